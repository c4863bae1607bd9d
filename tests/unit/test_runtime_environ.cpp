// A program gotap launches gets the environment the user gave gotap, variable for variable,
// whatever gotap does to itself: it sets DEBUGINFOD_TIMEOUT for libdebuginfod (which leaked
// into every traced program), and the planning commands run themselves again with glibc's
// huge-page tunable in GLIBC_TUNABLES (core/sys/huge_pages.h), which must not reach it. The ground
// truth is the program's own account of its environment (the errors fixture's `env` mode, cgo
// builds included, whose C side reads GLIBC_TUNABLES), against the environment the test gave gotap
// with `env -i`. Once per backend.
#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/unit/fixtures.h"

namespace gotap::testing {
namespace {

using Env = std::map<std::string, std::string>;

// The fixture's "gt env NAME=VALUE" lines; false when "gt env end" is missing.
bool printed_env(const std::string& out, Env& env) {
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line == "gt env end") return true;
    if (line.rfind("gt env ", 0) != 0) continue;
    const std::string kv = line.substr(7);
    const auto eq = kv.find('=');
    env[kv.substr(0, eq)] = eq == std::string::npos ? "" : kv.substr(eq + 1);
  }
  return false;
}

bool kernel_huge_pages_on() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string s;
  std::getline(f, s);
  return s.find("[always]") != std::string::npos || s.find("[madvise]") != std::string::npos;
}

class Environ : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace and BPF)";
    if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  }
};

TEST_P(Environ, LaunchedProgramGetsTheUsersEnvironmentExactly) {
  // Every flavour of the newest Go, and the oldest Go's cgo build: what gotap does to its
  // own environment depends on neither, but a cgo program is the one glibc's tunables reach.
  std::vector<Fixture> all = all_fixtures("errors"), fixtures;
  std::string oldest, newest;
  for (const auto& f : all) {
    if (oldest.empty() || std::stod(f.go_version.substr(2)) < std::stod(oldest.substr(2)))
      oldest = f.go_version;
    if (newest.empty() || std::stod(f.go_version.substr(2)) > std::stod(newest.substr(2)))
      newest = f.go_version;
  }
  for (const auto& f : all)
    if (f.go_version == newest || (f.go_version == oldest && f.flavour == "cgo"))
      fixtures.push_back(f);
  if (fixtures.empty()) GTEST_SKIP() << "no errors fixture built (tests/tools/build-fixtures.sh)";
  // Unset, set to another tunable, set empty; and gotap's huge pages turned off.
  const std::vector<Env> given = {
      {{"PATH", "/usr/bin:/bin"}, {"HOME", "/root"}, {"WITH_SPACE", "a b=c"}},
      {{"PATH", "/usr/bin:/bin"}, {"GLIBC_TUNABLES", "glibc.malloc.perturb=0"}},
      {{"PATH", "/usr/bin:/bin"}, {"GLIBC_TUNABLES", ""}},
      {{"PATH", "/usr/bin:/bin"}, {"GOTAP_HUGE_PAGES", "0"}},
  };
  for (const auto& fx : fixtures) {
    for (const Env& env : given) {
      SCOPED_TRACE(fx.label() + ", GLIBC_TUNABLES " +
                   (env.count("GLIBC_TUNABLES") ? "'" + env.at("GLIBC_TUNABLES") + "'" : "unset") +
                   (env.count("GOTAP_HUGE_PAGES") ? ", GOTAP_HUGE_PAGES=0" : ""));
      std::vector<std::string> argv = {"/usr/bin/env", "-i"};
      for (const auto& [k, v] : env) argv.push_back(k + "=" + v);
      // GOTAP_TIMING is the user's too: the program must see it.
      argv.insert(argv.end(), {"GOTAP_TIMING=1", gotap_binary(), "count", "--json", "--backend",
                               GetParam(), "main.plain", "--", fx.path, "env"});
      RunResult r = run_command(argv);
      ASSERT_EQ(r.exit_code, 0) << r.err;
      Env want = env;
      want["GOTAP_TIMING"] = "1";
      Env got;
      ASSERT_TRUE(printed_env(r.out, got)) << r.out;
      EXPECT_EQ(got, want) << r.out;
      // And gotap did run with its heap in huge pages, unless told not to.
      const bool huge = r.err.find("timing: start (heap in huge pages)") != std::string::npos;
      EXPECT_EQ(huge, kernel_huge_pages_on() && !env.count("GOTAP_HUGE_PAGES")) << r.err;
      auto counts = events_in(r.out, "count");
      ASSERT_EQ(counts.size(), 1u) << r.out;
      EXPECT_EQ(counts[0]["func"], "main.plain");
      EXPECT_EQ(counts[0]["count"], 1);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Environ, ::testing::Values("ebpf", "ptrace"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gotap::testing
