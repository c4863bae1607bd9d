#include "frontends/trace_pipeline.h"

#include <unistd.h>

#include <iostream>

#include "core/output/goroutine_views.h"
#include "core/output/line_cap.h"
#include "core/output/record.h"
#include "core/why/why_latency.h"
#include "core/why/why_sink.h"
#include "frontends/fault_injection.h"
#include "frontends/interval_printer.h"

namespace gotap::cli {
namespace {

// The file a traced process runs: for -p PID (where `path` is /proc/PID/exe) the path the
// kernel names, as the process sees it, without " (deleted)"; otherwise `path` itself.
std::string real_binary_path(const std::string& path, int pid) {
  std::string p = path;
  if (pid > 0) {
    char buf[4096];
    ssize_t n = readlink(path.c_str(), buf, sizeof(buf) - 1);
    if (n > 0) p.assign(buf, static_cast<size_t>(n));
    const std::string deleted = " (deleted)";
    if (p.size() > deleted.size() && p.ends_with(deleted)) p.resize(p.size() - deleted.size());
  }
  return p;
}

// The name the binary label of --prometheus series gives: the file's base name.
std::string binary_label(const std::string& path, int pid) {
  std::string p = real_binary_path(path, pid);
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

}  // namespace

Result<std::unique_ptr<TracePipeline>> assemble_pipeline(const TraceRequest& req,
                                                         const ProbePlan& plan,
                                                         const std::string& root,
                                                         TraceOptions& opts) {
  auto p = std::make_unique<TracePipeline>();
  auto out = open_output_path(req.output, stdout, /*live=*/true);
  if (!out) return out.error();
  p->output = std::move(*out);
  auto record = open_output_path(req.record, nullptr);
  if (!record) return record.error();
  p->record = std::move(*record);

  const ViewOptions view{.why = req.why, .all_goroutine_events = req.goroutines};
  std::unique_ptr<EventSink> sink =
      req.command == "graph" && req.format == "graph"
          ? make_graph_writer(p->output.fp, root, req.graph_args, view)
          : make_output(req.format, p->output.fp, view);
  auto guard = std::make_unique<ReaderGuard>(std::move(sink), p->output.fp);
  p->guard = guard.get();
  sink = std::move(guard);
  // --why: the kernel's intervals inside traced calls go to the views that draw them and to
  // the record, and nowhere else; without --goroutines, the status changes inside traced
  // calls too (why_sink.h).
  std::vector<EventSink*> call_states_to, replays_to;
  if (req.why && draws_call_states(req.format)) {
    call_states_to.push_back(sink.get());
    if (req.goroutines) replays_to.push_back(sink.get());
  }
  if (p->record.fp) {
    Event info = {{"command", req.command},
                  {"binary", real_binary_path(req.binary, opts.target.pid)},
                  {"patterns", req.patterns}};
    // What `report` needs to render the record as the run did: a record with `why` but not
    // `goroutines` holds the status changes inside traced calls alone (docs/json.md).
    if (req.why) {
      info["why"] = true;
      info["goroutines"] = req.goroutines;
    }
    auto rec = make_record_writer(p->record.fp, info);
    if (req.why) call_states_to.push_back(rec.get());
    // With --goroutines, a held call's changes again after its entry, as the views got them,
    // so that `report` draws them inside it; its views that do not draw leave them out.
    if (req.why && req.goroutines) replays_to.push_back(rec.get());
    sink = make_tee(std::move(sink), std::move(rec));
  }
  // Outside the view and the record: both get the same, capped, events.
  sink = make_line_cap(std::move(sink), req.max_line);
  if (!req.prometheus_addr.empty()) {
    auto e = PrometheusExporter::start(req.prometheus_addr, p->metrics,
                                       binary_label(req.binary, opts.target.pid),
                                       plan.goroutines.status != 0);
    if (!e) return e.error();
    p->exporter = std::move(*e);
    std::cerr << "gotap: serving metrics on http://" << p->exporter->where() << "/metrics"
              << std::endl;
    opts.metrics = &p->metrics;
    // Inside the goroutine filter: the gauge counts the goroutines the output shows.
    sink = make_metrics_observer(std::move(sink), p->metrics);
  }
  if (req.interval_s > 0) {
    opts.metrics = &p->metrics;
    sink = make_interval_printer(std::move(sink), p->metrics, req.interval_s,
                                 opts.mode == Mode::Latency);
  }
  GoroutineSelection selection = req.selection;
  if (req.command == "goroutines")
    for (const auto& f : plan.funcs) selection.under.insert(f.name);
  if (req.command == "goroutines" && (!selection.goids.empty() || !selection.under.empty()))
    sink = make_goroutine_filter(std::move(sink), std::move(selection));
  // Before everything else: the output, the record and the metrics see returns with `why`,
  // and goroutine events only when they were asked for.
  if (req.why && req.command == "latency" && opts.mode == Mode::Trace)
    sink = why::make_why_latency_sink(std::move(sink));
  // Each return's split, before latency --why folds the returns into its totals.
  if (req.why && !req.prometheus_addr.empty())
    sink = make_why_metrics_observer(std::move(sink), p->metrics);
  if (req.why)
    sink = why::make_why_sink(std::move(sink), {.pass_goroutine_events = req.goroutines,
                                                .syscalls_seen = !plan.go.at_least(1, 26) ||
                                                                 plan.goroutines.sys_enter != 0,
                                                .call_states_to = std::move(call_states_to),
                                                .replays_to = std::move(replays_to),
                                                .entries_held = req.condition.any()});
  p->sink = maybe_failing_sink(std::move(sink));
  return p;
}

}  // namespace gotap::cli
