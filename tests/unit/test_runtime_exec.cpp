// A traced program that execs goes on doing so. Go's os/exec and os.StartProcess run the
// child of a vfork in the program's own memory, with every signal blocked, until its exec: an
// int3 of the ptrace backend there killed the child ("signal: trace/breakpoint trap") and
// every exec failed; the ptrace backend now places none in that code (core/plan/fork_child.h)
// and says so. The ground truth is the latency fixture's own account (`exec` mode: "GT exec ok
// N of N"); forkExec, which only the parent runs, is still counted once per exec. Once per
// backend, on every Go release built, the flavour turning with the release (DWARF, stripped,
// PIE, cgo).
#include <unistd.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/unit/fixtures.h"

namespace gotap::testing {
namespace {

class Exec : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace and BPF)";
    if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  }
};

TEST_P(Exec, ProgramStillExecsWhileItsForkCodeIsProbed) {
  std::map<std::string, std::vector<Fixture>> by_go;
  for (const Fixture& f : all_fixtures("latency")) by_go[f.go_version].push_back(f);
  if (by_go.empty()) GTEST_SKIP() << "no latency fixture built (tests/tools/build-fixtures.sh)";
  size_t turn = 0;
  for (auto& [go, flavours] : by_go) {
    const Fixture& f = flavours[turn++ % flavours.size()];
    SCOPED_TRACE(f.label());
    constexpr int kRuns = 4;
    RunResult r = run_command({gotap_binary(), "count", "--backend", GetParam(), "--json",
                               "re:^syscall\\.", "--", f.path, "exec", std::to_string(kRuns)},
                              120);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const std::string want = "GT exec ok " + std::to_string(kRuns) + " of " + std::to_string(kRuns);
    EXPECT_NE(r.out.find(want), std::string::npos) << r.out << r.err;
    uint64_t fork_exec = 0;
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);) {
      auto e = nlohmann::json::parse(line, nullptr, false);
      if (!e.is_discarded() && e.value("func", "") == "syscall.forkExec")
        fork_exec = e.value("count", uint64_t{0});
    }
    EXPECT_EQ(fork_exec, uint64_t(kRuns)) << r.out;
    if (GetParam() == "ptrace")
      EXPECT_NE(r.err.find("probe sites left out: "), std::string::npos) << r.err;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Exec, ::testing::Values("ebpf", "ptrace"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gotap::testing
