#include "core/plan/x86_quick.h"

#include <array>
#include <cstring>

namespace gotap {

namespace {

// How an opcode's instruction goes on after the opcode byte.
enum Form : uint8_t {
  kUnknown,  // left to Zydis
  kOp,       // nothing more
  kOpIb,     // imm8
  kOpIz,     // imm16 with 0x66, else imm32
  kOpIv,     // MOV r, imm: imm64 with REX.W, imm16 with 0x66, else imm32
  kM,        // ModRM (SIB, displacement)
  kMIb,      // ModRM, imm8
  kMIz,      // ModRM, imm16 with 0x66, else imm32
  kSpecial,  // a branch, or a group whose form depends on ModRM.reg (below)
};

// The mandatory prefixes an SSE/0F opcode is known with, as Zydis decodes them.
enum Prefix : uint8_t { kNone = 1, k66 = 2, kF3 = 4, kF2 = 8, kAny = 15 };

struct TwoByte {
  Form form = kUnknown;
  uint8_t prefixes = 0;
};

constexpr std::array<Form, 256> one_byte_forms() {
  std::array<Form, 256> t{};
  // The eight ALU rows: r/m,r; r,r/m (byte and full size); AL,imm8; eAX,imm.
  for (int row = 0; row < 8; ++row) {
    const int b = row * 8;
    t[b + 0] = t[b + 1] = t[b + 2] = t[b + 3] = kM;
    t[b + 4] = kOpIb;
    t[b + 5] = kOpIz;
  }
  for (int b = 0x50; b <= 0x5f; ++b) t[b] = kOp;       // PUSH/POP r64
  t[0x63] = kM;                                        // MOVSXD
  t[0x68] = kOpIz;                                     // PUSH imm32
  t[0x69] = kMIz;                                      // IMUL r, r/m, imm
  t[0x6a] = kOpIb;                                     // PUSH imm8
  t[0x6b] = kMIb;                                      // IMUL r, r/m, imm8
  for (int b = 0x70; b <= 0x7f; ++b) t[b] = kSpecial;  // Jcc rel8
  t[0x80] = kMIb;
  t[0x81] = kMIz;
  t[0x83] = kMIb;
  for (int b = 0x84; b <= 0x8b; ++b) t[b] = kM;      // TEST, XCHG, MOV
  t[0x8d] = kSpecial;                                // LEA: memory only
  t[0x8f] = kSpecial;                                // POP r/m: /0 only (else XOP)
  for (int b = 0x90; b <= 0x99; ++b) t[b] = kOp;     // NOP/XCHG eAX, CWDE/CDQE, CDQ/CQO
  t[0x9c] = t[0x9d] = kOp;                           // PUSHF, POPF
  t[0xa4] = t[0xa5] = t[0xaa] = t[0xab] = kOp;       // MOVS, STOS (REP)
  t[0xa8] = kOpIb;                                   // TEST AL, imm8
  t[0xa9] = kOpIz;                                   // TEST eAX, imm
  for (int b = 0xb0; b <= 0xb7; ++b) t[b] = kOpIb;   // MOV r8, imm8
  for (int b = 0xb8; b <= 0xbf; ++b) t[b] = kOpIv;   // MOV r, imm
  t[0xc0] = t[0xc1] = kMIb;                          // shifts by imm8
  t[0xc2] = t[0xc3] = kSpecial;                      // RET
  t[0xc6] = t[0xc7] = kSpecial;                      // MOV r/m, imm: /0 only (else XABORT/XBEGIN)
  t[0xcc] = kSpecial;                                // INT3
  for (int b = 0xd0; b <= 0xd3; ++b) t[b] = kM;      // shifts by 1 and CL
  t[0xe8] = t[0xe9] = t[0xeb] = kSpecial;            // CALL, JMP
  t[0xf6] = t[0xf7] = t[0xfe] = t[0xff] = kSpecial;  // groups 3, 4, 5
  return t;
}

constexpr std::array<TwoByte, 256> two_byte_forms() {
  std::array<TwoByte, 256> t{};
  auto set = [&](int b, Form f, uint8_t p) { t[b] = TwoByte{f, p}; };
  set(0x05, kOp, kNone);       // SYSCALL
  set(0x0b, kSpecial, kNone);  // UD2
  set(0x10, kM, kAny);         // MOVUPS/MOVUPD/MOVSS/MOVSD
  set(0x11, kM, kAny);
  set(0x1f, kM, kNone | k66);  // NOP r/m
  set(0x28, kM, kNone | k66);  // MOVAPS/MOVAPD
  set(0x29, kM, kNone | k66);
  set(0x2a, kM, kF3 | kF2);                                    // CVTSI2SS/SD
  set(0x2c, kM, kF3 | kF2);                                    // CVTTSS2SI/CVTTSD2SI
  set(0x2d, kM, kF3 | kF2);                                    // CVTSS2SI/CVTSD2SI
  set(0x2e, kM, kNone | k66);                                  // UCOMISS/UCOMISD
  set(0x2f, kM, kNone | k66);                                  // COMISS/COMISD
  set(0x31, kOp, kNone);                                       // RDTSC
  for (int b = 0x40; b <= 0x4f; ++b) set(b, kM, kNone | k66);  // CMOVcc
  set(0x51, kM, kAny);                                         // SQRT
  for (int b = 0x54; b <= 0x57; ++b) set(b, kM, kNone | k66);  // AND/ANDN/OR/XOR PS/PD
  for (int b : {0x58, 0x59, 0x5a, 0x5c, 0x5d, 0x5e, 0x5f}) set(b, kM, kAny);  // arithmetic
  set(0x6e, kM, kNone | k66);                                                 // MOVD/MOVQ
  set(0x6f, kM, kNone | k66 | kF3);                                           // MOVQ/MOVDQA/MOVDQU
  set(0x70, kMIb, kAny);                                       // PSHUFW/PSHUFD/PSHUFHW/PSHUFLW
  for (int b = 0x74; b <= 0x76; ++b) set(b, kM, kNone | k66);  // PCMPEQ
  set(0x7e, kM, kNone | k66 | kF3);                            // MOVD/MOVQ
  set(0x7f, kM, kNone | k66 | kF3);                            // MOVQ/MOVDQA/MOVDQU
  for (int b = 0x80; b <= 0x8f; ++b) set(b, kSpecial, kNone);  // Jcc rel32
  for (int b = 0x90; b <= 0x9f; ++b) set(b, kM, kNone);        // SETcc
  set(0xa2, kOp, kNone);                                       // CPUID
  for (int b :
       {0xa3, 0xab, 0xb3, 0xbb, 0xa5, 0xad, 0xaf, 0xb0, 0xb1, 0xb6, 0xb7, 0xbe, 0xbf, 0xc0, 0xc1})
    set(b, kM, kNone | k66);         // BT*, SHLD/SHRD CL, IMUL, CMPXCHG, MOVZX/MOVSX, XADD
  set(0xa4, kMIb, kNone | k66);      // SHLD imm8
  set(0xac, kMIb, kNone | k66);      // SHRD imm8
  set(0xb8, kM, kF3);                // POPCNT
  set(0xba, kSpecial, kNone | k66);  // BT* imm8: /4 to /7
  set(0xbc, kM, kNone | k66 | kF3);  // BSF/TZCNT
  set(0xbd, kM, kNone | k66 | kF3);  // BSR/LZCNT
  set(0xc2, kMIb, kAny);             // CMPPS/CMPPD/CMPSS/CMPSD
  set(0xc6, kMIb, kNone | k66);      // SHUFPS/SHUFPD
  for (int b = 0xc8; b <= 0xcf; ++b) set(b, kOp, kNone);  // BSWAP
  set(0xd4, kM, kNone | k66);                             // PADDQ
  set(0xd6, kM, k66);                                     // MOVQ xmm/m64, xmm
  for (int b : {0xdb, 0xdf, 0xeb, 0xef, 0xf4, 0xfb, 0xfe}) set(b, kM, kNone | k66);  // PAND...
  return t;
}

constexpr std::array<Form, 256> kOneByte = one_byte_forms();
constexpr std::array<TwoByte, 256> kTwoByte = two_byte_forms();

// The bytes of a ModRM and what follows it for memory (SIB, displacement), from p[0]: 0 when
// past n. 32- and 64-bit addressing have the same shape (no 0x67 gets here).
size_t modrm_size(const uint8_t* p, size_t n) {
  if (n < 1) return 0;
  const uint8_t mod = p[0] >> 6, rm = p[0] & 7;
  size_t len = 1;
  if (mod == 3) return len;
  if (rm == 4) {
    if (n < 2) return 0;
    ++len;
    if (mod == 0 && (p[1] & 7) == 5) len += 4;  // SIB with no base: disp32
  } else if (mod == 0 && rm == 5) {
    len += 4;  // RIP-relative
  }
  if (mod == 1) len += 1;
  if (mod == 2) len += 4;
  return len <= n ? len : 0;
}

int32_t read_rel(const uint8_t* p, size_t size) {
  if (size == 1) return static_cast<int8_t>(p[0]);
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

}  // namespace

bool quick_decode(const uint8_t* p, size_t n, QuickInsn& out) {
  size_t i = 0;
  bool p66 = false, seg = false;
  uint8_t rep = 0;
  // Legacy prefixes, each kind at most once (repeats, LOCK, 0x67 and the order rules of the
  // rest are Zydis').
  for (;; ++i) {
    if (i >= n) return false;
    const uint8_t b = p[i];
    if (b == 0x66) {
      if (p66) return false;
      p66 = true;
    } else if (b == 0xf2 || b == 0xf3) {
      if (rep) return false;
      rep = b;
    } else if (b == 0x2e || b == 0x3e || b == 0x26 || b == 0x36 || b == 0x64 || b == 0x65) {
      if (seg) return false;
      seg = true;
    } else {
      break;
    }
  }
  const bool prefixed = i > 0;
  uint8_t rex = 0;
  if ((p[i] & 0xf0) == 0x40) {
    rex = p[i++];
    if (i >= n) return false;
  }
  const bool w = rex & 8;
  const size_t iz = (p66 && !w) ? 2 : 4;
  const uint8_t op = p[i++];
  size_t rest = 0;  // bytes after the opcode
  out.flow = QuickInsn::kPlain;
  out.rel = 0;

  if (op == 0x0f) {
    if (i >= n) return false;
    const uint8_t op2 = p[i++];
    const TwoByte& tb = kTwoByte[op2];
    if (tb.form == kUnknown) return false;
    // Which mandatory prefix: Zydis takes F2/F3 over 0x66; with both kinds it is left to it.
    if (p66 && rep) return false;
    const uint8_t have = rep == 0xf3 ? kF3 : rep == 0xf2 ? kF2 : p66 ? k66 : kNone;
    if (!(tb.prefixes & have)) return false;
    if (op2 >= 0x80 && op2 <= 0x8f) {  // Jcc rel32
      if (prefixed || rex || n - i < 4) return false;
      out.flow = QuickInsn::kJcc;
      out.rel = read_rel(p + i, 4);
      rest = 4;
    } else if (op2 == 0x0b) {
      out.flow = QuickInsn::kUd2;
    } else if (tb.form == kOp) {
      rest = 0;
    } else {
      const size_t m = modrm_size(p + i, n - i);
      if (!m) return false;
      if (op2 == 0xba && ((p[i] >> 3) & 7) < 4) return false;  // BT group: /4 to /7 only
      rest = m + ((tb.form == kMIb || op2 == 0xba) ? 1 : 0);
    }
  } else {
    const Form f = kOneByte[op];
    switch (f) {
      case kUnknown:
        return false;
      case kOp:
        break;
      case kOpIb:
        rest = 1;
        break;
      case kOpIz:
        rest = iz;
        break;
      case kOpIv:
        rest = w ? 8 : iz;
        break;
      case kM:
      case kMIb:
      case kMIz: {
        const size_t m = modrm_size(p + i, n - i);
        if (!m) return false;
        rest = m + (f == kMIb ? 1 : f == kMIz ? iz : 0);
        break;
      }
      case kSpecial: {
        // Branches: plain encodings only (no 0x66 operand size, BND or hint prefixes, REX).
        const bool plain = !prefixed && !rex;
        if ((op >= 0x70 && op <= 0x7f) || op == 0xeb) {
          if (!plain || n - i < 1) return false;
          out.flow = op == 0xeb ? QuickInsn::kJmp : QuickInsn::kJcc;
          out.rel = read_rel(p + i, 1);
          rest = 1;
        } else if (op == 0xe8 || op == 0xe9) {
          if (!plain || n - i < 4) return false;
          out.flow = op == 0xe8 ? QuickInsn::kCall : QuickInsn::kJmp;
          out.rel = read_rel(p + i, 4);
          rest = 4;
        } else if (op == 0xc3 || op == 0xc2) {
          if (!plain) return false;
          out.flow = QuickInsn::kRet;
          rest = op == 0xc2 ? 2 : 0;
        } else if (op == 0xcc) {
          if (!plain) return false;
          out.flow = QuickInsn::kInt3;
        } else {
          // A group: what it is depends on ModRM.reg.
          if (i >= n) return false;
          const uint8_t reg = (p[i] >> 3) & 7, mod = p[i] >> 6;
          const size_t m = modrm_size(p + i, n - i);
          if (!m) return false;
          rest = m;
          switch (op) {
            case 0x8d:  // LEA
              if (mod == 3) return false;
              break;
            case 0x8f:  // POP r/m
            case 0xc6:  // MOV r/m8, imm8
            case 0xc7:  // MOV r/m, imm
              if (reg != 0) return false;
              rest += op == 0xc6 ? 1 : op == 0xc7 ? iz : 0;
              break;
            case 0xf6:  // TEST r/m8, imm8 (/0, /1); NOT, NEG, MUL, IMUL, DIV, IDIV
            case 0xf7:
              if (reg <= 1) rest += op == 0xf6 ? 1 : iz;
              break;
            case 0xfe:  // INC/DEC r/m8
              if (reg > 1) return false;
              break;
            case 0xff:  // INC, DEC, CALL, (CALL far), JMP, (JMP far), PUSH
              if (reg == 3 || reg == 5 || reg == 7) return false;
              if (reg == 2 || reg == 4) {
                if (prefixed) return false;
                out.flow = reg == 2 ? QuickInsn::kCall : QuickInsn::kJmpIndirect;
              }
              break;
            default:
              return false;
          }
        }
        break;
      }
    }
  }
  const size_t len = i + rest;
  if (len > 15 || len > n) return false;
  out.len = static_cast<uint8_t>(len);
  return true;
}

}  // namespace gotap
