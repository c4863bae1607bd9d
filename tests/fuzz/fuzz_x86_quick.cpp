// libFuzzer target: quick_decode, the table decoder of planning's hot loop, against Zydis on
// the same bytes. Wherever it answers, Zydis must decode the same length and control flow
// (the code bytes of a traced binary are untrusted; a wrong length would put a probe inside
// an instruction).
#include <Zydis/Zydis.h>

#include <cstddef>
#include <cstdint>

#include "core/plan/x86_quick.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ZydisDecoder dec = [] {
    ZydisDecoder d;
    ZydisDecoderInit(&d, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    return d;
  }();
  // Every offset of the input, so that one input is many instructions.
  for (size_t off = 0; off < size && off < 64; ++off) {
    gotap::QuickInsn q;
    if (!gotap::quick_decode(data + off, size - off, q)) continue;
    ZydisDecodedInstruction in;
    ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
    if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, data + off, size - off, &in, ops)))
      __builtin_trap();
    if (in.length != q.len) __builtin_trap();
    const bool imm = in.operand_count_visible >= 1 && ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE;
    const bool branch = in.meta.category == ZYDIS_CATEGORY_COND_BR ||
                        in.meta.category == ZYDIS_CATEGORY_UNCOND_BR ||
                        in.meta.category == ZYDIS_CATEGORY_CALL;
    switch (q.flow) {
      case gotap::QuickInsn::kPlain:
        if (branch || in.meta.category == ZYDIS_CATEGORY_RET ||
            in.meta.category == ZYDIS_CATEGORY_INTERRUPT || in.mnemonic == ZYDIS_MNEMONIC_UD2)
          __builtin_trap();
        break;
      case gotap::QuickInsn::kRet:
        if (in.mnemonic != ZYDIS_MNEMONIC_RET) __builtin_trap();
        break;
      case gotap::QuickInsn::kCall:
        if (in.meta.category != ZYDIS_CATEGORY_CALL) __builtin_trap();
        if (imm && ops[0].imm.value.s != q.rel) __builtin_trap();
        break;
      case gotap::QuickInsn::kJmp:
        if (in.mnemonic != ZYDIS_MNEMONIC_JMP || !imm || ops[0].imm.value.s != q.rel)
          __builtin_trap();
        break;
      case gotap::QuickInsn::kJcc:
        if (in.meta.category != ZYDIS_CATEGORY_COND_BR || !imm || ops[0].imm.value.s != q.rel)
          __builtin_trap();
        break;
      case gotap::QuickInsn::kJmpIndirect:
        if (in.mnemonic != ZYDIS_MNEMONIC_JMP || imm) __builtin_trap();
        break;
      case gotap::QuickInsn::kInt3:
        if (in.mnemonic != ZYDIS_MNEMONIC_INT3) __builtin_trap();
        break;
      case gotap::QuickInsn::kUd2:
        if (in.mnemonic != ZYDIS_MNEMONIC_UD2) __builtin_trap();
        break;
    }
  }
  return 0;
}
