#include "core/events/live_metrics.h"

#include <optional>
#include <utility>

#include "core/events/typed_events.h"

namespace gotap {

void LiveMetrics::begin(int pid, Reader read) {
  std::lock_guard<std::mutex> rl(reader_mu_);
  reader_ = std::move(read);
  std::lock_guard<std::mutex> lock(mu_);
  last_.pid = pid;
  last_.ended = false;
}

void LiveMetrics::end() {
  std::lock_guard<std::mutex> rl(reader_mu_);
  read_backend();
  reader_ = nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  last_.ended = true;
}

void LiveMetrics::read_backend() {
  if (!reader_) return;
  MetricsSnapshot got;
  reader_(got);
  std::lock_guard<std::mutex> lock(mu_);
  last_.funcs = std::move(got.funcs);
  last_.lost = got.lost;
  if (got.pid) last_.pid = got.pid;
  if (got.detached_functions) last_.detached_functions = got.detached_functions;
  // A reader that sums --why itself (eBPF's latency) gives the whole sums each time; the
  // others leave why_ns to add_why().
  if (!got.why_ns.empty()) last_.why_ns = std::move(got.why_ns);
}

void LiveMetrics::observe(const Event& ev) {
  const auto kind = ev.find("event");
  if (kind == ev.end() || !kind->is_string()) return;
  const std::string& k = kind->get_ref<const std::string&>();
  if (k != "gstate" && k != "gcreate" && k != "gexit") return;
  const auto goid = ev.find("goid");
  if (goid == ev.end() || !goid->is_number_unsigned()) return;
  const uint64_t id = goid->get<uint64_t>();
  std::lock_guard<std::mutex> lock(mu_);
  last_.goroutines = true;
  if (k == "gexit") {
    gstate_.erase(id);
  } else if (k == "gstate") {
    const auto to = ev.find("to");
    if (to == ev.end() || !to->is_string()) return;
    if (*to == "dead")
      gstate_.erase(id);
    else
      gstate_[id] = to->get<std::string>();
  } else if (!gstate_.count(id)) {
    // A new goroutine is runnable until its first status change says otherwise.
    gstate_[id] = "runnable";
  }
}

void add_why_ns(std::map<std::tuple<std::string, std::string, std::string>, uint64_t>& why_ns,
                const std::string& func, const Event& why) {
  if (!why.is_object()) return;
  auto ns_of = [](const Event& e, const char* key) -> std::optional<uint64_t> {
    const auto it = e.find(key);
    if (it == e.end() || !it->is_number_unsigned()) return std::nullopt;
    return it->get<uint64_t>();
  };
  for (auto [key, part] :
       {std::pair{"running_ns", "running"}, std::pair{"preempted_ns", "preempted"},
        std::pair{"runnable_ns", "runnable"}, std::pair{"syscall_ns", "syscall"}})
    if (auto ns = ns_of(why, key)) why_ns[{func, part, ""}] += *ns;
  const auto waiting = ns_of(why, "waiting_ns");
  if (!waiting) return;
  // By reason; what no wait names (none should be left: a call returns running) under "".
  uint64_t named = 0;
  if (const auto waits = why.find("waits"); waits != why.end() && waits->is_array())
    for (const Event& w : *waits) {
      const auto ns = ns_of(w, "ns");
      if (!ns || named + *ns > *waiting) continue;
      const auto r = w.find("reason");
      const std::string reason = r != w.end() && r->is_string() ? r->get<std::string>() : "";
      why_ns[{func, "waiting", reason}] += *ns;
      named += *ns;
    }
  if (*waiting > named) why_ns[{func, "waiting", ""}] += *waiting - named;
}

void LiveMetrics::add_why(const std::string& func, const Event& why) {
  std::lock_guard<std::mutex> lock(mu_);
  add_why_ns(last_.why_ns, func, why);
}

MetricsSnapshot LiveMetrics::scrape() {
  return snapshot(true);
}

MetricsSnapshot LiveMetrics::read() {
  return snapshot(false);
}

MetricsSnapshot LiveMetrics::snapshot(bool scraped) {
  std::lock_guard<std::mutex> rl(reader_mu_);
  read_backend();
  std::lock_guard<std::mutex> lock(mu_);
  if (last_.ended && scraped) ++final_scrapes_;
  MetricsSnapshot s = last_;
  s.gstates.clear();
  for (const auto& [goid, state] : gstate_) ++s.gstates[state];
  return s;
}

uint64_t LiveMetrics::final_scrapes() {
  std::lock_guard<std::mutex> lock(mu_);
  return final_scrapes_;
}

namespace {

class MetricsObserver : public EventSink {
 public:
  MetricsObserver(std::unique_ptr<EventSink> next, LiveMetrics& m)
      : next_(std::move(next)), m_(m) {}
  void emit(const Event& ev) override {
    m_.observe(ev);
    next_->emit(ev);
  }
  void flush() override { next_->flush(); }

 private:
  std::unique_ptr<EventSink> next_;
  LiveMetrics& m_;
};

class WhyMetricsObserver : public EventSink {
 public:
  WhyMetricsObserver(std::unique_ptr<EventSink> next, LiveMetrics& m)
      : next_(std::move(next)), m_(m) {}
  void emit(const Event& ev) override {
    if (ev.value("event", "") == "return")
      if (const auto w = ev.find("why"); w != ev.end()) m_.add_why(ev.value("func", ""), *w);
    next_->emit(ev);
  }
  void emit_entry(const CallEntry& e) override { next_->emit_entry(e); }
  void emit_return(const CallReturn& r) override {
    if (r.why) m_.add_why(r.func, *r.why);
    next_->emit_return(r);
  }
  void emit_unfinished(const CallUnfinished& u) override { next_->emit_unfinished(u); }
  void flush() override { next_->flush(); }

 private:
  std::unique_ptr<EventSink> next_;
  LiveMetrics& m_;
};

}  // namespace

std::unique_ptr<EventSink> make_why_metrics_observer(std::unique_ptr<EventSink> next,
                                                     LiveMetrics& metrics) {
  return std::make_unique<WhyMetricsObserver>(std::move(next), metrics);
}

std::unique_ptr<EventSink> make_metrics_observer(std::unique_ptr<EventSink> next,
                                                 LiveMetrics& metrics) {
  return std::make_unique<MetricsObserver>(std::move(next), metrics);
}

}  // namespace gotap
