#include "core/output/goroutine_views.h"
#include "core/output/writers.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

#include "core/events/typed_events.h"
#include "core/output/value_text.h"

namespace gotap {

namespace {

bool is_goroutine_event(const std::string& kind) {
  return kind == "gstate" || kind == "gcreate" || kind == "gexit";
}

class GoroutineFilter : public EventSink {
 public:
  GoroutineFilter(std::unique_ptr<EventSink> inner, GoroutineSelection sel)
      : inner_(std::move(inner)), sel_(std::move(sel)) {}

  void emit(const Event& ev) override {
    const std::string kind = ev.value("event", "");
    const uint64_t goid = ev.value("goid", uint64_t{0});
    if (!sel_.under.empty() && (kind == "entry" || kind == "return" || kind == "unfinished")) {
      // Calls of the --under functions only tell which goroutines run them; an inlined copy
      // has no return, so it cannot open a call.
      if (!sel_.under.count(ev.value("func", ""))) return;
      int& n = active_[goid];
      if (kind == "entry" && !ev.value("inlined", false))
        ++n;
      else if (kind != "entry" && n > 0)
        --n;
      return;
    }
    if (!is_goroutine_event(kind)) return inner_->emit(ev);
    // A gcreate, or the first gstate of a goroutine created before the trace (which then
    // says where it came from): is it beneath an --under function?
    if (!sel_.under.empty() &&
        (kind == "gcreate" || ev.contains("created_by") || ev.contains("parent_goid")) &&
        !selected_.count(goid)) {
      const uint64_t parent = ev.value("parent_goid", uint64_t{0});
      auto it = active_.find(parent);
      // Only a creation happens now: an older goroutine's parent may have left FUNC since.
      const bool parent_in_under = kind == "gcreate" && it != active_.end() && it->second > 0;
      if (parent_in_under || (ev.contains("parent_goid") && selected_.count(parent)) ||
          sel_.under.count(ev.value("created_by", "")))
        selected_.insert(goid);
    }
    const bool keep = (sel_.goids.empty() || sel_.goids.count(goid)) &&
                      (sel_.under.empty() || selected_.count(goid));
    if (kind == "gexit") {  // goids are never reused
      selected_.erase(goid);
      active_.erase(goid);
    }
    if (keep) inner_->emit(ev);
  }
  void flush() override { inner_->flush(); }

 private:
  std::unique_ptr<EventSink> inner_;
  GoroutineSelection sel_;
  std::unordered_map<uint64_t, int> active_;  // goid -> open calls of --under functions
  std::unordered_set<uint64_t> selected_;
};

// Three significant digits in the largest unit under 1000 of it: "229ms", "2.17ms", "394us",
// so that the columns stay narrow.
std::string short_duration(uint64_t ns) {
  if (ns == 0) return "0";
  double v = static_cast<double>(ns);
  const char* units[] = {"ns", "us", "ms", "s"};
  int u = 0;
  while (v >= 999.5 && u < 3) {
    v /= 1000;
    ++u;
  }
  if (u == 0) return fmt::format("{}ns", ns);
  const int decimals = v >= 99.95 ? 0 : v >= 9.995 ? 1 : 2;
  return fmt::format("{:.{}f}{}", v, decimals, units[u]);
}

// The states the table has a column for; the others (copystack, preempted, ...) only count
// in the lifetime.
enum Column { kRunning, kRunnable, kWaiting, kSyscall, kColumns };
int column_of(const std::string& state) {
  if (state == "running") return kRunning;
  if (state == "runnable") return kRunnable;
  if (state == "waiting") return kWaiting;
  if (state == "syscall") return kSyscall;
  return -1;
}

struct Row {
  uint64_t parent = 0;
  bool parent_known = false;
  std::string func, created_by;
  std::string state;
  std::string reason;       // why it waits, when `state` is waiting and the release is known
  uint64_t since = 0;       // when it entered `state`
  uint64_t first_seen = 0;  // its creation, or its first event when created before the trace
  bool created = false;
  uint64_t exited = 0;  // 0: still alive
  uint64_t in[kColumns] = {};
};

class GoroutineTable : public EventSink {
 public:
  GoroutineTable(std::FILE* out, bool live)
      : out_(out), live_(live), text_(make_text_writer(out)) {}

  void emit(const Event& ev) override {
    const std::string kind = ev.value("event", "");
    if (kind == "summary") {
      // The end of the trace: goroutines still alive were in their state until then (the
      // last event may be long before, or filtered out).
      now_ = std::max(now_, ev.value("ts_ns", uint64_t{0}));
      if (live_) print("\x1b[H\x1b[2J");
      print(render(SIZE_MAX));
      text_->emit(ev);
      return;
    }
    if (!is_goroutine_event(kind)) return text_->emit(ev);
    const uint64_t goid = ev.value("goid", uint64_t{0});
    const uint64_t ts = ev.value("ts_ns", uint64_t{0});
    now_ = std::max(now_, ts);
    bool fresh = !rows_.count(goid);
    Row& r = rows_[goid];
    if (fresh) r.first_seen = ts;
    if (kind == "gcreate") {
      r.created = true;
      r.first_seen = ts;
      r.parent = ev.value("parent_goid", uint64_t{0});
      r.parent_known = true;
      r.func = printable(ev.value("func", ""));
      r.created_by = printable(ev.value("created_by", ""));
    } else if (kind == "gstate") {
      // A goroutine created before the trace says where it came from on its first change.
      if (!r.created && ev.contains("func")) r.func = printable(ev.value("func", ""));
      if (!r.created && ev.contains("created_by"))
        r.created_by = printable(ev.value("created_by", ""));
      if (!r.created && ev.contains("parent_goid")) {
        r.parent = ev.value("parent_goid", uint64_t{0});
        r.parent_known = true;
      }
      if (!r.state.empty() && ts >= r.since) {
        int c = column_of(r.state);
        if (c >= 0) r.in[c] += ts - r.since;
      }
      r.state = printable(ev.value("to", "?"));
      r.reason = printable(ev.value("reason", ""));
      r.since = ts;
    } else {
      r.exited = ts;
      if (r.state.empty()) r.state = "dead";
      forget_oldest_exited(goid);
    }
    if (live_) redraw();
  }
  void flush() override { std::fflush(out_); }

 private:
  void print(const std::string& s) { std::fwrite(s.data(), 1, s.size(), out_); }

  void redraw() {
    auto t = std::chrono::steady_clock::now();
    if (t - last_draw_ < std::chrono::seconds(1)) return;
    last_draw_ = t;
    print("\x1b[H\x1b[2J" + render(40));
    std::fflush(out_);
  }

  // A server may start millions of goroutines: keep the rows of the kMaxExitedRows that
  // exited last, and only the times and counts of the others.
  static constexpr size_t kMaxExitedRows = 10000;
  void forget_oldest_exited(uint64_t goid) {
    exited_order_.push_back(goid);
    if (exited_order_.size() <= kMaxExitedRows) return;
    auto it = rows_.find(exited_order_.front());
    exited_order_.pop_front();
    if (it == rows_.end()) return;
    for (int i = 0; i < kColumns; ++i) forgotten_times_.in[i] += it->second.in[i];
    forgotten_created_ += it->second.created;
    ++forgotten_;
    rows_.erase(it);
  }

  // Up to max_rows goroutines, live ones first, each group by id.
  std::string render(size_t max_rows) const {
    std::vector<std::pair<uint64_t, const Row*>> order;
    for (const auto& [goid, r] : rows_) order.push_back({goid, &r});
    std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
      if ((a.second->exited == 0) != (b.second->exited == 0)) return a.second->exited == 0;
      return a.first < b.first;
    });
    std::string out =
        fmt::format("{:>8} {:>8} {:<10} {:<18} {:>10} {:>10} {:>10} {:>10} {:>10}  {}\n", "GOID",
                    "PARENT", "STATE", "WAITING ON", "RUNNING", "RUNNABLE", "WAITING", "SYSCALL",
                    "LIFETIME", "FUNC [CREATED BY]");
    uint64_t total[kColumns] = {};
    std::copy(std::begin(forgotten_times_.in), std::end(forgotten_times_.in), total);
    size_t alive = 0, created = forgotten_created_, exited = forgotten_, shown = 0;
    for (const auto& [goid, r] : order) {
      uint64_t in[kColumns];
      std::copy(std::begin(r->in), std::end(r->in), in);
      // The current state lasts until now for a goroutine still alive.
      int c = column_of(r->state);
      if (c >= 0 && !r->exited && now_ >= r->since) in[c] += now_ - r->since;
      for (int i = 0; i < kColumns; ++i) total[i] += in[i];
      // A cgo callback's borrowed g back to dead (Go <= 1.25) has not exited, but is not alive.
      alive += r->exited == 0 && r->state != "dead";
      created += r->created;
      exited += r->exited != 0;
      if (shown++ >= max_rows) continue;
      const uint64_t end = r->exited ? r->exited : now_;
      std::string life = short_duration(end >= r->first_seen ? end - r->first_seen : 0);
      if (!r->created) life = ">" + life;  // it existed before the trace started
      std::string who = r->func.empty() ? "?" : r->func;
      if (!r->created_by.empty()) who += " [" + r->created_by + "]";
      const bool waiting = !r->exited && r->state == "waiting" && !r->reason.empty();
      out += fmt::format("{:>8} {:>8} {:<10} {:<18} {:>10} {:>10} {:>10} {:>10} {:>10}  {}\n", goid,
                         r->parent_known ? std::to_string(r->parent) : "-",
                         r->exited          ? "exited"
                         : r->state.empty() ? "?"
                                            : r->state,
                         waiting ? r->reason : "-", short_duration(in[kRunning]),
                         short_duration(in[kRunnable]), short_duration(in[kWaiting]),
                         short_duration(in[kSyscall]), life, who);
    }
    if (shown > max_rows) out += fmt::format("{:>8} ... {} more\n", "", shown - max_rows);
    if (forgotten_)
      out += fmt::format("{:>8} ... {} more that exited earlier (in the totals)\n", "", forgotten_);
    out += fmt::format("{:>8} {:>8} {:<10} {:<18} {:>10} {:>10} {:>10} {:>10}\n", "TOTAL", "", "",
                       "", short_duration(total[kRunning]), short_duration(total[kRunnable]),
                       short_duration(total[kWaiting]), short_duration(total[kSyscall]));
    out += fmt::format("# {} goroutines: {} created and {} exited while traced, {} alive\n",
                       rows_.size() + forgotten_, created, exited, alive);
    return out;
  }

  std::FILE* out_;
  bool live_;
  std::unique_ptr<EventSink> text_;
  std::map<uint64_t, Row> rows_;
  std::deque<uint64_t> exited_order_;  // rows of exited goroutines, oldest exit first
  struct {
    uint64_t in[kColumns] = {};
  } forgotten_times_;
  size_t forgotten_ = 0, forgotten_created_ = 0;
  uint64_t now_ = 0;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace

std::unique_ptr<EventSink> make_goroutine_filter(std::unique_ptr<EventSink> inner,
                                                 GoroutineSelection sel) {
  return std::make_unique<GoroutineFilter>(std::move(inner), std::move(sel));
}

std::unique_ptr<EventSink> make_goroutine_table(std::FILE* out, bool live) {
  return std::make_unique<GoroutineTable>(out, live);
}

namespace {

class GoroutineEventDrop : public EventSink {
 public:
  GoroutineEventDrop(std::unique_ptr<EventSink> inner, bool goroutine_events)
      : inner_(std::move(inner)), goroutine_events_(goroutine_events) {}
  void emit(const Event& ev) override {
    const auto k = ev.find("event");
    if (k != ev.end() && k->is_string() &&
        (*k == "kwhy" || ev.value("replayed", false) ||
         (goroutine_events_ && (*k == "gstate" || *k == "gcreate" || *k == "gexit"))))
      return;
    inner_->emit(ev);
  }
  void emit_entry(const CallEntry& e) override { inner_->emit_entry(e); }
  void emit_return(const CallReturn& r) override { inner_->emit_return(r); }
  void emit_unfinished(const CallUnfinished& u) override { inner_->emit_unfinished(u); }
  void flush() override { inner_->flush(); }

 private:
  std::unique_ptr<EventSink> inner_;
  bool goroutine_events_;
};

}  // namespace

std::unique_ptr<EventSink> make_goroutine_event_drop(std::unique_ptr<EventSink> inner) {
  return std::make_unique<GoroutineEventDrop>(std::move(inner), true);
}

std::unique_ptr<EventSink> make_view_only_drop(std::unique_ptr<EventSink> inner) {
  return std::make_unique<GoroutineEventDrop>(std::move(inner), false);
}

}  // namespace gotap
