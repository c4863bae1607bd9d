#include "frontends/interval_printer.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "core/events/typed_events.h"
#include "core/sys/timing.h"

namespace gotap::cli {

namespace {

uint64_t minus(uint64_t now, uint64_t before) {
  return now >= before ? now - before : 0;  // a detached function's counters may vanish
}

// `now` less `before`: the interval's own samples. min and max cannot be subtracted: they are
// the bounds of the lowest and highest fine bucket the interval filled (within 12.5%).
LatencySummary latency_between(const LatencySummary& now, const LatencySummary* before) {
  LatencySummary d;
  d.sum_ns = minus(now.sum_ns, before ? before->sum_ns : 0);
  if (now.fine.empty()) return d;
  d.fine.assign(now.fine.size(), 0);
  bool any = false;
  for (size_t b = 0; b < now.fine.size(); ++b) {
    const uint64_t was = before && b < before->fine.size() ? before->fine[b] : 0;
    d.fine[b] = minus(now.fine[b], was);
    if (!d.fine[b]) continue;
    d.count += d.fine[b];
    const BucketRange r = latency_bucket_range(static_cast<uint32_t>(b));
    if (!any) d.min_ns = std::max(r.lo, now.min_ns);
    d.max_ns = std::min(r.hi > 0 ? r.hi - 1 : 0, now.max_ns);
    any = true;
  }
  if (!any) d.fine.clear();
  return d;
}

class IntervalPrinter : public EventSink {
 public:
  IntervalPrinter(std::unique_ptr<EventSink> next, LiveMetrics& metrics, double seconds,
                  bool latency)
      : next_(std::move(next)), metrics_(metrics), period_(seconds), latency_(latency) {
    start_ns_ = sys::monotonic_ns();
    timer_ = std::thread([this] { run(); });
  }

  ~IntervalPrinter() override {
    stop();
    std::lock_guard<std::mutex> lock(mu_);
    next_.reset();
  }

  void emit(const Event& ev) override {
    std::unique_lock<std::mutex> lock(mu_);
    const std::string kind = ev.value("event", "");
    if (!last_done_ && (kind == "count" || kind == "latency" || kind == "summary")) {
      // The run has ended: its totals follow the last, partial interval.
      last_done_ = true;
      done_ = true;
      wake_.notify_all();
      print_interval();
    }
    next_->emit(ev);
  }
  void emit_entry(const CallEntry& e) override {
    std::lock_guard<std::mutex> lock(mu_);
    next_->emit_entry(e);
  }
  void emit_return(const CallReturn& r) override {
    std::lock_guard<std::mutex> lock(mu_);
    next_->emit_return(r);
  }
  void emit_unfinished(const CallUnfinished& u) override {
    std::lock_guard<std::mutex> lock(mu_);
    next_->emit_unfinished(u);
  }
  void flush() override {
    std::lock_guard<std::mutex> lock(mu_);
    next_->flush();
  }

 private:
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
      wake_.notify_all();
    }
    if (timer_.joinable()) timer_.join();
  }

  void run() {
    std::unique_lock<std::mutex> lock(mu_);
    auto due = std::chrono::steady_clock::now() + period_;
    while (!done_) {
      if (wake_.wait_until(lock, due) == std::cv_status::timeout && !done_) {
        print_interval();
        next_->flush();
        // Steps of the period, not of the print: the intervals do not drift.
        due += std::chrono::duration_cast<std::chrono::steady_clock::duration>(period_);
      }
    }
  }

  // Under mu_. The read takes the metrics' own mutex; the backend never holds that while
  // it emits, so the order mu_ -> metrics is the only one.
  void print_interval() {
    const MetricsSnapshot s = metrics_.read();
    const uint64_t end_ns = sys::monotonic_ns();
    // Before the probes are live (an attach can take longer than an interval) there is
    // nothing to read: interval 1 is the first that can hold calls.
    if (s.funcs.empty() && !s.ended) {
      start_ns_ = end_ns;
      return;
    }
    ++number_;
    for (const FuncMetrics& f : s.funcs) {
      auto was = before_.find(f.func);
      const FuncMetrics* b = was == before_.end() ? nullptr : &was->second;
      Event ev;
      if (latency_) {
        FuncLatency l{f.func, latency_between(f.latency, b ? &b->latency : nullptr), {}};
        if (l.latency.count == 0) continue;  // as at the end: called functions only
        if (f.failed) l.failed = minus(*f.failed, b && b->failed ? *b->failed : 0);
        ev = to_event(l);
      } else {
        FuncCount c{f.func, minus(f.calls, b ? b->calls : 0), {}};
        if (c.count == 0) continue;
        if (f.failed) c.failed = minus(*f.failed, b && b->failed ? *b->failed : 0);
        ev = to_event(c);
      }
      ev["interval"] = number_;
      ev["start_ts_ns"] = start_ns_;
      ev["end_ts_ns"] = end_ns;
      next_->emit(ev);
    }
    before_.clear();
    for (const FuncMetrics& f : s.funcs) before_.emplace(f.func, f);
    start_ns_ = end_ns;
  }

  std::unique_ptr<EventSink> next_;
  LiveMetrics& metrics_;
  const std::chrono::duration<double> period_;
  const bool latency_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool done_ = false;
  bool last_done_ = false;
  uint64_t number_ = 0;
  uint64_t start_ns_ = 0;
  std::map<std::string, FuncMetrics> before_;
  std::thread timer_;
};

}  // namespace

std::unique_ptr<EventSink> make_interval_printer(std::unique_ptr<EventSink> next,
                                                 LiveMetrics& metrics, double seconds,
                                                 bool latency) {
  return std::make_unique<IntervalPrinter>(std::move(next), metrics, seconds, latency);
}

}  // namespace gotap::cli
