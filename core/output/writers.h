// The plain writers of events: JSON Lines and text. The views (graph, Perfetto, flame graph,
// latency, goroutines) are in output_views.h and goroutine_views.h.
#pragma once

#include <cstdio>
#include <memory>

#include "core/events/events.h"

namespace gotap {

// One JSON object per line.
std::unique_ptr<EventSink> make_json_lines_writer(std::FILE* out);
// Aligned, human-readable lines; strings are escaped so the tracee cannot inject terminal
// control sequences.
std::unique_ptr<EventSink> make_text_writer(std::FILE* out);

}  // namespace gotap
