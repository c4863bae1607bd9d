// libFuzzer target: where a 5-byte jump can replace a probe site (core/plan/jump_site.h), over
// code bytes as untrusted as any of a traced binary. The first byte picks the site; every RET
// is tried too. A range it accepts must lie in the code, cover whole decoded instructions of
// at least 5 bytes, and a RET site's must end with that RET (`ret imm16` too).
#include <cstddef>
#include <cstdint>

#include "core/plan/jump_site.h"

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
  };
  check(gotap::entry_jump_site(code, entry, blocks, entry + data[0]), 0, 0);
  for (const auto& in : blocks.insns)
    if (in.flags & gotap::CodeInsn::kRet)
      check(gotap::ret_jump_site(code, entry, blocks, in.pc), in.pc, in.len);
  return 0;
}
