// The `summary` event that ends every run, built in one place for both backends so that
// its fields mean the same on each (docs/json.md, "summary").
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/events/events.h"

namespace gotap {

struct RunSummary {
  std::string backend;
  uint64_t ts_ns = 0;  // when tracing ended (CLOCK_MONOTONIC, as every ts_ns)
  uint64_t functions = 0, probes = 0, events = 0;
  // Events dropped before they reached the output, and nothing else.
  uint64_t lost = 0;
  int pid = 0;  // the traced process; 0 when there was none in particular (--all)
  // "exit" (the process exited), "exec" (it replaced itself), "stop" (duration, a signal,
  // the reader gone).
  std::string ended_by = "stop";
  std::optional<int> exit_code;    // when it exited: its status, 128 + signal if killed
  std::optional<int> exit_signal;  // when a signal killed it
  Event extra = Event::object();   // backend-specific counters, under their own names
};

Event summary_event(const RunSummary& s);

}  // namespace gotap
