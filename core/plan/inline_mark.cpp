#include "core/plan/inline_mark.h"

#include <Zydis/Zydis.h>

#include <algorithm>

namespace gotap {

int64_t CodeBlocks::index_of(uint64_t pc) const {
  auto it = std::lower_bound(insns.begin(), insns.end(), pc,
                             [](const CodeInsn& i, uint64_t v) { return i.pc < v; });
  if (it == insns.end() || it->pc != pc) return -1;
  return it - insns.begin();
}

CodeBlocks decode_blocks(Bytes code, uint64_t entry) {
  ZydisDecoder dec;
  ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
  CodeBlocks out;
  std::vector<uint64_t> targets;
  bool next_leads = true, after_call = false;
  size_t off = 0;
  while (off < code.size()) {
    ZydisDecodedInstruction in;
    ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
    if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, code.data() + off, code.size() - off, &in, ops)))
      return out;  // incomplete: callers trust nothing about blocks then
    CodeInsn ci;
    ci.pc = entry + off;
    ci.len = in.length;
    ci.leader = next_leads;
    // A NOP right after a CALL is the one Go puts after calls that never return (so their
    // return address stays in the function), not an inline mark.
    ci.nop1 = in.length == 1 && code[off] == 0x90 && !after_call;
    after_call = in.meta.category == ZYDIS_CATEGORY_CALL;
    out.insns.push_back(ci);
    next_leads = false;
    switch (in.meta.category) {
      case ZYDIS_CATEGORY_COND_BR:
      case ZYDIS_CATEGORY_UNCOND_BR: {
        next_leads = true;
        const auto& op = ops[0];
        ZyanU64 t = 0;
        if (in.operand_count_visible >= 1 && op.type == ZYDIS_OPERAND_TYPE_IMMEDIATE &&
            ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&in, &op, ci.pc, &t)))
          targets.push_back(t);
        else
          out.indirect = true;
        break;
      }
      case ZYDIS_CATEGORY_RET:
      case ZYDIS_CATEGORY_INTERRUPT:
        next_leads = true;
        break;
      default:
        if (in.mnemonic == ZYDIS_MNEMONIC_UD2) next_leads = true;
        break;
    }
    off += in.length;
  }
  for (uint64_t t : targets) {
    int64_t k = out.index_of(t);
    if (k >= 0) out.insns[k].leader = true;
  }
  out.complete = true;
  return out;
}

InlineMarkChoice choose_inline_site(const CodeBlocks& code, const InlineFacts& facts, int32_t node,
                                    uint64_t mark) {
  InlineMarkChoice c;
  const int64_t i = code.index_of(mark);
  if (i < 0) {
    c.reason = "its call-site mark is not an instruction of the function";
    return c;
  }
  // Go's compiler emits one NOP per inlined call in the call's own basic block, and keeps it
  // there (it carries a memory argument, so no pass moves it); it stays a NOP only when no
  // other instruction of the call's line could stand in for it.
  if (code.insns[i].nop1) {
    c.ok = true;
    c.pc = mark;
    return c;
  }
  // Otherwise the compiler reused the first instruction, in layout order, of the call's
  // line and frame, which may be in another block than the call (scheduled ahead of a
  // branch, or at the end of a condition inside the body). It is taken only when the whole
  // inlined body and all of the call line's code are in the mark's one basic block: then
  // the block runs once each time the body does.
  if (!code.complete || code.indirect) {
    c.reason =
        "its call-site mark is an instruction of the caller, and the function's jump "
        "targets are not all known";
    return c;
  }
  int64_t b0 = i, b1 = i + 1;
  while (b0 > 0 && !code.insns[b0].leader) --b0;
  const int64_t n = static_cast<int64_t>(code.insns.size());
  while (b1 < n && !code.insns[b1].leader) ++b1;
  const int32_t frame = facts.node_at(mark);
  bool body_here = false;
  for (int64_t j = 0; j < n; ++j) {
    const uint64_t pc = code.insns[j].pc;
    const bool here = j >= b0 && j < b1;
    if (facts.within(facts.node_at(pc), node)) {
      if (!here) {
        c.reason = "its inlined body is not all in its call-site mark's basic block";
        return c;
      }
      body_here = true;
    } else if (!here && facts.node_at(pc) == frame && facts.same_line(pc, mark)) {
      c.reason = "the call's line has code in more than one basic block";
      return c;
    }
  }
  if (body_here) {
    c.ok = true;
    c.pc = mark;
    return c;
  }
  c.reason = "no instruction of the inlined body is in its call-site mark's basic block";
  return c;
}

}  // namespace gotap
