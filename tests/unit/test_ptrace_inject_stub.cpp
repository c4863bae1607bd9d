// The self-restoring injection stub (backends/ptrace/inject_stub.h), without a tracee: the
// stub is `syscall`, then one movabs per borrowed register with the thread's own value, then
// an absolute jump to where the thread was; an interrupted system call that the kernel would
// restart is rewound to its `syscall` with its number in rax; the vDSO of this very process
// has room for a stub past its ELF image.
#include <sys/syscall.h>
#include <sys/user.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <string>

#include <Zydis/Zydis.h>
#include <gtest/gtest.h>

#include "backends/ptrace/inject_stub.h"
#include "backends/ptrace/memory.h"

namespace gotap::ptrace {
namespace {

user_regs_struct sample_regs() {
  user_regs_struct r{};
  r.rax = 0x1111;
  r.rdi = 0x2222;
  r.rsi = 0x3333;
  r.rdx = 0x4444;
  r.r10 = 0x5555;
  r.r8 = 0x6666;
  r.r9 = 0x7777;
  r.rcx = 0x8888;
  r.r11 = 0x9999;
  r.rip = 0x401000;
  r.orig_rax = static_cast<unsigned long long>(-1);
  return r;
}

TEST(InjectStub, SyscallThenEveryBorrowedRegisterThenTheWayBack) {
  const user_regs_struct back = sample_regs();
  const auto stub = syscall_stub(back);
  ZydisDecoder dec;
  ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
  ZydisDecodedInstruction in;
  ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
  size_t off = 0;
  ASSERT_TRUE(
      ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, stub.data() + off, stub.size() - off, &in, ops)));
  EXPECT_EQ(in.mnemonic, ZYDIS_MNEMONIC_SYSCALL);
  EXPECT_EQ(off + in.length, kStubSyscallEnd);
  off += in.length;
  std::map<ZydisRegister, uint64_t> set;
  for (int i = 0; i < 9; ++i) {
    ASSERT_TRUE(
        ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, stub.data() + off, stub.size() - off, &in, ops)));
    ASSERT_EQ(in.mnemonic, ZYDIS_MNEMONIC_MOV) << i;
    ASSERT_EQ(ops[1].type, ZYDIS_OPERAND_TYPE_IMMEDIATE) << i;
    set[ops[0].reg.value] = ops[1].imm.value.u;
    off += in.length;
  }
  const std::map<ZydisRegister, uint64_t> want = {
      {ZYDIS_REGISTER_RAX, back.rax}, {ZYDIS_REGISTER_RDI, back.rdi},
      {ZYDIS_REGISTER_RSI, back.rsi}, {ZYDIS_REGISTER_RDX, back.rdx},
      {ZYDIS_REGISTER_R10, back.r10}, {ZYDIS_REGISTER_R8, back.r8},
      {ZYDIS_REGISTER_R9, back.r9},   {ZYDIS_REGISTER_RCX, back.rcx},
      {ZYDIS_REGISTER_R11, back.r11}};
  EXPECT_EQ(set, want);
  // jmp qword [rip+0], the target right after it.
  ASSERT_TRUE(
      ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, stub.data() + off, stub.size() - off, &in, ops)));
  EXPECT_EQ(in.mnemonic, ZYDIS_MNEMONIC_JMP);
  EXPECT_EQ(ops[0].type, ZYDIS_OPERAND_TYPE_MEMORY);
  EXPECT_EQ(ops[0].mem.base, ZYDIS_REGISTER_RIP);
  EXPECT_EQ(ops[0].mem.disp.value, 0);
  uint64_t to = 0;
  std::memcpy(&to, stub.data() + off + in.length, 8);
  EXPECT_EQ(to, back.rip);
  EXPECT_LE(off + in.length + 8, kStubSize);
}

TEST(InjectStub, InterruptedSyscallsResumeAtTheirSyscallAsTheKernelRestartsThem) {
  user_regs_struct r = sample_regs();
  r.orig_rax = SYS_futex;
  for (int64_t err : {-512, -513, -514}) {  // -ERESTARTSYS, -ERESTARTNOINTR, -ERESTARTNOHAND
    r.rax = static_cast<unsigned long long>(err);
    const user_regs_struct b = resume_point(r);
    EXPECT_EQ(b.rip, r.rip - 2) << err;
    EXPECT_EQ(b.rax, uint64_t(SYS_futex)) << err;
    EXPECT_EQ(b.orig_rax, static_cast<unsigned long long>(-1)) << err;
    EXPECT_EQ(b.rdi, r.rdi) << err;
  }
  r.rax = static_cast<unsigned long long>(-516);  // -ERESTART_RESTARTBLOCK
  EXPECT_EQ(resume_point(r).rax, uint64_t(SYS_restart_syscall));
  EXPECT_EQ(resume_point(r).rip, r.rip - 2);
  // A finished syscall (its result in rax) and a thread in user code stay where they are.
  r.rax = 3;
  EXPECT_EQ(resume_point(r).rip, r.rip);
  EXPECT_EQ(resume_point(r).rax, 3u);
  r.orig_rax = static_cast<unsigned long long>(-1);
  r.rax = static_cast<unsigned long long>(-512);
  EXPECT_EQ(resume_point(r).rip, r.rip);
}

TEST(InjectStub, TheVdsoHasRoomPastItsImage) {
  TraceeMemory mem(getpid());
  const uint64_t at = find_stub_area(getpid(), mem);
  ASSERT_NE(at, 0u) << "no room for a stub in this process's vDSO";
  EXPECT_EQ(at % 64, 0u);
  uint8_t b[kStubSize];
  ASSERT_TRUE(mem.read(at, b, sizeof b));
  for (uint8_t x : b) ASSERT_EQ(x, 0);
}

}  // namespace
}  // namespace gotap::ptrace
