// The image that is probed is the image that was planned. gotap plans from /proc/PID/exe and
// attaches later; a pid that execs another program in between used to get the first
// program's probes at the same offsets of the second: uprobes in the middle of its
// instructions. Here the execer fixture execs the latency fixture (another Go program) on a
// signal, after a delay swept across the window that GOTAP_TEST_ATTACH_DELAY_MS (test only)
// holds open between planning and attaching, and past it: the exec lands before the probes
// are in place (gotap must refuse: exit 1, one line) or after (gotap traced the planned
// image, and the new one must carry none of its probes). In every run the new program's text
// in /proc/PID/mem equals its file (a uprobe's int3 shows there) and the new program runs to
// its end with its own ground truth ("done N").
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "backends/ebpf/ebpf_backend.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/loopback.h"

namespace gotap::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kWindowMs = 300;            // GOTAP_TEST_ATTACH_DELAY_MS
constexpr int kWorkers = 4, kRounds = 8;  // the latency fixture's `park`: 3 calls a round

// Waits up to timeout_s for pid to end, then kills it; its wait status, or -1.
int wait_or_kill(pid_t pid, int timeout_s) {
  int st = 0;
  for (auto until = Clock::now() + std::chrono::seconds(timeout_s); Clock::now() < until;) {
    if (waitpid(pid, &st, WNOHANG) == pid) return st;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, SIGKILL);
  waitpid(pid, &st, 0);
  return -1;
}

bool eventually(int timeout_ms, const std::function<bool()>& ready) {
  for (auto until = Clock::now() + std::chrono::milliseconds(timeout_ms); Clock::now() < until;) {
    if (ready()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return ready();
}

// spawn(), with a pipe to the child's stdin too.
struct Piped {
  Child child;
  int in = -1;
};
Piped spawn_piped(const std::vector<std::string>& argv) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return {};
  Piped out;
  // The read end becomes the child's stdin: spawn() dups only stdout and stderr, so it goes
  // in as fd 0 of this process for the fork, then back.
  const int saved = dup(0);
  dup2(p[0], 0);
  out.child = spawn(argv);
  dup2(saved, 0);
  close(saved);
  close(p[0]);
  out.in = p[1];
  return out;
}

// Reads fd into `text` until `needle` appears in it at or after `from`; false on timeout or
// end of file.
bool read_into(int fd, std::string& text, const std::string& needle, size_t from, int timeout_ms) {
  const auto until = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (text.find(needle, from) == std::string::npos) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || poll(&p, 1, static_cast<int>(left)) <= 0) return false;
    char buf[4096];
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) return false;
    text.append(buf, static_cast<size_t>(n));
  }
  return true;
}

std::string exe_of(pid_t pid) {
  std::error_code ec;
  return fs::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec).string();
}

class ExecPlanned : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace and BPF)";
    if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
    if (GetParam() == "ebpf") {
      const std::string why = ebpf::unavailable_reason();
      if (!why.empty()) GTEST_SKIP() << "BPF unavailable: " << why;
    }
  }
  int refused = 0, traced = 0;

  // One run: execer (fx) becomes `next` `delay_ms` after gotap's window opened.
  void run_once(const std::string& fx, const std::string& next, int delay_ms) {
    // The next program waits for a line on stdin (-wait) once it runs: alive for as long as
    // the test looks at it.
    Piped piped = spawn_piped({fx, "-signal", std::to_string(delay_ms), next, "park",
                               std::to_string(kWorkers), std::to_string(kRounds), "-wait"});
    const Child& prog = piped.child;
    ASSERT_GT(prog.pid, 0);
    const std::string pid = std::to_string(prog.pid);
    // Go's runtime runs: /proc/PID/exe is execer, not the test's fork.
    std::string out;
    ASSERT_TRUE(read_into(prog.out, out, "ready\n", 0, 10000)) << out;

    const std::string events =
        (fs::temp_directory_path() / ("gotap-exec-planned-" + pid + ".jsonl")).string();
    setenv("GOTAP_TEST_ATTACH_DELAY_MS", std::to_string(kWindowMs).c_str(), 1);
    Child g =
        spawn({gotap_binary(), "trace", "--backend", GetParam(), "--json", "-o", events, "-d", "20",
               "-p", pid, "re:^runtime\\.(casgstatus|gopark|schedule|newproc1)$", "time.Sleep"});
    unsetenv("GOTAP_TEST_ATTACH_DELAY_MS");
    ASSERT_GT(g.pid, 0);
    std::string err = read_until(g.err, "gotap: test: attaching in", 60000);
    if (err.find("gotap: test: attaching in") == std::string::npos) {
      kill(prog.pid, SIGKILL);
      wait_or_kill(prog.pid, 5);
      wait_or_kill(g.pid, 5);
      FAIL() << "gotap never reached its attach: " << err;
    }
    // The plan is made: the exec comes delay_ms into the window (or after it).
    kill(prog.pid, SIGUSR1);
    const size_t before = out.size();
    read_into(prog.out, out, "GT exec", before, 10000);
    read_into(prog.out, out, "ready\n", before, 10000);  // the next program's
    const bool execd = eventually(1000, [&] { return exe_of(prog.pid) == next; });
    // gotap has placed its probes (the banner) or refused (its stderr ends).
    err += read_until(g.err, "Ctrl-C to end.", 10000);
    TextCompare text;
    if (execd) text = compare_text(prog.pid);
    EXPECT_TRUE(execd) << "runs " << exe_of(prog.pid) << "\n" << out;
    EXPECT_GT(text.bytes, 0u);
    EXPECT_EQ(text.differing, 0u) << "the new program's text holds bytes its file lacks: "
                                  << text.first;

    // The new program lives to its end and says what it did.
    EXPECT_EQ(write(piped.in, "go\n", 3), 3);
    close(piped.in);
    const std::string done = "done " + std::to_string(kWorkers * kRounds * 3) + "\n";
    read_into(prog.out, out, done, 0, 20000);
    const int st = wait_or_kill(prog.pid, 20);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "status " << st << "\n" << out;
    EXPECT_NE(out.find(done), std::string::npos) << out;

    const int gst = wait_or_kill(g.pid, 30);
    err += read_all(g.err);
    close(prog.out);
    close(prog.err);
    close(g.out);
    close(g.err);
    const std::string jsonl = read_file(events);
    fs::remove(events);
    // What gotap said, less the test hook's line.
    std::vector<std::string> lines;
    std::istringstream in(err);
    for (std::string l; std::getline(in, l);)
      if (l.rfind("gotap: test: ", 0) != 0) lines.push_back(l);
    ASSERT_TRUE(WIFEXITED(gst)) << err;
    if (WEXITSTATUS(gst) == 1) {
      ++refused;
      ASSERT_EQ(lines.size(), 1u) << err;
      EXPECT_EQ(lines[0].rfind("gotap: pid " + pid + " changed its program (exec)", 0), 0u) << err;
      EXPECT_TRUE(events_in(jsonl, "entry").empty()) << jsonl.substr(0, 2000);
    } else {
      EXPECT_EQ(WEXITSTATUS(gst), 0) << err;
      ++traced;
      // It traced execer, which works between its signal and its exec; the summary is
      // the last event.
      EXPECT_FALSE(events_in(jsonl, "entry").empty()) << err;
      EXPECT_EQ(err.find("changed its program"), std::string::npos) << err;
    }
  }
};

TEST_P(ExecPlanned, ProbesOnlyTheImageThatWasPlanned) {
  // execer of the newest Go release built, non-PIE and PIE (the load bias is proven from
  // the mapping), each becoming the latency fixture of its own build.
  std::vector<Fixture> fxs;
  for (const Fixture& f : all_fixtures("execer"))
    if ((f.flavour == "default" || f.flavour == "pie") &&
        file_exists(fs::path(f.path).parent_path() / "latency"))
      fxs.push_back(f);
  if (fxs.empty()) GTEST_SKIP() << "no execer and latency fixtures built (build-fixtures.sh)";
  const std::string newest = fxs.back().go_version;
  std::erase_if(fxs, [&](const Fixture& f) { return f.go_version != newest; });
  // Into the window at several points, and well after it.
  const int delays[] = {0, 60, 120, 180, 2 * kWindowMs, 3 * kWindowMs};
  for (size_t i = 0; i < std::size(delays) && !HasFatalFailure(); ++i) {
    const Fixture& f = fxs[i % fxs.size()];
    SCOPED_TRACE(f.label() + " exec " + std::to_string(delays[i]) + " ms into the window");
    run_once(f.path, (fs::path(f.path).parent_path() / "latency").string(), delays[i]);
  }
  // The sweep met both sides of the race.
  EXPECT_GT(refused, 0);
  EXPECT_GT(traced, 0);
}

// -- CMD: the file planned from is replaced on disk (renamed over) before it starts. What
// starts is another program: gotap refuses it (exit 1, one line) and it never runs, since it
// was stopped at its first instruction.
TEST_P(ExecPlanned, LaunchedFileReplacedOnDiskIsRefused) {
  std::string latency, execer;
  for (const Fixture& f : all_fixtures("execer"))
    if (f.flavour == "default" && file_exists(fs::path(f.path).parent_path() / "latency")) {
      execer = f.path;
      latency = (fs::path(f.path).parent_path() / "latency").string();
    }
  if (execer.empty()) GTEST_SKIP() << "no execer and latency fixtures built (build-fixtures.sh)";
  const fs::path dir = fs::temp_directory_path() / ("gotap-replaced-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path prog = dir / "prog";
  fs::copy_file(latency, prog, fs::copy_options::overwrite_existing);

  setenv("GOTAP_TEST_ATTACH_DELAY_MS", std::to_string(kWindowMs).c_str(), 1);
  Child g = spawn({gotap_binary(), "count", "--backend", GetParam(), "--json", "main.park", "--",
                   prog.string(), "park", "1", "1"});
  unsetenv("GOTAP_TEST_ATTACH_DELAY_MS");
  ASSERT_GT(g.pid, 0);
  std::string err = read_until(g.err, "gotap: test: attaching in", 60000);
  ASSERT_NE(err.find("gotap: test: attaching in"), std::string::npos) << err;
  // Planned from latency; execer takes its name.
  fs::copy_file(execer, dir / "new", fs::copy_options::overwrite_existing);
  fs::rename(dir / "new", prog);
  const int st = wait_or_kill(g.pid, 60);
  const std::string out = read_all(g.out);
  err += read_all(g.err);
  close(g.out);
  close(g.err);
  fs::remove_all(dir);
  std::vector<std::string> lines;
  std::istringstream in(err);
  for (std::string l; std::getline(in, l);)
    if (l.rfind("gotap: test: ", 0) != 0) lines.push_back(l);
  ASSERT_TRUE(WIFEXITED(st)) << err;
  EXPECT_EQ(WEXITSTATUS(st), 1) << err;
  ASSERT_EQ(lines.size(), 1u) << err;
  EXPECT_EQ(lines[0].rfind("gotap: the program started (pid ", 0), 0u) << err;
  EXPECT_NE(lines[0].find("is not the file that was planned"), std::string::npos) << err;
  // Neither program ran: execer, given latency's arguments, would have said so on the
  // stderr it shares with gotap (a second line), latency says "done" at its end.
  EXPECT_EQ(out.find("done"), std::string::npos) << out;
}

INSTANTIATE_TEST_SUITE_P(Backends, ExecPlanned, ::testing::Values("ebpf"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gotap::testing
