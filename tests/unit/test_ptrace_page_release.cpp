// Whether a stopped thread may still run code in a range (backends/ptrace/page_release.h),
// on real stopped children of this process: its pc there, a word of its stack there while it
// blocks a signal, and a signal frame on an alternate signal stack whose saved pc is there (a
// signal taken in one of the scratch page's copies returns to it), as Go's handlers run.
#include <sched.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/time.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "backends/ptrace/memory.h"
#include "backends/ptrace/page_release.h"

namespace gotap::ptrace {
namespace {

constexpr uint64_t kMarker = 0x5a5a0128;  // no code or data of this process is there

TEST(PageRelease, WordsInRangeOnTheGrid) {
  uint64_t words[4] = {1, kMarker, 0, 0};
  std::span<const uint8_t> b(reinterpret_cast<const uint8_t*>(words), sizeof words);
  EXPECT_TRUE(has_word_in(b, kMarker, kMarker + 1));
  EXPECT_FALSE(has_word_in(b, kMarker + 1, kMarker + 4096));
  EXPECT_FALSE(has_word_in(b.subspan(0, 15), kMarker, kMarker + 1));  // no whole word there
}

// A child stopped (SIGSTOP, traced) with kMarker in a local of its stack, blocking SIGUSR1
// or nothing.
pid_t stopped_child_with_marker(bool blocking) {
  pid_t c = fork();
  if (c == 0) {
    ::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr);
    if (blocking) {
      sigset_t s;
      sigemptyset(&s);
      sigaddset(&s, SIGUSR1);
      sigprocmask(SIG_BLOCK, &s, nullptr);
    }
    volatile uint64_t frame[8] = {};
    frame[5] = kMarker;
    raise(SIGSTOP);
    _exit(frame[0] == 0 ? 0 : 1);
  }
  int st = 0;
  if (c > 0 && (waitpid(c, &st, 0) != c || !WIFSTOPPED(st))) return -1;
  return c;
}

void end_child(pid_t c) {
  kill(c, SIGKILL);
  ::ptrace(PTRACE_DETACH, c, nullptr, nullptr);
  waitpid(c, nullptr, 0);
}

// A thread that blocks a signal may be in a handler: its stack is searched.
TEST(PageRelease, PcOrAStackWordInTheRange) {
  pid_t c = stopped_child_with_marker(true);
  ASSERT_GT(c, 0);
  TraceeMemory mem(c);
  user_regs_struct r{};
  ASSERT_EQ(::ptrace(PTRACE_GETREGS, c, nullptr, &r), 0);
  EXPECT_TRUE(may_return_into(c, mem, r.rip, r.rip + 1));
  EXPECT_TRUE(may_return_into(c, mem, kMarker, kMarker + 1));
  EXPECT_FALSE(may_return_into(c, mem, kMarker + 8, kMarker + 4096));
  end_child(c);
}

// One that blocks nothing is in no handler: what its stack holds is stale (a Go thread's
// stack reaches into memory where other threads' past signal frames lie).
TEST(PageRelease, NoHandlerNoSearch) {
  pid_t c = stopped_child_with_marker(false);
  ASSERT_GT(c, 0);
  TraceeMemory mem(c);
  user_regs_struct r{};
  ASSERT_EQ(::ptrace(PTRACE_GETREGS, c, nullptr, &r), 0);
  EXPECT_TRUE(may_return_into(c, mem, r.rip, r.rip + 1));
  EXPECT_FALSE(may_return_into(c, mem, kMarker, kMarker + 1));
  end_child(c);
}

// SIGALRM interrupts spin() and its handler, on an alternate stack, stops the child there:
// the child's pc is in the handler's raise(), and the pc it returns to, in spin(), is only
// in the kernel's signal frame on the alternate stack.
volatile uint64_t g_interrupted_pc = 0;
volatile uint64_t g_spins = 0;

__attribute__((noinline)) void spin() {
  for (;;) g_spins = g_spins + 1;
}

void on_alarm(int, siginfo_t*, void* uc) {
  g_interrupted_pc = static_cast<ucontext_t*>(uc)->uc_mcontext.gregs[REG_RIP];
  raise(SIGSTOP);
}

TEST(PageRelease, SignalFrameOnTheAlternateStackReturningIntoTheRange) {
  pid_t c = fork();
  if (c == 0) {
    ::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr);
    static std::vector<char> alt(64 * 1024);
    stack_t ss{};
    ss.ss_sp = alt.data();
    ss.ss_size = alt.size();
    sigaltstack(&ss, nullptr);
    struct sigaction sa {};
    sa.sa_sigaction = on_alarm;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigfillset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, nullptr);
    itimerval it{};
    it.it_value.tv_usec = 20000;
    setitimer(ITIMER_REAL, &it, nullptr);
    spin();
  }
  ASSERT_GT(c, 0);
  int st = 0;
  // The SIGALRM's delivery stop first (passed on), then the handler's SIGSTOP.
  for (;;) {
    ASSERT_EQ(waitpid(c, &st, 0), c);
    ASSERT_TRUE(WIFSTOPPED(st));
    if (WSTOPSIG(st) == SIGSTOP) break;
    ::ptrace(PTRACE_CONT, c, nullptr, reinterpret_cast<void*>(long(WSTOPSIG(st))));
  }
  TraceeMemory mem(c);
  uint64_t pc = 0;
  ASSERT_TRUE(mem.read(reinterpret_cast<uint64_t>(&g_interrupted_pc), &pc, sizeof pc));
  const uint64_t spin_at = reinterpret_cast<uint64_t>(&spin);
  ASSERT_GE(pc, spin_at);
  ASSERT_LT(pc, spin_at + 64);
  user_regs_struct r{};
  ASSERT_EQ(::ptrace(PTRACE_GETREGS, c, nullptr, &r), 0);
  ASSERT_FALSE(r.rip >= spin_at && r.rip < spin_at + 64);  // stopped elsewhere: in raise()
  EXPECT_TRUE(may_return_into(c, mem, spin_at, spin_at + 64));
  end_child(c);
}

// A thread just cloned, stopped before its first instruction, with every signal blocked (as
// Go's newosproc clones) and kMarker in the memory above its new stack: it has run nothing,
// so nothing there is its own; its creator, stopped at the clone's event, is no such child.
int thread_body(void*) {
  for (;;) pause();
}

TEST(PageRelease, ACloneChildThatHasNotRunIsNotSearched) {
  constexpr size_t kStack = 64 * 1024;
  // The new thread's stack, then memory past its top that holds the marker.
  static std::vector<uint64_t> area((kStack + 4096) / 8);
  area[kStack / 8 + 16] = kMarker;
  pid_t c = fork();
  if (c == 0) {
    ::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr);
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, nullptr);
    raise(SIGSTOP);
    clone(thread_body, reinterpret_cast<char*>(area.data()) + kStack,
          CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM,
          nullptr);
    for (;;) pause();
  }
  ASSERT_GT(c, 0);
  int st = 0;
  ASSERT_EQ(waitpid(c, &st, 0), c);
  ASSERT_TRUE(WIFSTOPPED(st));
  ASSERT_EQ(::ptrace(PTRACE_SETOPTIONS, c, nullptr, reinterpret_cast<void*>(PTRACE_O_TRACECLONE)),
            0);
  ASSERT_EQ(::ptrace(PTRACE_CONT, c, nullptr, nullptr), 0);
  // The creator's clone event, then the new thread's first stop (in either order).
  pid_t thread = 0;
  bool creator_seen = false;
  TraceeMemory mem(c);
  while (!creator_seen || thread == 0) {
    const pid_t t = waitpid(-1, &st, __WALL);
    ASSERT_GT(t, 0);
    ASSERT_TRUE(WIFSTOPPED(st));
    if (t == c && (st >> 16) == PTRACE_EVENT_CLONE) {
      user_regs_struct r{};
      ASSERT_EQ(::ptrace(PTRACE_GETREGS, c, nullptr, &r), 0);
      EXPECT_FALSE(at_clone_child_start(r, mem));
      creator_seen = true;
      continue;
    }
    if (t != c) thread = t;
  }
  user_regs_struct r{};
  ASSERT_EQ(::ptrace(PTRACE_GETREGS, thread, nullptr, &r), 0);
  EXPECT_TRUE(at_clone_child_start(r, mem));
  EXPECT_EQ(r.rsp, reinterpret_cast<uint64_t>(area.data()) + kStack - 16);
  // What used to keep the page: the search found the marker above the new stack.
  EXPECT_FALSE(may_return_into(thread, mem, kMarker, kMarker + 1));
  r.orig_rax = ~0ull;  // as after a sigreturn: it may have run
  EXPECT_FALSE(at_clone_child_start(r, mem));
  // The traced thread is reaped first: the leader reports its exit only after it.
  kill(c, SIGKILL);
  waitpid(thread, nullptr, __WALL);
  waitpid(c, nullptr, __WALL);
}

}  // namespace
}  // namespace gotap::ptrace
