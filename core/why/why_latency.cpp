#include "core/why/why_latency.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "core/events/typed_events.h"

namespace gotap::why {

namespace {

constexpr const char* kParts[] = {"running_ns", "preempted_ns", "runnable_ns", "syscall_ns",
                                  "waiting_ns"};

Event wait_key(const Event& w) {
  Event by = w.value("woken_by", Event());
  if (by.is_object()) by.erase("goid");
  return {w.value("reason", Event()), w.value("parked_at", Event()), by};
}

}  // namespace

void add_shares(Event& total) {
  if (!total.is_object()) return;
  uint64_t sum = 0;
  for (const char* p : kParts)
    if (total[p].is_number_unsigned()) sum += total[p].get<uint64_t>();
  auto share = [&](const Event& ns) -> Event {
    if (!ns.is_number_unsigned() || !sum) return nullptr;
    // Four decimals: 0.1% of a share is below what the parts' accuracy tells apart.
    return std::round(double(ns.get<uint64_t>()) / double(sum) * 1e4) / 1e4;
  };
  Event shares = Event::object();
  for (const char* p : kParts) {
    std::string name = p;
    shares[name.substr(0, name.size() - 3)] = share(total[p]);
  }
  total["shares"] = std::move(shares);
  if (total["waits"].is_array())
    for (Event& w : total["waits"]) w["share"] = share(w.value("ns", Event()));
}

void add_why(Event& total, const Event& why) {
  if (!why.is_object()) return;
  if (!total.is_object()) {
    total = Event::object();
    for (const char* p : kParts) total[p] = uint64_t{0};
    total["waits"] = Event::array();
    total["syscalls"] = Event::array();
    total["calls"] = uint64_t{0};
  }
  total["calls"] = total["calls"].get<uint64_t>() + 1;
  for (const char* p : kParts) {
    const auto v = why.find(p);
    if (v == why.end() || !v->is_number_unsigned() || total[p].is_null())
      total[p] = nullptr;
    else
      total[p] = total[p].get<uint64_t>() + v->get<uint64_t>();
  }
  // System calls merge by name; not measured in any call: not measured in the total.
  const auto calls = why.find("syscalls");
  if (calls == why.end() || !calls->is_array()) total["syscalls"] = nullptr;
  Event& sys = total["syscalls"];
  if (sys.is_array()) {
    for (const Event& c : *calls) {
      if (!c.is_object() || !c.contains("name")) continue;
      auto it = std::find_if(sys.begin(), sys.end(),
                             [&](const Event& t) { return t["name"] == c["name"]; });
      if (it == sys.end()) {
        sys.push_back({{"name", c["name"]}, {"ns", uint64_t{0}}, {"count", uint64_t{0}}});
        it = sys.end() - 1;
      }
      (*it)["ns"] = (*it)["ns"].get<uint64_t>() + c.value("ns", uint64_t{0});
      (*it)["count"] = (*it)["count"].get<uint64_t>() + c.value("count", uint64_t{0});
    }
    std::stable_sort(sys.begin(), sys.end(), [](const Event& a, const Event& b) {
      return a.value("ns", uint64_t{0}) > b.value("ns", uint64_t{0});
    });
  }
  Event& waits = total["waits"];
  for (const Event& w : why.value("waits", Event::array())) {
    const Event key = wait_key(w);
    auto it = std::find_if(waits.begin(), waits.end(),
                           [&](const Event& t) { return wait_key(t) == key; });
    if (it == waits.end()) {
      Event t = w;
      t["woken_by"] = key[2];
      t["ns"] = uint64_t{0};
      t["count"] = uint64_t{0};
      waits.push_back(std::move(t));
      it = waits.end() - 1;
    }
    (*it)["ns"] = (*it)["ns"].get<uint64_t>() + w.value("ns", uint64_t{0});
    (*it)["count"] = (*it)["count"].get<uint64_t>() + w.value("count", uint64_t{0});
  }
  std::stable_sort(waits.begin(), waits.end(), [](const Event& a, const Event& b) {
    return a.value("ns", uint64_t{0}) > b.value("ns", uint64_t{0});
  });
}

namespace {

class WhyLatencySink : public EventSink {
 public:
  WhyLatencySink(std::unique_ptr<EventSink> next, size_t keep)
      : next_(std::move(next)), keep_(keep) {}

  void emit(const Event& ev) override {
    const std::string kind = ev.value("event", "");
    if (kind == "entry" || kind == "unfinished") return;
    if (kind == "return") {
      if (ev.contains("duration_ns"))
        add(ev.value("func", ""), ev["duration_ns"].get<uint64_t>(), ev.value("why", Event()));
      return;
    }
    if (kind == "summary") {
      finish();
      Event out = ev;
      if (not_kept_) out["why_not_kept"] = not_kept_;
      next_->emit(out);
      return;
    }
    next_->emit(ev);
  }
  void emit_entry(const CallEntry&) override {}
  void emit_unfinished(const CallUnfinished&) override {}
  void emit_return(const CallReturn& r) override {
    if (r.duration_ns) add(r.func, *r.duration_ns, r.why ? *r.why : Event());
  }
  void flush() override { next_->flush(); }

 private:
  struct Func {
    LatencySummary latency;
    Event why;                                      // totals
    std::vector<std::pair<uint64_t, Event>> calls;  // duration, why: for why_slowest
  };
  void add(const std::string& func, uint64_t ns, const Event& why) {
    Func& f = funcs_[func];
    f.latency.add(ns);
    add_why(f.why, why);
    if (f.calls.size() < keep_)
      f.calls.emplace_back(ns, why);
    else
      ++not_kept_;
  }
  void finish() {
    std::vector<FuncLatency> lats;
    for (auto& [name, f] : funcs_) lats.push_back({name, f.latency, std::nullopt});
    for (Event ev : latency_events(std::move(lats))) {
      Func& f = funcs_[ev.value("func", "")];
      ev["why"] = f.why;
      add_shares(ev["why"]);
      // The slowest 1% of the calls (at least one): where the tail went.
      const size_t n = std::max<size_t>(1, (f.calls.size() + 99) / 100);
      std::partial_sort(f.calls.begin(), f.calls.begin() + std::min(n, f.calls.size()),
                        f.calls.end(),
                        [](const auto& a, const auto& b) { return a.first > b.first; });
      Event slow;
      for (size_t i = 0; i < n && i < f.calls.size(); ++i) add_why(slow, f.calls[i].second);
      add_shares(slow);
      ev["why_slowest"] = slow;
      next_->emit(ev);
    }
    funcs_.clear();
  }

  std::unique_ptr<EventSink> next_;
  size_t keep_;
  std::map<std::string, Func> funcs_;
  uint64_t not_kept_ = 0;
};

}  // namespace

std::unique_ptr<EventSink> make_why_latency_sink(std::unique_ptr<EventSink> next, size_t keep) {
  return std::make_unique<WhyLatencySink>(std::move(next), keep);
}

}  // namespace gotap::why
