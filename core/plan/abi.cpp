#include "core/plan/abi.h"

#include <algorithm>

#include <fmt/format.h>

namespace gotap {

const char* reg_name(Reg r) {
  static const char* const kNames[kNumIntRegs] = {"rax", "rbx", "rcx", "rdi", "rsi",
                                                  "r8",  "r9",  "r10", "r11"};
  auto i = static_cast<size_t>(r);
  if (r == Reg::RDX) return "rdx";
  return i < kNumIntRegs ? kNames[i] : "?";
}

std::string ValueLoc::describe() const {
  std::string out;
  for (const auto& p : pieces) {
    if (!out.empty()) out += '+';
    switch (p.kind) {
      case LocPiece::IntReg:
        out += reg_name(static_cast<Reg>(p.reg));
        break;
      case LocPiece::FloatReg:
        out += fmt::format("x{}", p.reg);
        break;
      case LocPiece::Stack:
        out += fmt::format("stack+{}", p.stack_offset);
        break;
      case LocPiece::RegMem:
        out += fmt::format("[{}+{}]", reg_name(static_cast<Reg>(p.reg)), p.stack_offset);
        break;
    }
    if (p.reg_byte) out += fmt::format("[{}:{}]", p.reg_byte, p.reg_byte + p.size);
  }
  return out;
}

bool ValueLoc::in_registers() const {
  if (pieces.empty()) return false;
  return std::all_of(pieces.begin(), pieces.end(), [](const LocPiece& p) {
    return p.kind == LocPiece::IntReg || p.kind == LocPiece::FloatReg;
  });
}

bool is_shape_function(std::string_view name) {
  return name.find("[go.shape.") != std::string_view::npos;
}

namespace {

// True when `rest` (what follows the shape brackets) names a closure: ".func1", ".gowrap2",
// ".Get.func1.3", ...
bool names_closure(std::string_view rest) {
  for (std::string_view prefix : {".func", ".gowrap", ".deferwrap"}) {
    size_t at = 0;
    while ((at = rest.find(prefix, at)) != std::string_view::npos) {
      at += prefix.size();
      if (at < rest.size() && rest[at] >= '0' && rest[at] <= '9') return true;
    }
  }
  return false;
}

}  // namespace

AbiOptions::Dict dict_position(std::string_view name, int go_minor) {
  size_t shape = name.find("[go.shape.");
  if (shape == std::string_view::npos) return AbiOptions::Dict::None;
  // Generated equality and hash functions of instantiated types are not shape functions.
  if (name.rfind("type:", 0) == 0 || name.rfind("type..", 0) == 0) return AbiOptions::Dict::None;
  // Find the bracket that closes the type arguments; shapes may contain brackets.
  int depth = 0;
  size_t close = std::string_view::npos;
  for (size_t i = shape; i < name.size(); ++i) {
    if (name[i] == '[') ++depth;
    if (name[i] == ']' && --depth == 0) {
      close = i;
      break;
    }
  }
  if (close == std::string_view::npos) return AbiOptions::Dict::First;
  std::string_view rest = name.substr(close + 1);
  if (names_closure(rest)) return AbiOptions::Dict::None;
  bool method = !rest.empty();  // "pkg.T[...].M" or "pkg.(*T[...]).M"
  if (method && go_minor >= 20) return AbiOptions::Dict::AfterReceiver;
  return AbiOptions::Dict::First;
}

namespace {

constexpr int64_t kPtrSize = 8;
// The return PC sits at [RSP]; the argument frame starts right above it.
constexpr int64_t kArgFrameStart = 8;
constexpr int kMaxDepth = 32;

int64_t align_up(int64_t v, int64_t a) {
  return a <= 1 ? v : (v + a - 1) / a * a;
}

// One register-sized part of a value: the unit the register assignment works on.
struct Part {
  bool is_float = false;
  uint32_t value_offset = 0;
  uint32_t size = 0;
};

// Breaks a value into the base values ABIInternal assigns to registers, or fails (arrays of
// more than one element, unknown layouts) when it has to go to the stack.
bool flatten(const TypeGraph& g, TypeId id, uint32_t base, int depth, std::vector<Part>& out,
             int& budget) {
  const GoType* t = g.get(id);
  // More parts than registers, or a walk this long (only corrupt DWARF has cycles), fail:
  // the value goes to the stack.
  if (!t || depth > kMaxDepth || --budget < 0) return false;
  if (out.size() > kNumIntRegs + kNumFloatRegs) return false;
  auto word = [&](uint32_t off) { out.push_back(Part{false, base + off, 8}); };
  switch (t->kind) {
    case GoKind::Bool:
    case GoKind::Int:
    case GoKind::Int8:
    case GoKind::Int16:
    case GoKind::Int32:
    case GoKind::Int64:
    case GoKind::Uint:
    case GoKind::Uint8:
    case GoKind::Uint16:
    case GoKind::Uint32:
    case GoKind::Uint64:
    case GoKind::Uintptr:
      if (t->size == 0 || t->size > 8) return false;
      out.push_back(Part{false, base, static_cast<uint32_t>(t->size)});
      return true;
    case GoKind::Ptr:
    case GoKind::Map:
    case GoKind::Chan:
    case GoKind::Func:
    case GoKind::UnsafePointer:
      word(0);
      return true;
    case GoKind::Float32:
    case GoKind::Float64:
      if (t->size != 4 && t->size != 8) return false;
      out.push_back(Part{true, base, static_cast<uint32_t>(t->size)});
      return true;
    case GoKind::Complex64:
    case GoKind::Complex128: {
      if (t->size != 8 && t->size != 16) return false;
      auto half = static_cast<uint32_t>(t->size / 2);
      out.push_back(Part{true, base, half});
      out.push_back(Part{true, base + half, half});
      return true;
    }
    case GoKind::String:
    case GoKind::Interface:
      word(0);
      word(8);
      return true;
    case GoKind::Slice:
      word(0);
      word(8);
      word(16);
      return true;
    case GoKind::Array:
      if (t->count == 0) return true;
      if (t->count != 1) return false;
      return flatten(g, t->elem, base, depth + 1, out, budget);
    case GoKind::Struct:
      for (const auto& f : t->fields) {
        const GoType* ft = g.get(f.type);
        if (ft && ft->size == 0) continue;
        if (!flatten(g, f.type, base + static_cast<uint32_t>(f.offset), depth + 1, out, budget))
          return false;
      }
      return true;
    default:
      return false;
  }
}

struct Assigner {
  const TypeGraph& g;
  int ints = 0, floats = 0;
  int64_t stack = 0;  // next free offset in the argument frame (0 = entry RSP + 8)

  void assign_word(bool registers_allowed) {
    if (registers_allowed && ints < kNumIntRegs) {
      ++ints;
      return;
    }
    stack = align_up(stack, kPtrSize) + kPtrSize;
  }

  ParamLoc assign(const AbiParamIn& p, bool registers_allowed) {
    ParamLoc out;
    out.name = p.name;
    out.type = p.type;
    out.is_result = p.is_result;
    const GoType* t = g.get(p.type);
    if (t) {
      out.type_name = t->name;
      out.size = t->size;
    }
    if (out.size == 0) {
      // Zero-size values are stack-assigned: they only align the frame.
      stack = align_up(stack, g.align_of(p.type));
      return out;
    }
    std::vector<Part> parts;
    int budget = 256;
    if (registers_allowed && flatten(g, p.type, 0, 0, parts, budget)) {
      int ni = 0, nf = 0;
      for (const auto& part : parts) (part.is_float ? nf : ni)++;
      if (ints + ni <= kNumIntRegs && floats + nf <= kNumFloatRegs) {
        for (const auto& part : parts) {
          LocPiece lp;
          lp.kind = part.is_float ? LocPiece::FloatReg : LocPiece::IntReg;
          lp.reg = static_cast<uint8_t>(part.is_float ? floats++ : ints++);
          lp.value_offset = part.value_offset;
          lp.size = part.size;
          out.loc.pieces.push_back(lp);
        }
        return out;
      }
    }
    // The whole value goes to the stack; registers it did not take stay free for later ones.
    stack = align_up(stack, g.align_of(p.type));
    LocPiece lp;
    lp.kind = LocPiece::Stack;
    lp.stack_offset = kArgFrameStart + stack;
    lp.size = static_cast<uint32_t>(out.size);
    out.loc.pieces.push_back(lp);
    stack += static_cast<int64_t>(out.size);
    return out;
  }
};

std::vector<ParamLoc> assign(const TypeGraph& g, const std::vector<AbiParamIn>& ps, bool regabi,
                             const AbiOptions& opts) {
  std::vector<ParamLoc> out(ps.size());
  Assigner a{g};
  bool explicit_dict =
      std::any_of(ps.begin(), ps.end(), [](const AbiParamIn& p) { return p.name == ".dict"; });
  auto dict = explicit_dict ? AbiOptions::Dict::None : opts.dict;
  // The dictionary is a pointer: one integer register, or a stack word when none is left.
  auto assign_dict = [&] { a.assign_word(regabi); };
  if (dict == AbiOptions::Dict::First) assign_dict();
  bool first_arg = true;
  for (size_t i = 0; i < ps.size(); ++i) {
    if (ps[i].is_result) continue;
    out[i] = a.assign(ps[i], regabi);
    if (first_arg && dict == AbiOptions::Dict::AfterReceiver) assign_dict();
    first_arg = false;
  }
  a.stack = align_up(a.stack, kPtrSize);
  a.ints = a.floats = 0;
  for (size_t i = 0; i < ps.size(); ++i)
    if (ps[i].is_result) out[i] = a.assign(ps[i], regabi);
  return out;
}

}  // namespace

std::vector<ParamLoc> assign_abi_internal(const TypeGraph& g, const std::vector<AbiParamIn>& ps,
                                          const AbiOptions& opts) {
  return assign(g, ps, true, opts);
}

std::vector<ParamLoc> assign_abi0(const TypeGraph& g, const std::vector<AbiParamIn>& ps) {
  return assign(g, ps, false, {});
}

std::vector<ParamLoc> args_from_arginfo(const std::vector<ArgInfoItem>& items,
                                        const std::vector<RegSpill>& spills, bool regabi) {
  // Group the items into top-level arguments: a word, or an aggregate with its words.
  struct Word {
    int64_t offset;  // in the argument frame; -1 when ArgInfo could not encode it
    uint32_t size;
  };
  std::vector<std::vector<Word>> args;
  int depth = 0;
  bool more = false;
  for (const auto& it : items) {
    if (it.kind == ArgInfoItem::Dotdotdot) {
      // The traceback limit: later arguments are not described.
      if (depth == 0) {
        more = true;
        break;
      }
      continue;
    }
    if (it.kind == ArgInfoItem::StartAgg) {
      if (depth++ == 0) args.emplace_back();
      continue;
    }
    if (it.kind == ArgInfoItem::EndAgg) {
      if (depth > 0) --depth;
      continue;
    }
    if (depth == 0) args.emplace_back();
    if (args.empty()) args.emplace_back();
    if (it.kind == ArgInfoItem::OffsetTooLarge)
      args.back().push_back(Word{-1, 0});
    else
      args.back().push_back(Word{it.offset, it.size});
  }

  // Register arguments are described by their spill slots. The spill area comes after the
  // stack arguments and results, so a word below the lowest spill slot is a stack argument.
  int64_t spill_start = INT64_MAX;
  for (const auto& s : spills) spill_start = std::min(spill_start, s.spill_offset - kArgFrameStart);

  // ArgInfo encodes offsets in one byte: past 0xfa a word is only "offset too large". After a
  // known 8-byte word of the same argument, the next word starts 8 bytes further (no Go type
  // is aligned to more than 8 on amd64), and the morestack path's spill of that slot tells
  // its register and width; etcd's processInternalRaftRequestOnce has its context's second
  // word there, behind a large stack argument.
  if (regabi)
    for (auto& words : args)
      for (size_t k = 1; k < words.size(); ++k) {
        if (words[k].offset >= 0 || words[k - 1].offset < 0 || words[k - 1].size != 8) continue;
        const int64_t at = words[k - 1].offset + 8;
        auto it = std::find_if(spills.begin(), spills.end(), [&](const RegSpill& s) {
          return s.spill_offset == kArgFrameStart + at;
        });
        if (it != spills.end() && it->reg.size > 0 && it->reg.size <= 8)
          words[k] = Word{at, static_cast<uint32_t>(it->reg.size)};
      }

  std::vector<ParamLoc> out;
  int64_t max_offset_seen = -1;
  for (size_t i = 0; i < args.size(); ++i) {
    ParamLoc p;
    p.name = fmt::format("arg{}", i);
    const auto& words = args[i];
    uint64_t lo = UINT64_MAX, hi = 0, unknown = 0;
    for (const auto& w : words) {
      if (w.offset < 0) {
        ++unknown;
        continue;
      }
      lo = std::min<uint64_t>(lo, w.offset);
      hi = std::max<uint64_t>(hi, w.offset + w.size);
    }
    // A word whose offset ArgInfo could not encode still belongs to the value: counting it
    // (at most 8 bytes) keeps the known words from passing for the whole value, so the
    // decoders say where it is unknown instead of showing part of it as all of it.
    p.size = (lo == UINT64_MAX ? 0 : hi - lo) + 8 * unknown;
    p.type_name = words.empty()       ? "empty"
                  : words.size() == 1 ? fmt::format("word{}", words[0].size * 8)
                                      : fmt::format("words{}", words.size());
    // Without spills, an argument whose words sit below an earlier argument's cannot be in
    // the spill area, so it was passed on the stack.
    bool below_earlier = lo != UINT64_MAX && static_cast<int64_t>(lo) < max_offset_seen;
    // Without spills, only an argument below an earlier one is known to be on the stack:
    // stack arguments come first in the frame, in order, and spill slots after them.
    for (const auto& w : words) {
      LocPiece lp;
      lp.value_offset = lo == UINT64_MAX || w.offset < 0 ? 0 : static_cast<uint32_t>(w.offset - lo);
      lp.size = w.size;
      if (w.offset < 0) continue;  // unknown position: leave the piece out
      if (!regabi) {
        lp.kind = LocPiece::Stack;
        lp.stack_offset = kArgFrameStart + w.offset;
      } else if (!spills.empty()) {
        auto it = std::find_if(spills.begin(), spills.end(), [&](const RegSpill& s) {
          return s.spill_offset == kArgFrameStart + w.offset;
        });
        if (it != spills.end()) {
          lp.kind = it->reg.kind;
          lp.reg = it->reg.reg;
        } else if (w.offset < spill_start) {
          lp.kind = LocPiece::Stack;
          lp.stack_offset = kArgFrameStart + w.offset;
        } else {
          continue;  // in the spill area but never spilled: not known
        }
      } else if (!below_earlier) {
        // A register word, or a stack argument that precedes every register one: ArgInfo
        // cannot tell, nor which register (a float goes to an X register and shifts the
        // integers after it). Unknown, never a guess shown as a value.
        continue;
      } else {
        lp.kind = LocPiece::Stack;
        lp.stack_offset = kArgFrameStart + w.offset;
      }
      p.loc.pieces.push_back(lp);
    }
    // A value on the stack is one piece, as assign_abi_internal describes it.
    bool all_stack = !p.loc.pieces.empty() &&
                     std::all_of(p.loc.pieces.begin(), p.loc.pieces.end(),
                                 [](const LocPiece& lp) { return lp.kind == LocPiece::Stack; });
    if (all_stack) {
      LocPiece whole = p.loc.pieces.front();
      whole.value_offset = 0;
      whole.size = static_cast<uint32_t>(hi - lo);
      whole.stack_offset = kArgFrameStart + static_cast<int64_t>(lo);
      p.loc.pieces.assign(1, whole);
    }
    if (lo != UINT64_MAX) max_offset_seen = std::max<int64_t>(max_offset_seen, lo);
    out.push_back(std::move(p));
  }
  if (more) {
    // A mark where ArgInfo stops (it describes the first 10 words at most): more follow.
    ParamLoc p;
    p.name = "...";
    p.type_name = "more";
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace gotap
