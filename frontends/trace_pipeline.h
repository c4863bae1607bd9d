// Where a trace's events go, assembled from the request in one place: the view (text, JSON,
// graph, ...) on the output file, the guard that notices the reader leaving, the record, the
// line cap, Prometheus, the interval printer and the goroutine filter, outermost last.
#pragma once

#include <memory>
#include <string>

#include "core/events/live_metrics.h"
#include "core/output/output_views.h"
#include "core/plan/plan.h"
#include "frontends/options.h"
#include "frontends/prometheus_exporter.h"
#include "frontends/reader_gone.h"
#include "frontends/trace_request.h"

namespace gotap::cli {

struct TracePipeline {
  OutputFile output, record;
  LiveMetrics metrics;  // what --prometheus and -i read while the probes are live
  std::unique_ptr<PrometheusExporter> exporter;
  const ReaderGuard* guard = nullptr;  // inside `sink`
  std::unique_ptr<EventSink> sink;     // the outermost stage: the backend's
};

// The pipeline for `req`'s trace of `plan` (graph: beneath `root`). Sets opts.metrics when a
// stage reads the live counters. The Prometheus listener is up on return: a port in use fails
// here, before anything is traced.
Result<std::unique_ptr<TracePipeline>> assemble_pipeline(const TraceRequest& req,
                                                         const ProbePlan& plan,
                                                         const std::string& root,
                                                         TraceOptions& opts);

}  // namespace gotap::cli
