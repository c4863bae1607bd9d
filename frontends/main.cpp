// gotap's entry point: dispatches subcommands and maps every failure to one "gotap: ..." line
// and a documented exit code. Nothing below main() exits or aborts on bad input.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "core/decode/decode_stack.h"
#include "core/model/go_quote.h"
#include "core/sys/huge_pages.h"
#include "core/sys/spawn.h"
#include "frontends/commands.h"

namespace gotap::cli {

int report_error(const Error& e) {
  // One line, always, and nothing a terminal acts on: messages may quote file names,
  // patterns or a binary's names with newlines or escape sequences in them (go_quote.h).
  const std::string msg = printable_text(e.what());
  std::fprintf(stderr, "gotap: %s\n", msg.c_str());
  return e.kind == ErrorKind::Runtime ? 1 : 2;
}

int usage_error(const std::string& message) {
  return report_error(make_error("{}", message));
}

}  // namespace gotap::cli

namespace {

const char* kUsage =
    "usage: gotap COMMAND [OPTIONS] ...\n"
    "\n"
    "Trace Go programs: arguments, results, latency and goroutines, on stripped and\n"
    "optimized binaries.\n"
    "\n"
    "commands:\n"
    "  info  [--json] BINARY                 what gotap knows about a Go binary\n"
    "  funcs [--json] BINARY [PATTERN...]    functions and their probe plan\n"
    "  trace   [TARGET] [--json] PATTERN... [-- CMD ARGS...]   calls with args and results\n"
    "  count   [TARGET] [--json] PATTERN... [-- CMD ARGS...]   calls per function\n"
    "  latency [TARGET] [--json] PATTERN... [-- CMD ARGS...]   latency histograms\n"
    "  graph   [TARGET] ROOT [PATTERN...] [-- CMD ARGS...]     per-goroutine call trees\n"
    "  goroutines [TARGET] [--goid N] [--under FUNC] [-- CMD ARGS...]\n"
    "                                        goroutine states, creation and exit\n"
    "  report  [--format FORMAT] RECORD      render a trace recorded with --record FILE\n"
    "  bench   [--json] [OPTIONS] [-- CMD ARGS...]             what tracing costs, per\n"
    "                                        backend and mode, next to bpftrace and dlv\n"
    "\n"
    "TARGET: -p PID, or -- CMD ARGS; --backend ptrace|ebpf|trampoline|auto; -d SECONDS; -o FILE.\n"
    "PATTERN: a Go function name, a glob (main.*, *.ServeHTTP) or re:REGEX.\n"
    "Run `gotap COMMAND --help` for a command's options. Exit codes: 0 ok, 1 the trace\n"
    "failed at run time, 2 bad usage or bad input.\n";

}  // namespace

int main(int argc, char** argv) {
  using namespace gotap::cli;
  std::vector<std::string> args(argv + 1, argv + argc);
  gotap::reserve_thread_stacks();  // before any thread: the output thread renders deep values
  if (args.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const std::string cmd = args[0];
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (cmd == "--version" || cmd == "version") {
    std::printf("gotap %s\n", GOTAP_VERSION);
    return 0;
  }
  // The commands that plan probes touch 100+ MB of new heap (core/sys/huge_pages.h).
  if (cmd == "funcs" || cmd == "trace" || cmd == "count" || cmd == "latency" || cmd == "graph" ||
      cmd == "goroutines")
    gotap::sys::rerun_with_huge_pages(argv);
  gotap::sys::keep_launch_environment();
  // Split at the first "--": what follows is the command to launch, untouched.
  Args opts, rest;
  bool after = false;
  for (size_t i = 1; i < args.size(); ++i) {
    if (!after && args[i] == "--") {
      after = true;
      continue;
    }
    (after ? rest : opts).push_back(args[i]);
  }
  try {
    if (cmd == "info") return cmd_info(opts);
    if (cmd == "funcs") return cmd_funcs(opts);
    if (cmd == "trace" || cmd == "count" || cmd == "latency" || cmd == "graph" ||
        cmd == "goroutines")
      return cmd_trace(cmd, opts, rest);
    if (cmd == "bench") return cmd_bench(opts, rest);
    if (cmd == "report") return cmd_report(opts);
    return usage_error("unknown command '" + cmd + "' (see gotap --help)");
  } catch (const std::exception& e) {
    // Last resort: library code returns Result, but std:: and boost may still throw.
    return report_error(gotap::make_error("{}", e.what()));
  }
}
