// What `-p PID` attaches to: a thread's id (as `top -H` shows it) traces the thread's process
// on both backends, saying so; a user without the privileges is told which it needs.
#include <fcntl.h>
#include <poll.h>
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

// Reads `fd` until `want` appears, it closes, or `ms` pass.
std::string read_until(int fd, const std::string& want, int ms) {
  std::string got;
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (got.find(want) == std::string::npos && std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char buf[4096];
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

// An attached program that dies: the summary has its exit status, as the kernel gives it to
// its parent (this test) through waitpid. eBPF cannot wait for a process it did not start.
TEST_P(TargetPid, AttachedProcessExitStatus) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace and BPF)";
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  std::string path;
  for (const Fixture& fx : all_fixtures("demo"))
    if (fx.flavour == "default") path = fx.path;
  if (path.empty()) GTEST_SKIP() << "no demo fixtures (tests/tools/build-fixtures.sh)";
  Running demo({path, "-n", "100000", "-sleep", "10ms"});
  ASSERT_GT(demo.pid, 0);
  int out[2], err[2];
  ASSERT_EQ(pipe(out), 0);
  ASSERT_EQ(pipe(err), 0);
  const std::vector<std::string> argv = {gotap_binary(),
                                         "count",
                                         "--backend",
                                         GetParam(),
                                         "--json",
                                         "-p",
                                         std::to_string(demo.pid),
                                         "main.processOrder"};
  const pid_t tap = fork();
  if (tap == 0) {
    dup2(out[1], 1);
    dup2(err[1], 2);
    std::vector<char*> a;
    for (const auto& x : argv) a.push_back(const_cast<char*>(x.c_str()));
    a.push_back(nullptr);
    execv(a[0], a.data());
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  const std::string banner = read_until(err[0], "Tracing ", 60000);
  EXPECT_NE(banner.find("Tracing "), std::string::npos) << banner;
  kill(demo.pid, SIGTERM);
  const std::string text =
      read_until(out[0], "\"event\":\"summary\"", 30000) + read_until(out[0], "\n", 2000);
  int tap_status = 0;
  waitpid(tap, &tap_status, 0);
  close(out[0]);
  close(err[0]);
  // The truth: what the kernel tells the parent.
  int status = 0;
  ASSERT_EQ(waitpid(demo.pid, &status, 0), demo.pid);
  demo.pid = -1;
  ASSERT_TRUE(WIFSIGNALED(status) || WIFEXITED(status));
  EXPECT_TRUE(WIFEXITED(tap_status) && WEXITSTATUS(tap_status) == 0) << tap_status;
  auto summary = events_in(text, "summary");
  ASSERT_EQ(summary.size(), 1u) << text;
  EXPECT_EQ(summary[0].value("ended_by", ""), "exit") << summary[0];
  if (WIFSIGNALED(status)) {
    EXPECT_EQ(summary[0].value("exit_code", -1), 128 + WTERMSIG(status)) << summary[0];
    EXPECT_EQ(summary[0].value("exit_signal", -1), WTERMSIG(status)) << summary[0];
  } else {
    EXPECT_EQ(summary[0].value("exit_code", -1), WEXITSTATUS(status)) << summary[0];
    EXPECT_FALSE(summary[0].contains("exit_signal")) << summary[0];
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, TargetPid, ::testing::Values("ebpf", "ptrace"),
                         [](const auto& info) { return info.param; });

// As `nobody`, a root process's executable cannot be read: the error names what tracing it
// takes. Root is needed to become nobody; gotap runs from a copy nobody can reach (the build
// tree may be under a private home).
TEST(TargetPidUnprivileged, NamesThePrivilegesNeeded) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (to run gotap as nobody)";
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  if (!file_exists("/usr/bin/setpriv")) GTEST_SKIP() << "no setpriv (util-linux)";
  char dir[] = "/tmp/gotap-nobody-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string copy = std::string(dir) + "/gotap";
  std::filesystem::copy_file(gotap_binary(), copy);
  std::filesystem::permissions(dir, std::filesystem::perms(0755));
  std::filesystem::permissions(copy, std::filesystem::perms(0755));
  Running sleeper({"/bin/sleep", "30"});
  ASSERT_GT(sleeper.pid, 0);
  auto r =
      run_command({"/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", copy,
                   "count", "--backend", "ptrace", "-p", std::to_string(sleeper.pid), "main.*"});
  std::filesystem::remove_all(dir);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err.rfind("gotap: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("Permission denied"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("root, or CAP_SYS_PTRACE"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("CAP_BPF"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace gotap::testing
