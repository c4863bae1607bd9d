// The functions the trampoline backend has no jump for (a function without a stack check, a
// RET whose epilogue offers no 5 bytes, a stub with no room at its place), counted or timed in
// the same run on kernel uprobes: an eBPF session of their own (backends/ebpf), beside the
// jumps, on the same process. The issue asked for each such site alone on a uprobe; a function
// goes whole (all its sites), so that its entry and its returns are paired by one backend.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/backend.h"
#include "core/cond/condition.h"
#include "core/events/live_metrics.h"

namespace gotap::trampoline {

class Fallback {
 public:
  // Starts the session on `pid` for the plan's functions `funcs` (indexes), and returns once
  // its uprobes are live; an error when they could not be placed (nothing is left placed).
  // `image_locked`: the caller holds the executable's lock meanwhile. Its trace events go to
  // `out` from the session's thread, each read of its ring buffer ending with `on_read`
  // (ebpf::EbpfOptions::on_read); its rows (count, latency) wait for rows().
  // `inlined_only`: functions whose own code the jumps take, whose inlined copies the
  // uprobes take (`count`, `trace`: an inlined copy has no return, and no latency).
  static Result<std::unique_ptr<Fallback>> start(const ProbePlan& plan,
                                                 const std::vector<int>& funcs,
                                                 const std::vector<int>& inlined_only,
                                                 const TraceOptions& opts, pid_t pid,
                                                 bool image_locked, EventSink& out,
                                                 std::function<void(uint64_t)> on_read = {});
  ~Fallback();
  Fallback(const Fallback&) = delete;
  Fallback& operator=(const Fallback&) = delete;

  // The functions it takes whole, and the inlined copies it takes of the others.
  size_t functions() const { return whole_; }
  size_t inlined_copies() const { return copies_; }
  size_t probes() const { return probes_; }
  // Whether the session ended by itself (the process exited or exec'd, or it failed).
  bool ended() const { return ended_.load(); }
  // Ends the session: its uprobes removed, its last events out. Then error() says why it
  // failed ("" when it did not), and rows() and summary() hold what it reported.
  void finish();
  const std::string& error() const { return error_; }
  // Its count or latency events, one per function called.
  const std::vector<Event>& rows() const { return rows_; }
  // Its summary event (null when it failed before it).
  const Event& summary() const { return summary_; }
  // With --prometheus or -i: adds its functions' counters to `s` (a function's inlined
  // copies' calls to that function's row), and its losses; the final values once it ended.
  void read_metrics(MetricsSnapshot& s) const;

 private:
  class Sink;
  Fallback() = default;
  ProbePlan plan_;
  TraceOptions opts_;
  std::unique_ptr<Sink> sink_;
  std::thread thread_;
  std::atomic<bool> stop_{false}, ended_{false};
  std::mutex mu_;
  std::condition_variable live_cv_;
  bool live_ = false;
  size_t probes_ = 0, whole_ = 0, copies_ = 0;
  std::string error_;
  std::vector<Event> rows_;
  Event summary_;
  // The condition's programs of its functions, by the session's indexes (opts.condition).
  std::unique_ptr<cond::Condition> cond_;
  // The session's own metrics (opts.metrics), read by read_metrics; null without them.
  std::unique_ptr<LiveMetrics> metrics_;
};

// A run in which no function takes a jump: all of it on kernel uprobes, its banner and
// summary the trampoline backend's (the summary's `uprobes` says so). `reason`: why the
// jumps cannot take the request at all (Run::jumpless_request), in the summary's
// `uprobes.reason`; null when they could, but no function had a place for one (`opts` then
// as the jumps' rows would have been: Run::uprobe_options).
Result<void> run_all_on_uprobes(const ProbePlan& plan, const TraceOptions& opts, EventSink& sink,
                                const char* reason = nullptr);

}  // namespace gotap::trampoline
