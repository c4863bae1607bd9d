#include "core/plan/disasm.h"

#include <Zydis/Zydis.h>

#include <algorithm>

#include "core/plan/zydis_decoder.h"

namespace gotap {

namespace {

// How far into a function the stack-check CMP may sit: ABIInternal code starts with it; ABI0
// code first loads g from TLS (one instruction, two for PIE's initial-exec TLS); huge frames
// compute SP-N first (`mov r12,rsp; sub r12,N; jb`).
constexpr int kStackCheckWindow = 6;
// The morestack path is a handful of spills, the call, reloads and the jump back.
constexpr int kMorestackWindow = 64;

struct Insn {
  ZydisDecodedInstruction in;
  ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
  uint64_t addr = 0;
};

// Decodes the instruction at addr (inside code starting at base), with operands.
bool decode_full(Bytes code, uint64_t base, uint64_t addr, Insn& out) {
  if (addr < base || addr - base >= code.size()) return false;
  uint64_t off = addr - base;
  out.addr = addr;
  return ZYAN_SUCCESS(ZydisDecoderDecodeFull(zydis_decoder(), code.data() + off, code.size() - off,
                                             &out.in, out.ops));
}

bool is_reg(const ZydisDecodedOperand& op) {
  return op.type == ZYDIS_OPERAND_TYPE_REGISTER;
}
bool is_mem(const ZydisDecodedOperand& op) {
  return op.type == ZYDIS_OPERAND_TYPE_MEMORY && op.mem.type == ZYDIS_MEMOP_TYPE_MEM;
}

// `cmp reg, [g+0x10]` (either operand order): g.stackguard0 is at offset 16 in every release;
// `//go:systemstack` functions compare with g.stackguard1 at 0x18 instead.
bool is_stack_check_cmp(const Insn& i) {
  if (i.in.mnemonic != ZYDIS_MNEMONIC_CMP || i.in.operand_count_visible != 2) return false;
  const auto& a = i.ops[0];
  const auto& b = i.ops[1];
  auto guard = [](const ZydisDecodedOperand& m) {
    return is_mem(m) && m.mem.base != ZYDIS_REGISTER_NONE && m.mem.base != ZYDIS_REGISTER_RIP &&
           m.mem.index == ZYDIS_REGISTER_NONE &&
           (m.mem.disp.value == 0x10 || m.mem.disp.value == 0x18) &&
           m.mem.segment != ZYDIS_REGISTER_FS && m.size == 64;
  };
  auto sp_like = [](const ZydisDecodedOperand& r) {
    return is_reg(r) && ZydisRegisterGetWidth(ZYDIS_MACHINE_MODE_LONG_64, r.reg.value) == 64;
  };
  return (sp_like(a) && guard(b)) || (guard(a) && sp_like(b));
}

bool is_jbe(const Insn& i) {
  return i.in.mnemonic == ZYDIS_MNEMONIC_JBE;
}

bool is_push_rbp(const Insn& i) {
  return i.in.mnemonic == ZYDIS_MNEMONIC_PUSH && i.in.operand_count_visible == 1 &&
         is_reg(i.ops[0]) && i.ops[0].reg.value == ZYDIS_REGISTER_RBP;
}

std::optional<uint64_t> branch_target(const Insn& i) {
  if (i.in.operand_count_visible < 1) return std::nullopt;
  const auto& op = i.ops[0];
  if (op.type != ZYDIS_OPERAND_TYPE_IMMEDIATE) return std::nullopt;
  ZyanU64 target = 0;
  if (!ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&i.in, &op, i.addr, &target))) return std::nullopt;
  return target;
}

// ABIInternal argument register -> (integer?, index), for spills of the morestack path.
std::optional<LocPiece> arg_register(ZydisRegister r) {
  LocPiece p;
  if (r >= ZYDIS_REGISTER_XMM0 && r <= ZYDIS_REGISTER_XMM14) {
    p.kind = LocPiece::FloatReg;
    p.reg = static_cast<uint8_t>(r - ZYDIS_REGISTER_XMM0);
    return p;
  }
  static const ZydisRegister kInt[kNumIntRegs] = {
      ZYDIS_REGISTER_RAX, ZYDIS_REGISTER_RBX, ZYDIS_REGISTER_RCX,
      ZYDIS_REGISTER_RDI, ZYDIS_REGISTER_RSI, ZYDIS_REGISTER_R8,
      ZYDIS_REGISTER_R9,  ZYDIS_REGISTER_R10, ZYDIS_REGISTER_R11};
  ZydisRegister big = ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, r);
  for (int k = 0; k < kNumIntRegs; ++k) {
    if (kInt[k] == big) {
      p.kind = LocPiece::IntReg;
      p.reg = static_cast<uint8_t>(k);
      return p;
    }
  }
  return std::nullopt;
}

bool is_spill_store(ZydisMnemonic m) {
  switch (m) {
    case ZYDIS_MNEMONIC_MOV:
    case ZYDIS_MNEMONIC_MOVQ:
    case ZYDIS_MNEMONIC_MOVD:
    case ZYDIS_MNEMONIC_MOVSD:
    case ZYDIS_MNEMONIC_MOVSS:
    case ZYDIS_MNEMONIC_MOVUPS:
    case ZYDIS_MNEMONIC_MOVAPS:
    case ZYDIS_MNEMONIC_MOVUPD:
    case ZYDIS_MNEMONIC_MOVDQU:
      return true;
    default:
      return false;
  }
}

// The block the stack check jumps to: `mov [rsp+off], reg`... then `call runtime.morestack*`.
// No frame is allocated yet, so RSP is the entry RSP and `off` is relative to it.
void analyze_morestack_path(Bytes code, uint64_t entry, uint64_t target, FuncCode& fc) {
  std::vector<RegSpill>& out = fc.morestack_spills;
  uint64_t pc = target;
  for (int n = 0; n < kMorestackWindow; ++n) {
    Insn i;
    if (!decode_full(code, entry, pc, i)) break;
    if (i.in.mnemonic == ZYDIS_MNEMONIC_CALL) {
      fc.morestack_call = pc;
      break;
    }
    if (is_spill_store(i.in.mnemonic) && i.in.operand_count_visible == 2 && is_mem(i.ops[0]) &&
        is_reg(i.ops[1]) && i.ops[0].mem.base == ZYDIS_REGISTER_RSP &&
        i.ops[0].mem.index == ZYDIS_REGISTER_NONE) {
      if (auto reg = arg_register(i.ops[1].reg.value)) {
        reg->size = i.ops[0].size / 8;
        out.push_back(RegSpill{*reg, i.ops[0].mem.disp.value});
      }
    } else if (i.in.meta.branch_type != ZYDIS_BRANCH_TYPE_NONE) {
      break;  // not the shape we know
    }
    pc += i.in.length;
  }
}

void analyze_prologue(Bytes code, uint64_t entry, FuncCode& fc) {
  uint64_t pc = entry;
  Insn i;
  for (int n = 0; n < kStackCheckWindow; ++n) {
    if (!decode_full(code, entry, pc, i)) return;
    if (n == 0 && is_push_rbp(i)) {  // NOSPLIT function with a frame
      fc.push_rbp = pc;
      return;
    }
    if (i.in.meta.branch_type != ZYDIS_BRANCH_TYPE_NONE &&
        i.in.mnemonic != ZYDIS_MNEMONIC_JB) {  // huge frames: `jb` on SP-N underflow first
      return;
    }
    if (is_stack_check_cmp(i)) break;
    pc += i.in.length;
  }
  if (!is_stack_check_cmp(i)) return;
  uint64_t cmp = pc;
  pc += i.in.length;
  if (!decode_full(code, entry, pc, i) || !is_jbe(i)) return;
  fc.stack_check = cmp;
  fc.stack_check_jcc = pc;
  if (auto target = branch_target(i)) analyze_morestack_path(code, entry, *target, fc);
  pc += i.in.length;
  if (decode_full(code, entry, pc, i) && is_push_rbp(i)) fc.push_rbp = pc;
}

}  // namespace

FuncCode analyze_function(Bytes code, uint64_t entry) {
  return analyze_function(code, entry, decode_blocks(code, entry, false));
}

FuncCode analyze_function(Bytes code, uint64_t entry, const CodeBlocks& decoded) {
  FuncCode fc;
  const uint64_t end = entry + code.size();
  analyze_prologue(code, entry, fc);
  for (const CodeInsn& in : decoded.insns) {
    if (in.flags & CodeInsn::kRet) fc.rets.push_back(in.pc);
    if ((in.flags & CodeInsn::kJmpDirect) && (in.target < entry || in.target >= end))
      fc.tail_jumps.push_back(in.pc);
    if (in.flags & CodeInsn::kJmpIndirect) fc.indirect_jumps.push_back(in.pc);
  }
  // Decoding stopped there, so RETs after it are missing.
  if (!decoded.complete) {
    fc.decode_error = true;
    fc.decode_error_at = decoded.error_at;
  }
  return fc;
}

std::optional<int64_t> fs_load_offset(Bytes code) {
  uint64_t pc = 0;
  Insn i;
  for (int n = 0; n < 4 && decode_full(code, 0, pc, i); ++n) {
    if (i.in.mnemonic == ZYDIS_MNEMONIC_MOV && i.in.operand_count_visible == 2 &&
        is_reg(i.ops[0]) && is_mem(i.ops[1]) && i.ops[1].mem.segment == ZYDIS_REGISTER_FS &&
        i.ops[1].mem.base == ZYDIS_REGISTER_NONE && i.ops[1].mem.index == ZYDIS_REGISTER_NONE) {
      return i.ops[1].mem.disp.value;
    }
    pc += i.in.length;
  }
  return std::nullopt;
}

unsigned instruction_length(Bytes code, uint64_t addr) {
  (void)addr;  // x86 lengths do not depend on the address
  ZydisDecodedInstruction in;
  if (code.empty() || !ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(zydis_decoder(), nullptr,
                                                                  code.data(), code.size(), &in)))
    return 0;
  return in.length;
}

InsnKind instruction_kind(Bytes code) {
  InsnKind k;
  ZydisDecodedInstruction in;
  if (code.empty() || !ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(zydis_decoder(), nullptr,
                                                                  code.data(), code.size(), &in)))
    return k;
  k.len = in.length;
  k.ret = in.mnemonic == ZYDIS_MNEMONIC_RET;
  k.jmp = in.mnemonic == ZYDIS_MNEMONIC_JMP;
  k.jcc = in.meta.category == ZYDIS_CATEGORY_COND_BR;
  k.call = in.meta.category == ZYDIS_CATEGORY_CALL;
  return k;
}

const ZydisDecoder* zydis_decoder() {
  static const ZydisDecoder d = [] {
    ZydisDecoder z;
    ZydisDecoderInit(&z, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    return z;
  }();
  return &d;
}

}  // namespace gotap
