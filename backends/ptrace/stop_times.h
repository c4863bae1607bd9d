// When a traced thread's int3 raised SIGTRAP, when the scheduler switched it away at its
// tracer stops, and first back to a CPU afterwards: read from BPF programs on the
// signal_generate and sched_switch tracepoints (bpf/ptrace_stops.bpf.c), where BPF can be used
// (root, or CAP_BPF and CAP_PERFMON, and a kernel with BTF). These are the moments themselves,
// whatever the thread did in between (slept, was preempted, lost time to the hypervisor), and
// whatever delayed gotap in taking the stop. StopClock falls back to the thread's schedstat without
// them.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace gotap::ptrace {

class StopTimes {
 public:
  struct Times {
    uint64_t out = 0;      // CLOCK_MONOTONIC ns: switched away entering its last tracer stop
    uint64_t in = 0;       // its first run since then (0: none yet)
    uint64_t prev_in = 0;  // its first run after the resume before that stop (0: unknown)
    uint64_t trap = 0;     // the last SIGTRAP raised on it by an int3 (0: none seen)
    // ns it spent waiting for a CPU after the scheduler preempted it, in all (--why's
    // preempted_ns on ptrace; page faults and tracer stops are not in it).
    uint64_t preempted = 0;
  };
  // The program loaded and attached, or nullptr when BPF is not usable here (or gotap was
  // built without it, or GOTAP_PTRACE_STOP_BPF=0). It watches no process until watch().
  // syscalls (--why): room for each thread's system calls, read by take_syscalls once
  // watch_syscalls() attached their programs.
  static std::unique_ptr<StopTimes> open(bool syscalls = false);
  // The process whose threads it dates from now on.
  void watch(pid_t pid);
  ~StopTimes();
  StopTimes(const StopTimes&) = delete;
  StopTimes& operator=(const StopTimes&) = delete;
  // One map lookup (a system call, ~1 µs).
  std::optional<Times> of(pid_t tid) const;
  // System calls by number, each one or several merged (count > 1), CLOCK_MONOTONIC ns.
  struct Syscall {
    uint64_t from = 0, to = 0, ns = 0;
    uint32_t nr = 0, count = 0;
    bool other = false;  // calls whose numbers found no slot (kOtherSyscall)
  };
  // Attaches the system-call tracepoints' programs (every thread of the machine then takes
  // the kernel's slower system-call path, as under eBPF's --why). false: they cannot be.
  bool watch_syscalls();
  // tid's system calls since the last take, in the order they ended; tid must be stopped (in
  // a tracer stop, it makes none meanwhile). Two map operations (~2 µs).
  std::vector<Syscall> take_syscalls(pid_t tid);
  // System calls that found no room for their thread (more threads than why::why_threads_max()),
  // so far: in no `syscalls`, their time left in the running part.
  uint64_t syscalls_lost() const;
  // When the process was last chosen by watch(): a stop dated before it is not one it saw.
  uint64_t since() const { return since_; }

 private:
  StopTimes() = default;
  struct Impl;
  Impl* impl_ = nullptr;
  uint64_t since_ = 0;
};

}  // namespace gotap::ptrace
