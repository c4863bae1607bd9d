// When a traced thread really stopped at a probe hit, and how long it waited for a CPU after
// gotap resumed it: the part of a stop that gotap's own timestamps cannot see. gotap stamps a
// hit only once waitid returned and it got to that thread (after a wake-up, or after other
// threads' hits), and a resumed thread runs only once the scheduler gives it a CPU; both
// spans would otherwise count in the call's duration (issue 36: a 1.4 µs call shown as 6 ms).
//
// The kernel's per-thread account, /proc/PID/task/TID/schedstat (time on a CPU, time waiting
// for one, times it got one: three numbers, ~1 µs to read), is frozen while the thread is
// stopped. Between two stops of a thread that never slept, its time is all accounted: it
// waited Δwait for a CPU and ran Δcpu up to the trap, of which the kernel spent trap_cost()
// on the stops. So it stopped at resume + Δwait + Δcpu - trap_cost(); when it got a CPU just
// once, all of Δwait was the resume's delay. It never slept when its voluntary context
// switches (/proc/PID/task/TID/status, read only after a preemption or a sleep) grew by one,
// its stop's. Otherwise (it slept, or this is its first stop) the stop is dated when gotap
// took it, as before: never earlier than the truth, so a call never loses time it spent
// sleeping.
//
// Where BPF can be used, the kernel's own times (an int3's SIGTRAP, the scheduler's switches)
// date every stop instead (stop_times.h): the account above leaves out the time a KVM guest's
// hypervisor stole from the thread (CONFIG_PARAVIRT_TIME_ACCOUNTING), which dated stops up to 1.7
// ms early under load, and cannot date a stop after a sleep, which gotap's own late timestamp then
// moved.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "backends/ptrace/stop_times.h"

namespace gotap::ptrace {

class StopClock {
 public:
  // Measures the trap's own cost first (trap_cost). why: room for system calls by name.
  explicit StopClock(pid_t pid, bool why = false);
  ~StopClock();
  StopClock(const StopClock&) = delete;
  StopClock& operator=(const StopClock&) = delete;

  struct Stop {
    uint64_t at = 0;     // the trap, CLOCK_MONOTONIC ns: the best estimate
    bool exact = false;  // dated from the kernel's account, not from `taken`
    // How long the previous resume of the thread waited for a CPU (exact stops only), and
    // the goroutine that resume let run again.
    uint64_t resumed_late = 0;
    uint64_t resumed_at = 0;
    std::optional<int64_t> resumed_goid;
    // The thread's time preempted by the scheduler, in all, as of this stop (StopTimes; unset
    // without it). Read with the stop's dating, whether or not its own switch was seen yet.
    std::optional<uint64_t> preempted_total;
  };
  // A stop of tid, taken by gotap at `taken` (CLOCK_MONOTONIC ns, just after waitid).
  Stop on_stop(pid_t tid, uint64_t taken);
  // Right before tid is resumed at `now`; goid: the goroutine it was stopped in, if known.
  void on_resume(pid_t tid, uint64_t now, std::optional<int64_t> goid);
  // A thread that exited: its /proc file goes.
  void forget(pid_t tid);
  uint64_t exact_stops() const { return exact_; }
  // The CPU time the kernel spends on one stop and resume of a thread at an int3 (raising
  // the SIGTRAP, stopping, waking gotap, returning to the thread once resumed): ~4 µs on a
  // KVM guest, which a call's time would otherwise gain at each of its hits. The least of
  // kCalibrations round trips of a child gotap forks for it; 0 when it cannot be measured.
  uint64_t trap_cost() const { return trap_cost_; }
  // With the scheduler's switches: the kernel's way from a resumed thread's first run back
  // to the program (~2.5 µs on a KVM guest), the least of kCalibrations on that child.
  uint64_t ret_cost() const { return ret_cost_; }
  static constexpr int kCalibrations = 16;
  uint64_t stops() const { return stops_; }
  // Whether stops are dated by the kernel's SIGTRAP and switch times (stop_times.h).
  bool switch_dated() const { return times_ != nullptr; }
  // --why's system calls by name (StopTimes::watch_syscalls, take_syscalls).
  bool watch_syscalls() { return times_ && times_->watch_syscalls(); }
  std::vector<StopTimes::Syscall> take_syscalls(pid_t tid) {
    return times_ ? times_->take_syscalls(tid) : std::vector<StopTimes::Syscall>();
  }
  uint64_t syscalls_lost() const { return times_ ? times_->syscalls_lost() : 0; }

 private:
  struct Account {
    uint64_t cpu = 0, wait = 0, slices = 0;
  };
  struct Thread {
    int fd = -1, status_fd = -1;
    bool have_acct = false;
    std::optional<uint64_t> vol;  // voluntary switches at the last stop, when known
    bool resumed = false;         // resumed by on_resume since the account was read
    uint64_t resumed_at = 0;
    // How long its resume waited for a CPU, seen at another thread's stop while it ran its
    // first slice (probe_resumed).
    std::optional<uint64_t> first_wait;
    Account acct;
    std::optional<int64_t> goid;
  };
  bool read(Thread& t, pid_t tid, Account& out, pid_t pid);
  std::optional<uint64_t> voluntary(Thread& t, pid_t tid);
  void close_files(Thread& t);
  // Reads /proc/PID/task/TID/<name> from its start. The file stays open for the next read
  // while fewer than kOpenFiles are: a program of thousands of threads must not take all of
  // gotap's descriptors.
  ssize_t read_proc(int& fd, pid_t pid, pid_t tid, const char* name, char* buf, size_t n);
  static constexpr int kOpenFiles = 256;
  int open_files_ = 0;
  uint64_t measure_trap_cost();
  // on_stop when the kernel's SIGTRAP and switch times are at hand.
  void date_by_switch(Thread& t, pid_t tid, Stop& s);
  // tid's times for the stop it is in, recorded at or after lo.
  std::optional<StopTimes::Times> switch_times(pid_t tid, uint64_t lo) const;
  pid_t pid_;
  std::unique_ptr<StopTimes> times_;
  uint64_t ret_cost_ = 0;  // set by measure_trap_cost, which runs after it is initialised
  uint64_t trap_cost_ = 0;
  // At a stop of `except`: the threads resumed since their last stop whose first wait for
  // a CPU is not known yet, read again; a thread that has run once since has it in its account.
  void probe_resumed(pid_t except);
  std::unordered_map<pid_t, Thread> threads_;
  std::vector<pid_t> unprobed_;
  uint64_t exact_ = 0, stops_ = 0;
};

// The three numbers of a schedstat line: ns on a CPU, ns waiting for one, times it got one.
bool parse_schedstat(const char* line, size_t n, uint64_t& cpu, uint64_t& wait, uint64_t& slices);
// voluntary_ctxt_switches of a /proc/PID/task/TID/status text.
std::optional<uint64_t> parse_voluntary_switches(std::string_view status);

}  // namespace gotap::ptrace
