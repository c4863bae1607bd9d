// --why: a sink in front of the output that turns the goroutine probes' events into each
// return's `why` (why_tracker.h). The goroutine events themselves go on to the output only
// when they were asked for (--goroutines).
#pragma once

#include <memory>
#include <vector>

#include "core/events/events.h"

namespace gotap::why {

struct WhyOptions {
  bool pass_goroutine_events = false;  // --goroutines too
  // Go 1.26 and later enter and leave most system calls without runtime.casgstatus: their
  // time is then the goroutine's running time, and syscall_ns is null.
  bool syscalls_seen = true;
  // Without --goroutines: the sinks that draw a call's stretches off the CPU (graph,
  // Perfetto, flame graphs) and the record get the status changes of goroutines inside
  // traced calls, and the kernel's intervals of those goroutines (`kwhy`), bypassing the
  // rest (which prints or counts goroutine events).
  std::vector<EventSink*> call_states_to;
  // A condition decided at the return (--slower, --errors, on results or duration) holds a
  // call's entry until then: the sink keeps each goroutine's last status changes to credit
  // the call with those after its entry when the entry comes (kHeldHistory).
  bool entries_held = false;
};
// How many status changes of each goroutine are kept for entries that come late (a call
// with more gets its earliest ones counted as running), and for how long at most.
constexpr size_t kHeldHistory = 256;
constexpr uint64_t kHeldHistoryNs = 30'000'000'000;
std::unique_ptr<EventSink> make_why_sink(std::unique_ptr<EventSink> next, WhyOptions opts);

}  // namespace gotap::why
