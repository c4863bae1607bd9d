// Rebuilds, per goroutine, the nesting of traced calls from a stream of entry and return
// events: what the call-graph views (Perfetto slices, folded stacks, flame graphs) are made
// of. Only traced functions appear; an inlined copy has no return, so it is an instant.
// With goroutine events (--goroutines), the time a goroutine spent waiting inside a traced
// call is a span of its own beneath that call, "(waiting: REASON)": where the call's time
// went when it was not running.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/events/events.h"

namespace gotap {

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
  bool wait = false;               // a stretch spent waiting, not a call
};

class CallTree {
 public:
  // Feeds one event; entry/return/unfinished and gstate are used, the rest ignored.
  void add(const Event& ev);
  // Closes calls still open at `end_ns` (the last timestamp seen when 0) as unfinished and
  // returns every span, ordered by goroutine, then start time.
  std::vector<CallSpan> finish(uint64_t end_ns = 0);

 private:
  std::map<int64_t, std::vector<CallSpan>> open_;  // per goroutine, innermost last
  std::vector<CallSpan> done_;
  uint64_t last_ts_ = 0;
};

}  // namespace gotap
