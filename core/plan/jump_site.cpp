#include "core/plan/jump_site.h"

#include <cstring>
#include <utility>

#include "core/plan/zydis_decoder.h"

namespace gotap {

namespace {

// Why the instruction at pc cannot run in a trampoline ("" when it can). `ret_ok`: the RET
// that ends a RET site's range.
std::string displaceable(Bytes code, uint64_t entry, uint64_t pc, bool ret_ok) {
  ZydisDecodedInstruction in;
  ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
  const uint64_t off = pc - entry;
  if (!ZYAN_SUCCESS(
          ZydisDecoderDecodeFull(zydis_decoder(), code.data() + off, code.size() - off, &in, ops)))
    return "an instruction does not decode";
  switch (in.meta.category) {
    case ZYDIS_CATEGORY_RET:
      if (ret_ok) return "";
      return "a return";
    case ZYDIS_CATEGORY_COND_BR:
    case ZYDIS_CATEGORY_UNCOND_BR:
    case ZYDIS_CATEGORY_CALL:
      return "a jump or a call";
    case ZYDIS_CATEGORY_INTERRUPT:
    case ZYDIS_CATEGORY_SYSCALL:
    case ZYDIS_CATEGORY_SYSTEM:
      return "a trap, an interrupt or a system call";
    default:
      break;
  }
  if (in.mnemonic == ZYDIS_MNEMONIC_UD2 || in.mnemonic == ZYDIS_MNEMONIC_HLT)
    return "a trap, an interrupt or a system call";
  for (unsigned i = 0; i < in.operand_count; ++i) {
    const ZydisDecodedOperand& op = ops[i];
    if (op.type != ZYDIS_OPERAND_TYPE_MEMORY) continue;
    if (op.mem.base == ZYDIS_REGISTER_RIP) return "a RIP-relative operand";
    if (op.mem.type == ZYDIS_MEMOP_TYPE_AGEN) continue;  // LEA computes, reads nothing
    const bool stack = op.mem.base == ZYDIS_REGISTER_RSP || op.mem.base == ZYDIS_REGISTER_RBP;
    const bool plain = op.mem.segment == ZYDIS_REGISTER_SS || op.mem.segment == ZYDIS_REGISTER_DS ||
                       op.mem.segment == ZYDIS_REGISTER_NONE;
    if (!stack || !plain) return "a memory access that can fault (off the stack)";
  }
  return "";
}

JumpSite refuse(uint64_t at, std::string why) {
  JumpSite s;
  s.at = at;
  s.refused = std::move(why);
  return s;
}

// The instructions [first, last] of blocks: whole, one block (only `first` a jump's target),
// each displaceable.
JumpSite cover(Bytes code, uint64_t entry, const CodeBlocks& blocks, int64_t first, int64_t last,
               bool ends_in_ret) {
  const CodeInsn& a = blocks.insns[first];
  const CodeInsn& b = blocks.insns[last];
  const uint64_t len = b.pc + b.len - a.pc;
  if (len < kJumpLen) return refuse(a.pc, "fewer than 5 bytes before the function ends");
  for (int64_t i = first; i <= last; ++i) {
    if (i != first && blocks.insns[i].leader)
      return refuse(a.pc, "a jump lands inside the 5 bytes");
    std::string why = displaceable(code, entry, blocks.insns[i].pc, ends_in_ret && i == last);
    if (!why.empty()) return refuse(a.pc, why);
  }
  JumpSite s;
  s.at = a.pc;
  s.len = static_cast<uint8_t>(len);
  return s;
}

}  // namespace

JumpSite entry_jump_site(Bytes code, uint64_t entry, const CodeBlocks& blocks, uint64_t site) {
  if (!blocks.complete) return refuse(site, "the function did not decode whole");
  const int64_t first = blocks.index_of(site);
  if (first < 0) return refuse(site, "not an instruction's start");
  int64_t last = first;
  uint64_t len = blocks.insns[first].len;
  while (len < kJumpLen && last + 1 < int64_t(blocks.insns.size())) {
    ++last;
    len += blocks.insns[last].len;
  }
  return cover(code, entry, blocks, first, last, false);
}

JumpSite ret_jump_site(Bytes code, uint64_t entry, const CodeBlocks& blocks, uint64_t ret) {
  if (!blocks.complete) return refuse(ret, "the function did not decode whole");
  if (blocks.indirect) return refuse(ret, "a jump table's targets are not known");
  const int64_t last = blocks.index_of(ret);
  if (last < 0) return refuse(ret, "not an instruction's start");
  int64_t first = last;
  uint64_t len = blocks.insns[last].len;
  // Backwards while the RET's own block holds them: a leader ends the walk at itself.
  while (len < kJumpLen && first > 0 && !blocks.insns[first].leader) {
    --first;
    len += blocks.insns[first].len;
  }
  if (len < kJumpLen)
    return refuse(blocks.insns[first].pc, "fewer than 5 bytes in the RET's block");
  return cover(code, entry, blocks, first, last, true);
}

JumpSite stack_check_jump_site(Bytes code, uint64_t entry, const CodeBlocks& blocks, uint64_t cmp,
                               uint64_t jbe) {
  if (!blocks.complete) return refuse(entry, "the function did not decode whole");
  const int64_t k_cmp = blocks.index_of(cmp), last = blocks.index_of(jbe);
  if (k_cmp < 0 || last != k_cmp + 1) return refuse(cmp, "not a stack check");
  ZydisDecodedInstruction in;
  ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
  const uint64_t off = jbe - entry;
  if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(zydis_decoder(), code.data() + off, code.size() - off,
                                           &in, ops)) ||
      in.mnemonic != ZYDIS_MNEMONIC_JBE || ops[0].type != ZYDIS_OPERAND_TYPE_IMMEDIATE ||
      !ops[0].imm.is_relative)
    return refuse(cmp, "the stack check does not end with a relative jbe");
  uint64_t branch_to = 0;
  if (!ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&in, &ops[0], jbe, &branch_to)))
    return refuse(cmp, "the stack check's jbe has no target");
  if (blocks.insns[last].leader) return refuse(cmp, "a jump lands on the stack check's jbe");
  JumpSite s;
  s.at = cmp;
  s.len = static_cast<uint8_t>(jbe + in.length - cmp);
  s.branch_to = branch_to;
  s.branch_len = in.length;
  if (s.len < kJumpLen) return refuse(cmp, "fewer than 5 bytes");
  return s;
}

JumpSite stack_check_branch_site(Bytes code, uint64_t entry, const CodeBlocks& blocks, uint64_t cmp,
                                 uint64_t jbe) {
  JumpSite s = stack_check_jump_site(code, entry, blocks, cmp, jbe);
  if (!s.ok()) return s;
  if (s.branch_len < kJumpLen)
    return refuse(jbe, "a short function: its stack check's jbe is 2 bytes");
  s.at = jbe;
  s.len = s.branch_len;
  return s;
}

JumpSite stack_check_short_site(Bytes code, uint64_t entry, const CodeBlocks& blocks, uint64_t cmp,
                                uint64_t jbe) {
  JumpSite s = stack_check_jump_site(code, entry, blocks, cmp, jbe);
  if (!s.ok()) return s;
  if (s.branch_len != 2 || code[jbe - entry] != kShortJbe) return refuse(jbe, "not a short jbe");
  if (jbe - cmp != kJumpLen - 1) return refuse(cmp, "a compare that is not 4 bytes long");
  return s;
}

namespace {

// The bytes of an `add rsp, N` at b (n of them there): its length and N, or 0.
std::pair<size_t, uint32_t> add_rsp(const uint8_t* b, size_t n) {
  if (n >= 4 && b[0] == 0x48 && b[1] == 0x83 && b[2] == 0xc4 && b[3] < 0x80) return {4, b[3]};
  if (n >= 7 && b[0] == 0x48 && b[1] == 0x81 && b[2] == 0xc4) {
    uint32_t v = 0;
    std::memcpy(&v, b + 3, 4);
    return {7, v};
  }
  return {0, 0};
}

// The site [at, ret]: an epilogue's range, its RET last.
JumpSite range_to_ret(uint64_t at, uint64_t ret) {
  JumpSite s;
  s.at = at;
  s.len = static_cast<uint8_t>(ret + 1 - at);
  return s;
}

// The length of a `mov rbp, [rsp+D]` at b, or 0.
size_t restore_rbp(const uint8_t* b, size_t n) {
  if (n < 4 || b[0] != 0x48 || b[1] != 0x8b || b[3] != 0x24) return 0;
  if (b[2] == 0x2c) return 4;  // mov rbp, [rsp]: the next byte (the add's REX) ends the rel32
  if (b[2] == 0x6c && n >= 5) return 5;
  if (b[2] == 0xac && n >= 8) return 8;
  return 0;
}

// Go 1.17-1.20's epilogue before the RET, ok() or refused with a reason; neither (empty
// refusal) when there is no `add rsp, N` right before the RET.
JumpSite restore_epilogue_site(Bytes code, uint64_t entry, const CodeBlocks& blocks, uint64_t ret) {
  for (const size_t add_len : {size_t{4}, size_t{7}}) {
    if (ret < entry + add_len) continue;
    const uint64_t add = ret - add_len;
    if (add_rsp(code.data() + (add - entry), add_len).first != add_len || blocks.index_of(add) < 0)
      continue;
    for (const size_t mov_len : {size_t{4}, size_t{5}, size_t{8}}) {
      if (add < entry + mov_len) continue;
      const uint64_t mov = add - mov_len;
      const uint8_t* b = code.data() + (mov - entry);
      if (blocks.index_of(mov) < 0 || restore_rbp(b, mov_len) != mov_len) continue;
      return range_to_ret(mov, ret);
    }
    return refuse(add, "no `mov rbp, [rsp+D]` before the RET's `add rsp, N`");
  }
  return JumpSite{};
}

}  // namespace

std::optional<RetEpilogue> ret_epilogue_form(Bytes o) {
  if (o.size() < 6) return std::nullopt;
  // Go 1.21: add rsp, N (or sub rsp, -128); pop rbp.
  if (o[0] == 0x48 && o[1] == 0x83 && o[4] == kPopRbp &&
      ((o[2] == 0xc4 && o[3] < 0x80) || (o[2] == 0xec && o[3] == 0x80)))
    return RetEpilogue{5, 0, false};
  if (o.size() >= 9 && o[0] == 0x48 && o[1] == 0x81 && o[2] == 0xc4 && o[7] == kPopRbp)
    return RetEpilogue{8, 0, true};
  // Go 1.17-1.20: mov rbp, [rsp+D]; add rsp, N.
  const size_t mov = restore_rbp(o.data(), o.size());
  if (!mov) return std::nullopt;
  const auto [add, n] = add_rsp(o.data() + mov, o.size() - mov);
  if (!add) return std::nullopt;
  return RetEpilogue{static_cast<uint8_t>(mov), n, true};
}

JumpSite ret_epilogue_site(Bytes code, uint64_t entry, const CodeBlocks& blocks, uint64_t ret) {
  if (!blocks.complete) return refuse(ret, "the function did not decode whole");
  if (ret >= entry + code.size()) return refuse(ret, "no epilogue before the RET");
  // Go 1.26 may put a one-byte NOP between the pop and the RET.
  const bool nop =
      ret >= entry + 6 && code[ret - 1 - entry] == 0x90 && blocks.index_of(ret - 1) >= 0;
  const uint64_t pop = ret - 1 - (nop ? 1 : 0);
  if (pop < entry + 4) return refuse(ret, "no epilogue before the RET");
  const uint64_t at = pop - 4;
  const uint8_t* b = code.data() + (at - entry);
  if (blocks.index_of(pop) < 0 || b[4] != kPopRbp) {
    // Go before 1.21: mov rbp, [rsp+D]; add rsp, N; ret.
    const JumpSite old = restore_epilogue_site(code, entry, blocks, ret);
    if (old.ok() || !old.refused.empty()) return old;
    return refuse(at, "a RET with no `pop rbp` or `mov rbp, [rsp+D]` before it (no frame)");
  }
  // add rsp, imm32 (REX.W 81 /0, ModRM C4): a frame of 128 bytes or more. The jump's
  // displacement is 81 C4 and the frame's two low bytes: under 32 KiB, a place 8 MiB to 2
  // GiB past the site; else one below it, which lay_out_timed keeps only where it can be.
  if (pop >= entry + 7 && blocks.index_of(pop - 7) >= 0) {
    const auto wide = ret_epilogue_form(Bytes(code.data() + (pop - 7 - entry), ret + 8 - pop));
    if (wide && wide->runs == 8) {
      if (code[ret - entry] != 0xc3) return refuse(pop - 7, "no RET after the `pop rbp`");
      return range_to_ret(pop - 7, ret);
    }
  }
  if (blocks.index_of(at) < 0 || blocks.index_of(ret) < 0)
    return refuse(at, "no `add rsp, N` before the RET's `pop rbp`");
  // add rsp, imm8 (REX.W 83 /0, ModRM C4) with a positive imm8, or a frame of exactly 128
  // bytes as Go's assembler writes it: sub rsp, -128 (83 /5, ModRM EC, imm8 0x80), whose
  // place is 0x5D80EC88 past the site, just after the others'.
  const auto form = ret_epilogue_form(Bytes(b, ret + 1 - at));
  if (!form || form->runs != 5 || code[ret - entry] != 0xc3)
    return refuse(at, "no `add rsp, N` before the RET's `pop rbp`");
  return range_to_ret(at, ret);
}

}  // namespace gotap
