// `gotap funcs [--json] BINARY [PATTERN...]`: the functions and their probe plan. With --json
// this is exactly the plan both backends consume, so it is golden-testable without root.
#include <algorithm>
#include <barrier>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/output/value_text.h"
#include "core/plan/gccgo_binary.h"
#include "core/plan/go_binary.h"
#include "core/plan/plan.h"
#include "core/plan/plan_cache.h"
#include "core/plan/plan_json.h"
#include "core/plan/trampoline_sites.h"
#include "core/sys/huge_pages.h"
#include "core/sys/timing.h"
#include "frontends/commands.h"
#include "frontends/options.h"

namespace gotap::cli {

namespace {

std::string params_text(const std::vector<ParamLoc>& ps) {
  std::string out;
  for (const auto& p : ps) {
    if (!out.empty()) out += ", ";
    if (p.name == "...") {
      out += "...";
      continue;
    }
    out += fmt::format("{} {}", printable(p.name), printable(p.type_name));
    std::string loc = p.loc.describe();
    if (!loc.empty()) out += " @" + loc;
  }
  return out;
}

void print_text(const ProbePlan& plan) {
  // The name column fits the longest name (Go's generic and closure names run long).
  size_t width = 8;
  for (const auto& f : plan.funcs) width = std::max(width, printable(f.name).size());
  std::cout << fmt::format("{:<{}} {:>12} {:>12} {:<8} {:>4}  {}\n", "FUNCTION", width, "ENTRY",
                           "PROBE", "KIND", "RETS", "ARGS -> RESULTS");
  for (const auto& f : plan.funcs) {
    std::string res = params_text(f.results);
    std::cout << fmt::format("{:<{}} {:>12} {:>12} {:<8} {:>4}  ({}){}", printable(f.name), width,
                             f.entry ? hex(f.entry) : "inlined",
                             f.entry_probe ? hex(f.entry_probe) : "-", f.entry_probe_kind,
                             f.ret_sites.size(), params_text(f.args),
                             res.empty() ? "" : " -> (" + res + ")")
              << (f.args_source.empty() ? "" : " [" + f.args_source + "]") << "\n";
    for (const auto& s : f.inline_sites)
      std::cout << fmt::format("    inlined in {} at {} ({}:{}), entry probe only{}\n",
                               printable(std::string(s.outer)), hex(s.pc),
                               printable(std::string(s.file)), s.line,
                               f.inline_probed ? "" : " [not probed]");
    for (const auto& s : f.inline_skipped)
      std::cout << fmt::format("    inlined in {} at {} ({}:{}), not probed: {}\n",
                               printable(std::string(s.outer)), hex(s.pc),
                               printable(std::string(s.file)), s.line, s.skip_reason);
  }
  for (const auto& w : plan.warnings) std::cerr << "gotap: warning: " << printable_text(w) << "\n";
}

}  // namespace

namespace {

// The trampoline backend's way in at each site of f (core/plan/trampoline_sites.h), spliced
// into f's JSON line before its closing brace: "probe_via":{"entry":"jump",
// "ret_sites":["jump","uprobe"],"why":"..."}. "jump" at the entry is what `count` needs;
// `latency` and `trace` need it at every RET too. A site that takes no jump takes a kernel
// uprobe (backends/trampoline/fallback.h), and with it its function's other sites.
void add_probe_via(std::string& out, const ElfFile* elf, const FuncPlan& f) {
  const TrampolineSites t = trampoline_sites(elf, f);
  const bool entry = t.refused.empty();
  nlohmann::ordered_json v;
  v["entry"] = entry ? "jump" : "uprobe";
  nlohmann::ordered_json rets = nlohmann::ordered_json::array();
  for (size_t k = 0; k < f.ret_sites.size(); ++k)
    rets.push_back(entry && k < t.rets.size() && t.rets[k].ok() ? "jump" : "uprobe");
  v["ret_sites"] = std::move(rets);
  if (!t.untimed.empty()) v["why"] = t.untimed;
  // Before the line's "}\n".
  out.insert(out.size() - 2,
             ",\"probe_via\":" + v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

}  // namespace

int cmd_funcs(const Args& args) {
  po::options_description desc("gotap funcs [--json] BINARY [PATTERN...]");
  desc.add_options()("help,h", "show this help")("json", "one JSON object per function")(
      "no-inline", "do not plan probes at inlined call sites")(
      "backend", po::value<std::string>(),
      "with --json, trampoline: each site's probe_via (a jump, or a uprobe and why)");
  add_debuginfo_options(desc);
  auto vm = parse_options(args, desc, "args");
  if (!vm) return report_error(vm.error());
  if (vm->count("help")) {
    std::cout << desc;
    return 0;
  }
  auto pos = positionals(*vm, "args");
  if (pos.empty()) return usage_error("funcs needs a BINARY (see gotap funcs --help)");
  bool via = false;
  if (vm->count("backend")) {
    const std::string b = (*vm)["backend"].as<std::string>();
    if (b != "trampoline")
      return usage_error(
          "funcs --backend takes trampoline only (the other backends probe every "
          "site the plan lists)");
    if (!vm->count("json")) return usage_error("funcs --backend trampoline needs --json");
    via = true;
  }
  sys::timing_mark(sys::heap_in_huge_pages() ? "start (heap in huge pages)" : "start");
  auto bin = GoBinary::open(pos[0], open_options(*vm));
  // gccgo: functions from the symbol tables, in the same plan shape (no inline sites).
  std::unique_ptr<GccgoBinary> gccgo;
  if (!bin) {
    if (!GccgoBinary::is_gccgo(pos[0])) return report_error(bin.error());
    auto g = GccgoBinary::open(pos[0]);
    if (!g) return report_error(g.error());
    gccgo = std::move(*g);
  }
  sys::timing_mark("open the binary");
  std::vector<std::string> patterns(pos.begin() + 1, pos.end());
  if (patterns.empty()) patterns.push_back("*");
  PlanOptions opts;
  opts.probe_inline_sites = !vm->count("no-inline");
  opts.cache_dir = plan_cache_dir();
  auto plan = gccgo ? gccgo->plan(patterns) : (*bin)->plan(patterns, opts);
  if (!plan) return report_error(plan.error());
  sys::timing_mark("plan");
  if (vm->count("json")) {
    // A whole binary's plan is tens of MB of JSON: each CPU writes the lines of a run of
    // functions straight into its buffer (no JSON tree per function), and at the end of each
    // round the buffers are written in order and emptied. Holding the whole output instead
    // was 55 MB of a cold `funcs --json` of caddy, at its peak.
    const auto& funcs = plan->funcs;
    const size_t shares =
        funcs.size() < 1024 ? 1 : std::clamp(std::thread::hardware_concurrency(), 1u, 8u);
    constexpr size_t kRun = 512;  // functions per buffer and round: about 400 KB of JSON
    const size_t rounds = (funcs.size() + shares * kRun - 1) / (shares * kRun);
    std::vector<std::string> out(shares);
    auto flush = [&]() noexcept {
      for (std::string& o : out) {
        std::fwrite(o.data(), 1, o.size(), stdout);
        o.clear();
      }
    };
    std::barrier round_done(static_cast<std::ptrdiff_t>(shares), flush);
    auto print = [&](size_t k) {
      for (size_t r = 0; r < rounds; ++r) {
        const size_t lo = std::min(funcs.size(), (r * shares + k) * kRun);
        const size_t hi = std::min(funcs.size(), lo + kRun);
        for (size_t i = lo; i < hi; ++i) {
          append_json_line(out[k], funcs[i]);
          if (via) add_probe_via(out[k], plan->binary_view.elf, funcs[i]);
        }
        round_done.arrive_and_wait();
      }
    };
    {
      std::vector<std::jthread> threads;
      for (size_t k = 1; k < shares; ++k) threads.emplace_back(print, k);
      print(0);
    }
    sys::timing_mark("print");
    for (const auto& w : plan->warnings)
      std::cerr << "gotap: warning: " << printable_text(w) << "\n";
  } else {
    print_text(*plan);
  }
  // gotap exits next: a whole binary's plan (tens of thousands of allocations, 3% of a cold
  // `funcs --json`) is left to the system instead of freed piece by piece. Held by a static,
  // it is still reachable for leak checkers; volatile, because a pointer stored and never
  // read is a dead store the optimiser drops (at -O1 LeakSanitizer then reported the plan).
  static ProbePlan* volatile left = nullptr;
  left = new ProbePlan(std::move(*plan));
  return 0;
}

}  // namespace gotap::cli
