// Process::attach (backends/ptrace/process.h) on a process whose main thread has exited while
// another thread runs on: ptrace cannot seize a zombie thread (EPERM), which gotap once
// reported as "Operation not permitted", as if it lacked a privilege. It says what it found,
// and leaves the other thread as it was, untraced and running. The same EPERM meets an attach
// that races the process's exit, or an exec by another thread (the main thread is a zombie
// until the exec'ing thread takes its place: Process::attach waits that out and attaches to
// the new image, which the tracer then refuses as an exec).
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "backends/ptrace/process.h"

namespace gotap::ptrace {
namespace {

// Field `key` of /proc/PID/task/TID/status ("" when unreadable).
std::string task_status(pid_t pid, pid_t tid, const std::string& key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key + ":", 0) == 0) {
      const auto v = line.find_first_not_of(" \t", key.size() + 1);
      return v == std::string::npos ? "" : line.substr(v);
    }
  return "";
}

void* sleep_then_exit(void*) {
  sleep(30);
  _exit(0);
}

TEST(ProcessAttach, AMainThreadThatExitedIsSaidAsSuch) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace attach)";
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  if (child == 0) {
    pthread_t t;
    if (pthread_create(&t, nullptr, sleep_then_exit, nullptr) != 0) _exit(1);
    if (write(ready[1], "x", 1) != 1) _exit(1);
    // The main thread alone ends (exit(2), not exit_group): pthread_exit would unwind
    // through the test's frames.
    syscall(SYS_exit, 0);
  }
  ASSERT_GT(child, 0);
  close(ready[1]);
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  close(ready[0]);
  // Until the main thread is a zombie.
  for (int i = 0; i < 500 && task_status(child, child, "State").rfind("Z", 0) != 0; ++i)
    usleep(2000);
  ASSERT_EQ(task_status(child, child, "State").rfind("Z", 0), 0u);

  auto p = Process::attach(child);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().what(), "cannot attach to pid " + std::to_string(child) +
                                  ": its main thread has exited (the process is exiting, or "
                                  "its main thread ended alone); nothing was written");
  // Its other thread: running, and traced by no one.
  pid_t other = 0;
  for (const auto& e :
       std::filesystem::directory_iterator("/proc/" + std::to_string(child) + "/task"))
    if (const pid_t t = std::stoi(e.path().filename().string()); t != child) other = t;
  ASSERT_NE(other, 0) << "the other thread";
  EXPECT_EQ(task_status(child, other, "TracerPid"), "0");
  EXPECT_EQ(task_status(child, other, "State").rfind("S", 0), 0u)
      << task_status(child, other, "State");
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
}

}  // namespace
}  // namespace gotap::ptrace
