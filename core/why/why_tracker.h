// Where a traced call's time went (--why, issue 37): each call's duration split by the
// states its goroutine was in between the entry and the return, from the same status
// changes the goroutines view follows (runtime.casgstatus, core/events/goroutine_events.h).
// Only goroutines with a traced call open are accounted; for the others gotap keeps no more
// than which goroutine runs on which thread (to name wakers) and start functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/events/events.h"

namespace gotap::why {

// Who made a parked goroutine runnable again.
struct WokenBy {
  enum Kind { Unknown, Goroutine, Netpoll, Timer };
  Kind kind = Unknown;
  int64_t goid = 0;
  // Goroutine: the waker's innermost frame outside the runtime, sync and internal/ when the
  // backend read its stack, else its start function ("" when unknown).
  std::string func;
  bool operator==(const WokenBy&) const = default;
};

// The time one call spent waiting for one reason, woken one way.
struct WaitPart {
  std::string reason;  // Go's wait reason, as the binary names it ("" when not known)
  uint64_t ns = 0, count = 0;
  WokenBy woken_by;
  std::string parked_at;  // "" when not read
};

// The time one call spent in one system call, by name (the kernel's view).
struct SyscallPart {
  std::string name;
  uint64_t ns = 0, count = 0;
};

struct WhySplit {
  uint64_t running_ns = 0, runnable_ns = 0, syscall_ns = 0, waiting_ns = 0;
  // The kernel's side (WhyTracker::kernel_seen): unset when the backend does not read it.
  std::optional<uint64_t> preempted_ns;
  // Whether the backend names the kernel's system calls (eBPF; ptrace reads preempted_ns
  // alone): `syscalls` is null otherwise.
  bool syscalls_named = false;
  std::vector<SyscallPart> syscalls;  // largest first; with syscalls_named only
  std::vector<WaitPart> waits;        // largest first
  uint64_t total() const {
    return running_ns + preempted_ns.value_or(0) + runnable_ns + syscall_ns + waiting_ns;
  }
};

// The state classes a call's time is split into; Other is not credited.
enum class Part { Running, Runnable, Syscall, Waiting, Other };
// From the status names of gstate events ("running", "copystack", ...).
Part part_of(const std::string& status);

class WhyTracker {
 public:
  // A traced call began on goid: the goroutine runs (the probe runs on it).
  void entry(uint64_t ts, int64_t goid, const std::string& func);
  // The innermost open call of func on goid returned: its split over [entry, ts], or nullopt
  // when its entry was not seen. Calls above it that never returned are dropped.
  std::optional<WhySplit> ret(uint64_t ts, int64_t goid, const std::string& func);
  // What a backend read beside a status change (--why stacks): where a goroutine parked
  // (to waiting), and at a wake-up the goroutine the waking thread ran (0: none) and its frame.
  struct Seen {
    std::string parked_at;
    std::optional<int64_t> waker_goid;
    std::string waker_func;
  };
  // goid's status changed on thread tid; reason: the wait reason on the way to waiting.
  void state(uint64_t ts, int tid, int64_t goid, const std::string& from, const std::string& to,
             const std::string& reason, const Seen& seen = {});
  // goid's start function (from its creation, or its first sight).
  void named(int64_t goid, const std::string& func);
  void exited(int64_t goid);
  // Whether goid has a traced call open.
  bool inside_call(int64_t goid) const { return open_.count(goid) != 0; }

  // The backend reads the kernel's side: calls entered from now on get preempted_ns, and with
  // `syscalls` the system calls by name, from the two below.
  void kernel_seen(bool syscalls = true) {
    kernel_ = true;
    kernel_syscalls_ = syscalls;
  }
  // goid's thread was off the CPU over [from, to) outside a system call, the goroutine running
  // (or in Go's syscall state): that time moves from the part the goroutine was in to
  // preempted_ns.
  void preempted(uint64_t from, uint64_t to, int64_t goid);
  // goid's thread was in system call `name` over [from, to). Go's own syscall state covers the
  // system calls Go wraps (entersyscall); one it does not (RawSyscall, the runtime's own) is
  // running time to Go, and moves from running_ns to syscall_ns.
  // count > 1: that many calls of name over [from, to), ns inside them (a merged part).
  void syscall(uint64_t from, uint64_t to, int64_t goid, const std::string& name,
               uint32_t count = 1, uint64_t ns = 0);

 private:
  struct OpenCall {
    std::string func;
    uint64_t entry_ts = 0;
    WhySplit split;
    // Kernel time inside Go parts, taken off them at the return (the Go part's stretch is
    // credited only when it ends).
    uint64_t preempted_running = 0, preempted_syscall = 0, syscall_running = 0;
  };
  struct Goroutine {
    std::vector<OpenCall> calls;  // innermost last
    Part part = Part::Running;
    uint64_t since = 0;
    std::string reason;  // while waiting
    std::string parked_at;
  };
  // Credits [since, ts) in g's current state to each open call (clipped to its entry).
  void credit(Goroutine& g, uint64_t ts, const WokenBy* woken);
  WokenBy waker(int tid, int64_t woken, const std::string& reason, const Seen& seen) const;

  std::unordered_map<int64_t, Goroutine> open_;     // goroutines with traced calls open
  std::unordered_map<int, int64_t> running_on_;     // thread -> the goroutine it runs
  std::unordered_map<int64_t, std::string> names_;  // goroutine -> start function
  bool kernel_ = false;
  bool kernel_syscalls_ = false;
};

// The contract's `why` object (CONTRACT.md, "Additions (fourth turn)"). preempted_ns and
// syscalls are null when the backend did not read the kernel's side. parked_at is null when
// the backend could not read the stack.
Event why_json(const WhySplit& s);
// One line for the text view, from a `why` object: "waiting 40.1 ms (chan receive, woken by
// main.f [g 7]) · running 0.2 ms", the largest part first.
std::string why_text(const Event& why);

}  // namespace gotap::why
