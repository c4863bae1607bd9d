// What `gotap goroutines` shows: the goroutines a filter selects (by id, or created beneath a
// function) and the table of their states. Both work on the gstate, gcreate and gexit events,
// so a recorded file reports the same as the live run.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <set>
#include <string>

#include "core/events/events.h"

namespace gotap {

struct GoroutineSelection {
  std::set<uint64_t> goids;  // --goid: these goroutines only (empty: all)
  // --under: the functions (the plan's names); a goroutine is selected when it was created
  // while one of them was running on its parent goroutine, or by a go statement in one of
  // them, or when its parent was selected. Their entry/return events are consumed.
  std::set<std::string> under;
};

// Passes the selected goroutines' events, and every event that is not about a goroutine.
std::unique_ptr<EventSink> make_goroutine_filter(std::unique_ptr<EventSink> inner,
                                                 GoroutineSelection sel);

// Drops the gcreate, gstate and gexit events (and --why's kernel intervals), and passes the
// rest: a view of a record made
// with --why but not --goroutines shows what the live run showed.
std::unique_ptr<EventSink> make_goroutine_event_drop(std::unique_ptr<EventSink> inner);
// Passes everything but what --why records for the views that draw a call's stretches alone:
// the kernel's intervals (`kwhy`), and a held call's changes given again after its entry
// (`"replayed":true`).
std::unique_ptr<EventSink> make_view_only_drop(std::unique_ptr<EventSink> inner);

// One row per goroutine: parent, state, time spent running, runnable, waiting and in
// syscalls, lifetime, start function and creating function; then the totals. Printed when
// the summary arrives; with `live` (a terminal) also redrawn in place every second.
// Other events go to the text writer.
std::unique_ptr<EventSink> make_goroutine_table(std::FILE* out, bool live);

}  // namespace gotap
