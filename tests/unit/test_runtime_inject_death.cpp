// gotap dies while it injects a system call (docs/design.md, "When gotap dies"). Attached by
// pid to Debian's stripped rclone, which serves loopback requests from two clients without
// pause, gotap kills itself (GOTAP_TEST_DIE_AT=PHASE:N, SIGKILL) right after the Nth step of
// the system calls it runs in a thread of the program: at attach (mapping the scratch page,
// making the safety net the SIGTRAP handler) and at detach (putting the program's handler
// back), for every N until the injections of that phase have no Nth step. After every death
// the server answers right pages, and goes on answering; no request of the load fails; its
// code equals its file's. The ptrace backend injects system calls (the scratch page, the
// safety net), and so does the trampoline backend (its pages: mmap, madvise, munmap), whose
// jumps are written after its attach's injections and taken back before its detach's: both
// are run.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/unit/fixtures.h"
#include "tests/unit/loopback.h"

namespace gotap::testing {
namespace {

using Clock = std::chrono::steady_clock;

class InjectionDeath : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace attach)";
    if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
    if (auto why = RcloneServer::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
    std::string err = srv_.start("gotap-inject-death");
    ASSERT_TRUE(err.empty()) << err;
    for (int c = 0; c < 2; ++c)
      load_.emplace_back([this] {
        while (!stop_load_.load()) (srv_.serves_page() ? load_ok_ : load_failed_)++;
      });
  }
  void TearDown() override {
    stop_load_.store(true);
    for (auto& t : load_) t.join();
    srv_.stop();
  }

  // One trace that dies at step `n` of `phase`'s injections. False when it did not die there:
  // that phase has fewer steps, and the trace ended normally.
  bool trial(const std::string& phase, int n) {
    const std::string die_at = phase + ":" + std::to_string(n);
    setenv("GOTAP_TEST_DIE_AT", die_at.c_str(), 1);
    Child tap = spawn({gotap_binary(), "trace", "--backend", GetParam(), "--json", "-p",
                       std::to_string(srv_.pid()), "net/http.serverHandler.ServeHTTP",
                       "net/http.(*response).finishRequest"});
    unsetenv("GOTAP_TEST_DIE_AT");
    EXPECT_GT(tap.pid, 0);
    if (tap.pid <= 0) return false;
    // The output is drained until gotap exits: a reader that stops reading would stop a
    // ptrace trace, and the server with it.
    std::thread drain([fd = tap.out] { read_all(fd); });
    std::string err = read_until(tap.err, "Tracing ", 60000);
    const bool tracing = err.find("Tracing ") != std::string::npos;
    if (phase == "detach" && tracing) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // events flow
      kill(tap.pid, SIGINT);
    }
    if (phase == "attach" && tracing) kill(tap.pid, SIGINT);  // no Nth step at attach
    int st = 0;
    pid_t got = 0;
    for (auto end = Clock::now() + std::chrono::seconds(30); got == 0 && Clock::now() < end;) {
      got = waitpid(tap.pid, &st, WNOHANG);
      if (got == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (got == 0) {
      ADD_FAILURE() << die_at << ": gotap did not end within 30 s";
      kill(tap.pid, SIGKILL);
      waitpid(tap.pid, &st, 0);
    }
    drain.join();
    err += read_all(tap.err);
    close(tap.out);
    close(tap.err);
    const bool died = WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
    if (!died) {
      EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << die_at << ": status " << st << "\n"
                                                         << err;
    }
    // The server answers, and goes on answering; its code is as in its file.
    int wst = 0;
    if (waitpid(srv_.pid(), &wst, WNOHANG) == srv_.pid()) {
      ADD_FAILURE() << "the server died at " << die_at << " (status " << wst << "):\n"
                    << srv_.output();
      return false;
    }
    int ok = 0, failed = 0;
    for (auto end = Clock::now() + std::chrono::milliseconds(300); Clock::now() < end;)
      (srv_.serves_page() ? ok : failed)++;
    EXPECT_EQ(failed, 0) << die_at;
    EXPECT_GT(ok, 0) << die_at;
    const TextCompare text = compare_text(srv_.pid());
    EXPECT_GT(text.bytes, 0u) << die_at;
    EXPECT_EQ(text.differing, 0u) << die_at << ": " << text.first;
    return died;
  }

  // Step 1, 2, ... of `phase`, until gotap no longer dies in it (the phase has no such step)
  // or `max_steps`; at least `min_steps` of them, so that a hook that never fires does not
  // pass for a window that is closed. The attach's steps grow from trial to trial: a scratch
  // page each killed gotap left takes a place the next one tries first.
  void every_step(const std::string& phase, int min_steps, int max_steps) {
    int n = 1;
    for (; n <= max_steps; ++n) {
      SCOPED_TRACE(phase + " step " + std::to_string(n));
      const bool died = trial(phase, n);
      if (!died || HasFatalFailure() || kill(srv_.pid(), 0) != 0) break;  // reaped when dead
    }
    std::printf("gotap died at each of %d steps of the %s injections\n", n - 1, phase.c_str());
    EXPECT_GT(n, min_steps) << "gotap died at only " << n - 1 << " steps of the " << phase
                            << " injections";
    EXPECT_EQ(load_failed_.load(), 0) << load_ok_.load() << " requests served";
    EXPECT_GT(load_ok_.load(), 0);
  }

  RcloneServer srv_;
  std::vector<std::thread> load_;
  std::atomic<bool> stop_load_{false};
  std::atomic<int> load_ok_{0}, load_failed_{0};
};

TEST_P(InjectionDeath, AtEveryStepOfAttach) {
  // ptrace: mapping the scratch page and the data page, reading and setting the handler: 4
  // syscalls. trampoline: mapping its regions and faulting in the ring's pages.
  if (GetParam() == "ptrace")
    every_step("attach", 32, 40);
  else
    every_step("attach", 12, 60);
}

TEST_P(InjectionDeath, AtEveryStepOfDetach) {
  // ptrace: reading and setting the handler: 2 syscalls. trampoline: unmapping its regions.
  if (GetParam() == "ptrace")
    every_step("detach", 16, 40);
  else
    every_step("detach", 12, 60);
}

INSTANTIATE_TEST_SUITE_P(Backends, InjectionDeath, ::testing::Values("ptrace", "trampoline"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gotap::testing
