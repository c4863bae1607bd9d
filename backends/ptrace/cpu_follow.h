// Keeps the tracer thread on the CPU where the stopped thread last ran (issue 22, lever 1).
// A ptrace stop wakes the tracer and the resume wakes the thread back: on two CPUs each
// wake-up is an inter-processor interrupt and a cold cache, on one CPU a context switch.
// Only gotap's own tracer thread is moved; the traced program's affinity is never touched.
#pragma once

#include <sched.h>
#include <sys/types.h>

#include <cstdint>
#include <unordered_map>

namespace gotap::ptrace {

class CpuFollower {
 public:
  // Off unless GOTAP_PTRACE_FOLLOW_CPU=1: on this project's 2-CPU hosts it did not pay
  // (docs/benchmarks.md, "ptrace backend"), and with several goroutines it cost more.
  CpuFollower();
  // Restores the tracer thread's affinity as it was.
  ~CpuFollower();
  CpuFollower(const CpuFollower&) = delete;
  CpuFollower& operator=(const CpuFollower&) = delete;

  bool enabled() const { return enabled_; }
  // Moves the calling thread to the CPU `tid` (stopped) last ran on, when that changed.
  // Reading where it ran costs a system call: done at a hit of another thread than the last
  // one, and every kRecheck hits of the same thread (threads seldom migrate).
  void follow(pid_t pid, pid_t tid);
  static constexpr uint32_t kRecheck = 16;
  // A thread that exited: its /proc file goes.
  void forget(pid_t tid);
  uint64_t moves() const { return moves_; }

 private:
  int stat_fd(pid_t pid, pid_t tid);
  bool enabled_ = false;
  bool saved_ = false;
  cpu_set_t orig_{};
  int cpu_ = -1;  // where the tracer is pinned now, -1: not pinned
  uint64_t moves_ = 0;
  pid_t last_tid_ = 0;
  uint32_t since_check_ = 0;
  std::unordered_map<pid_t, int> fds_;
};

// The "processor" field (39) of a /proc/PID/task/TID/stat line; -1 when it has none.
int stat_processor(const char* line, size_t n);

}  // namespace gotap::ptrace
