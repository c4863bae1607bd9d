#include "core/plan/sysv_abi.h"

#include <algorithm>
#include <iterator>

namespace gotap {

namespace {

constexpr Reg kIntArgs[] = {Reg::RDI, Reg::RSI, Reg::RDX, Reg::RCX, Reg::R8, Reg::R9};
constexpr int kSseArgs = 8;

ParamLoc param(const GccgoParam& p, bool result) {
  ParamLoc out;
  out.name = p.name;
  out.type_name = p.type.name;
  out.size = p.type.size;
  out.is_result = result;
  return out;
}

}  // namespace

SysvAssignment assign_sysv(const GccgoDwarfFunc& f) {
  SysvAssignment out;
  const bool result_in_memory = f.result && f.result->memory;
  size_t ints = result_in_memory ? 1 : 0;  // rdi holds the result buffer
  int sses = 0;
  uint64_t stack = 0;  // bytes of stack arguments so far
  for (const auto& p : f.params) {
    ParamLoc loc = param(p, false);
    const SysvType& t = p.type;
    if (t.size == 0) {
      out.args.push_back(std::move(loc));
      continue;
    }
    size_t ni = 0;
    int ns = 0;
    for (auto c : t.eightbytes) {
      ni += c == EightbyteClass::Integer;
      ns += c == EightbyteClass::Sse;
    }
    const bool regs = !t.memory && !t.eightbytes.empty() && ints + ni <= std::size(kIntArgs) &&
                      sses + ns <= kSseArgs;
    if (regs) {
      for (size_t k = 0; k < t.eightbytes.size(); ++k) {
        LocPiece piece;
        piece.value_offset = uint32_t(8 * k);
        piece.size = uint32_t(std::min<uint64_t>(8, t.size - 8 * k));
        if (t.eightbytes[k] == EightbyteClass::Sse) {
          piece.kind = LocPiece::FloatReg;
          piece.reg = uint8_t(sses++);
        } else {
          piece.kind = LocPiece::IntReg;
          piece.reg = uint8_t(kIntArgs[ints++]);
        }
        loc.loc.pieces.push_back(piece);
      }
    } else {
      LocPiece piece;
      piece.kind = LocPiece::Stack;
      piece.stack_offset = int64_t(8 + stack);
      piece.size = uint32_t(t.size);
      loc.loc.pieces.push_back(piece);
      stack += (t.size + 7) / 8 * 8;
    }
    out.args.push_back(std::move(loc));
  }
  if (!f.result) {
    for (const auto& r : f.results) out.results.push_back(param(r, true));
    return out;
  }
  if (result_in_memory) {
    // At the RET, rax holds the buffer's address (the System V ABI returns it there).
    for (const auto& r : f.results) {
      ParamLoc loc = param(r, true);
      if (r.type.size > 0) {
        LocPiece p;
        p.kind = LocPiece::RegMem;
        p.reg = uint8_t(Reg::RAX);
        p.stack_offset = int64_t(r.offset);
        p.size = uint32_t(r.type.size);
        loc.loc.pieces.push_back(p);
      }
      out.results.push_back(std::move(loc));
    }
    return out;
  }
  // Which register returns each eightbyte of the result.
  std::vector<LocPiece> regs;
  int ri = 0, rs = 0;
  for (auto c : f.result->eightbytes) {
    LocPiece p;
    if (c == EightbyteClass::Sse) {
      p.kind = LocPiece::FloatReg;
      p.reg = uint8_t(rs++);
    } else {
      p.kind = LocPiece::IntReg;
      p.reg = uint8_t(ri++ == 0 ? Reg::RAX : Reg::RDX);
    }
    regs.push_back(p);
  }
  for (const auto& r : f.results) {
    ParamLoc loc = param(r, true);
    const uint64_t first = r.offset / 8, last = (r.offset + r.type.size + 7) / 8;
    if (r.type.size > 0 && last <= regs.size() && r.offset % 8 + r.type.size <= 8) {
      // Within one eightbyte, which it may share with other results: its bytes of it.
      LocPiece p = regs[first];
      p.reg_byte = uint8_t(r.offset % 8);
      p.size = uint32_t(r.type.size);
      loc.loc.pieces.push_back(p);
    } else if (r.type.size > 0 && r.offset % 8 == 0 && last <= regs.size()) {
      for (uint64_t k = first; k < last; ++k) {
        LocPiece p = regs[k];
        p.value_offset = uint32_t(8 * (k - first));
        p.size = uint32_t(std::min<uint64_t>(8, r.type.size - 8 * (k - first)));
        loc.loc.pieces.push_back(p);
      }
    }
    out.results.push_back(std::move(loc));
  }
  return out;
}

}  // namespace gotap
