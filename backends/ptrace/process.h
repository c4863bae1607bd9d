// Process control for the ptrace backend: launching a command traced from its first
// instruction, attaching to a running process (every thread, and every thread it creates
// later, through PTRACE_SEIZE + PTRACE_O_TRACECLONE), syscall injection and detaching.
// Only one thread ever stops at a time: nothing here stops the whole process except detach.
#pragma once

#include <sys/types.h>
#include <sys/user.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backends/ptrace/memory.h"
#include "core/model/result.h"

namespace gotap::ptrace {

// A decoded waitpid status.
struct WaitStatus {
  pid_t tid = 0;
  int raw = 0;
  bool exited() const;      // WIFEXITED or WIFSIGNALED
  bool stopped() const;     // WIFSTOPPED
  int stop_sig() const;     // WSTOPSIG
  int event() const;        // PTRACE_EVENT_* or 0
  bool group_stop() const;  // PTRACE_EVENT_STOP with a stopping signal
};

// Called with a thread's registers at a SIGTRAP stop; returns true after changing them.
// A signal mask line of /proc/PID[/task/TID]/status ("SigPnd", "SigCgt", ...; tid 0: the
// process's); nullopt when the process is gone or the line is unreadable.
std::optional<uint64_t> signal_mask(pid_t pid, pid_t tid, std::string_view field);

using TrapFix = std::function<bool(pid_t, user_regs_struct&)>;
// The TrapFix that changes nothing: a SIGTRAP goes to the program as it came (no int3 of
// gotap's is in place yet or any more, or its probes are uprobes, which the kernel handles).
inline bool trap_unchanged(pid_t, user_regs_struct&) {
  return false;
}

// Whether a system call's raw result (Process::inject_syscall's) is an error: -4095 to -1,
// the kernel's -errno; mmap's addresses are never in that range.
inline bool syscall_failed(uint64_t r) {
  const int64_t v = static_cast<int64_t>(r);
  return v < 0 && v > -4096;
}

class Process {
 public:
  // Whether a wait should give up: a stop requested while attaching (set_abort).
  using Abort = std::function<bool()>;
  // How long a wait for one thread's stop lasts at most (an injected system call's, an
  // interrupt's); a thread that never reports must not hold gotap and the program for ever.
  static constexpr std::chrono::seconds kWaitLimit{5};

  // fork + exec; returns with the only thread stopped at the exec (PTRACE_EVENT_EXEC).
  static Result<std::unique_ptr<Process>> launch(const std::vector<std::string>& argv,
                                                 Abort abort = nullptr);
  // Seizes every thread; returns with all threads running.
  static Result<std::unique_ptr<Process>> attach(pid_t pid, Abort abort = nullptr);
  ~Process();

  pid_t pid() const { return pid_; }
  bool launched() const { return launched_; }
  TraceeMemory& mem() { return *mem_; }
  std::unordered_set<pid_t>& threads() { return threads_; }

  // Stops thread `tid` with PTRACE_INTERRUPT and waits for it; other threads' events that
  // arrive meanwhile are handled by passing their signals through. A SIGTRAP stop (of any
  // thread) goes to `fix_trap` first, as in detach_all: once breakpoints exist, such a stop
  // is a probe hit, which must not be resumed as if it were not.
  Result<void> interrupt_and_wait(pid_t tid, const TrapFix& fix_trap = nullptr);

  // Runs syscall `nr` in the stopped thread `tid` and returns its result, leaving the thread
  // as it was. Through a self-restoring stub (inject_stub.h) when the process has room for
  // one; else with a `syscall` instruction written temporarily at `code_addr` (an address no
  // other thread executes) and single-stepped.
  Result<uint64_t> inject_syscall(pid_t tid, uint64_t code_addr, long nr,
                                  std::initializer_list<uint64_t> args);

  // Test hook: GOTAP_TEST_DIE_AT=PHASE:N makes gotap kill itself (SIGKILL) right after the
  // Nth step (a ptrace request, a wait or a write of the tracee) of the injections made
  // while `phase` ("attach" or "detach") is set, as a tracer that dies there would.
  // `fix_trap`: what a thread's registers become when an int3's SIGTRAP that was queued
  // before its stop turns up during an injection (as in detach_all).
  void set_inject_phase(const char* phase, TrapFix fix_trap = nullptr) {
    inject_phase_ = phase;
    inject_steps_ = 0;
    fix_trap_ = std::move(fix_trap);
  }

  // A signal that arrived while a thread was held for injection; delivered on its next resume.
  int take_held_signal(pid_t tid);
  void hold_signal(pid_t tid, int sig) { held_signals_[tid] = sig; }

  // The next stop or exit of `which` (-1: any thread); tid 0 when `block` is false and there
  // is none, -1 on error (errno: EINTR when a signal interrupted the wait). A SIGTRAP stop
  // goes to `fix` *before* it is consumed (waitid with WNOWAIT): once waitpid has reported a
  // stop, a tracer that dies leaves the thread to resume with no signal, so its registers
  // must already say where it resumes. *fixed says whether `fix` changed them.
  WaitStatus next_event(pid_t which, bool block, const TrapFix& fix, bool* fixed);

  // Resumes a stopped thread with a signal (0 = none).
  static bool cont(pid_t tid, int sig);
  // Handles a stop that is not a probe hit: thread creation, group stops, signals, and the
  // first stop of a forked child (release_child).
  void handle_other_stop(const WaitStatus& ws);

  // A forked child's first stop (PTRACE_O_TRACEFORK, or a clone that made no thread): unless
  // it shares the program's memory, `clean` gets that memory (to put the original bytes back
  // where the program has int3s); then the child is detached, to run untraced. False, doing
  // nothing, for a stop of the program's own.
  using ChildClean = std::function<void(TraceeMemory& child)>;
  void set_child_clean(ChildClean clean) { child_clean_ = std::move(clean); }
  bool release_child(const WaitStatus& ws);
  // The children forked since whose first stop has not come yet, released as it comes
  // (bounded: a second). After the last thread is detached, or the program exited: a
  // child it forked just before must not be left to the kernel's detach, int3s and all.
  void release_children();
  uint64_t children_cleaned() const { return children_cleaned_; }

  // Whether the process ran exec since the launch's own (or the attach): the threads are
  // gone but the leader, which runs another program (the plan's addresses mean nothing
  // there). Seen by every wait: an injection, an interrupt, detach_all. /proc/PID/mem, opened
  // before, reaches the old program's memory only: no write can reach the new one.
  bool exec_seen() const { return exec_seen_; }
  // While set, waits give up when it says so (errors "stopped while attaching").
  void set_abort(Abort abort) { abort_ = std::move(abort); }
  int exit_code() const { return exit_code_; }
  int exit_signal() const { return exit_signal_; }  // 0 unless a signal killed it
  void note_exit(const WaitStatus& ws);
  bool gone() const { return gone_; }

  // Interrupts every thread and detaches from each. `fix_trap` gets a thread that reported a
  // SIGTRAP (a probe hit taken before the breakpoints were restored): it returns true after
  // rewinding the registers, so that the original instruction runs and no signal is sent.
  // `already_stopped`: a thread the caller holds in an interrupt stop (it reports no more).
  // Gives up after a few seconds on threads that never report. Then the children forked
  // meanwhile are released (release_children).
  // `all_stopped`, when given, runs once every thread is held in a stop with no int3's
  // SIGTRAP left to take, before any thread is released: the only moment at which gotap
  // can know where every thread is. It gets those threads that may have run code (a thread
  // created during the detach, held at its first stop, has run none); `already_stopped` is
  // among them and free for injections. It does not run when a thread cannot be held (a job-control
  // stop, a thread that never reports).
  using AllStopped = std::function<void(const std::vector<pid_t>& stopped)>;
  void detach_all(const TrapFix& fix_trap, pid_t already_stopped = 0,
                  const AllStopped& all_stopped = nullptr);

 private:
  Process() = default;
  pid_t pid_ = 0;
  bool launched_ = false;
  bool exec_seen_ = false;
  bool exec_stopped_ = false;  // the leader sits in the exec stop that saw_exec took
  bool gone_ = false;
  Abort abort_;
  int exit_code_ = 0;
  int exit_signal_ = 0;
  std::unique_ptr<TraceeMemory> mem_;
  std::unordered_set<pid_t> threads_;
  std::unordered_map<pid_t, int> held_signals_;
  const char* inject_phase_ = "";
  int inject_steps_ = 0;
  void inject_step();
  void test_pause() const;
  TrapFix fix_trap_;
  ChildClean child_clean_;
  // At a CLONE or FORK event: the new thread, or nothing when it made a process (then kept
  // in children_ until its first stop).
  std::optional<pid_t> new_thread(const WaitStatus& ws);
  std::unordered_set<pid_t> children_;
  uint64_t children_cleaned_ = 0;
  uint64_t stub_area_ = 0;
  bool stub_searched_ = false;
  Result<uint64_t> inject_by_step(pid_t tid, uint64_t code_addr, long nr,
                                  std::initializer_list<uint64_t> args);
  // The next stop or exit of `tid`, the exits of other threads reaped meanwhile: an exec by
  // another thread waits (in D state) until every other thread is reaped, and a tracer that
  // waits for the leader alone waited for ever. {-1, 0} with errno ETIMEDOUT after
  // `timeout`, EINTR when aborted, ECHILD when tid is gone.
  WaitStatus wait_thread(pid_t tid, std::chrono::steady_clock::duration timeout);
  // Reaps every thread's exit that is ready, but `keep`'s; whether there was one.
  bool reap_exits(pid_t keep);
  // An exec took the process: the leader alone is left (`stopped`: in its exec stop).
  void saw_exec(bool stopped);
  bool aborted() const;
  // The error of a wait_thread that gave up.
  Error wait_error(pid_t tid, const char* during) const;
};

}  // namespace gotap::ptrace
