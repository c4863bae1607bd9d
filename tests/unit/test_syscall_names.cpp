// The system call names --why gives (core/why/syscall_names.h) against the numbers of this
// system's <asm/unistd_64.h>, the header the table was generated from.
#include <asm/unistd_64.h>

#include <gtest/gtest.h>

#include "core/why/syscall_names.h"

namespace gotap::why {
namespace {

TEST(SyscallNames, MatchTheHeader) {
  EXPECT_EQ(syscall_name(__NR_read), "read");
  EXPECT_EQ(syscall_name(__NR_write), "write");
  EXPECT_EQ(syscall_name(__NR_nanosleep), "nanosleep");
  EXPECT_EQ(syscall_name(__NR_clock_nanosleep), "clock_nanosleep");
  EXPECT_EQ(syscall_name(__NR_futex), "futex");
  EXPECT_EQ(syscall_name(__NR_epoll_pwait), "epoll_pwait");
  EXPECT_EQ(syscall_name(__NR_rt_sigreturn), "rt_sigreturn");
  EXPECT_EQ(syscall_name(__NR_sched_yield), "sched_yield");
}

TEST(SyscallNames, UnknownNumbersAreNamedByNumber) {
  EXPECT_EQ(syscall_name(99999), "syscall_99999");
  EXPECT_EQ(syscall_name(uint64_t(-2)), "syscall_18446744073709551614");
}

// ptrace's calls past the numbers it keeps per thread between two stops.
TEST(SyscallNames, TheCallsLeftUnnamedAreOther) {
  EXPECT_EQ(syscall_name(kOtherSyscalls), "other");
}

}  // namespace
}  // namespace gotap::why
