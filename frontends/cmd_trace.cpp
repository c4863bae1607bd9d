// `gotap trace|count|latency|graph|goroutines`: plan the probes, pick a backend, run it until the
// target exits, the duration ends, or Ctrl-C / SIGTERM / SIGHUP.
#include <signal.h>

#include <cstring>
#include <iostream>
#include <set>
#include <string>

#include "core/backend.h"
#include "core/binary/wait_reason_table.h"
#include "core/model/go_quote.h"
#include "core/output/value_text.h"
#include "core/plan/gccgo_binary.h"
#include "core/plan/go_binary.h"
#include "core/plan/pattern.h"
#include "core/plan/plan_cache.h"
#include "core/sys/huge_pages.h"
#include "core/sys/timing.h"
#include "core/sys/urgent_thread.h"
#include "frontends/commands.h"
#include "frontends/reader_gone.h"
#include "frontends/register_backends.h"
#include "frontends/trace_pipeline.h"
#include "frontends/trace_request.h"

namespace gotap::cli {

namespace {

// The stop also puts the main thread, which ends the trace, at the highest priority.
void on_stop_signal(int) {
  sys::hurry_main_thread();
  stop_requested().store(true);
}

// No SA_RESTART: blocking waits in the backends must return EINTR so they notice the stop.
void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
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
// A gccgo program's (gccgo set, bin null) are its symbols' Go names.
Result<std::string> graph_root(const GoBinary* bin, const GccgoBinary* gccgo,
                               const std::string& root) {
  if (bin && !bin->pclntab().lookup(root).empty()) return root;  // generic names hold brackets
  auto pat = Pattern::parse(root);
  if (!pat) return pat.error();
  if (pat->is_exact()) return root;  // the plan says when it names nothing
  std::set<std::string_view> names;
  if (bin) {
    for (const auto& f : bin->pclntab().all_funcs())
      if (!f.is_wrapper && !f.name.empty() && !f.name.starts_with("go:") && pat->matches(f.name))
        names.insert(f.name);
    for (const auto& n : bin->inline_nodes())
      if (pat->matches(n.callee)) names.insert(n.callee);
  }
  if (gccgo)
    for (const auto& f : gccgo->funcs())
      if (pat->matches(f.name)) names.insert(f.name);
  if (names.size() == 1) return std::string(*names.begin());
  if (names.empty()) return make_error("graph's ROOT '{}' matches no function", printable(root));
  std::string some;  // the first three, by name
  size_t shown = 0;
  for (auto it = names.begin(); it != names.end() && shown < 3; ++it, ++shown)
    some += (some.empty() ? "" : ", ") + printable(*it);
  return make_error("graph's ROOT '{}' matches {} functions ({}{}): give one", printable(root),
                    names.size(), some, names.size() > 3 ? ", ..." : "");
}

// What a gccgo program cannot be traced with yet (docs/cli.md, gccgo): --why (libgo's stacks
// and scheduler are not walked), and --stack but with ptrace (which walks the call frame
// information; a BPF program cannot). "" when the request is fine.
std::string gccgo_refusal(const std::string& command, const TraceRequest& req) {
  if (req.why)
    return "--why is not supported for gccgo programs yet (libgo's stacks are not walked)";
  if (req.opts.stack_depth > 0 && req.backend != "ptrace")
    return "--stack on a gccgo program needs --backend ptrace (gccgo keeps no frame pointers: "
           "its frames are walked with the call frame information, which BPF cannot read)";
  return "";
}

}  // namespace

int cmd_trace(const std::string& command, const Args& args, const Args& rest) {
  ParsedRequest parsed = parse_trace_request(command, args, rest);
  if (!parsed.request) return parsed.exit_code;
  TraceRequest& req = *parsed.request;
  TraceOptions opts = req.opts;
  sys::timing_mark(sys::heap_in_huge_pages() ? "start (heap in huge pages)" : "start");

  auto bin = GoBinary::open(req.binary, req.open);
  // A gccgo program: planned from its symbols and DWARF (GccgoBinary), which the plan's
  // binary_view points into for the whole run.
  std::unique_ptr<GccgoBinary> gccgo;
  if (!bin && GccgoBinary::is_gccgo(req.binary)) {
    if (std::string no = gccgo_refusal(command, req); !no.empty()) return usage_error(no);
    auto g = GccgoBinary::open(req.binary);
    if (!g) return report_error(g.error());
    gccgo = std::move(*g);
    // `goroutines -p PID --backend ptrace` of a program linked against libgo.so: no function
    // of the program is probed, so libgo's copy in that process is the target, as with
    // --binary LIB (ptrace probes one file per trace).
    if (command == "goroutines" && req.patterns.empty() && req.backend == "ptrace" &&
        opts.target.pid > 0 && !opts.target.library) {
      auto probes = gccgo->goroutine_probes(opts.target.pid);
      if (probes && probes->image) {
        const std::string lib = probes->image->path();
        auto l = GccgoBinary::open(lib);
        if (!l) return report_error(l.error());
        gccgo = std::move(*l);
        req.binary = lib;
        req.opts.target.library = opts.target.library = true;
      }
    }
  }
  if (!bin && !gccgo) return report_error(bin.error());
  sys::timing_mark("open the binary");
  // graph ROOT [PATTERN...]: the calls beneath ROOT; by default those of ROOT's package.
  std::string root;
  if (command == "graph") {
    auto r = graph_root(bin ? bin->get() : nullptr, gccgo.get(), req.patterns[0]);
    if (!r) return report_error(r.error());
    root = req.patterns[0] = *r;
    if (req.patterns.size() == 1) req.patterns.push_back(package_of(root) + ".*");
  }
  PlanOptions popts;
  popts.probe_inline_sites = req.probe_inline;
  popts.cache_dir = plan_cache_dir();
  auto plan = gccgo ? gccgo->plan(req.patterns) : (*bin)->plan(req.patterns, popts);
  if (!plan) return report_error(plan.error());
  sys::timing_mark("plan");
  auto condition = cond::build_condition(req.condition, *plan);
  if (!condition) return report_error(condition.error());
  if (req.condition.any()) opts.condition = &*condition;
  if (req.goroutines || req.why) {
    // Go 1.26+'s fast system-call path skips casgstatus: --why probes it apart.
    auto g = gccgo ? gccgo->goroutine_probes(opts.target.pid)
                   : (*bin)->goroutine_probes(req.why && plan->go.at_least(1, 26));
    if (!g) return report_error(g.error());
    // libgo.so's probes go into one process's copy: the one traced.
    if (g->image && opts.target.all)
      return usage_error(
          "goroutine states of a gccgo program linked against libgo.so are followed in one "
          "process (-p PID or -- CMD), not with --all");
    plan->goroutines = *g;
    // libgo.so's runtime names its own wait reasons.
    if (g->image && plan->wait_reasons.empty())
      plan->wait_reasons = read_wait_reason_table(*g->image);
    plan->goroutines.walk = req.why;
    plan->goroutines.all_changes = req.goroutines;
    plan->warnings.insert(plan->warnings.end(), g->warnings.begin(), g->warnings.end());
  }
  for (const auto& w : plan->warnings) std::cerr << "gotap: warning: " << printable_text(w) << "\n";

  register_backends();
  std::string why;
  auto backend = make_backend(req.backend, &why);
  if (!backend) return report_error(backend.error());
  // The trampoline backend's conditions run in its eBPF session (Run::jumpless_request).
  const bool in_bpf = (*backend)->name() == "ebpf" || (*backend)->name() == "trampoline";
  if (opts.condition && in_bpf && !condition->ebpf_problem.empty())
    return usage_error(condition->ebpf_problem);
  if (req.backend == "auto")
    std::cerr << "gotap: backend " << (*backend)->name() << ": " << printable_text(why) << "\n";
  // latency --why: the eBPF backend adds each call's split up in the kernel (bpf/why_agg.h),
  // and --prometheus's scrapes read the sums. Elsewhere, and where each call's split must
  // reach user space (--record, --goroutines), the backend traces the calls and the latencies
  // are made from their returns (core/why/why_latency.h).
  if (req.why && opts.mode == Mode::Latency &&
      ((*backend)->name() != "ebpf" || req.record || req.goroutines))
    opts.mode = Mode::Trace;

  auto pipeline = assemble_pipeline(req, *plan, root, opts);
  if (!pipeline) return report_error(pipeline.error());
  EventSink& sink = *(*pipeline)->sink;
  install_stop_handlers();
  catch_sigpipe();
  // An exception here is gotap's failure, not bad input: exit 1 (the backends have removed
  // their probes before it reaches this point).
  Result<void> r;
  try {
    r = (*backend)->run(*plan, opts, sink);
    sink.flush();
  } catch (const std::exception& e) {
    return report_error(runtime_error("{}", e.what()));
  }
  sys::timing_mark("run, detach and summary");
  if (!r) return report_error(r.error());
  // The probes are out: a write that failed (not the reader leaving) is a failure.
  if (int err = (*pipeline)->guard->write_error())
    return report_error(runtime_error("cannot write the output: {}", std::strerror(err)));
  if ((*pipeline)->exporter) (*pipeline)->exporter->linger(req.linger_s);
  return 0;
}

}  // namespace gotap::cli
