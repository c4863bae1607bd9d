// Event sinks that render a whole trace at once, when its summary event arrives (every run
// ends with one): Chrome/Perfetto trace JSON, folded stacks, an SVG flame graph, and
// latency histograms derived from recorded returns. Plus a tee, for --record.
#pragma once

#include <cstdio>
#include <memory>
#include <string>

#include "core/events/events.h"

namespace gotap {

// What the views that draw a whole trace are given.
struct ViewOptions {
  // --why: a traced call's stretches off the CPU are drawn inside it (runnable, in system
  // calls, waiting with who ended the wait: call_tree.h), not only its waits.
  bool why = false;
  // false: the goroutine events are only those of goroutines inside traced calls (--why
  // without --goroutines), so no view draws a goroutine's whole life from them.
  bool all_goroutine_events = true;
};

// Chrome trace-event JSON (opens in ui.perfetto.dev and chrome://tracing): one track per
// goroutine, each traced call a complete slice, inlined calls instants; goroutine states
// (gstate events) as slices on a track per goroutine of their own.
// With v.why (--why): a traced call's stretches off the CPU are slices inside it, and a flow
// arrow goes from each goroutine that woke one to the stretch it then spent runnable
// (call_tree.h). Without it, only waits are, as with --goroutines.
std::unique_ptr<EventSink> make_perfetto_writer(std::FILE* out, const ViewOptions& v = {});
// One line per distinct stack of traced calls, "outer;inner;leaf SELF_NS", for flame graph
// tools (flamegraph.pl, speedscope, inferno). With v.why, a call's stretches off the CPU
// are frames beneath it ("main.f;(waiting: sleep)").
std::unique_ptr<EventSink> make_folded_writer(std::FILE* out, const ViewOptions& v = {});
// A self-contained SVG flame graph of the same stacks, weighted by time.
std::unique_ptr<EventSink> make_flamegraph_svg_writer(std::FILE* out, const std::string& title,
                                                      const ViewOptions& v = {});
// Passes events to `inner`, but replaces entry/return events by one latency event per
// function, computed from the returns' durations (what `gotap latency` would have shown).
std::unique_ptr<EventSink> make_latency_view(std::unique_ptr<EventSink> inner);
// The call graph, uftrace style: per goroutine, the traced calls beneath each call of
// `root` (every traced call when root is ""), indented, with durations; arguments too when
// show_args. With v.why, a line per stretch off the CPU inside a call, a wait's with who
// ended it.
std::unique_ptr<EventSink> make_graph_writer(std::FILE* out, const std::string& root,
                                             bool show_args, const ViewOptions& v = {});
// Every event to both.
std::unique_ptr<EventSink> make_tee(std::unique_ptr<EventSink> a, std::unique_ptr<EventSink> b);

// The names --format takes, as a help text lists them.
constexpr const char* kOutputFormats =
    "text, json, latency, graph, perfetto, folded, svg or goroutines";
bool is_output_format(const std::string& name);
// v: for the views that draw a whole trace (above); text and json are the same either way.
std::unique_ptr<EventSink> make_output(const std::string& format, std::FILE* out,
                                       const ViewOptions& v = {});
// Whether a format draws goroutine status changes inside traced calls (graph, perfetto,
// folded, svg): --why gives them its status changes even without --goroutines.
bool draws_call_states(const std::string& format);

}  // namespace gotap
