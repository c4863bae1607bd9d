// What `-p PID` attaches to: a thread's id (as `top -H` shows it) traces the thread's process
// on both backends, saying so; a user without the privileges is told which it needs.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "tests/unit/fixtures.h"

namespace gotap::testing {
namespace {

// A started program, killed and reaped when it goes out of scope.
struct Running {
  pid_t pid = -1;
  explicit Running(const std::vector<std::string>& argv) {
    pid = fork();
    if (pid == 0) {
      int null = open("/dev/null", O_WRONLY);
      dup2(null, 1);
      std::vector<char*> a;
      for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
      a.push_back(nullptr);
      execv(a[0], a.data());
      _exit(127);
    }
  }
  ~Running() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
};

// A thread of `pid` that is not its main thread (the kernel's view: /proc/PID/task), or 0.
pid_t other_thread(pid_t pid) {
  for (int tries = 0; tries < 100; ++tries) {
    for (const auto& e :
         std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
      const pid_t tid = std::stoi(e.path().filename().string());
      if (tid != pid) return tid;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return 0;
}

class TargetPid : public ::testing::TestWithParam<std::string> {};

// tests/fixtures/demo processes an order every 10 ms; its Go runtime runs several threads.
TEST_P(TargetPid, ThreadIdTracesItsProcess) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace and BPF)";
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  std::string path;
  for (const Fixture& fx : all_fixtures("demo"))
    if (fx.flavour == "default") path = fx.path;
  if (path.empty()) GTEST_SKIP() << "no demo fixtures (tests/tools/build-fixtures.sh)";
  Running demo({path, "-n", "100000", "-sleep", "10ms"});
  ASSERT_GT(demo.pid, 0);
  const pid_t tid = other_thread(demo.pid);
  ASSERT_NE(tid, 0) << "the Go program started no second thread";
  auto r = run_command({gotap_binary(), "count", "--backend", GetParam(), "--json", "-d", "1", "-p",
                        std::to_string(tid), "main.processOrder"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("gotap: pid " + std::to_string(tid) + " is a thread of process " +
                       std::to_string(demo.pid)),
            std::string::npos)
      << r.err;
  auto summary = events_in(r.out, "summary");
  ASSERT_EQ(summary.size(), 1u) << r.out;
  EXPECT_EQ(summary[0].value("pid", 0), demo.pid);
  auto counts = events_in(r.out, "count");
  ASSERT_EQ(counts.size(), 1u) << r.out;
  // About 100 orders in the second; the process's calls, whichever thread runs them.
  EXPECT_GT(counts[0].value("count", 0), 20) << r.out;
}

INSTANTIATE_TEST_SUITE_P(Backends, TargetPid, ::testing::Values("ebpf", "ptrace"),
                         [](const auto& info) { return info.param; });

// As `nobody`, a root process's executable cannot be read: the error names what tracing it
// takes. Root is needed to become nobody; the gotap binary must be readable by it.
TEST(TargetPidUnprivileged, NamesThePrivilegesNeeded) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (to run gotap as nobody)";
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  if (!file_exists("/usr/bin/setpriv")) GTEST_SKIP() << "no setpriv (util-linux)";
  Running sleeper({"/bin/sleep", "30"});
  ASSERT_GT(sleeper.pid, 0);
  auto r = run_command({"/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                        "--inh-caps=-all", gotap_binary(), "count", "--backend", "ptrace", "-p",
                        std::to_string(sleeper.pid), "main.*"});
  if (r.exit_code == 126 || r.exit_code == 127)
    GTEST_SKIP() << "nobody cannot run " << gotap_binary() << ": " << r.err;
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err.rfind("gotap: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("Permission denied"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("root, or CAP_SYS_PTRACE"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("CAP_BPF"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace gotap::testing
