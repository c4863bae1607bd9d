// Rebuilds, per goroutine, the nesting of traced calls from a stream of entry and return
// events: what the call-graph views (Perfetto slices, folded stacks, flame graphs) are made
// of. Only traced functions appear; an inlined copy has no return, so it is an instant.
// With goroutine events (--goroutines), the time a goroutine spent waiting inside a traced
// call is a span of its own beneath that call, "(waiting: REASON)": where the call's time
// went when it was not running. With --why (CallTree::Options::why), so are the stretches
// it spent runnable and in system calls, and each wake-up by another goroutine is kept, for
// the views that draw who woke whom (Perfetto's flow arrows).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/events/events.h"

namespace gotap {

// What a span that is not a call stands for: a stretch of a traced call's time off the CPU.
// Syscall by name and Preempted (the kernel took the goroutine's thread off a CPU) come from
// the kernel's intervals (`kwhy` events, eBPF), where the backend reads them.
enum class OffCpu { None, Waiting, Runnable, Syscall, Preempted };

// Who made a goroutine runnable at the end of a wait: another goroutine (goid > 0, with its
// innermost frame outside the runtime when the backend read it), or the scheduler itself
// (goid 0: the network poller for an IO wait, else a timer).
struct Waker {
  int64_t goid = 0;
  std::string func;
};

struct CallSpan {
  // The goroutine; minus the thread id for a call without one (a gccgo program's: its calls
  // nest per thread).
  int64_t goid = 0;
  std::string func;
  uint64_t start_ns = 0, end_ns = 0;
  bool finished = true;            // false: never returned before the trace ended
  bool instant = false;            // an inlined copy: an entry with no return
  std::vector<std::string> stack;  // the open traced calls of its goroutine, outermost first
  Event args;                      // the entry's arguments (may be null)
  bool wait = false;               // a stretch off the CPU (below), not a call
  OffCpu off_cpu = OffCpu::None;
  std::string detail;     // waiting: the reason; syscall: the system call's name
  uint64_t named_by = 0;  // syscall: how long the kernel's call that named it lasted
  std::string parked_at;  // waiting: where it parked, when the backend read it
  // waiting: who ended it; runnable: who made it runnable, at start_ns (when it follows a
  // wait). When the backend told.
  std::optional<Waker> woken_by;
};

// The name a span off the CPU goes by in every view: "(waiting: chan receive)",
// "(runnable)", "(syscall)" or "(syscall read)", "(preempted)".
std::string off_cpu_name(OffCpu kind, const std::string& detail);

class CallTree {
 public:
  struct Options {
    bool why = false;  // runnable and syscall stretches too, and wakers
  };
  CallTree() = default;
  explicit CallTree(Options o) : opts_(o) {}
  // Feeds one event; entry/return/unfinished and gstate are used, and with --why the
  // kernel's intervals of a goroutine (`kwhy`: a system call by name, or its thread off the
  // CPU, from_ns to ts_ns), the rest ignored.
  void add(const Event& ev);
  // Closes calls still open at `end_ns` (the last timestamp seen when 0) as unfinished and
  // returns every span, ordered by goroutine, then start time.
  std::vector<CallSpan> finish(uint64_t end_ns = 0);

 private:
  void kernel_interval(const Event& ev);

  std::map<int64_t, std::vector<CallSpan>> open_;  // per goroutine, innermost last
  std::vector<CallSpan> done_;
  uint64_t last_ts_ = 0;
  Options opts_;
};

}  // namespace gotap
