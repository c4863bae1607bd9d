// Whose trampolines a region holds (backends/trampoline/owner.h): a gotap that runs, one that
// is gone, and one killed whose parent has not reaped it yet (a zombie), which reads and
// writes nothing any more: its jumps are a killed gotap's, for the next one to take back.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "backends/trampoline/owner.h"
#include "core/sys/proc_status.h"

namespace gotap::trampoline {
namespace {

TEST(TrampolineOwner, AZombieIsNoLongerAnOwner) {
  EXPECT_TRUE(owner_alive(self_owner()));
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    pause();
    _exit(0);
  }
  // The child's owner record, as its header would hold it.
  const auto stat = sys::stat_fields(child);
  ASSERT_GT(stat.size(), 22u);
  const Owner o{static_cast<uint64_t>(child), std::stoull(stat[22])};
  EXPECT_TRUE(owner_alive(o));
  kill(child, SIGKILL);
  // Not reaped: a zombie until waitpid.
  for (int i = 0; i < 200 && sys::status_value(child, 0, "State").value_or("").rfind("Z", 0); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(sys::status_value(child, 0, "State").value_or("").substr(0, 1), "Z");
  EXPECT_FALSE(owner_alive(o));
  waitpid(child, nullptr, 0);
  EXPECT_FALSE(owner_alive(o));
}

}  // namespace
}  // namespace gotap::trampoline
