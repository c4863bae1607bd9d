// `gotap bench`: what tracing costs, per backend and mode, next to the peers (bpftrace and
// `dlv trace`), measured side by side in one run. Each configuration runs --runs times,
// interleaved so machine noise hits all alike, and the median is reported.
//
// With the bundled workload (gotap-workload) the program times its own calls, so start-up,
// attach and detach stay out of the per-call figure. With `-- CMD ARGS` (a user's program)
// the whole run's wall time is measured, and the per-call cost is the extra wall time over
// the calls the tracer saw.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <regex>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/backend.h"
#include "core/sys/spawn.h"
#include "frontends/child_process.h"
#include "frontends/commands.h"
#include "frontends/options.h"
#include "frontends/register_backends.h"

namespace gotap::cli {

namespace {

namespace fs = std::filesystem;

// A path, a function name or a failure's message may hold invalid UTF-8: nlohmann's default
// handler would throw on it (type_error 316) and end the run.
constexpr auto kReplace = nlohmann::json::error_handler_t::replace;

enum class Tool { Untraced, Gotap, Bpftrace, Dlv };

struct Config {
  std::string name;  // "ebpf count"
  Tool tool = Tool::Untraced;
  std::string command, backend;    // gotap only
  uint64_t calls = 0;              // workload calls for this configuration
  std::string unavailable;         // why it cannot run here ("" when it can)
  std::vector<std::string> extra;  // gotap options after the command's own
};

struct Sample {
  double ns = 0;  // per call (workload) or wall time of the run (user program)
  std::optional<uint64_t> seen, lost;
};

struct Row {
  Config cfg;
  std::vector<Sample> samples;
  std::string failure;  // the first failed run's reason
};

std::string self_exe() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "gotap" : p.string();
}

// Next to gotap in the build tree, or in libexec when installed.
std::string find_workload() {
  fs::path dir = fs::path(self_exe()).parent_path();
  for (const fs::path& cand :
       {dir / "gotap-workload", dir.parent_path() / "libexec" / "gotap" / "gotap-workload"})
    if (access(cand.c_str(), X_OK) == 0) return cand.string();
  return "";
}

std::string last_line(const std::string& s) {
  std::string t = s;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  auto nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

std::optional<double> ns_per_call(const std::string& out) {
  std::smatch m;
  static const std::regex re("ns_per_call ([0-9.]+)");
  if (!std::regex_search(out, m, re)) return std::nullopt;
  return std::stod(m[1]);
}

// Calls seen and events lost, from a gotap --json output file.
void read_gotap_events(const std::string& path, Sample& s) {
  std::ifstream in(path);
  uint64_t seen = 0;
  for (std::string l; std::getline(in, l);) {
    if (l.find("\"event\":\"entry\"") != std::string::npos) {
      ++seen;
      continue;
    }
    if (l.find("\"event\":\"return\"") != std::string::npos) continue;
    auto j = nlohmann::json::parse(l, nullptr, false);
    if (j.is_discarded()) continue;
    std::string ev = j.value("event", "");
    if (ev == "count" || ev == "latency") seen += j.value("count", uint64_t{0});
    if (ev == "summary") s.lost = j.value("lost", uint64_t{0});
  }
  s.seen = seen;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];
}

std::string escape_regex(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::string_view(".^$|()[]{}*+?\\").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

struct Bench {
  std::string func;
  std::vector<std::string> user_cmd;  // empty: the workload
  std::string workload;
  int goroutines = 4;
  double rate = 0;
  int timeout_s = 300;

  std::vector<std::string> target(uint64_t calls) const {
    if (!user_cmd.empty()) return user_cmd;
    return {workload,
            "-calls",
            std::to_string(calls),
            "-goroutines",
            std::to_string(goroutines),
            "-rate",
            fmt::format("{}", rate)};
  }

  // One run of one configuration; nullopt with `why` set when it failed.
  std::optional<Sample> run(const Config& c, std::string& why) const {
    std::vector<std::string> argv;
    std::string events;
    auto tgt = target(c.calls);
    switch (c.tool) {
      case Tool::Untraced:
        argv = tgt;
        break;
      case Tool::Gotap: {
        char tmpl[] = "/tmp/gotap-bench-XXXXXX";
        int fd = mkstemp(tmpl);
        if (fd >= 0) close(fd);
        events = tmpl;
        argv = {self_exe(), c.command, "--backend", c.backend, "--json", "-o", events};
        argv.insert(argv.end(), c.extra.begin(), c.extra.end());
        argv.insert(argv.end(), {func, "--"});
        argv.insert(argv.end(), tgt.begin(), tgt.end());
        break;
      }
      case Tool::Bpftrace: {
        std::string cmd;
        for (const auto& a : tgt) cmd += (cmd.empty() ? "" : " ") + a;
        argv = {"bpftrace", "-e", "uprobe:" + tgt[0] + ":" + func + " { @c = count(); }", "-c",
                cmd};
        break;
      }
      case Tool::Dlv:
        argv = {"dlv",    "trace", "--check-go-version=false",
                "--exec", tgt[0],  "^" + escape_regex(func) + "$",
                "--"};
        argv.insert(argv.end(), tgt.begin() + 1, tgt.end());
        break;
    }
    ChildRun r = run_child(argv, timeout_s);
    if (!events.empty()) {
      Sample s;
      read_gotap_events(events, s);
      fs::remove(events);
      return finish(c, r, s, why);
    }
    Sample s;
    if (c.tool == Tool::Bpftrace) {
      std::smatch m;
      static const std::regex re("@c: ([0-9]+)");
      s.seen = std::regex_search(r.out, m, re) ? std::stoull(m[1]) : 0;
    }
    return finish(c, r, s, why);
  }

  std::optional<Sample> finish(const Config& c, const ChildRun& r, Sample s,
                               std::string& why) const {
    if (!r.started) {
      why = "could not start";
      return std::nullopt;
    }
    if (r.timed_out) {
      why = fmt::format("timed out after {} s", timeout_s);
      return std::nullopt;
    }
    // dlv ends its traced program itself and may say so with a non-zero status.
    if (r.exit_code != 0 && c.tool != Tool::Dlv) {
      std::string l = last_line(r.err.empty() ? r.out : r.err);
      why = l.empty() ? fmt::format("exit status {}", r.exit_code) : l;
      return std::nullopt;
    }
    if (user_cmd.empty()) {
      auto ns = ns_per_call(r.out);
      if (!ns) {
        why = "the workload printed no result: " + last_line(r.err);
        return std::nullopt;
      }
      s.ns = *ns;
    } else {
      s.ns = static_cast<double>(r.wall_ns);
    }
    return s;
  }
};

std::vector<Config> configurations(uint64_t calls, uint64_t ptrace_calls, uint64_t dlv_calls,
                                   bool peers, bool workload) {
  register_backends();
  auto reason = [](const std::string& backend) -> std::string {
    for (const auto& b : registered_backends())
      if (b.name == backend) return b.unavailable_reason();
    return "not built into this gotap";
  };
  std::string ebpf = reason("ebpf"), ptrace = reason("ptrace"), trampoline = reason("trampoline");
  std::vector<Config> out = {
      {"untraced", Tool::Untraced, "", "", calls, "", {}},
      {"ebpf count", Tool::Gotap, "count", "ebpf", calls, ebpf, {}},
      {"trampoline count", Tool::Gotap, "count", "trampoline", calls, trampoline, {}},
      // Every call rejected in the kernel by a condition that follows a pointer: what a
      // call that does not match costs, next to a count hit at the same site (docs/cli.md,
      // "Conditions"). The workload's req.ID is never negative.
      {"ebpf rejected", Tool::Gotap, "count", "ebpf", calls, ebpf, {"--if", "req.ID < 0"}},
      {"ebpf latency", Tool::Gotap, "latency", "ebpf", calls, ebpf, {}},
      {"ebpf trace", Tool::Gotap, "trace", "ebpf", calls, ebpf, {}},
      {"ptrace trace", Tool::Gotap, "trace", "ptrace", ptrace_calls, ptrace, {}},
  };
  // A user's program has no argument known never to match: the row is the workload's only.
  if (!workload) std::erase_if(out, [](const Config& c) { return c.name == "ebpf rejected"; });
  if (peers) {
    out.push_back({"bpftrace count",
                   Tool::Bpftrace,
                   "",
                   "",
                   calls,
                   sys::find_on_path("bpftrace").empty()
                       ? "not installed (apt-get install bpftrace)"
                       : (geteuid() != 0 ? "needs root" : ""),
                   {}});
    out.push_back({"dlv trace",
                   Tool::Dlv,
                   "",
                   "",
                   dlv_calls,
                   sys::find_on_path("dlv").empty() ? "not installed (apt-get install delve)" : "",
                   {}});
  }
  return out;
}

}  // namespace

int cmd_bench(const Args& args, const Args& rest) {
  po::options_description desc("gotap bench [OPTIONS] [-- CMD ARGS...]");
  desc.add_options()("help,h", "show this help")("json", "JSON Lines output")(
      "func", po::value<std::string>(),
      "the function to trace (default main.handle, the workload's)")(
      "calls", po::value<uint64_t>()->default_value(200000), "workload calls per run")(
      "ptrace-calls", po::value<uint64_t>(), "workload calls under ptrace (default calls/10)")(
      "dlv-calls", po::value<uint64_t>()->default_value(200),
      "workload calls under dlv trace (milliseconds each)")(
      "goroutines", po::value<int>()->default_value(4), "workload goroutines")(
      "rate", po::value<double>()->default_value(0),
      "workload calls per second (0: as fast as possible)")(
      "runs", po::value<int>()->default_value(3), "runs of each configuration (median)")(
      "modes", po::value<std::string>(),
      "only these configurations, comma-separated (e.g. untraced,ebpf count)")(
      "no-peers", "skip bpftrace and dlv")("workload", po::value<std::string>(),
                                           "the workload binary (default: the bundled one)")(
      "timeout", po::value<int>()->default_value(300), "seconds before a run is abandoned");
  auto vm = parse_options(args, desc, "extra");
  if (!vm) return report_error(vm.error());
  if (vm->count("help")) {
    std::cout << desc;
    return 0;
  }
  if (!positionals(*vm, "extra").empty())
    return usage_error("bench takes no positional arguments (the program goes after --)");

  Bench b;
  b.user_cmd = rest;
  b.goroutines = (*vm)["goroutines"].as<int>();
  b.rate = (*vm)["rate"].as<double>();
  b.timeout_s = (*vm)["timeout"].as<int>();
  const int runs = (*vm)["runs"].as<int>();
  const uint64_t calls = (*vm)["calls"].as<uint64_t>();
  const uint64_t ptrace_calls = vm->count("ptrace-calls") ? (*vm)["ptrace-calls"].as<uint64_t>()
                                                          : std::max<uint64_t>(1, calls / 10);
  const uint64_t dlv_calls = (*vm)["dlv-calls"].as<uint64_t>();
  if (runs < 1 || calls < 1 || b.goroutines < 1 || b.rate < 0 || b.timeout_s < 1)
    return usage_error("--runs, --calls, --goroutines and --timeout must be positive");

  if (b.user_cmd.empty()) {
    b.workload = vm->count("workload") ? (*vm)["workload"].as<std::string>() : find_workload();
    if (b.workload.empty())
      return usage_error(
          "no bundled gotap-workload (gotap was built without Go): give --workload PATH or -- CMD "
          "ARGS");
    if (access(b.workload.c_str(), X_OK) != 0)
      return usage_error("cannot run the workload " + b.workload);
    b.func = vm->count("func") ? (*vm)["func"].as<std::string>() : "main.handle";
  } else {
    if (!vm->count("func")) return usage_error("bench -- CMD needs --func FUNCTION");
    b.func = (*vm)["func"].as<std::string>();
    std::string exe = sys::find_on_path(b.user_cmd[0]);
    if (exe.empty() || access(exe.c_str(), X_OK) != 0)
      return usage_error("cannot run " + b.user_cmd[0]);
    b.user_cmd[0] = exe;
  }

  std::vector<Config> cfgs = configurations(calls, ptrace_calls, dlv_calls,
                                            vm->count("no-peers") == 0, b.user_cmd.empty());
  if (vm->count("modes")) {
    std::string want = "," + (*vm)["modes"].as<std::string>() + ",";
    std::erase_if(cfgs, [&](const Config& c) {
      return c.name != "untraced" && want.find("," + c.name + ",") == std::string::npos;
    });
  }
  std::vector<Row> rows;
  for (const auto& c : cfgs) rows.push_back({c, {}, ""});

  const bool json = vm->count("json") > 0;
  const std::string target_name =
      b.user_cmd.empty() ? fs::path(b.workload).filename().string() : b.user_cmd[0];
  if (!json)
    std::cerr << fmt::format("gotap bench: {} in {}, {} run{} of each configuration\n", b.func,
                             target_name, runs, runs == 1 ? "" : "s");
  for (int i = 0; i < runs; ++i) {
    for (auto& row : rows) {
      if (!row.cfg.unavailable.empty() || !row.failure.empty()) continue;
      std::string why;
      if (auto s = b.run(row.cfg, why))
        row.samples.push_back(*s);
      else
        row.failure = why;
    }
  }

  // Medians, and the baseline every ratio is taken against.
  auto med = [](const Row& r) {
    std::vector<double> v;
    for (const auto& s : r.samples) v.push_back(s.ns);
    return median(v);
  };
  auto med_seen = [](const Row& r) -> std::optional<uint64_t> {
    std::vector<double> v;
    for (const auto& s : r.samples)
      if (s.seen) v.push_back(static_cast<double>(*s.seen));
    if (v.empty()) return std::nullopt;
    return static_cast<uint64_t>(median(v));
  };
  const Row* base = nullptr;
  for (const auto& r : rows)
    if (r.cfg.tool == Tool::Untraced && !r.samples.empty()) base = &r;
  if (!base) {
    const Row& u = rows.front();
    return report_error(
        runtime_error("the untraced run failed: {}", u.failure.empty() ? "no result" : u.failure));
  }
  const double base_ns = med(*base);
  // A user's program: the calls per run are what a tracer counted; the cost per call is the
  // extra wall time spread over them.
  std::optional<uint64_t> user_calls;
  if (!b.user_cmd.empty())
    for (const auto& r : rows)
      if (r.cfg.tool == Tool::Gotap && !user_calls) user_calls = med_seen(r);

  if (!json) {
    std::cout << fmt::format("{:<16} {:>9} {:>14} {:>14} {:>10} {:>10} {:>7}\n", "MODE", "CALLS",
                             b.user_cmd.empty() ? "NS/CALL" : "WALL MS", "COST/CALL", "SLOWDOWN",
                             "SEEN", "LOST");
  }
  for (const auto& r : rows) {
    nlohmann::ordered_json j = {{"event", "bench"}, {"mode", r.cfg.name}};
    std::string reason = !r.cfg.unavailable.empty() ? r.cfg.unavailable : r.failure;
    if (r.samples.empty()) {
      j["available"] = false;
      j["reason"] = reason;
      if (json)
        std::cout << j.dump(-1, ' ', false, kReplace) << "\n";
      else
        std::cout << fmt::format("{:<16} -- {}\n", r.cfg.name, reason);
      continue;
    }
    const double ns = med(r);
    const double slowdown = base_ns > 0 ? ns / base_ns : 0;
    std::optional<double> cost;
    uint64_t calls_run = b.user_cmd.empty() ? r.cfg.calls : user_calls.value_or(0);
    if (r.cfg.tool != Tool::Untraced) {
      if (b.user_cmd.empty())
        cost = ns - base_ns;
      else if (calls_run > 0)
        cost = (ns - base_ns) / static_cast<double>(calls_run);
    }
    auto seen = med_seen(r);
    std::optional<uint64_t> lost;
    for (const auto& s : r.samples)
      if (s.lost) lost = std::max(lost.value_or(0), *s.lost);
    if (json) {
      j["available"] = true;
      j["calls"] = calls_run;
      j[b.user_cmd.empty() ? "ns_per_call" : "wall_ns"] = ns;
      if (cost) j["cost_ns"] = *cost;
      j["slowdown"] = slowdown;
      if (seen) j["seen"] = *seen;
      if (lost) j["lost"] = *lost;
      auto samples = nlohmann::json::array();
      for (const auto& s : r.samples) samples.push_back(s.ns);
      j["samples"] = samples;
      std::cout << j.dump(-1, ' ', false, kReplace) << "\n";
      continue;
    }
    std::cout << fmt::format(
        "{:<16} {:>9} {:>14} {:>14} {:>9.2f}x {:>10} {:>7}{}\n", r.cfg.name,
        calls_run ? std::to_string(calls_run) : "?",
        b.user_cmd.empty() ? fmt::format("{:.1f}", ns) : fmt::format("{:.1f}", ns / 1e6),
        cost ? fmt::format("{:.1f} ns", *cost) : "-", slowdown, seen ? std::to_string(*seen) : "-",
        lost ? std::to_string(*lost) : "-",
        r.failure.empty() ? "" : "  (some runs failed: " + r.failure + ")");
  }
  if (json) {
    nlohmann::ordered_json s = {{"event", "summary"}, {"command", "bench"},
                                {"func", b.func},     {"target", target_name},
                                {"runs", runs},       {"goroutines", b.goroutines},
                                {"rate", b.rate}};
    std::cout << s.dump(-1, ' ', false, kReplace) << "\n";
  }
  return 0;
}

}  // namespace gotap::cli
