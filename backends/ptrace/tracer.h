// One tracing session of the ptrace backend: sets the breakpoints of a ProbePlan in a
// launched or attached process, turns each hit into entry/return events, and detaches
// leaving the process as it was.
#pragma once

#include <sys/user.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/ptrace/breakpoints.h"
#include "backends/ptrace/cpu_follow.h"
#include "backends/ptrace/event_queue.h"
#include "backends/ptrace/goroutine.h"
#include "backends/ptrace/hit_reader.h"
#include "backends/ptrace/process.h"
#include "backends/ptrace/stop_clock.h"
#include "backends/ptrace/trap_net.h"
#include "core/backend.h"
#include "core/decode/value_decoder.h"
#include "core/events/goroutine_events.h"
#include "core/events/latency.h"
#include "core/events/overhead_budget.h"
#include "core/events/rate_limit.h"
#include "core/plan/mapped_names.h"
#include "core/plan/planned_image.h"
#include "core/sys/image_lock.h"
#include "core/sys/timing.h"
#include "gotap_cond.h"

namespace gotap::ptrace {

class CfiStack;

class Tracer {
 public:
  Tracer(const ProbePlan& plan, const TraceOptions& opts, EventSink& sink);
  ~Tracer();
  Result<void> run();

  // For tests and benchmarks: stats of the finished run.
  uint64_t hits() const { return hits_; }
  uint64_t events() const { return events_; }

 private:
  struct FuncState {
    bool abi_internal = true;
    bool needs_xmm = false;
    // Code that may run with signals blocked (tracer.cpp, may_block_signals).
    bool signals_blocked = false;
    uint64_t count = 0;
    // Count: an entry that refires after morestack is taken back at the morestack call (an
    // Uncount site), so no frame is kept and the RETs need no int3.
    bool uncount = false;
    LatencySummary latency;
    // The itab word of the error result (core/plan/error_result.h), and the calls that
    // returned a non-nil error.
    std::optional<LocPiece> err;
    uint64_t failed = 0;
  };
  struct Pending {
    int func = -1;
    uint64_t ts = 0;
    uint64_t stop_at = 0;  // the entry's trap, as StopClock dates it
    pid_t tid = 0;
    uint64_t held_at = 0;  // held_[goid].ns at the entry
    bool dropped = false;  // --rate left the entry out: the return goes too
    // --if: rejected at the entry (its return stays silent); the entry's parts of a
    // condition decided at the return, and the entry event that waits for that decision.
    bool rejected = false;
    uint64_t cond_bits = 0;
    std::optional<nlohmann::json> waiting_entry;
    std::array<uint64_t, GOTAP_COND_VALS> cond_vals{};  // arguments compared with results
  };
  // The time gotap held a goroutine stopped at its probe hits, for the goroutines with a
  // call open: a return's duration leaves out what was held since its entry. A hit holds it
  // from its trap (StopClock::Stop::at) to when its thread ran again.
  struct Held {
    uint64_t ns = 0;
    uint32_t open = 0;  // calls of the goroutine in pending_
    // The trap of its latest entry: a resume before it is not inside every open call.
    uint64_t opened_at = 0;
  };
  using PendingMap = std::unordered_map<CallKey, Pending, CallKeyHash>;

  Result<void> start();
  // Whether the process maps the file the plan was made from (core/plan/image_identity.h):
  // after the attach and before any write, and at a launch's exec stop.
  Result<void> check_image();
  // The one line of a process that ran exec, or whose pid another program took, since the
  // plan: exit 1, nothing written.
  Error exec_refusal() const;
  // Whether /proc/PID/exe is now another file than the planned one (an exec that no wait
  // saw: the attach failed while it was under way).
  bool runs_another_file() const;
  // Where the plan's file is in the process: its executable, or with -p PID --binary LIB
  // that library's copy, proven by its inode (core/plan/planned_image.h). nullopt: not mapped.
  std::optional<uint64_t> image_bias() const;
  // The path that names the plan's file, for the image lock and the kernel's uprobe list:
  // /proc/PID/exe, or gotap's own descriptor of the library.
  std::string image_path(pid_t pid) const;
  // The probes placed, in steps: the decoders, the sites of the plan, what could not be
  // placed, and the int3s with the safety net (tracer_attach.cpp).
  Result<void> setup_probes(pid_t stopped);
  struct SiteTally {
    size_t wanted = 0, taken = 0, failed = 0, child_left = 0, blocked_left = 0, detoured = 0;
    std::string first_problem, first_holder, first_child, first_blocked, first_detoured;
  };
  void prepare_decoding();
  Result<void> collect_sites(SnapshotReader& code, SiteTally& t);
  Result<void> report_sites(const SiteTally& t);
  Result<void> arm(pid_t stopped);
  void clear_leftovers();
  // Who holds a uprobe at addr (bias: the image's load bias), from the kernel's list of the
  // executable's uprobes, asked once per attach (clear_leftovers, then setup_probes).
  const std::string* holder_of(uint64_t addr, uint64_t bias);
  // The lock of pid's executable (core/sys/image_lock.h), held from the first look at a site
  // to the last int3 written, and while they are removed. `wait_ms`: how long another gotap
  // may hold it; a stop request ends the wait when `abortable`.
  Result<sys::ImageLock> lock_image(pid_t pid, int wait_ms, bool abortable) const;
  // The sites a uprobe holds now, asked of the kernel afresh, are marked shared
  // (Breakpoints::share): no restore writes over that tracer's int3. How many, and who holds
  // the first ("BPF program 'x', link N holds F").
  std::pair<size_t, std::string> share_uprobe_sites();
  void loop();
  // A probe hit, already sent to its copy: trap_site_ and trap_regs_ (as at the int3).
  bool handle_trap(pid_t tid);
  // A stop of tid that gotap took at `taken`, dated (stop_clock.h); the resume before it
  // that waited for a CPU is held against the goroutine it let run.
  StopClock::Stop take_stop(pid_t tid, uint64_t taken);
  // --why with the stop clock's BPF: the time tid was preempted since its last stop, and its
  // system calls, sent as kernel intervals (`kwhy`) of the goroutine it ran; and which one that is,
  // from casgstatus's changes on tid and its traced entries (bpf/why_kernel.h's rule on eBPF).
  void credit_kernel(pid_t tid, const StopClock::Stop& stop);
  void note_runs(pid_t tid, int64_t goid, uint32_t from, uint32_t to);
  // A signal-delivery stop, held like a hit's until handle_other_stop resumes the thread.
  void hold_signal_stop(pid_t tid);
  void handle_roles(const Site& s, const user_regs_struct& r, pid_t tid, uint64_t ts);
  // Hands what was emitted to the reader: always when `idle`, else at most every 50 ms.
  void flush_output(bool idle);
  // Erases a pending call, and its goroutine's held time once it has no call open.
  void close_pending(PendingMap::iterator it);
  // Arms the safety net through the stopped thread `tid`; false while it must wait.
  bool arm_net(pid_t tid);
  void on_entry(const Site& s, const SiteRole& role, const user_regs_struct& r, pid_t tid,
                uint64_t ts);
  void on_return(const Site& s, const SiteRole& role, const user_regs_struct& r, pid_t tid,
                 uint64_t ts);
  void on_inline(const Site& s, const SiteRole& role, const user_regs_struct& r, pid_t tid,
                 uint64_t ts);
  // At a RET: counts the call as failed when its error result is not nil.
  void check_error(const Site& s, FuncState& fs, const user_regs_struct& r);
  // --rate: whether a call of func may be reported now (counted when not).
  bool rate_allows(int func, uint64_t ts);
  void on_goroutine(const SiteRole& role, const user_regs_struct& r, pid_t tid, uint64_t ts);
  // --why: the stacks read beside a park or a wake-up (nullopt: neither, or unreadable).
  std::optional<StatusStacks> status_stacks(const user_regs_struct& r, uint32_t from, uint32_t to);
  RegState reg_state(const user_regs_struct& r, pid_t tid, bool xmm, uint64_t sp);
  nlohmann::json stack_of(const user_regs_struct& r, uint64_t pc, uint64_t ret_slot, pid_t tid);
  void finish_pending();
  // Count keeps a frame per call (and probes the RETs) to recognise an entry probe's refire
  // after morestack, unless an Uncount site takes the refire back.
  static bool tracks_refires(const FuncPlan& f, const FuncState& fs) {
    return f.entry_refires && !fs.uncount;
  }
  // The executable's file at run-time addresses, for Breakpoints' writes of a page's sites at
  // once; and its text given back to the system once read (a whole binary's: 17 MB).
  FileText file_text() const;
  void release_file_text() const;
  void detach();
  // A launched program ends with its trace, once the probes are removed (sys::end_child);
  // `gone`: it had exited already.
  void end_launched(bool gone);
  // After a hit in code that may run with signals blocked: TrapNet::rearm when the thread
  // blocks signals.
  void keep_net(pid_t tid);
  // At detach, with every thread in `stopped` held: unmaps the data page, and the scratch
  // page when no thread can come back to it (page_release.h). Syscalls run in `via`.
  void release_pages(const std::vector<pid_t>& stopped, pid_t via);
  void emit(nlohmann::json ev);
  // A call event: staged for the queue's thread when there is one (with `params` to decode
  // there from the hit's copy), else decoded and written here.
  void emit(CallEntry ev, const std::vector<ParamLoc>* params = nullptr,
            const RegState* rs = nullptr);
  void emit(CallReturn ev, const std::vector<ParamLoc>* params = nullptr,
            const RegState* rs = nullptr);
  // Both of them: List is the event's args or results.
  template <class Call, std::vector<Param> Call::*List>
  void emit_decoded(Call ev, const std::vector<ParamLoc>* params, const RegState* rs);
  // After the hit's thread resumed: its staged events, and its copy, to the queue.
  void hand_over();
  // A call event, typed (EventSink::emit_entry), when there is nothing left to decode.
  template <class Call>
  void emit_call(Call ev);
  void emit_aggregates();
  bool stop_due() const;
  // --max-overhead (backends/ptrace/overhead.cpp): a hit of s held its thread ns; every
  // ~100 ms, the functions over the budget lose their breakpoints.
  void charge_hit(const Site& s, uint64_t ns);
  void check_overhead();
  // --prometheus: serves fstate_'s counts and latencies to scrapes until end_metrics().
  void begin_metrics();
  void end_metrics();

  const BinaryView& bin_;  // plan_.binary_view
  const ProbePlan& plan_;
  const TraceOptions& opts_;
  EventSink& sink_;
  std::unique_ptr<Process> proc_;
  uint64_t bias_ = 0;
  std::optional<PlannedImage> lib_;            // -p PID --binary LIB: the library's file
  std::unique_ptr<MappedNames> mapped_names_;  // with lib_: names outside it
  Breakpoints bps_;
  TrapNet net_;
  const Site* trap_site_ = nullptr;
  // Sites where a dead gotap's int3 was removed at attach (trap_net.h, rewind_leftover).
  std::vector<uint64_t> leftover_sites_;
  std::optional<std::map<uint64_t, std::string>> holders_;  // holder_of
  user_regs_struct trap_regs_{};
  // The SIGTRAP handler put back after the kernel reset it (TrapNet::rearm).
  uint64_t net_rearms_ = 0;
  bool net_wanted_ = false;  // not armed yet: the program has no SIGTRAP handler yet
  uint64_t syscall_at_ = 0;  // where syscalls are injected: the ELF entry, never run again
  std::unique_ptr<GoroutineReader> gr_;
  std::unique_ptr<CfiStack> cfi_;  // --stack on a gccgo program, made at its first stack
  // The hit's memory, copied while its thread is stopped (hit_reader.h); decoding reads it.
  std::unique_ptr<HitReader> hit_;
  bool batch_ = true;   // GOTAP_PTRACE_BATCH=0: every read its own system call
  bool defer_ = true;   // GOTAP_PTRACE_DEFER=0: decode before resuming, as before
  bool floor_ = false;  // GOTAP_PTRACE_FLOOR=1: resume at once, no event (a benchmark's floor)
  // Decoding and output of this hit that wait for its thread to resume; emit() queues behind
  // them so that the events keep their order.
  std::vector<std::function<void()>> deferred_;
  bool in_deferred_ = false;
  void run_deferred();
  bool may_defer(int func, bool results) const;
  std::unique_ptr<ValueDecoder> dec_;
  // Decoding from the copy and writing, on a second thread (GOTAP_PTRACE_QUEUE=0: here, as
  // before); the events of the hit being handled wait in staged_ until its thread resumes.
  std::unique_ptr<EventQueue> queue_;
  std::vector<QueuedEvent> staged_;
  bool use_queue_ = true;
  uint64_t flush_ns_ = 5'000'000;  // GOTAP_PTRACE_FLUSH_MS: the queue's flush timer
  // GoroutineEvents' sink: its events take the same way as the tracer's.
  struct StageSink : EventSink {
    explicit StageSink(Tracer& t) : t(t) {}
    void emit(const Event& ev) override;
    void flush() override;
    Tracer& t;
  };
  StageSink stage_sink_{*this};
  std::unique_ptr<GoroutineEvents> goroutines_;
  std::vector<FuncState> fstate_;
  // Guards fstate_'s count and latency against --prometheus scrapes on another thread.
  std::mutex fstate_mu_;
  bool metrics_live_ = false;
  PendingMap pending_;
  RateLimit rate_{0, 0};  // guarded by fstate_mu_ (scrapes read its counts)
  uint64_t hits_ = 0, events_ = 0;
  uint64_t goid_read_errors_ = 0;  // goroutine probe hits whose g could not be read
  uint64_t deadline_ns_ = 0;
  uint64_t spin_ns_ = 0;
  CpuFollower cpu_follow_;  // GOTAP_PTRACE_FOLLOW_CPU=1: follow the stopped thread's CPU
  bool exec_ended_ = false;
  // An exception out of decoding or the output, caught at the hit: the trace ends, probes
  // removed, and run() reports it (exit 1).
  std::optional<std::string> failed_;
  // Events handed to the sink, and how many of them were flushed: flushed when the tracer
  // is about to wait, or every 50 ms while hits keep coming (docs/cli.md).
  std::unordered_map<int64_t, Held> held_;
  // The goroutine of the hit being handled, once on_entry or on_return read it.
  std::optional<int64_t> trap_goid_;
  // The goid of a call site: kNoGoid when none is read (gccgo without libgo's g).
  int64_t site_goid(const std::optional<GInfo>& gi) const {
    return !gr_->goids() ? kNoGoid : gi ? gi->goid : 0;
  }
  // held_'s key for a call of goroutine `goid` on thread `tid`: without goids (gccgo), the
  // thread's, so that one thread's holds are not taken from another's calls.
  int64_t held_key(int64_t goid, pid_t tid) const {
    return gr_->goids() ? goid : -2 - int64_t(tid);
  }
  // When the threads really stopped and ran again (stop_clock.h); trap_at_ns_: the trap of
  // the hit being handled, which durations are measured from.
  std::unique_ptr<StopClock> stop_clock_;
  bool why_kernel_ = false;    // --why reads the kernel's side (credit_kernel)
  bool why_syscalls_ = false;  // system calls by name too (StopClock::take_syscalls)
  std::unordered_map<pid_t, uint64_t> preempted_seen_;  // tid: its total at its last stop
  std::unordered_map<pid_t, int64_t> runs_on_;          // tid: the goroutine it runs
  uint64_t trap_at_ns_ = 0;
  uint64_t test_hold_ns_ = 0;  // GOTAP_TEST_HOLD_US: a slow decoder, for tests
  uint64_t flushed_events_ = 0;
  uint64_t last_flush_ns_ = 0;
  OverheadBudget budget_{0, 0};
  std::vector<uint64_t> cost_ns_,
      cost_hits_;                            // per function: the time its hits held threads stopped
  uint64_t stop_taken_ns_ = UINT64_MAX;      // when the tracer took the stop being handled
  uint64_t held_total_ns_ = 0;               // GOTAP_TIMING: every hit's stop taken to its resume
  std::atomic<uint64_t> detached_total_{0};  // read by --prometheus scrapes
};

// CLOCK_MONOTONIC in nanoseconds (the clock of ts_ns).
inline uint64_t now_ns() {
  return sys::monotonic_ns();
}
// An argument or result as an event carries it: the decoder gives the value with its name and
// type (tracer.cpp; the hits and the output queue both decode).
Param param(ValueDecoder& dec, const ParamLoc& p, const RegState& rs);

}  // namespace gotap::ptrace
