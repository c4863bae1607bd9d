#include "backends/ptrace/process.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "backends/ptrace/forked_child.h"
#include "backends/ptrace/inject_stub.h"
#include "core/sys/proc_status.h"
#include "core/sys/spawn.h"

namespace gotap::ptrace {

namespace {

// TRACESYSGOOD: the syscall stops of an injection (inject_stub.h) carry SIGTRAP | 0x80, which
// a tracer that dies there does not leave the thread to take as a signal. TRACEFORK: each
// forked child stops before it runs, to be cleaned of the int3s it inherits (forked_child.h);
// not TRACEVFORK: a vfork's child shares the program's memory, whose int3s must stay.
constexpr long kSeizeOptions =
    PTRACE_O_TRACECLONE | PTRACE_O_TRACEFORK | PTRACE_O_TRACEEXEC | PTRACE_O_TRACESYSGOOD;

std::vector<pid_t> list_tasks(pid_t pid) {
  std::vector<pid_t> out;
  std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    out.push_back(static_cast<pid_t>(std::atoi(e->d_name)));
  }
  closedir(d);
  return out;
}

// Waits that poll: a blocked waitpid returns only for a signal delivered to its own thread,
// and the front end's handler may run on any thread, so a wait must look at the clock and
// at the stop request itself. Yields the CPU at first (an injected system call's stop comes
// within microseconds), then sleeps a little longer each time, up to a millisecond.
class Backoff {
 public:
  void pause() {
    if (n_++ < 64) {
      sched_yield();
      return;
    }
    usleep(us_);
    us_ = std::min(us_ * 2, 1000);
  }
  void reset() {
    n_ = 0;
    us_ = 20;
  }
  bool sleeping() const { return n_ >= 64; }

 private:
  int n_ = 0;
  int us_ = 20;
};

using Clock = std::chrono::steady_clock;

}  // namespace

WaitStatus Process::wait_thread(pid_t tid, Clock::duration timeout) {
  const auto deadline = Clock::now() + timeout;
  Backoff backoff;
  for (;;) {
    int st = 0;
    pid_t t = waitpid(tid, &st, __WALL | WNOHANG);
    if (t == tid) {
      WaitStatus ws{t, st};
      if (ws.stopped() && ws.event() == PTRACE_EVENT_EXEC) saw_exec(true);
      return ws;
    }
    if (t < 0 && errno != EINTR) return {-1, 0};
    // Once the stop is slow to come (a system call's comes within microseconds): an exec
    // may be waiting for the other threads to be reaped.
    if (backoff.sleeping() && reap_exits(tid)) continue;
    if (aborted()) {
      errno = EINTR;
      return {-1, 0};
    }
    if (Clock::now() >= deadline) {
      errno = ETIMEDOUT;
      return {-1, 0};
    }
    backoff.pause();
  }
}

bool Process::reap_exits(pid_t keep) {
  // Thread by thread, and only exits: a tracer's wait reports a tracee's ptrace stops even
  // without WSTOPPED, and another thread's stop (an int3's SIGTRAP) must be left to the
  // loop, which sends it to its copy before consuming it (next_event). /proc/PID/task still
  // lists a zombie, and a thread gotap has not heard of yet.
  std::vector<pid_t> tids = list_tasks(pid_);
  tids.insert(tids.end(), threads_.begin(), threads_.end());
  std::sort(tids.begin(), tids.end());
  tids.erase(std::unique(tids.begin(), tids.end()), tids.end());
  bool any = false;
  for (pid_t t : tids) {
    if (t == keep) continue;
    siginfo_t si{};
    if (waitid(P_PID, id_t(t), &si, WEXITED | __WALL | WNOHANG | WNOWAIT) != 0 || si.si_pid != t ||
        (si.si_code != CLD_EXITED && si.si_code != CLD_KILLED && si.si_code != CLD_DUMPED))
      continue;
    int st = 0;
    if (waitpid(t, &st, __WALL | WNOHANG) != t) continue;
    note_exit({t, st});
    any = true;
  }
  return any;
}

void Process::saw_exec(bool stopped) {
  // The execing thread took the leader's pid; every other thread is gone, unreported.
  exec_seen_ = true;
  exec_stopped_ = stopped;
  threads_.clear();
  threads_.insert(pid_);
  held_signals_.clear();
}

bool Process::aborted() const {
  return abort_ && abort_();
}

void Process::inject_step() {
  static const std::string die_at = [] {
    const char* e = getenv("GOTAP_TEST_DIE_AT");
    return std::string(e ? e : "");
  }();
  if (die_at.empty()) return;
  ++inject_steps_;
  if (die_at == std::string(inject_phase_) + ":" + std::to_string(inject_steps_)) raise(SIGKILL);
}

// Test hook (tests/unit/test_runtime_attach.cpp): GOTAP_TEST_INJECT_PAUSE_US waits that long
// after sending a thread to each system call injected while attaching and before waiting for
// its stop, so that a program's exec, or a stop request, falls among them.
void Process::test_pause() const {
  static const long pause_us = [] {
    const char* e = getenv("GOTAP_TEST_INJECT_PAUSE_US");
    return e ? std::atol(e) : 0L;
  }();
  if (pause_us > 0 && std::string_view(inject_phase_) == "attach") usleep(pause_us);
}

bool WaitStatus::exited() const {
  return WIFEXITED(raw) || WIFSIGNALED(raw);
}
bool WaitStatus::stopped() const {
  return WIFSTOPPED(raw);
}
int WaitStatus::stop_sig() const {
  return WSTOPSIG(raw);
}
int WaitStatus::event() const {
  return (raw >> 16) & 0xff;
}
bool WaitStatus::group_stop() const {
  if (event() != PTRACE_EVENT_STOP) return false;
  int s = stop_sig();
  return s == SIGSTOP || s == SIGTSTP || s == SIGTTIN || s == SIGTTOU;
}

Process::~Process() = default;

bool Process::cont(pid_t tid, int sig) {
  return ::ptrace(PTRACE_CONT, tid, nullptr, reinterpret_cast<void*>(static_cast<long>(sig))) == 0;
}

Result<std::unique_ptr<Process>> Process::launch(const std::vector<std::string>& argv,
                                                 Abort abort) {
  // Stopped before exec, so that exec is the first thing the tracer sees.
  auto c = sys::fork_exec(argv, sys::TraceStop::BeforeExec);
  if (!c) return c.error();
  const pid_t child = c->pid;
  int st = 0;
  if (waitpid(child, &st, WUNTRACED) != child || !WIFSTOPPED(st)) {
    return runtime_error("cannot start {}", argv[0]);
  }
  // No PTRACE_O_EXITKILL: a launched program outlives a gotap that is killed, as an attached
  // one does. A trace that ends ends it (Tracer::end_launched).
  if (::ptrace(PTRACE_SEIZE, child, nullptr, reinterpret_cast<void*>(kSeizeOptions)) != 0) {
    int e = errno;
    kill(child, SIGKILL);
    waitpid(child, &st, 0);
    errno = e;
    return errno_error(ErrorKind::Runtime, "cannot trace {}", argv[0]);
  }
  kill(child, SIGCONT);
  std::unique_ptr<Process> p(new Process());
  p->pid_ = child;
  p->launched_ = true;
  p->abort_ = std::move(abort);
  p->threads_.insert(child);
  for (;;) {
    // An exec takes milliseconds; one that hangs (a file on a dead NFS server) or a stop
    // request ends the wait. The child, stopped at its exec or not, then goes.
    WaitStatus ws = p->wait_thread(child, std::chrono::seconds(30));
    if (ws.tid != child) {
      const bool stopped = errno == EINTR;
      kill(child, SIGKILL);
      waitpid(child, nullptr, __WALL);
      p->gone_ = true;
      return stopped ? runtime_error("stopped while starting {}", argv[0])
                     : runtime_error("lost {} while starting it", argv[0]);
    }
    if (ws.exited()) {
      p->gone_ = true;
      if (int err = c->exec_error()) {
        Error e = runtime_error("cannot run {}", argv[0]);
        e.errnum = err;
        return e;
      }
      return runtime_error("cannot run {} (exit status {})", argv[0],
                           WIFEXITED(ws.raw) ? WEXITSTATUS(ws.raw) : 128 + WTERMSIG(ws.raw));
    }
    if (ws.event() == PTRACE_EVENT_EXEC) {
      // The exec gotap made, not one that would end the trace (wait_thread took it for that).
      p->exec_seen_ = p->exec_stopped_ = false;
      break;
    }
    if (ws.event() == PTRACE_EVENT_STOP || ws.stop_sig() == SIGSTOP || ws.stop_sig() == SIGCONT) {
      cont(child, 0);
      continue;
    }
    cont(child, ws.event() ? 0 : ws.stop_sig());
  }
  p->mem_ = std::make_unique<TraceeMemory>(child);
  return p;
}

namespace {

using sys::status_value;

// TracerPid of thread t of pid; -1 when it cannot be read.
pid_t tracer_of(pid_t pid, pid_t t) {
  auto v = status_value(pid, t, "TracerPid");
  return v ? pid_t(std::atoi(v->c_str())) : -1;
}

// Whether thread t of pid is gone or exiting (State Z or X).
bool thread_exiting(pid_t pid, pid_t t) {
  auto v = status_value(pid, t, "State");
  return !v || v->empty() || (*v)[0] == 'Z' || (*v)[0] == 'X';
}

}  // namespace

Result<std::unique_ptr<Process>> Process::attach(pid_t pid, Abort abort) {
  if (kill(pid, 0) != 0) return errno_error(ErrorKind::Runtime, "cannot attach to pid {}", pid);
  std::unique_ptr<Process> p(new Process());
  p->pid_ = pid;
  p->abort_ = std::move(abort);
  // An exec by a thread other than the main one makes the main thread a zombie until the
  // exec'ing thread takes its place (de_thread): it cannot be seized meanwhile (EPERM). Let
  // go of what was seized and attach again to what the process becomes, whose image the
  // caller then checks (an exec since the plan is refused as such). 100 ms at most: a main
  // thread still a zombie then is one of a process that is exiting, or that ended its main
  // thread alone (pthread_exit), which ptrace cannot seize; that is said as such.
  for (int attempt = 0;; ++attempt) {
    bool again = false;
    // Threads may be created while we seize: repeat until a pass finds no new thread.
    // Threads created by seized threads are attached automatically (PTRACE_O_TRACECLONE).
    for (bool more = true; more && !again;) {
      more = false;
      for (pid_t t : list_tasks(pid)) {
        if (p->threads_.count(t)) continue;
        if (::ptrace(PTRACE_SEIZE, t, nullptr, reinterpret_cast<void*>(kSeizeOptions)) != 0) {
          const int seize_errno = errno;       // reading /proc below may change errno
          if (seize_errno == ESRCH) continue;  // exited meanwhile
          // EPERM, in a program whose threads come and go (an attach met one now and then):
          // a thread a seized one has just cloned is ours already (PTRACE_O_TRACECLONE), and
          // one that is exiting cannot be seized.
          if (seize_errno == EPERM && t != pid) {
            if (tracer_of(pid, t) == getpid()) {
              p->threads_.insert(t);
              more = true;
              continue;
            }
            if (thread_exiting(pid, t)) continue;
          }
          if (seize_errno == EPERM && t == pid && thread_exiting(pid, t)) {
            if (attempt < 20) {
              again = true;
              break;
            }
            p->detach_all(trap_unchanged);
            return runtime_error(
                "cannot attach to pid {}: its main thread has exited (the process is exiting, "
                "or its main thread ended alone); nothing was written",
                pid);
          }
          errno = seize_errno;
          auto err = errno_error(ErrorKind::Runtime, "cannot attach to pid {} (thread {})", pid, t);
          p->detach_all(trap_unchanged);
          return err;
        }
        p->threads_.insert(t);
        more = true;
      }
    }
    if (!again) break;
    p->detach_all(trap_unchanged);
    p->threads_.clear();
    usleep(5'000);
  }
  if (p->threads_.empty()) return runtime_error("cannot attach to pid {}: no threads", pid);
  p->mem_ = std::make_unique<TraceeMemory>(pid);
  return p;
}

void Process::note_exit(const WaitStatus& ws) {
  threads_.erase(ws.tid);
  if (ws.tid == pid_) {
    gone_ = true;
    exit_code_ = WIFEXITED(ws.raw) ? WEXITSTATUS(ws.raw) : 128 + WTERMSIG(ws.raw);
    exit_signal_ = WIFSIGNALED(ws.raw) ? WTERMSIG(ws.raw) : 0;
  }
}

bool Process::release_child(const WaitStatus& ws) {
  if (!ws.stopped() || threads_.count(ws.tid) || is_thread_of(pid_, ws.tid)) return false;
  children_.erase(ws.tid);
  // Its first stop, before it ran an instruction. A child that shares the program's memory
  // (CLONE_VM without CLONE_THREAD) is left as it is: its int3s are the program's. When
  // the program is gone already (a child forked as it exited reports after), kcmp cannot
  // compare: no traced program is left to need those int3s, so the child is cleaned.
  if (child_clean_ && same_memory(pid_, ws.tid) != true) {
    TraceeMemory child(ws.tid);
    child_clean_(child);
    ++children_cleaned_;
  }
  // A signal that reached it first is its own, delivered as it goes.
  const int sig = ws.event() == 0 ? ws.stop_sig() : 0;
  ::ptrace(PTRACE_DETACH, ws.tid, nullptr, reinterpret_cast<void*>(static_cast<long>(sig)));
  return true;
}

std::optional<pid_t> Process::new_thread(const WaitStatus& ws) {
  if (ws.event() != PTRACE_EVENT_CLONE && ws.event() != PTRACE_EVENT_FORK) return std::nullopt;
  unsigned long nt = 0;
  if (::ptrace(PTRACE_GETEVENTMSG, ws.tid, nullptr, &nt) != 0) return std::nullopt;
  // A clone whose exit signal is not SIGCHLD is reported as CLONE, process or thread.
  if (ws.event() == PTRACE_EVENT_CLONE && is_thread_of(pid_, pid_t(nt))) return pid_t(nt);
  children_.insert(pid_t(nt));
  return std::nullopt;
}

void Process::release_children() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (!children_.empty() && std::chrono::steady_clock::now() < deadline) {
    for (auto it = children_.begin(); it != children_.end();) {
      const pid_t c = *it;
      int st = 0;
      const pid_t r = waitpid(c, &st, __WALL | WNOHANG);
      if (r == 0) {
        ++it;
        continue;
      }
      // Released already (its stop came first), gone, or stopped now.
      it = children_.erase(it);
      if (r == c && WIFSTOPPED(st)) release_child(WaitStatus{c, st});
    }
    if (!children_.empty()) usleep(200);
  }
}

void Process::handle_other_stop(const WaitStatus& ws) {
  pid_t tid = ws.tid;
  if (release_child(ws)) return;
  threads_.insert(tid);  // a new thread can report its first stop before its creator's event
  switch (ws.event()) {
    case PTRACE_EVENT_CLONE:
    case PTRACE_EVENT_FORK:
      if (auto nt = new_thread(ws)) threads_.insert(*nt);
      cont(tid, 0);
      return;
    case PTRACE_EVENT_STOP:
      if (ws.group_stop()) {
        ::ptrace(PTRACE_LISTEN, tid, nullptr, nullptr);
        return;
      }
      cont(tid, take_held_signal(tid));
      return;
    case 0:
      cont(tid, ws.stop_sig());  // a signal for the tracee: pass it through unchanged
      return;
    default:
      cont(tid, 0);
      return;
  }
}

int Process::take_held_signal(pid_t tid) {
  auto it = held_signals_.find(tid);
  if (it == held_signals_.end()) return 0;
  int s = it->second;
  held_signals_.erase(it);
  return s;
}

WaitStatus Process::next_event(pid_t which, bool block, const TrapFix& fix, bool* fixed) {
  *fixed = false;
  siginfo_t si{};
  int opts = WEXITED | WSTOPPED | __WALL | WNOWAIT | (block ? 0 : WNOHANG);
  if (waitid(which < 0 ? P_ALL : P_PID, which < 0 ? 0 : id_t(which), &si, opts) != 0)
    return {-1, 0};
  if (si.si_pid == 0) return {0, 0};
  const pid_t tid = si.si_pid;
  const bool trap = si.si_code == CLD_TRAPPED && si.si_status == SIGTRAP;
  user_regs_struct orig{};
  if (fix && trap && ::ptrace(PTRACE_GETREGS, tid, nullptr, &orig) == 0) {
    user_regs_struct r = orig;
    if (fix(tid, r) && ::ptrace(PTRACE_SETREGS, tid, nullptr, &r) == 0) *fixed = true;
  }
  // Consumed without blocking; a stopped thread's stop always can be. An exiting group leader
  // is not reapable before its other threads, so waiting for it by pid could block for good:
  // then another thread's event is taken instead.
  int st = 0;
  pid_t t = waitpid(tid, &st, __WALL | WNOHANG);
  if (t == 0 && !trap) t = waitpid(which, &st, __WALL | WNOHANG);
  if (t <= 0) {
    if (*fixed) ::ptrace(PTRACE_SETREGS, tid, nullptr, &orig);
    *fixed = false;
    return {t < 0 ? -1 : 0, 0};
  }
  WaitStatus ws{t, st};
  const bool plain_trap = ws.stopped() && ws.event() == 0 && ws.stop_sig() == SIGTRAP;
  // Not the plain SIGTRAP stop it looked like (a ptrace event stop): as it was.
  if (*fixed && !(t == tid && plain_trap)) {
    ::ptrace(PTRACE_SETREGS, tid, nullptr, &orig);
    *fixed = false;
  }
  // Another thread's probe hit, taken in the leader's place: fixed now, after the fact (a
  // tracer that dies in between leaves it to resume unfixed; rare, and only here).
  if (!*fixed && fix && plain_trap && t != tid) {
    user_regs_struct r{};
    if (::ptrace(PTRACE_GETREGS, t, nullptr, &r) == 0 && fix(t, r) &&
        ::ptrace(PTRACE_SETREGS, t, nullptr, &r) == 0)
      *fixed = true;
  }
  return ws;
}

Result<void> Process::interrupt_and_wait(pid_t tid, const TrapFix& fix_trap) {
  if (::ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr) != 0)
    return errno_error(ErrorKind::Runtime, "cannot stop thread {}", tid);
  // Polled (wait_thread says why), and bounded: a thread that never reports must not hold
  // gotap, and the program with it.
  const auto deadline = Clock::now() + kWaitLimit;
  Backoff backoff;
  for (;;) {
    bool fixed = false;
    WaitStatus ws = next_event(-1, false, fix_trap, &fixed);
    if (ws.tid == 0) {  // nothing yet, or an exit that cannot be taken yet (see next_event)
      if (aborted()) return runtime_error("stopped while attaching to pid {}", pid_);
      if (Clock::now() >= deadline)
        return runtime_error("thread {} did not stop within {} s", tid, kWaitLimit.count());
      backoff.pause();
      continue;
    }
    backoff.reset();
    if (ws.tid < 0) {
      if (errno == EINTR) continue;
      return errno_error(ErrorKind::Runtime, "waitpid");
    }
    if (ws.exited()) {
      note_exit(ws);
      if (ws.tid == tid || gone_) return runtime_error("thread {} exited", tid);
      continue;
    }
    if (fixed) {
      cont(ws.tid, 0);
      continue;
    }
    if (ws.event() == PTRACE_EVENT_EXEC) {
      // Another program now: nothing of the plan may go into it (the caller refuses).
      saw_exec(true);
      return runtime_error("pid {} ran exec", pid_);
    }
    if (ws.tid == tid) {
      if (ws.event() == PTRACE_EVENT_STOP && !ws.group_stop()) return {};
      // Stopped by job control (SIGSTOP, Ctrl-Z): it stays stopped, and nothing can run in it.
      if (ws.group_stop()) {
        ::ptrace(PTRACE_LISTEN, tid, nullptr, nullptr);
        return runtime_error("thread {} is stopped by job control", tid);
      }
      if (ws.event() == 0) {
        // A signal arrived first: keep it for later and wait for the interrupt's stop.
        held_signals_[tid] = ws.stop_sig();
        cont(tid, 0);
        continue;
      }
    }
    handle_other_stop(ws);
  }
}

Result<uint64_t> Process::inject_syscall(pid_t tid, uint64_t code_addr, long nr,
                                         std::initializer_list<uint64_t> args) {
  if (!stub_searched_) {
    stub_area_ = find_stub_area(pid_, *mem_);
    stub_searched_ = true;
  }
  if (!stub_area_) return inject_by_step(tid, code_addr, nr, args);
  const uint64_t stub = stub_area_;
  user_regs_struct saved{};
  if (::ptrace(PTRACE_GETREGS, tid, nullptr, &saved) != 0)
    return errno_error(ErrorKind::Runtime, "PTRACE_GETREGS");
  user_regs_struct back = resume_point(saved);
  // The stub is in place before the thread is sent to it.
  if (!mem_->write(stub, syscall_stub(back).data(), kStubSize))
    return runtime_error("cannot write {:#x}", stub);
  inject_step();
  user_regs_struct r = back;
  r.rip = stub;
  r.rax = nr;
  unsigned long long* slots[] = {&r.rdi, &r.rsi, &r.rdx, &r.r10, &r.r8, &r.r9};
  size_t i = 0;
  for (uint64_t a : args)
    if (i < 6) *slots[i++] = a;
  Result<uint64_t> out = runtime_error("syscall injection failed");
  bool entered = false, done = false;
  if (::ptrace(PTRACE_SETREGS, tid, nullptr, &r) == 0) {
    inject_step();
    int sig = 0;
    for (int stops = 0; stops < 1000 && !done; ++stops) {
      if (::ptrace(PTRACE_SYSCALL, tid, nullptr, reinterpret_cast<void*>(long(sig))) != 0) break;
      inject_step();
      if (stops == 0) test_pause();
      sig = 0;
      WaitStatus ws = wait_thread(tid, kWaitLimit);
      inject_step();
      // Gone to another program, or no answer: the registers and the stub are not put back
      // (the thread runs the new program, or may yet stop; the stub's bytes restore it).
      if (ws.tid < 0) return wait_error(tid, "during syscall injection");
      if (ws.event() == PTRACE_EVENT_EXEC) return runtime_error("pid {} ran exec", pid_);
      if (ws.exited()) {
        note_exit(ws);
        return runtime_error("thread {} exited during syscall injection", tid);
      }
      if (!ws.stopped()) continue;
      if (ws.stop_sig() == (SIGTRAP | 0x80)) {
        __ptrace_syscall_info info{};
        if (::ptrace(PTRACE_GET_SYSCALL_INFO, tid, reinterpret_cast<void*>(sizeof info), &info) <=
            0)
          break;
        const uint64_t at = info.instruction_pointer;
        if (info.op == PTRACE_SYSCALL_INFO_ENTRY && at == stub + kStubSyscallEnd &&
            info.entry.nr == uint64_t(nr)) {
          entered = true;
        } else if (info.op == PTRACE_SYSCALL_INFO_EXIT && entered) {
          out = static_cast<uint64_t>(info.exit.rval);
          done = true;
        } else if (info.op == PTRACE_SYSCALL_INFO_EXIT && !entered && at == stub) {
          // The exit of a syscall the thread was stopped in (execve at an exec stop): its
          // result went to rax. Our registers again, before the stub runs.
          if (::ptrace(PTRACE_SETREGS, tid, nullptr, &r) != 0) break;
          inject_step();
        }
        continue;
      }
      if (ws.event() != 0) continue;  // an interrupt or group stop: on with the stub
      if (ws.stop_sig() == SIGTRAP && fix_trap_) {
        // An int3's SIGTRAP that was still queued at the stop: the thread resumes as a hit
        // taken then does, the stub's way back rewritten before the thread can reach it.
        if (fix_trap_(tid, back) && mem_->write(stub, syscall_stub(back).data(), kStubSize)) {
          inject_step();
          continue;
        }
      }
      // Any other signal is the program's, delivered now: its handler runs at the stub and
      // returns there (Go's finds no Go code at that pc, and does nothing it would not do
      // in a syscall). Held instead, it would be lost if gotap died before resuming.
      sig = ws.stop_sig();
    }
  }
  // Back where it was, with its registers, as the stub would have left it. A thread that
  // did not finish the syscall is sent back too: the stub is zeroed next.
  if (::ptrace(PTRACE_SETREGS, tid, nullptr, &back) != 0 && done)
    out = errno_error(ErrorKind::Runtime, "PTRACE_SETREGS");
  inject_step();
  static const std::array<uint8_t, kStubSize> kZero{};
  mem_->write(stub, kZero.data(), kZero.size());
  inject_step();
  if (!done && out) out = runtime_error("syscall injection failed");
  return out;
}

// Without a stub area (no vDSO): `syscall` written at code_addr and single-stepped. A tracer
// that dies meanwhile leaves the thread with borrowed registers.
Result<uint64_t> Process::inject_by_step(pid_t tid, uint64_t code_addr, long nr,
                                         std::initializer_list<uint64_t> args) {
  user_regs_struct saved{}, r{};
  if (::ptrace(PTRACE_GETREGS, tid, nullptr, &saved) != 0)
    return errno_error(ErrorKind::Runtime, "PTRACE_GETREGS");
  uint8_t orig[2];
  if (!mem_->read(code_addr, orig, 2)) return runtime_error("cannot read {:#x}", code_addr);
  static const uint8_t kSyscall[2] = {0x0f, 0x05};
  if (!mem_->write(code_addr, kSyscall, 2)) return runtime_error("cannot write {:#x}", code_addr);
  inject_step();
  r = saved;
  r.rip = code_addr;
  r.rax = nr;
  r.orig_rax = static_cast<unsigned long long>(-1);  // no syscall restart on resume
  unsigned long long* slots[] = {&r.rdi, &r.rsi, &r.rdx, &r.r10, &r.r8, &r.r9};
  size_t i = 0;
  for (uint64_t a : args)
    if (i < 6) *slots[i++] = a;
  Result<uint64_t> out = runtime_error("syscall injection failed");
  if (::ptrace(PTRACE_SETREGS, tid, nullptr, &r) == 0) {
    inject_step();
    for (int tries = 0; tries < 100; ++tries) {
      if (::ptrace(PTRACE_SINGLESTEP, tid, nullptr, nullptr) != 0) break;
      inject_step();
      WaitStatus ws = wait_thread(tid, kWaitLimit);
      inject_step();
      if (ws.tid < 0) return wait_error(tid, "during syscall injection");
      if (ws.event() == PTRACE_EVENT_EXEC) return runtime_error("pid {} ran exec", pid_);
      if (ws.exited()) {
        note_exit(ws);
        return runtime_error("thread {} exited during syscall injection", tid);
      }
      user_regs_struct after{};
      ::ptrace(PTRACE_GETREGS, tid, nullptr, &after);
      if (after.rip == code_addr + 2) {
        out = static_cast<uint64_t>(after.rax);
        break;
      }
      // A signal got in the way: hold it, and step again.
      if (ws.event() == 0 && ws.stop_sig() != SIGTRAP) held_signals_[tid] = ws.stop_sig();
    }
  }
  mem_->write(code_addr, orig, 2);
  inject_step();
  ::ptrace(PTRACE_SETREGS, tid, nullptr, &saved);
  inject_step();
  return out;
}

Error Process::wait_error(pid_t tid, const char* during) const {
  if (errno == EINTR) return runtime_error("stopped while attaching to pid {}", pid_);
  if (errno == ETIMEDOUT)
    return runtime_error("thread {} did not stop within {} s {}", tid, kWaitLimit.count(), during);
  return errno_error(ErrorKind::Runtime, "thread {} lost {}", tid, during);
}

std::optional<uint64_t> signal_mask(pid_t pid, pid_t tid, std::string_view field) {
  auto v = status_value(pid, tid, field);
  if (!v) return std::nullopt;
  uint64_t mask = 0;
  auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), mask, 16);
  if (ec != std::errc() || end == v->data()) return std::nullopt;
  return mask;
}

namespace {

// Whether SIGTRAP is pending for thread `tid` (SigPnd: its own queue, where an int3's lands).
bool sigtrap_pending(pid_t pid, pid_t tid) {
  return signal_mask(pid, tid, "SigPnd").value_or(0) & (1ull << (SIGTRAP - 1));
}

}  // namespace

void Process::detach_all(const TrapFix& fix_trap, pid_t already_stopped,
                         const AllStopped& all_stopped) {
  std::unordered_set<pid_t> pending;
  // Threads released, parked or gone: a thread's creator may report the clone after the new
  // thread's first stop or its exit, which must not put it back among those waited for.
  // Waited for again, it never reported, and the detach gave up on holding every thread
  // (the scratch page stayed) after 5 s, in a program whose threads come and go.
  std::unordered_set<pid_t> done;
  // Threads created during the detach and held at their first stop: they have run no
  // instruction, so none can return into gotap's pages, whatever stale words lie above their
  // new stack (a Go thread's g0 stack is heap memory, where freed stacks held signal frames).
  std::unordered_set<pid_t> unstarted;
  // With all_stopped: threads held in their stop until every thread is, and the signal each
  // is to get when released.
  std::vector<std::pair<pid_t, int>> parked;
  bool holding = all_stopped != nullptr && already_stopped != 0;
  auto release = [&](pid_t t, int sig) {
    ::ptrace(PTRACE_DETACH, t, nullptr, reinterpret_cast<void*>(static_cast<long>(sig)));
    threads_.erase(t);
  };
  auto detach = [&](pid_t t, int sig) {
    pending.erase(t);
    done.insert(t);
    if (holding) {
      parked.push_back({t, sig});
      return;
    }
    release(t, sig);
  };
  // A thread that cannot be held: what is parked so far goes, and so does the hold.
  auto detach_now = [&](pid_t t, int sig) {
    if (holding) {
      holding = false;
      for (auto [p, s] : parked) release(p, s);
      parked.clear();
    }
    detach(t, sig);
  };
  // A thread in an interrupt stop may still have an int3's SIGTRAP queued: the kernel reports
  // the interrupt before it dequeues signals. Detached like that, the SIGTRAP would reach
  // the program. Resume it instead, and take the signal's stop that comes first.
  auto detach_stopped = [&](pid_t t, int sig) {
    if (sig == 0 && sigtrap_pending(pid_, t) && cont(t, 0)) {
      unstarted.erase(t);
      return;
    }
    detach(t, sig);
  };
  // The leader in an exec stop that was taken already (saw_exec): it reports nothing more.
  if (exec_stopped_ && already_stopped != pid_) {
    exec_stopped_ = false;
    release(pid_, 0);
  }
  for (pid_t t : threads_) {
    if (t == already_stopped) continue;
    if (::ptrace(PTRACE_INTERRUPT, t, nullptr, nullptr) == 0) pending.insert(t);
  }
  if (already_stopped && threads_.count(already_stopped)) {
    pending.insert(already_stopped);
    detach_stopped(already_stopped, take_held_signal(already_stopped));
  }
  // Bounded: a thread that never reports (it left in a way we did not see) must not keep
  // gotap, and with it a stop request, waiting forever. Whatever is left is detached by the
  // kernel when gotap exits.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!pending.empty() && std::chrono::steady_clock::now() < deadline) {
    bool fixed = false;
    WaitStatus ws = next_event(-1, false, fix_trap, &fixed);
    if (ws.tid == 0) {
      usleep(200);
      continue;
    }
    if (ws.tid < 0) {
      if (errno == EINTR) continue;
      break;  // ECHILD: nothing left
    }
    if (ws.exited()) {
      note_exit(ws);
      pending.erase(ws.tid);
      done.insert(ws.tid);
      continue;
    }
    pid_t t = ws.tid;
    if (release_child(ws)) continue;
    int held = take_held_signal(t);
    switch (ws.event()) {
      case PTRACE_EVENT_CLONE:
      case PTRACE_EVENT_FORK:
        if (auto nt = new_thread(ws)) {
          if (!done.count(*nt)) pending.insert(*nt);
          unstarted.insert(*nt);
        }
        detach(t, held);
        break;
      case PTRACE_EVENT_EXEC: {
        // The execing thread's former tid reports nothing more: no longer waited for.
        unsigned long former = 0;
        if (::ptrace(PTRACE_GETEVENTMSG, t, nullptr, &former) == 0) pending.erase(pid_t(former));
        exec_seen_ = true;
        detach(t, held);
        break;
      }
      case 0: {
        // A syscall stop (an injection given up: the stub finishes it) carries no signal.
        int sig = fixed || ws.stop_sig() == (SIGTRAP | 0x80) ? 0 : ws.stop_sig();
        // The pending interrupt is dropped by the detach.
        detach(t, sig ? sig : held);
        break;
      }
      case PTRACE_EVENT_STOP:
        if (!ws.group_stop()) {
          detach_stopped(t, held);
          break;
        }
        detach_now(t, held);
        break;
      default:
        detach(t, held);
        break;
    }
  }
  if (holding && pending.empty()) {
    std::vector<pid_t> stopped;
    for (auto [t, sig] : parked)
      if (!unstarted.count(t)) stopped.push_back(t);
    if (std::find(stopped.begin(), stopped.end(), already_stopped) != stopped.end())
      all_stopped(stopped);
  }
  for (auto [t, sig] : parked) release(t, sig);
  threads_.clear();
  // A child forked while the threads were seized stops at its first stop, ours: left there,
  // it would wait for as long as gotap lives (a trampoline trace, after the patch).
  release_children();
}

}  // namespace gotap::ptrace
