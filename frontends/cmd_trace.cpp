// `gotap trace|count|latency|graph|goroutines`: plan the probes, pick a backend, run it until the
// target exits, the duration ends, or Ctrl-C / SIGTERM / SIGHUP.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <tuple>

#include "core/backend.h"
#include "core/decode/value_decoder.h"
#include "core/events/live_metrics.h"
#include "core/events/overhead_budget.h"
#include "core/output/goroutine_views.h"
#include "core/output/line_cap.h"
#include "core/output/output_views.h"
#include "core/output/record.h"
#include "core/output/value_text.h"
#include "core/plan/go_binary.h"
#include "core/plan/pattern.h"
#include "core/plan/plan_cache.h"
#include "core/sys/huge_pages.h"
#include "core/sys/spawn.h"
#include "core/sys/timing.h"
#include "core/why/why_latency.h"
#include "core/why/why_sink.h"
#include "frontends/commands.h"
#include "frontends/cond_options.h"
#include "frontends/fault_injection.h"
#include "frontends/interval_printer.h"
#include "frontends/options.h"
#include "frontends/prometheus_exporter.h"
#include "frontends/reader_gone.h"
#include "frontends/register_backends.h"
#include "frontends/target_pid.h"

namespace gotap::cli {

namespace {

void on_stop_signal(int) {
  stop_requested().store(true);
}

// No SA_RESTART: blocking waits in the backends must return EINTR so they notice the stop.
void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
}

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

// The binary a pid runs, through /proc (works for deleted and namespaced files too).
std::string exe_of_pid(int pid) {
  return "/proc/" + std::to_string(pid) + "/exe";
}

// "net/http" for "net/http.(*conn).serve": up to the first dot after the last slash.
std::string package_of(const std::string& func) {
  size_t slash = func.rfind('/');
  size_t dot = func.find('.', slash == std::string::npos ? 0 : slash);
  return func.substr(0, dot);
}

// graph's ROOT as one function's name: the name itself, or the one function a pattern
// matches (the functions and inlined-only callees a plan can name). A pattern matching none or
// several is refused: the graph starts beneath one function.
Result<std::string> graph_root(const GoBinary& bin, const std::string& root) {
  if (!bin.pclntab().lookup(root).empty()) return root;  // generic names hold brackets
  auto pat = Pattern::parse(root);
  if (!pat) return pat.error();
  if (pat->is_exact()) return root;  // the plan says when it names nothing
  std::set<std::string_view> names;
  for (const auto& f : bin.pclntab().all_funcs())
    if (!f.is_wrapper && !f.name.empty() && !f.name.starts_with("go:") && pat->matches(f.name))
      names.insert(f.name);
  for (const auto& n : bin.inline_nodes())
    if (pat->matches(n.callee)) names.insert(n.callee);
  if (names.size() == 1) return std::string(*names.begin());
  if (names.empty()) return make_error("graph's ROOT '{}' matches no function", printable(root));
  std::string some;  // the first three, by name
  size_t shown = 0;
  for (auto it = names.begin(); it != names.end() && shown < 3; ++it, ++shown)
    some += (some.empty() ? "" : ", ") + printable(*it);
  return make_error("graph's ROOT '{}' matches {} functions ({}{}): give one", printable(root),
                    names.size(), some, names.size() > 3 ? ", ..." : "");
}

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

}  // namespace

int cmd_trace(const std::string& command, const Args& args, const Args& rest) {
  const bool goroutines_cmd = command == "goroutines";
  po::options_description desc(synopsis(command));
  desc.add_options()("help,h", "show this help")("pid,p", po::value<int>(),
                                                 "attach to a running process")(
      "all", "trace every process that runs the binary given with --binary (ebpf)")(
      "binary", po::value<std::string>(), "the binary, for --all")(
      "backend", po::value<std::string>()->default_value("auto"), "ptrace, ebpf or auto")(
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
  if (command == "count" || command == "latency")
    desc.add_options()("no-failed",
                       "no FAILED column: count then probes only the entries of functions "
                       "that return an error")(
        "interval,i", po::value<double>(),
        "every SECONDS print the calls of that interval alone, then start over");
  if (command == "latency")
    desc.add_options()("why", "also total where the calls' time went, and that of the slowest 1%");
  if (!goroutines_cmd) {
    add_condition_options(desc);
    desc.add_options()("max-overhead", po::value<std::string>(),
                       "detach a function whose probes cost more than PERCENT of the "
                       "program's CPU time (docs/cli.md)");
  }
  const bool prometheus_cmd = command != "graph";
  if (prometheus_cmd) {
    desc.add_options()("prometheus", po::value<std::string>(),
                       "serve /metrics on ADDR (HOST:PORT) while tracing")(
        "prometheus-linger", po::value<double>(),
        "after the trace, keep serving until a scrape has read the final values, at most "
        "SECONDS");
  }
  auto vm = parse_options(args, desc, "patterns");
  if (!vm) return report_error(vm.error());
  if (vm->count("help")) {
    std::cout << desc;
    return 0;
  }
  auto patterns = positionals(*vm, "patterns");
  GoroutineSelection selection;
  if (goroutines_cmd) {
    if (!patterns.empty())
      return usage_error("goroutines takes no PATTERN (to follow a function, use --under FUNC)");
    if (vm->count("under")) patterns.push_back((*vm)["under"].as<std::string>());
    if (vm->count("goid")) {
      auto ids = (*vm)["goid"].as<std::vector<uint64_t>>();
      selection.goids.insert(ids.begin(), ids.end());
    }
  } else if (patterns.empty()) {
    return usage_error(command + " needs at least one PATTERN");
  }
  // graph ROOT [PATTERN...]: the calls beneath ROOT; by default those of ROOT's package.
  // (A pattern as ROOT is resolved once the binary is open.)
  std::string root;

  TraceOptions opts;
  opts.mode = mode_of(command);
  opts.target.argv = rest;
  opts.target.all = vm->count("all") > 0;
  if (vm->count("pid")) opts.target.pid = (*vm)["pid"].as<int>();
  int targets = (opts.target.pid != 0) + !rest.empty() + opts.target.all;
  if (targets != 1) return usage_error("give exactly one target: -p PID, --all, or -- CMD ARGS");
  if (vm->count("pid") && opts.target.pid <= 0) return usage_error("bad pid");
  if (vm->count("duration")) {
    opts.duration_s = (*vm)["duration"].as<double>();
    if (opts.duration_s <= 0) return usage_error("--duration must be positive");
  }
  double interval_s = 0;
  if (vm->count("interval")) {
    interval_s = (*vm)["interval"].as<double>();
    // At least a millisecond: a print per microsecond would be all the trace does.
    if (!(interval_s >= 0.001 && interval_s <= 1e9))
      return usage_error("--interval must be 0.001 to 1000000000 seconds");
  }
  std::string prometheus_addr;
  double linger_s = 0;
  if (prometheus_cmd && vm->count("prometheus")) {
    prometheus_addr = (*vm)["prometheus"].as<std::string>();
    auto a = parse_prometheus_address(prometheus_addr);
    if (!a) return report_error(a.error());
    // Every series names the one traced pid.
    if (opts.target.all) return usage_error("--prometheus needs one process: -p PID or -- CMD");
  }
  if (prometheus_cmd && vm->count("prometheus-linger")) {
    if (prometheus_addr.empty()) return usage_error("--prometheus-linger needs --prometheus ADDR");
    linger_s = (*vm)["prometheus-linger"].as<double>();
    if (!(linger_s >= 0)) return usage_error("--prometheus-linger must not be negative");
  }
  opts.max_depth = (*vm)["max-depth"].as<int>();
  opts.max_elems = (*vm)["max-elems"].as<int>();
  opts.max_str = (*vm)["max-str"].as<int>();
  opts.stack_depth = (*vm)["stack"].as<int>();
  if (vm->count("rate")) {
    const int64_t rate = (*vm)["rate"].as<int64_t>();
    if (rate < 1 || rate > 1'000'000'000) return usage_error("--rate must be 1 to 1000000000");
    opts.rate_per_s = static_cast<uint32_t>(rate);
  }
  if (vm->count("max-overhead")) {
    const std::string text = (*vm)["max-overhead"].as<std::string>();
    auto pct = parse_max_overhead(text);
    if (!pct)
      return usage_error("--max-overhead must be a percentage above 0 and at most 100, not '" +
                         printable(text) + "'");
    // The budget is a share of one process's CPU time.
    if (opts.target.all) return usage_error("--max-overhead needs one process: -p PID or -- CMD");
    opts.max_overhead_pct = *pct;
  }
  opts.count_failed = vm->count("no-failed") == 0;
  const int max_line = (*vm)["max-line"].as<int>();
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

  std::string path;
  if (opts.target.pid) {
    // Before the backend is chosen: both get the process, never a thread's id.
    std::string note;
    auto process = target_process(opts.target.pid, &note);
    if (!process) return report_error(process.error());
    if (!note.empty()) std::cerr << "gotap: " << note << "\n";
    opts.target.pid = *process;
    path = exe_of_pid(opts.target.pid);
  } else if (opts.target.all) {
    if (!vm->count("binary")) return usage_error("--all needs --binary PATH");
    path = (*vm)["binary"].as<std::string>();
  } else {
    path = rest[0];
    // The file the backend will run (core/sys/spawn.h): the plan must be of that one.
    if (std::string found = sys::find_on_path(path); !found.empty()) path = found;
  }
  sys::timing_mark(sys::heap_in_huge_pages() ? "start (heap in huge pages)" : "start");
  cond::ConditionSpec cond_spec;
  if (!goroutines_cmd) {
    auto cs = condition_spec(*vm);
    if (!cs) return report_error(cs.error());
    cond_spec = std::move(*cs);
  }
  auto bin = GoBinary::open(path, open_options(*vm));
  if (!bin) return report_error(bin.error());
  sys::timing_mark("open the binary");
  if (command == "graph") {
    auto r = graph_root(**bin, patterns[0]);
    if (!r) return report_error(r.error());
    root = patterns[0] = *r;
    if (patterns.size() == 1) patterns.push_back(package_of(root) + ".*");
  }
  PlanOptions popts;
  // --under follows calls from entry to return; an inlined copy has no return to close it.
  // A condition reads arguments where the ABI puts them, which an inlined copy does not.
  popts.probe_inline_sites = !vm->count("no-inline") && !goroutines_cmd && !cond_spec.any();
  popts.cache_dir = plan_cache_dir();
  auto plan = (*bin)->plan(patterns, popts);
  if (!plan) return report_error(plan.error());
  sys::timing_mark("plan");
  auto condition = cond::build_condition(cond_spec, *plan);
  if (!condition) return report_error(condition.error());
  if (cond_spec.any()) opts.condition = &*condition;
  const bool want_why = vm->count("why") > 0;
  if (want_why && opts.mode == Mode::Latency) {
    // Each call's split is made from its return: the backend traces the calls, and the
    // latencies are made from them (why_latency.h).
    if (interval_s > 0 || !prometheus_addr.empty())
      return usage_error("latency --why takes no -i/--interval or --prometheus yet");
    opts.mode = Mode::Trace;
  }
  if (goroutines_cmd || vm->count("goroutines") || want_why) {
    // Goroutine ids and addresses belong to one process.
    if (opts.target.all)
      return usage_error("goroutine events need one process: give -p PID or -- CMD ARGS");
    // Go 1.26+'s fast system-call path skips casgstatus: --why probes it apart.
    auto g = (*bin)->goroutine_probes(want_why && plan->go.at_least(1, 26));
    if (!g) return report_error(g.error());
    plan->goroutines = *g;
    plan->goroutines.walk = want_why;
    plan->warnings.insert(plan->warnings.end(), g->warnings.begin(), g->warnings.end());
    if (goroutines_cmd)
      for (const auto& f : plan->funcs) selection.under.insert(f.name);
  }
  for (const auto& w : plan->warnings) std::cerr << "gotap: warning: " << printable_text(w) << "\n";

  register_backends();
  std::string why;
  const std::string backend_name = (*vm)["backend"].as<std::string>();
  auto backend = make_backend(backend_name, &why);
  if (!backend) return report_error(backend.error());
  if (opts.condition && (*backend)->name() == "ebpf" && !condition->ebpf_problem.empty())
    return usage_error(condition->ebpf_problem);
  if (backend_name == "auto")
    std::cerr << "gotap: backend " << (*backend)->name() << ": " << printable_text(why) << "\n";

  std::string format = vm->count("json")    ? "json"
                       : command == "graph" ? "graph"
                       : goroutines_cmd     ? "goroutines"
                                            : "text";
  if (vm->count("format")) {
    format = (*vm)["format"].as<std::string>();
    if (!is_output_format(format))
      return usage_error("unknown --format '" + format + "' (" + kOutputFormats + ")");
    if (vm->count("json") && format != "json")
      return usage_error("--json and --format " + format + " disagree");
  }
  auto out = open_output(*vm, "output", stdout, /*live=*/true);
  if (!out) return report_error(out.error());
  auto record = open_output(*vm, "record", nullptr);
  if (!record) return report_error(record.error());
  std::unique_ptr<EventSink> sink = command == "graph" && format == "graph"
                                        ? make_graph_writer(out->fp, root, vm->count("args") > 0)
                                        : make_output(format, out->fp);
  auto guard_owned = std::make_unique<ReaderGuard>(std::move(sink), out->fp);
  const ReaderGuard* guard = guard_owned.get();
  sink = std::move(guard_owned);
  if (record->fp) {
    Event info = {{"command", command},
                  {"binary", real_binary_path(path, opts.target.pid)},
                  {"patterns", patterns}};
    sink = make_tee(std::move(sink), make_record_writer(record->fp, info));
  }
  // Outermost: the output and the record get the same, capped, events.
  sink = make_line_cap(std::move(sink), static_cast<size_t>(max_line));
  // Listening before the target starts: a port in use fails before anything is traced.
  LiveMetrics metrics;
  std::unique_ptr<PrometheusExporter> exporter;
  if (!prometheus_addr.empty()) {
    auto e =
        PrometheusExporter::start(prometheus_addr, metrics, binary_label(path, opts.target.pid),
                                  plan->goroutines.status != 0);
    if (!e) return report_error(e.error());
    exporter = std::move(*e);
    std::cerr << "gotap: serving metrics on http://" << exporter->where() << "/metrics"
              << std::endl;
    opts.metrics = &metrics;
    // Inside the goroutine filter: the gauge counts the goroutines the output shows.
    sink = make_metrics_observer(std::move(sink), metrics);
  }
  if (interval_s > 0) {
    opts.metrics = &metrics;
    sink = make_interval_printer(std::move(sink), metrics, interval_s, opts.mode == Mode::Latency);
  }
  if (goroutines_cmd && (!selection.goids.empty() || !selection.under.empty()))
    sink = make_goroutine_filter(std::move(sink), std::move(selection));
  // Before everything else: the output, the record and the metrics see returns with `why`,
  // and goroutine events only when they were asked for.
  if (want_why && command == "latency") sink = why::make_why_latency_sink(std::move(sink));
  if (want_why)
    sink = why::make_why_sink(
        std::move(sink),
        {.pass_goroutine_events = vm->count("goroutines") > 0,
         .syscalls_seen = !plan->go.at_least(1, 26) || plan->goroutines.sys_enter != 0});
  sink = maybe_failing_sink(std::move(sink));
  install_stop_handlers();
  catch_sigpipe();
  // An exception here is gotap's failure, not bad input: exit 1 (the backends have removed
  // their probes before it reaches this point).
  Result<void> r;
  try {
    r = (*backend)->run(*plan, opts, *sink);
    sink->flush();
  } catch (const std::exception& e) {
    return report_error(runtime_error("{}", e.what()));
  }
  sys::timing_mark("run, detach and summary");
  if (!r) return report_error(r.error());
  // The probes are out: a write that failed (not the reader leaving) is a failure.
  if (int err = guard->write_error())
    return report_error(runtime_error("cannot write the output: {}", std::strerror(err)));
  if (exporter) exporter->linger(linger_s);
  return 0;
}

}  // namespace gotap::cli
