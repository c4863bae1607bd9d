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
  // The sinks that draw a call's stretches off the CPU (graph, Perfetto, flame graphs) and
  // the record get the kernel's intervals of goroutines inside traced calls (`kwhy`), and
  // without --goroutines their status changes too, bypassing the rest (which prints or
  // counts goroutine events). With --goroutines the changes reach them with the others.
  std::vector<EventSink*> call_states_to;
  // With --goroutines and held entries: the views that draw stretches get a held call's
  // changes and intervals again after its entry (they went by before it), marked
  // `"replayed":true` so that a goroutine's own track does not draw them twice. The record
  // has them once, where they happened.
  std::vector<EventSink*> replays_to;
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

// What a backend that reads the kernel's side sends the why sink (which keeps them from the
// output): that it does, before any call; then each interval of a thread running a goroutine
// inside a traced call, off the CPU outside a system call (syscall false) or in system call
// nr, over [from, to). `syscalls`: whether it names system calls (ptrace reads preemption
// alone without BPF's system-call tracepoints: its calls then have `syscalls` null). count > 1:
// that many calls of nr between from and to, ns inside them in all (ptrace merges the calls of a
// thread past the 16 it keeps between two stops).
Event kernel_start_event(bool syscalls = true);
Event kernel_event(bool syscall, uint64_t from, uint64_t to, int tid, int64_t goid, uint64_t nr,
                   uint32_t count = 1, uint64_t ns = 0);

}  // namespace gotap::why
