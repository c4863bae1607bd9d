// --why: a sink in front of the output that turns the goroutine probes' events into each
// return's `why` (why_tracker.h). The goroutine events themselves go on to the output only
// when they were asked for (--goroutines).
#pragma once

#include <memory>

#include "core/events/events.h"

namespace gotap::why {

struct WhyOptions {
  bool pass_goroutine_events = false;  // --goroutines too
  // Go 1.26 and later enter and leave most system calls without runtime.casgstatus: their
  // time is then the goroutine's running time, and syscall_ns is null.
  bool syscalls_seen = true;
};
std::unique_ptr<EventSink> make_why_sink(std::unique_ptr<EventSink> next, WhyOptions opts);

}  // namespace gotap::why
