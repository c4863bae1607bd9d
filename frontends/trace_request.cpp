#include "frontends/trace_request.h"

#include <iostream>
#include <tuple>

#include "core/decode/value_decoder.h"
#include "core/events/overhead_budget.h"
#include "core/output/line_cap.h"
#include "core/output/output_views.h"
#include "core/output/value_text.h"
#include "core/sys/spawn.h"
#include "frontends/cond_options.h"
#include "frontends/options.h"
#include "frontends/prometheus_exporter.h"
#include "frontends/target_pid.h"

namespace gotap::cli {
namespace {

Mode mode_of(const std::string& command) {
  if (command == "count") return Mode::Count;
  if (command == "latency") return Mode::Latency;
  if (command == "goroutines") return Mode::Goroutines;
  return Mode::Trace;
}

std::string synopsis(const std::string& command) {
  if (command == "goroutines")
    return "gotap goroutines [TARGET-OPTIONS] [--json|--format F] [--goid N]... [--under FUNC] "
           "[--record FILE] [-- CMD ARGS...]";
  if (command == "graph")
    return "gotap graph [TARGET-OPTIONS] [--json] ROOT [PATTERN...] [-- CMD ARGS...]";
  return "gotap " + command + " [TARGET-OPTIONS] [--json] PATTERN... [-- CMD ARGS...]";
}

// Every command's options, and those of this command alone.
po::options_description options_of(const std::string& command) {
  const bool goroutines_cmd = command == "goroutines";
  po::options_description desc(synopsis(command));
  desc.add_options()("help,h", "show this help")("pid,p", po::value<int>(),
                                                 "attach to a running process")(
      "all", "trace every process that runs the binary given with --binary (ebpf)")(
      "binary", po::value<std::string>(),
      "the binary, for --all; with -p PID, a shared library's copy in that process")(
      "backend", po::value<std::string>()->default_value("auto"),
      "ptrace, ebpf, trampoline (count, latency, trace, graph) or auto")(
      "duration,d", po::value<double>(), "stop after SECONDS")(
      "output,o", po::value<std::string>(), "write events to FILE instead of stdout")(
      "json", "JSON Lines output (docs/cli.md)")("max-depth", po::value<int>()->default_value(3),
                                                 "pointer/struct depth to decode")(
      "max-elems", po::value<int>()->default_value(16), "slice/map elements to decode")(
      "max-str", po::value<int>()->default_value(64), "string bytes to decode")(
      "max-line", po::value<int>()->default_value(static_cast<int>(kDefaultMaxLine)),
      "bytes of decoded values per event; more are cut and marked (0: no cap)")(
      "stack", po::value<int>()->default_value(0), "a stack of N frames per event")(
      "no-inline", "do not probe inlined call sites")(
      "jumps-only",
      "trampoline: leave out what no jump takes instead of putting it on kernel uprobes")(
      "format", po::value<std::string>(), kOutputFormats)("args",
                                                          "graph: show each call's arguments")(
      "record", po::value<std::string>(), "also store every event in FILE for gotap report");
  add_debuginfo_options(desc);
  if (goroutines_cmd) {
    desc.add_options()("goid", po::value<std::vector<uint64_t>>()->composing(),
                       "only this goroutine (repeatable)")(
        "under", po::value<std::string>(),
        "only the goroutines created beneath calls of FUNC (a pattern), and theirs");
  } else if (command == "trace" || command == "graph") {
    desc.add_options()("goroutines", "also trace goroutine states, creation and exit");
  }
  if (command == "trace")
    desc.add_options()("rate", po::value<int64_t>(),
                       "at most N calls per function in any one second; the rest are counted")(
        "why", "split each call's time into running, runnable, syscall and waiting by reason");
  if (command == "latency")
    desc.add_options()("why", "also total where the calls' time went, and that of the slowest 1%");
  if (command == "graph")
    desc.add_options()("why",
                       "also draw where each call's time went: runnable, in system calls, and "
                       "waiting, with who ended each wait");
  if (command == "count" || command == "latency")
    desc.add_options()("no-failed",
                       "no FAILED column: count then probes only the entries of functions "
                       "that return an error")(
        "interval,i", po::value<double>(),
        "every SECONDS print the calls of that interval alone, then start over");
  if (!goroutines_cmd) {
    add_condition_options(desc);
    desc.add_options()("max-overhead", po::value<std::string>(),
                       "detach a function whose probes cost more than PERCENT of the "
                       "program's CPU time (docs/cli.md)");
  }
  if (command != "graph") {
    desc.add_options()("prometheus", po::value<std::string>(),
                       "serve /metrics on ADDR (HOST:PORT) while tracing")(
        "prometheus-linger", po::value<double>(),
        "after the trace, keep serving until a scrape has read the final values, at most "
        "SECONDS");
  }
  return desc;
}

// The binary a pid runs, through /proc (works for deleted and namespaced files too).
std::string exe_of_pid(int pid) {
  return "/proc/" + std::to_string(pid) + "/exe";
}

// The request's checks in the order users meet them, each a usage error (2) unless said.
// Returns the exit code, or -1 when `r` is complete.
int fill(TraceRequest& r, const po::variables_map& vm, const Args& rest) {
  const bool goroutines_cmd = r.command == "goroutines";
  r.patterns = positionals(vm, "patterns");
  if (goroutines_cmd) {
    if (!r.patterns.empty())
      return usage_error("goroutines takes no PATTERN (to follow a function, use --under FUNC)");
    if (vm.count("under")) r.patterns.push_back(vm["under"].as<std::string>());
    if (vm.count("goid")) {
      auto ids = vm["goid"].as<std::vector<uint64_t>>();
      r.selection.goids.insert(ids.begin(), ids.end());
    }
  } else if (r.patterns.empty()) {
    return usage_error(r.command + " needs at least one PATTERN");
  }
  r.goroutines = goroutines_cmd || vm.count("goroutines");

  TraceOptions& opts = r.opts;
  opts.mode = mode_of(r.command);
  opts.target.argv = rest;
  opts.target.all = vm.count("all") > 0;
  if (vm.count("pid")) opts.target.pid = vm["pid"].as<int>();
  int targets = (opts.target.pid != 0) + !rest.empty() + opts.target.all;
  if (targets != 1) return usage_error("give exactly one target: -p PID, --all, or -- CMD ARGS");
  if (vm.count("pid") && opts.target.pid <= 0) return usage_error("bad pid");
  // -- CMD traces the program it starts; ignored, --binary would read as if a library's copy
  // in it were probed, and its patterns then matched nothing in the executable.
  if (vm.count("binary") && !rest.empty())
    return usage_error(
        "--binary goes with --all or -p PID; -- CMD traces the executable of the program it "
        "runs");
  if (vm.count("duration")) {
    opts.duration_s = vm["duration"].as<double>();
    if (opts.duration_s <= 0) return usage_error("--duration must be positive");
  }
  if (vm.count("interval")) {
    r.interval_s = vm["interval"].as<double>();
    // At least a millisecond: a print per microsecond would be all the trace does.
    if (!(r.interval_s >= 0.001 && r.interval_s <= 1e9))
      return usage_error("--interval must be 0.001 to 1000000000 seconds");
  }
  if (vm.count("prometheus")) {
    r.prometheus_addr = vm["prometheus"].as<std::string>();
    auto a = parse_prometheus_address(r.prometheus_addr);
    if (!a) return report_error(a.error());
    // Every series names the one traced pid.
    if (opts.target.all) return usage_error("--prometheus needs one process: -p PID or -- CMD");
  }
  if (vm.count("prometheus-linger")) {
    if (r.prometheus_addr.empty())
      return usage_error("--prometheus-linger needs --prometheus ADDR");
    r.linger_s = vm["prometheus-linger"].as<double>();
    if (!(r.linger_s >= 0)) return usage_error("--prometheus-linger must not be negative");
  }
  opts.max_depth = vm["max-depth"].as<int>();
  opts.max_elems = vm["max-elems"].as<int>();
  opts.max_str = vm["max-str"].as<int>();
  opts.stack_depth = vm["stack"].as<int>();
  if (vm.count("rate")) {
    const int64_t rate = vm["rate"].as<int64_t>();
    if (rate < 1 || rate > 1'000'000'000) return usage_error("--rate must be 1 to 1000000000");
    opts.rate_per_s = static_cast<uint32_t>(rate);
  }
  if (vm.count("max-overhead")) {
    const std::string text = vm["max-overhead"].as<std::string>();
    auto pct = parse_max_overhead(text);
    if (!pct)
      return usage_error("--max-overhead must be a percentage above 0 and at most 100, not '" +
                         printable(text) + "'");
    // The budget is a share of one process's CPU time.
    if (opts.target.all) return usage_error("--max-overhead needs one process: -p PID or -- CMD");
    opts.max_overhead_pct = *pct;
  }
  opts.count_failed = vm.count("no-failed") == 0;
  opts.jumps_only = vm.count("jumps-only") > 0;
  const int max_line = vm["max-line"].as<int>();
  if (opts.max_depth < 0 || opts.max_elems < 0 || opts.max_str < 0 || opts.stack_depth < 0 ||
      max_line < 0)
    return usage_error("limits must not be negative");
  // Ceilings (docs/cli.md, "Limits"): past them a decode would need more stack than its
  // thread is sure to have, or more memory than one event's byte budget reads anyway.
  for (auto [name, v, ceiling] : {std::tuple{"--max-depth", opts.max_depth, kMaxDepthCeiling},
                                  std::tuple{"--max-elems", opts.max_elems, kMaxElemsCeiling},
                                  std::tuple{"--max-str", opts.max_str, kMaxStrCeiling},
                                  std::tuple{"--max-line", max_line, kMaxLineCeiling}})
    if (v > ceiling)
      return usage_error(std::string(name) + " must be at most " + std::to_string(ceiling));
  r.max_line = static_cast<size_t>(max_line);

  if (opts.target.pid) {
    // Before the backend is chosen: both get the process, never a thread's id.
    std::string note;
    auto process = target_process(opts.target.pid, &note);
    if (!process) return report_error(process.error());
    if (!note.empty()) std::cerr << "gotap: " << note << "\n";
    opts.target.pid = *process;
    r.binary = exe_of_pid(opts.target.pid);
    // A shared library's copy in that process (libgo.so, as bcc's `-p PID LIB:FUNC`).
    if (vm.count("binary")) {
      r.binary = vm["binary"].as<std::string>();
      opts.target.library = true;
    }
  } else if (opts.target.all) {
    if (!vm.count("binary")) return usage_error("--all needs --binary PATH");
    r.binary = vm["binary"].as<std::string>();
  } else {
    r.binary = rest[0];
    // The file the backend will run (core/sys/spawn.h): the plan must be of that one.
    if (std::string found = sys::find_on_path(r.binary); !found.empty()) r.binary = found;
  }
  if (!goroutines_cmd) {
    auto cs = condition_spec(vm);
    if (!cs) return report_error(cs.error());
    r.condition = std::move(*cs);
  }
  r.why = vm.count("why") > 0;
  // latency --why: the mode is chosen with the backend (cmd_trace.cpp).
  if (r.why && opts.mode == Mode::Latency && r.interval_s > 0)
    return usage_error("latency --why takes no -i/--interval yet");
  // Goroutine ids and addresses belong to one process.
  if ((r.goroutines || r.why) && opts.target.all)
    return usage_error("goroutine events need one process: give -p PID or -- CMD ARGS");
  // --under follows calls from entry to return; an inlined copy has no return to close it.
  // A condition reads arguments where the ABI puts them, which an inlined copy does not.
  r.probe_inline = !vm.count("no-inline") && !goroutines_cmd && !r.condition.any();
  r.open = open_options(vm);
  r.backend = vm["backend"].as<std::string>();
  if (opts.jumps_only && r.backend != "trampoline")
    return usage_error("--jumps-only goes with --backend trampoline");
  if (opts.jumps_only && opts.target.library)
    return usage_error(
        "--jumps-only: the trampoline backend jumps in the executable's code only, "
        "not in a library's (--binary)");
  // The trampoline backend jumps from the executable's code only; auto keeps to eBPF.
  if (opts.target.library && r.backend != "ptrace") r.backend = "ebpf";

  r.format = vm.count("json")       ? "json"
             : r.command == "graph" ? "graph"
             : goroutines_cmd       ? "goroutines"
                                    : "text";
  if (vm.count("format")) {
    r.format = vm["format"].as<std::string>();
    if (!is_output_format(r.format))
      return usage_error("unknown --format '" + r.format + "' (" + kOutputFormats + ")");
    if (vm.count("json") && r.format != "json")
      return usage_error("--json and --format " + r.format + " disagree");
  }
  r.graph_args = vm.count("args") > 0;
  if (vm.count("output")) r.output = vm["output"].as<std::string>();
  if (vm.count("record")) r.record = vm["record"].as<std::string>();
  return -1;
}

}  // namespace

ParsedRequest parse_trace_request(const std::string& command, const Args& args, const Args& rest) {
  ParsedRequest out;
  po::options_description desc = options_of(command);
  auto vm = parse_options(args, desc, "patterns");
  if (!vm) {
    out.exit_code = report_error(vm.error());
    return out;
  }
  if (vm->count("help")) {
    std::cout << desc;
    return out;
  }
  TraceRequest r;
  r.command = command;
  if (int code = fill(r, *vm, rest); code >= 0) {
    out.exit_code = code;
    return out;
  }
  out.request = std::move(r);
  return out;
}

}  // namespace gotap::cli
