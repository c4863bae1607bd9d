// core/sys/image_lock.h: one holder at a time per file, whatever path names it; a wait ends at
// its deadline or at a stop request, with one line; the lock goes with its holder.
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "core/sys/image_lock.h"

namespace gotap::sys {
namespace {

using Clock = std::chrono::steady_clock;

TEST(ImageLock, OneHolderPerFileWhateverPathNamesIt) {
  const std::string self = "/proc/self/exe";
  auto first = ImageLock::take(self, "this test", 1000);
  ASSERT_TRUE(first.ok()) << first.error().what();
  // Another process, through another path to the same inode, waits; then gives up.
  const pid_t child = fork();
  if (child == 0) {
    const std::string other = "/proc/" + std::to_string(getppid()) + "/exe";
    auto second = ImageLock::take(other, "the binary", 200);
    if (second.ok()) _exit(1);
    const std::string why = second.error().what();
    _exit(why.find("the binary stayed locked") == 0 && why.find('\n') == std::string::npos ? 0 : 2);
  }
  int st = 0;
  ASSERT_EQ(waitpid(child, &st, 0), child);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  // Let go, it is the next one's.
  first->release();
  const pid_t next = fork();
  if (next == 0) _exit(ImageLock::take("/proc/self/exe", "x", 200).ok() ? 0 : 1);
  ASSERT_EQ(waitpid(next, &st, 0), next);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
}

TEST(ImageLock, AStopRequestEndsTheWait) {
  // Held by a process of its own (flock is per open file, so a second open in this process
  // would wait as well, but the holder must outlive nothing here).
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t holder = fork();
  if (holder == 0) {
    auto l = ImageLock::take("/proc/self/exe", "x", 1000);
    char c = l.ok() ? 'y' : 'n';
    (void)!write(ready[1], &c, 1);
    pause();
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  std::atomic<bool> stop{false};
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    stop = true;
  });
  const auto t0 = Clock::now();
  auto r = ImageLock::take("/proc/self/exe", "x", 30000, &stop);
  stopper.join();
  EXPECT_FALSE(r.ok());
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));
  if (!r.ok()) {
    EXPECT_NE(r.error().what().find("stopped while waiting"), std::string::npos);
  }
  // The holder dies: the kernel lets go of its lock.
  kill(holder, SIGKILL);
  waitpid(holder, nullptr, 0);
  EXPECT_TRUE(ImageLock::take("/proc/self/exe", "x", 1000).ok());
  close(ready[0]);
  close(ready[1]);
}

}  // namespace
}  // namespace gotap::sys
