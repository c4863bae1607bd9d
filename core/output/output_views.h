// Event sinks that render a whole trace at once, when its summary event arrives (every run
// ends with one): Chrome/Perfetto trace JSON, folded stacks, an SVG flame graph, and
// latency histograms derived from recorded returns. Plus a tee, for --record.
#pragma once

#include <cstdio>
#include <memory>
#include <string>

#include "core/events/events.h"

namespace gotap {

// Chrome trace-event JSON (opens in ui.perfetto.dev and chrome://tracing): one track per
// goroutine, each traced call a complete slice, inlined calls instants; goroutine states
// (gstate events) as slices on a track per goroutine of their own.
std::unique_ptr<EventSink> make_perfetto_writer(std::FILE* out);
// One line per distinct stack of traced calls, "outer;inner;leaf SELF_NS", for flame graph
// tools (flamegraph.pl, speedscope, inferno).
std::unique_ptr<EventSink> make_folded_writer(std::FILE* out);
// A self-contained SVG flame graph of the same stacks, weighted by time.
std::unique_ptr<EventSink> make_flamegraph_svg_writer(std::FILE* out, const std::string& title);
// Passes events to `inner`, but replaces entry/return events by one latency event per
// function, computed from the returns' durations (what `gotap latency` would have shown).
std::unique_ptr<EventSink> make_latency_view(std::unique_ptr<EventSink> inner);
// The call graph, uftrace style: per goroutine, the traced calls beneath each call of
// `root` (every traced call when root is ""), indented, with durations; arguments too when
// show_args.
std::unique_ptr<EventSink> make_graph_writer(std::FILE* out, const std::string& root,
                                             bool show_args);
// Every event to both.
std::unique_ptr<EventSink> make_tee(std::unique_ptr<EventSink> a, std::unique_ptr<EventSink> b);

// The names --format takes, as a help text lists them.
constexpr const char* kOutputFormats =
    "text, json, latency, graph, perfetto, folded, svg or goroutines";
bool is_output_format(const std::string& name);
std::unique_ptr<EventSink> make_output(const std::string& format, std::FILE* out);

}  // namespace gotap
