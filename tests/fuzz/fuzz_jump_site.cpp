// libFuzzer target: where a 5-byte jump can replace a probe site (core/plan/jump_site.h), over
// code bytes as untrusted as any of a traced binary. The first byte picks the site; every RET
// is tried too. A range it accepts must lie in the code, cover whole decoded instructions of
// at least 5 bytes, and a RET site's must end with that RET (`ret imm16` too). The stack check
// analyze_function finds, when there is one, is tried as a site, and the trampoline's code is
// made for every site accepted: a stack check's must end with its jbe.
#include <cstddef>
#include <cstdint>

#include "core/plan/disasm.h"
#include "core/plan/jump_site.h"
#include "core/plan/trampoline_code.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint64_t entry = 0x401000;
  gotap::Bytes code{data + 1, size - 1};
  const gotap::CodeBlocks blocks = gotap::decode_blocks(code, entry, false);
  auto check = [&](const gotap::JumpSite& s, uint64_t ret, unsigned ret_len) {
    if (!s.ok()) return;
    if (s.len < gotap::kJumpLen || s.at < entry || s.at + s.len > entry + code.size())
      __builtin_trap();
    if (blocks.index_of(s.at) < 0) __builtin_trap();
    if (ret && s.at + s.len != ret + ret_len) __builtin_trap();
    const gotap::Bytes original{code.data() + (s.at - entry), s.len};
    auto t = gotap::count_trampoline(entry + 0x100000, s, original, entry + 0x200000, ret != 0);
    if (!t || t->size() != gotap::count_trampoline_size(s, ret != 0)) __builtin_trap();
    auto j = s.branch_len && s.len == s.branch_len ? gotap::branch_site_jump(s, entry + 0x100000)
                                                   : gotap::site_jump(s, entry + 0x100000);
    if (!j || j->size() != s.len) __builtin_trap();
  };
  check(gotap::entry_jump_site(code, entry, blocks, entry + data[0]), 0, 0);
  const gotap::FuncCode fc = gotap::analyze_function(code, entry, blocks);
  if (fc.stack_check && fc.stack_check_jcc) {
    const gotap::JumpSite s =
        gotap::stack_check_jump_site(code, entry, blocks, *fc.stack_check, *fc.stack_check_jcc);
    check(s, 0, 0);
    if (s.ok() && (s.at != *fc.stack_check || !s.branch_len ||
                   s.at + s.len != *fc.stack_check_jcc + s.branch_len))
      __builtin_trap();
    const gotap::JumpSite b =
        gotap::stack_check_branch_site(code, entry, blocks, *fc.stack_check, *fc.stack_check_jcc);
    check(b, 0, 0);
    if (b.ok() && (b.at != *fc.stack_check_jcc || b.len != b.branch_len || b.len < 5))
      __builtin_trap();
    const gotap::JumpSite c =
        gotap::stack_check_short_site(code, entry, blocks, *fc.stack_check, *fc.stack_check_jcc);
    if (c.ok()) {
      if (c.len != 6 || c.at + 4 != *fc.stack_check_jcc) __builtin_trap();
      const gotap::Bytes orig(code.data() + (c.at - entry), 6);
      const uint64_t at = gotap::short_site_trampoline(c, orig);
      auto j = gotap::short_site_jump(c, orig);
      auto t = gotap::count_trampoline(at, c, orig, (at + 0x1000) & ~uint64_t{7}, false);
      if (!j || j->size() != 1 || !t || at < c.at + 0x76000005 || at > c.at + 0x77000004)
        __builtin_trap();
    }
  }
  for (const auto& in : blocks.insns)
    if (in.flags & gotap::CodeInsn::kRet)
      check(gotap::ret_jump_site(code, entry, blocks, in.pc), in.pc, in.len);
  return 0;
}
