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

// What a backend that reads the kernel's side sends the why sink (which keeps them from the
// output): that it does, before any call; then each interval of a thread running a goroutine
// inside a traced call, off the CPU outside a system call (syscall false) or in system call
// nr, over [from, to).
Event kernel_start_event();
Event kernel_event(bool syscall, uint64_t from, uint64_t to, int tid, int64_t goid, uint64_t nr);

}  // namespace gotap::why
