// One `gotap count --backend trampoline` run (trampoline_backend.cpp), in three parts:
// run.cpp checks the request, waits while the program counts and reports; run_place.cpp
// launches or attaches, maps the pages and writes the trampolines, then the jumps with every
// thread stopped; run_remove.cpp takes the jumps back and releases the pages.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "backends/ptrace/process.h"
#include "backends/trampoline/call_tally.h"
#include "backends/trampoline/call_timer.h"
#include "backends/trampoline/exec_watch.h"
#include "backends/trampoline/fallback.h"
#include "backends/trampoline/patch_set.h"
#include "backends/trampoline/program_pages.h"
#include "backends/trampoline/site_patches.h"
#include "backends/trampoline/trace_reader.h"
#include "core/backend.h"
#include "core/binary/elf_file.h"
#include "core/events/live_metrics.h"
#include "core/events/time_merge.h"
#include "core/sys/fd.h"
#include "core/sys/image_lock.h"

namespace gotap::trampoline {

uint64_t now_ns();

class Run {
 public:
  Run(const ProbePlan& plan, const TraceOptions& opts, EventSink& sink)
      : plan_(plan), opts_(opts), sink_(sink) {}
  // The fallback's thread is joined before any member it reaches (merge_) goes, on every
  // way out of run().
  ~Run() {
    if (fallback_) fallback_->finish();
  }
  Result<void> run();

 private:
  const ProbePlan& plan_;
  const TraceOptions& opts_;
  EventSink& sink_;
  PatchSet set_;
  std::unique_ptr<ptrace::Process> proc_;
  // One per region (patch_set.h): its pages in the program and its sites.
  struct Mapped {
    Region region;
    ProgramPages pages;
    std::vector<LiveSite> sites;
    bool jumps_left = false;  // a restore that failed: the pages stay for good
  };
  std::vector<std::unique_ptr<Mapped>> mapped_;
  pid_t pid_ = 0;
  bool launched_ = false;
  uint64_t bias_ = 0, syscall_at_ = 0, image_lo_ = UINT64_MAX, image_hi_ = 0;
  size_t placed_ = 0, funcs_placed_ = 0, foreign_ = 0, restored_ = 0, left_ = 0, taken_ = 0;
  size_t stubless_ = 0;  // timed functions left out: a stub of theirs has no place
  bool pages_kept_ = false;
  // `latency`: trampolines that write events (core/plan/event_ring.h), read by timer_ from
  // ring_ (gotap's view of the first region's ring).
  bool timed_ = false;
  std::unique_ptr<CallTimer> timer_;
  // `trace` and `graph`: timed_ too, with records that hold the arguments and results
  // (trace_capture.h), read by reader_.
  bool traced_ = false;
  // `count` with a condition, `latency --if` and `--errors`: timed_ too, with trace records
  // that hold what the condition reads, added up by tally_ (call_tally.h).
  bool tallied_ = false;
  std::unique_ptr<CallTally> tally_;
  // A plain `count` of functions with an `error` result: timed_'s sites and places, bodies
  // that count the calls at the entry and the failures at each RET into the first region's
  // counters (trampoline_code.h, ret_fail_body), no ring read. has_error_: by plan index.
  bool fails_counted_ = false;
  std::vector<bool> has_error_;
  std::vector<CaptureWord> fail_words_;  // by PatchSet index: a RET's error word
  // Whether the run reads a ring (a timer, a tally or a reader): a counting one reads none.
  bool reads_ring() const { return timed_ && !fails_counted_; }
  // What this run does to a function ("count", "time", "trace"), and its records' ring.
  const char* verb() const {
    return opts_.mode == Mode::Count ? "count" : traced_ ? "trace" : "time";
  }
  const char* done() const {
    return opts_.mode == Mode::Count ? "counted" : traced_ ? "traced" : "timed";
  }
  // A counting run's ring is never written: one page of records, the least a mapping of
  // whole pages holds.
  RingShape ring_shape() const {
    return fails_counted_ ? RingShape{7, kTimedRing.record_shift}
           : trace_sites_ ? trace_sites_->shape
                          : kTimedRing;
  }
  std::unique_ptr<TraceSites> trace_sites_;
  // `count` and `latency`: the functions no jump takes (refused, or stubless), on kernel
  // uprobes in the same run (fallback.h); null when there are none or they could not be placed.
  bool falls_back_ = false;
  bool all_on_uprobes_ = false;  // place() found no room for any timed function's bodies
  // trace --why or --goroutines: the goroutine probes (runtime.casgstatus, ...: nosplit, no
  // jump) and --why's kernel side run in the fallback's session, their events merged with
  // the ring's; the run fails when it cannot start.
  bool goroutine_probes_ = false;
  std::vector<int> stubless_funcs_;
  // Functions whose sites other uprobes hold, on the fallback's uprobes (held_functions).
  std::set<int> uprobe_held_;
  std::unique_ptr<Fallback> fallback_;
  std::string fallback_error_;  // why it could not start, or why it failed
  // `trace` with a fallback: its events and the ring's, in time order (source 0 the ring's).
  std::unique_ptr<TimeMerge> merge_;
  // The options of the uprobes that stand in for jumps (the fallback, or a whole run on them
  // when no function has a place): their rows are the jumps' rows, with failures counted only
  // where the jumps count them (a tally's).
  TraceOptions uprobe_options() const {
    TraceOptions o = opts_;
    o.count_failed = opts_.count_failed && (tallied_ || fails_counted_);
    return o;
  }
  // Starts the fallback for the refused and stubless functions; says what became of them.
  void start_fallback(bool image_locked);
  std::unique_ptr<TraceReader> reader_;
  uint8_t* ring_ = nullptr;
  TimedCode timed_code_;
  mutable std::mutex timer_mu_;
  uint64_t clock_at_ = 0;    // when the TSC's rate was last measured
  size_t drained_ = 0;       // records the last read found
  uint64_t drained_at_ = 0;  // when it began

  // Reads the ring (timed runs).
  void drain();
  std::string ended_by_ = "stop", remove_error_;
  std::optional<int> exit_code_, exit_signal_;
  sys::Fd pidfd_;
  ExecWatch exec_;

  Result<void> check_request() const;
  // Why the jumps cannot take this request (goroutine events, --why, conditions, ...): a
  // phrase after "the trampoline backend"; null when they can.
  const char* jumpless_request() const;
  // trace --slower / --errors without --if, which its reader decides (jumpless_request leaves
  // it the rest).
  ReturnFilter filter() const;
  // trace --if, which its reader runs on each record (with --slower and --errors in it); null
  // without one.
  const cond::Condition* if_condition() const {
    return opts_.condition && !opts_.condition->spec.expr.empty() ? opts_.condition : nullptr;
  }
  // --if, --slower or --errors as compiled programs, one per function; null without them.
  const cond::Condition* compiled_condition() const {
    return opts_.condition && !opts_.condition->funcs.empty() ? opts_.condition : nullptr;
  }
  // count with any condition; latency with --if or --errors, or whose failures are counted
  // (one of its functions has an error result, and no --no-failed). Else a timed run's timer
  // (CallTimer) decides latency's --slower, and count's counters have no RET to see failures.
  bool tallied() const;

  // The executable's lock, which every gotap holds while it looks at sites and writes them
  // (core/sys/image_lock.h); `abortable`: a stop request ends the wait.
  Result<sys::ImageLock> lock_image(int wait_ms, bool abortable) const;

  Error exec_refusal() const;

  // Launches or attaches, maps the pages, writes the trampolines, then the jumps with every
  // thread stopped, and lets the program go.
  Result<void> place();

  // Fills m's pages (mapped already) with its trampolines.
  Result<void> write_trampolines(Mapped& m, bool empty);

  // With every thread stopped: when a killed gotap's pages hold the place of m's (short
  // checks') trampolines, takes back every jump into them, removes them and maps m's there.
  // The jumps taken back; m's pages stay unplaced when it cannot.
  size_t take_place(Mapped& m, pid_t held, const std::vector<pid_t>& stopped, const IsOurs& dead,
                    const ElfFile& elf, bool empty);

  // With every thread in `stopped` stopped: unmaps each region no jump is left to and no
  // thread can be in or return into (page_release.h). Whether none is left.
  bool release_pages(pid_t held, const std::vector<pid_t>& stopped);

  // Attaches again to release what release_pages kept; whether none is left.
  bool release_pages_again();

  // After the detach, a failure with nothing patched: a launched program is ended as a
  // trace's end ends it (sys::end_child); an attached one runs on.
  Error end_unpatched(Error e);

  bool stop_due(uint64_t t0) const;

  // With every thread stopped, a timed run: leaves out every site of each function one of
  // whose sites another tracer holds (or cannot be read), and puts those uprobes alone hold
  // in uprobe_held_. How many sites were left to the other tracers.
  size_t drop_held_functions(const IsOurs& ours);
  // The functions with an unwritten site in `sites` that another tracer holds (or that
  // cannot be read), one look at each site: `by_uprobes`, held by uprobes alone
  // (held_by_uprobes at every such site; the kernel shares a site between uprobes, so the
  // fallback takes them beside the other's; none without a fallback), and `by_others`.
  struct HeldFunctions {
    std::set<int> by_uprobes, by_others;
  };
  HeldFunctions held_functions(const std::vector<const LiveSite*>& sites, const IsOurs& ours);
  // With every thread stopped: leaves out every site of `funcs`. How many sites.
  size_t drop_functions(const std::set<int>& funcs);

  // Whether the program still has the trampolines: after an exec the address is gone.
  bool still_patched() const;

  // Whether a jump's target is a slot in the pages of a gotap that is gone (killed): an
  // executable anonymous mapping that begins with kMagic, whose owner (owner.h) no longer
  // runs. Read while the threads are stopped: the maps once, each mapping's header once.
  IsOurs left_by_a_gotap();

  // Whether the process is gone or a zombie.
  bool exiting() const;

  // Until the trace ends: a stop asked for, the duration out, the program gone or exec'd.
  // Meanwhile the program counts; gotap looks at its jno jumps for another tracer's uprobe
  // over one (note_uprobes), every 100 ms, or less often where a look takes over 1 ms of CPU
  // (a page read each: 8 ms for a whole caddy), so that looking takes 1% of a CPU at most.
  void wait(uint64_t t0);

  // Attaches again and takes every jump back; the pages go too, unless a thread may still
  // be in them or return into them (page_release.h).
  void remove();

  void end_launched();

  size_t site_count() const;

  // Each counted function's calls so far, by plan index, those called only.
  std::vector<std::pair<int, uint64_t>> counts() const;
  // A counting run's failures, by plan index (fails_counted_).
  std::vector<uint64_t> failures() const;

  // What unmaps every region mapped so far (an error on the way), then returns `e`.
  Error unmap_all(pid_t held, Error e);

  void read_metrics(MetricsSnapshot& s) const;
  // A tally's `failed` of function `func`: none when it has no error result (or --no-failed).
  std::optional<uint64_t> failed_of(size_t func, uint64_t failed) const;

  void emit(uint64_t ended);
};

}  // namespace gotap::trampoline
