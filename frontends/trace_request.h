// What `gotap trace|count|latency|graph|goroutines` was asked, read from the command line once
// and checked: every later stage (planning, the backend, the output pipeline) works from this
// typed request, never from the options again.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/cond/condition.h"
#include "core/output/goroutine_views.h"
#include "core/plan/go_binary.h"
#include "frontends/commands.h"

namespace gotap::cli {

struct TraceRequest {
  std::string command;                // trace, count, latency, graph or goroutines
  std::vector<std::string> patterns;  // graph: ROOT first, as given
  TraceOptions opts;                  // target, limits, mode; metrics and condition unset
  std::string binary;                 // the file to plan from (/proc/PID/exe for -p)
  OpenOptions open;                   // --debug-dir, --no-debuginfo
  cond::ConditionSpec condition;      // --if, --slower, --errors
  bool goroutines = false;            // the goroutines command, or --goroutines
  bool why = false;                   // --why: each call's time split (core/why)
  GoroutineSelection selection;       // goroutines: --goid, --under
  bool probe_inline = true;           // no --no-inline
  std::string backend = "auto";
  std::string format;  // text, json, graph, goroutines, or one of --format's
  bool graph_args = false;
  std::optional<std::string> output, record;  // -o FILE, --record FILE
  size_t max_line = 0;
  double interval_s = 0;        // -i SECONDS; 0: none
  std::string prometheus_addr;  // "" : no --prometheus
  double linger_s = 0;
};

// The request, or the exit code to end with: 0 after printing --help, 2 after a usage error
// (already reported on stderr).
struct ParsedRequest {
  std::optional<TraceRequest> request;
  int exit_code = 0;
};
ParsedRequest parse_trace_request(const std::string& command, const Args& args, const Args& rest);

}  // namespace gotap::cli
