#include "core/cond/compile.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "core/binary/type_names.h"

namespace gotap::cond {

namespace {

using Code = std::vector<gotap_cond_insn>;

gotap_cond_insn insn(uint8_t op, uint8_t a = 0, uint8_t b = 0, uint8_t c = 0, int32_t off = 0,
                     uint64_t imm = 0) {
  gotap_cond_insn i{};
  i.op = op;
  i.a = a;
  i.b = b;
  i.c = c;
  i.off = off;
  i.imm = imm;
  return i;
}

enum class Num { None, Signed, Unsigned, Float, Bool, Pointer, String, Slice, Iface, Struct };

Num num_of(const GoType* t) {
  if (!t) return Num::None;
  switch (t->kind) {
    case GoKind::Int:
    case GoKind::Int8:
    case GoKind::Int16:
    case GoKind::Int32:
    case GoKind::Int64:
      return Num::Signed;
    case GoKind::Uint:
    case GoKind::Uint8:
    case GoKind::Uint16:
    case GoKind::Uint32:
    case GoKind::Uint64:
    case GoKind::Uintptr:
      return Num::Unsigned;
    case GoKind::Float32:
    case GoKind::Float64:
      return Num::Float;
    case GoKind::Bool:
      return Num::Bool;
    case GoKind::Ptr:
    case GoKind::Map:
    case GoKind::Chan:
    case GoKind::Func:
    case GoKind::UnsafePointer:
      return Num::Pointer;
    case GoKind::String:
      return Num::String;
    case GoKind::Slice:
      return Num::Slice;
    case GoKind::Interface:
      return Num::Iface;
    case GoKind::Struct:
    case GoKind::Array:
      return Num::Struct;
    default:
      return Num::None;
  }
}

// A typed operand: a value in a parameter's ABI location (at value offset `voff`), or in
// memory at `moff` past the pointer that `base` pushes; or a special word (goid, duration).
struct Operand {
  enum Kind { Loc, Mem, Word } kind = Loc;
  const GoType* type = nullptr;
  const ParamLoc* param = nullptr;
  uint64_t voff = 0;
  Code base;
  uint64_t moff = 0;
  Code word;  // Word: the code that pushes it
  Num num = Num::None;
  std::string spelled;  // how the expression names it, for errors
};

class Compiler {
 public:
  Compiler(const FuncPlan& f, const BinaryView& bin, FuncProgram* out)
      : f_(f), bin_(bin), out_(out) {}

  CompileStatus run(const Node& root, ExprError* err, std::string* missing) {
    err_ = err;
    missing_ = missing;
    status_ = CompileStatus::Ok;
    bool at_ret = has_ret(root);
    if (status_ != CompileStatus::Ok) return status_;
    Code entry, ret;
    if (at_ret) {
      split(root, entry, ret);
    } else {
      boolean(root, entry);
    }
    if (status_ != CompileStatus::Ok) return status_;
    if (entry.size() + ret.size() > GOTAP_COND_MAX_INSNS)
      return error(root.pos, fmt::format("condition too long for {} ({} steps, at most {})",
                                         f_.name, entry.size() + ret.size(), GOTAP_COND_MAX_INSNS));
    for (const Code* c : {&entry, &ret})
      if (depth(*c) > GOTAP_COND_STACK) return error(root.pos, "condition nested too deeply");
    gotap_cond& p = out_->prog;
    p.flags = GOTAP_COND_ON | (at_ret ? GOTAP_COND_AT_RET : 0) |
              (goid_entry_ ? GOTAP_COND_NEEDS_GOID : 0);
    p.n_entry = static_cast<uint8_t>(entry.size());
    p.n_ret = static_cast<uint8_t>(ret.size());
    size_t i = 0;
    for (const auto& x : entry) p.insns[i++] = x;
    for (const auto& x : ret) p.insns[i++] = x;
    std::memcpy(p.pool, pool_.data(), pool_.size());
    return CompileStatus::Ok;
  }

 private:
  CompileStatus error(size_t pos, std::string what) {
    if (status_ == CompileStatus::Ok) {
      *err_ = {pos, std::move(what)};
      status_ = CompileStatus::Error;
    }
    return status_;
  }
  CompileStatus missing(const Node& n) {
    if (status_ == CompileStatus::Ok) {
      *err_ = {n.pos, ""};
      *missing_ = n.text;
      status_ = CompileStatus::MissingName;
    }
    return status_;
  }
  bool ok() const { return status_ == CompileStatus::Ok; }

  void ebpf_cannot(size_t pos, std::string what) {
    if (out_->ebpf_problem.empty()) {
      out_->ebpf_problem = std::move(what);
      out_->ebpf_pos = pos;
    }
  }

  static int depth(const Code& c) {
    int d = 0, max = 0;
    for (const auto& i : c) {
      switch (i.op) {
        case GOTAP_COP_CONST:
        case GOTAP_COP_REG:
        case GOTAP_COP_STACK:
        case GOTAP_COP_XMM:
        case GOTAP_COP_GOID:
        case GOTAP_COP_DURATION:
        case GOTAP_COP_BIT:
        case GOTAP_COP_LOAD:
          ++d;
          break;
        case GOTAP_COP_CMP:
        case GOTAP_COP_AND:
        case GOTAP_COP_OR:
        case GOTAP_COP_STR:
        case GOTAP_COP_MAP_INDEX:
          --d;
          break;
        case GOTAP_COP_INDEX:
          d -= 2;
          break;
        case GOTAP_COP_STR2:
          d -= 3;
          break;
        case GOTAP_COP_SAVE:
          --d;
          break;
        case GOTAP_COP_SETBIT:
          --d;
          break;
        default:
          break;
      }
      max = std::max(max, d);
    }
    return max;
  }

  // The parameter or result of that name.
  const ParamLoc* param(const std::string& name) const {
    if (name == kErrorResult) {
      const ParamLoc* last = nullptr;
      for (const auto& p : f_.results)
        if (p.type_name == "error") last = &p;
      return last;
    }
    for (const auto* list : {&f_.args, &f_.results})
      for (const auto& p : *list)
        if (p.name == name) return &p;
    return nullptr;
  }

  // Whether evaluating n needs the return (a result or the duration).
  bool has_ret(const Node& n) {
    if (n.kind == NodeKind::Name) {
      if (const ParamLoc* p = param(n.text)) return p->is_result;
      if (n.text == "duration") return true;
      if (n.text == "goid") return false;
      missing(n);
      return false;
    }
    bool r = false;
    for (const auto& k : n.kids) r = has_ret(*k) || r;
    return r;
  }

  // Whether n reads an argument (which the return cannot: its registers are reused).
  bool has_arg(const Node& n) const {
    if (n.kind == NodeKind::Name) {
      const ParamLoc* p = param(n.text);
      return p && !p->is_result;
    }
    for (const auto& k : n.kids)
      if (has_arg(*k)) return true;
    return false;
  }

  // The first argument name inside n.
  const Node* arg_name(const Node& n) const {
    if (n.kind == NodeKind::Name && has_arg(n)) return &n;
    for (const auto& k : n.kids)
      if (const Node* f = arg_name(*k)) return f;
    return nullptr;
  }

  // Split: argument-only boolean parts run at the entry and leave a bit for the return.
  void split(const Node& n, Code& entry, Code& ret) {
    if (!ok()) return;
    if (!has_ret(n)) {
      if (nbits_ >= 64 - GOTAP_COND_VALS) {
        error(n.pos, "too many parts for one condition");
        return;
      }
      uint8_t bit = static_cast<uint8_t>(nbits_++);
      boolean(n, entry);
      entry.push_back(insn(GOTAP_COP_SETBIT, bit));
      ret.push_back(insn(GOTAP_COP_BIT, bit));
      return;
    }
    switch (n.kind) {
      case NodeKind::Or:
      case NodeKind::And:
        split(*n.kids[0], entry, ret);
        split(*n.kids[1], entry, ret);
        ret.push_back(insn(n.kind == NodeKind::Or ? GOTAP_COP_OR : GOTAP_COP_AND));
        return;
      case NodeKind::Not:
        split(*n.kids[0], entry, ret);
        ret.push_back(insn(GOTAP_COP_NOT));
        return;
      default:
        // An operand of a result may not read arguments; an argument operand compared with a
        // result is read at the entry and kept for the return (GOTAP_COP_SAVE).
        for (const auto& k : n.kids) {
          if (n.kind == NodeKind::Compare && !has_ret(*k)) continue;
          if (has_arg(*k)) {
            const Node* a = arg_name(*k);
            error(a->pos, fmt::format("{} is an argument inside an expression of a result; "
                                      "compare them apart",
                                      a->text));
            return;
          }
        }
        in_ret_ = true;
        entry_ = &entry;
        boolean(n, ret);
        entry_ = nullptr;
        in_ret_ = false;
        return;
    }
  }

  static bool is_literal(const Node& n) {
    switch (n.kind) {
      case NodeKind::Int:
      case NodeKind::Float:
      case NodeKind::String:
      case NodeKind::Bool:
      case NodeKind::Nil:
      case NodeKind::Duration:
        return true;
      default:
        return false;
    }
  }

  // Code that pushes n's truth.
  void boolean(const Node& n, Code& c) {
    if (!ok()) return;
    switch (n.kind) {
      case NodeKind::Or:
      case NodeKind::And:
        boolean(*n.kids[0], c);
        boolean(*n.kids[1], c);
        c.push_back(insn(n.kind == NodeKind::Or ? GOTAP_COP_OR : GOTAP_COP_AND));
        return;
      case NodeKind::Not:
        boolean(*n.kids[0], c);
        c.push_back(insn(GOTAP_COP_NOT));
        return;
      case NodeKind::Compare:
        compare(n, c);
        return;
      case NodeKind::Bool:
        c.push_back(insn(GOTAP_COP_CONST, 0, 0, 0, 0, n.u));
        return;
      case NodeKind::Call:
        if (n.text == "hasPrefix" || n.text == "contains") {
          string_call(n, c);
          return;
        }
        [[fallthrough]];
      default: {
        auto o = operand(n, c);
        if (!o) return;
        if (o->num != Num::Bool) {
          error(n.pos, fmt::format("{} is {}, not a condition (compare it with something)",
                                   o->spelled, type_name(*o)));
          return;
        }
        push_scalar(*o, c, n.pos);
        return;
      }
    }
  }

  // A string, or a []byte taken as its bytes (nats and net/textproto pass requests as
  // []byte): both are a data pointer then a length, which the string operations read.
  bool stringy(const Operand& o) const {
    if (o.num == Num::String) return true;
    if (o.num != Num::Slice || !o.type) return false;
    const GoType* e = bin_.types->get(o.type->elem);
    return e && e->kind == GoKind::Uint8;
  }

  static std::string type_name(const Operand& o) {
    if (o.type) return o.type->name;
    return o.num == Num::Signed ? "int64" : "a word";
  }

  void string_call(const Node& n, Code& c) {
    if (n.kids.size() != 2) {
      error(n.pos, fmt::format("{}(s, \"...\") takes 2 arguments", n.text));
      return;
    }
    if (n.kids[1]->kind != NodeKind::String) {
      error(n.kids[1]->pos, fmt::format("{}'s second argument must be a string literal", n.text));
      return;
    }
    auto o = operand(*n.kids[0], c);
    if (!o) return;
    if (!stringy(*o)) {
      error(n.kids[0]->pos,
            fmt::format("{} is {}, not a string or []byte", o->spelled, type_name(*o)));
      return;
    }
    string_compare(*o, n.kids[1]->text, n.text == "hasPrefix" ? GOTAP_CS_PREFIX : GOTAP_CS_CONTAINS,
                   c, n.kids[1]->pos);
  }

  void string_compare(const Operand& o, const std::string& lit, uint8_t kind, Code& c, size_t pos) {
    if (lit.size() > GOTAP_COND_MAX_LIT) {
      error(pos, fmt::format("string literal longer than {} bytes", GOTAP_COND_MAX_LIT));
      return;
    }
    if (pool_.size() + lit.size() > GOTAP_COND_POOL) {
      error(pos, fmt::format("string literals longer than {} bytes in all", GOTAP_COND_POOL));
      return;
    }
    load(o, 0, 8, false, c, pos);  // data pointer
    load(o, 8, 8, true, c, pos);   // length
    c.push_back(insn(GOTAP_COP_STR, kind, static_cast<uint8_t>(lit.size()), 0,
                     static_cast<int32_t>(pool_.size())));
    pool_ += lit;
  }

  // Pushes one scalar word of o (its whole value: an int, a bool, a pointer word).
  void push_scalar(const Operand& o, Code& c, size_t pos) {
    if (o.kind == Operand::Word) {
      c.insert(c.end(), o.word.begin(), o.word.end());
      return;
    }
    uint32_t size = o.type ? static_cast<uint32_t>(o.type->size) : 8;
    if (size == 0 || size > 8) size = 8;
    load(o, 0, size, o.num == Num::Signed, c, pos);
  }

  // push_scalar, except that an argument's value compared at the return is read at the entry
  // and kept (GOTAP_COP_SAVE, GOTAP_COP_LOAD).
  void push_side(const Operand& o, const Node& side, Code& c, size_t pos) {
    if (!in_ret_ || !entry_ || has_ret(side)) {
      push_scalar(o, c, pos);
      return;
    }
    if (nvals_ >= GOTAP_COND_VALS) {
      error(pos, fmt::format("at most {} arguments can be compared with results", GOTAP_COND_VALS));
      return;
    }
    const uint8_t slot = static_cast<uint8_t>(nvals_++);
    push_scalar(o, *entry_, pos);
    entry_->push_back(insn(GOTAP_COP_SAVE, slot));
    c.push_back(insn(GOTAP_COP_LOAD, slot));
  }

  // Pushes the `size` bytes at offset `off` of o.
  void load(const Operand& o, uint64_t off, uint32_t size, bool sign, Code& c, size_t pos) {
    uint8_t ext = sign ? GOTAP_CDF_SIGNED : 0;
    if (o.kind == Operand::Mem) {
      c.insert(c.end(), o.base.begin(), o.base.end());
      c.push_back(insn(GOTAP_COP_DEREF, 0, static_cast<uint8_t>(size), ext,
                       static_cast<int32_t>(o.moff + off)));
      return;
    }
    uint64_t at = o.voff + off;
    for (const auto& pc : o.param->loc.pieces) {
      if (at < pc.value_offset || at >= pc.value_offset + pc.size) continue;
      uint64_t in = at - pc.value_offset;
      if (pc.kind == LocPiece::Stack) {
        c.push_back(insn(GOTAP_COP_STACK, 0, 0, 0, static_cast<int32_t>(pc.stack_offset + in)));
      } else if (pc.kind == LocPiece::RegMem) {
        // The buffer's address, then the bytes at the offset from it.
        c.push_back(insn(GOTAP_COP_REG, pc.reg));
        c.push_back(insn(GOTAP_COP_DEREF, 0, static_cast<uint8_t>(size), ext,
                         static_cast<int32_t>(pc.stack_offset + in)));
        return;
      } else if (in != 0 || (pc.reg_byte != 0 && pc.kind != LocPiece::IntReg)) {
        error(pos, fmt::format("{}: a value inside a register word is not supported", o.spelled));
        return;
      } else if (pc.kind == LocPiece::IntReg) {
        c.push_back(insn(GOTAP_COP_REG, pc.reg));
        if (pc.reg_byte) {  // its bytes of a register other results share (gccgo)
          c.push_back(insn(GOTAP_COP_EXT, pc.reg_byte, static_cast<uint8_t>(size), ext));
          return;
        }
      } else {
        c.push_back(insn(GOTAP_COP_XMM, pc.reg));
        ebpf_cannot(pos, fmt::format("{} is a float in register X{}", o.spelled, pc.reg));
      }
      if (size < 8) c.push_back(insn(GOTAP_COP_EXT, 0, static_cast<uint8_t>(size), ext));
      return;
    }
    error(pos, fmt::format("{}: where it is at this probe is not known", o.spelled));
  }

  // Resolves the operand n; code pushing intermediate words goes into the operand.
  std::optional<Operand> operand(const Node& n, Code& c) {
    if (!ok()) return std::nullopt;
    switch (n.kind) {
      case NodeKind::Name: {
        const ParamLoc* p = param(n.text);
        Operand o;
        o.spelled = n.text == kErrorResult ? "the error result" : n.text;
        if (!p) {
          if (n.text == "goid" || n.text == "duration") {
            o.kind = Operand::Word;
            o.num = n.text == "goid" ? Num::Signed : Num::Signed;
            o.word.push_back(insn(n.text == "goid" ? GOTAP_COP_GOID : GOTAP_COP_DURATION));
            if (n.text == "goid" && !in_ret_) goid_entry_ = true;
            return o;
          }
          missing(n);
          return std::nullopt;
        }
        if (!bin_.types || p->type == 0 || !bin_.types->get(p->type)) {
          error(n.pos, fmt::format("{} of {} has no type information (its signature comes from "
                                   "{}); conditions need DWARF or a method table",
                                   n.text, f_.name, f_.args_source));
          return std::nullopt;
        }
        if (p->loc.pieces.empty()) {
          error(n.pos, fmt::format("where {} of {} lives is not known", n.text, f_.name));
          return std::nullopt;
        }
        o.kind = Operand::Loc;
        o.param = p;
        o.type = bin_.types->get(p->type);
        o.num = num_of(o.type);
        return o;
      }
      case NodeKind::Field: {
        auto o = operand(*n.kids[0], c);
        if (!o) return std::nullopt;
        if (o->num == Num::Pointer && o->type && o->type->kind == GoKind::Ptr) {
          // Follow the pointer: its word is the base of what comes next.
          Operand m;
          m.kind = Operand::Mem;
          push_scalar(*o, m.base, n.pos);
          m.type = bin_.types->get(o->type->elem);
          m.spelled = o->spelled;
          if (!m.type) {
            error(n.pos, fmt::format("{}: the type it points to is not known", o->spelled));
            return std::nullopt;
          }
          m.num = num_of(m.type);
          o = std::move(m);
        }
        if (!o->type || o->type->kind != GoKind::Struct) {
          error(n.pos, fmt::format("{} is {}, which has no fields", o->spelled, type_name(*o)));
          return std::nullopt;
        }
        const GoField* fld = nullptr;
        for (const auto& f : o->type->fields)
          if (f.name == n.text) fld = &f;
        if (!fld) {
          error(n.pos, fmt::format("{} ({}) has no field {}", o->spelled, o->type->name, n.text));
          return std::nullopt;
        }
        const GoType* ft = bin_.types->get(fld->type);
        if (!ft) {
          error(n.pos, fmt::format("the type of {}.{} is not known", o->spelled, n.text));
          return std::nullopt;
        }
        if (o->kind == Operand::Loc)
          o->voff += fld->offset;
        else
          o->moff += fld->offset;
        o->type = ft;
        o->num = num_of(ft);
        o->spelled += "." + n.text;
        return o;
      }
      case NodeKind::Index:
        return index(n, c);
      case NodeKind::Call: {
        if (n.text == "len") return len_of(n, c);
        if (n.text == "hasPrefix" || n.text == "contains") {
          Operand o;
          o.kind = Operand::Word;
          o.num = Num::Bool;
          o.spelled = n.text + "(..)";
          string_call(n, o.word);
          return o;
        }
        if (n.text == "type") {
          error(n.pos,
                "type(x) can only be compared with a type name, as in type(err) == "
                "\"*fs.PathError\"");
          return std::nullopt;
        }
        error(n.pos, fmt::format("unknown function {}() (len, hasPrefix, contains, type)", n.text));
        return std::nullopt;
      }
      default:
        error(n.pos, "expected a name, a field or len(..) here");
        return std::nullopt;
    }
  }

  // s[i] and m[k], ptrace only: the element's address is computed (a bounded index, a map
  // walked in user space) and what follows reads memory there. Out of range or absent: the
  // address is an invalid word, so that a comparison of it is false.
  std::optional<Operand> index(const Node& n, Code& c) {
    auto o = operand(*n.kids[0], c);
    if (!o) return std::nullopt;
    const Node& k = *n.kids[1];
    const GoType* elem = o->type ? bin_.types->get(o->type->elem) : nullptr;
    const bool is_map = o->type && o->type->kind == GoKind::Map;
    if (!o->type || !(o->num == Num::Slice || is_map || o->type->kind == GoKind::Array)) {
      error(n.kids[0]->pos, fmt::format("{} is {}: only slices, arrays and maps can be indexed",
                                        o->spelled, type_name(*o)));
      return std::nullopt;
    }
    if (!elem) {
      error(n.pos, fmt::format("{}: the type of its elements is not known", o->spelled));
      return std::nullopt;
    }
    Operand m;
    m.kind = Operand::Mem;
    m.type = elem;
    m.num = num_of(elem);
    if (is_map) {
      if (!map_key(*o, k, n, m)) return std::nullopt;
      ebpf_cannot(n.kids[0]->pos, fmt::format("{}[..] looks up a map", o->spelled));
      return m;
    }
    if (o->type->kind == GoKind::Array) {
      if (k.kind != NodeKind::Int || k.neg || k.u >= static_cast<uint64_t>(o->type->count)) {
        error(k.pos, fmt::format("{} is {}: index it with a constant from 0 to {}", o->spelled,
                                 o->type->name, o->type->count - 1));
        return std::nullopt;
      }
      (o->kind == Operand::Mem ? o->moff : o->voff) += k.u * elem->size;
      o->type = elem;
      o->num = m.num;
      o->spelled += fmt::format("[{}]", k.u);
      return o;
    }
    load(*o, 0, 8, false, m.base, n.pos);  // the slice's data
    load(*o, 8, 8, true, m.base, n.pos);   // its length
    if (k.kind == NodeKind::Int) {
      m.base.push_back(insn(GOTAP_COP_CONST, 0, 0, 0, 0,
                            k.neg ? static_cast<uint64_t>(-static_cast<int64_t>(k.u)) : k.u));
      m.spelled = fmt::format("{}[{}{}]", o->spelled, k.neg ? "-" : "", k.u);
    } else {
      auto i = operand(k, c);
      if (!i) return std::nullopt;
      if (i->num != Num::Signed && i->num != Num::Unsigned) {
        error(k.pos, fmt::format("{} is {}: an index is an integer", i->spelled, type_name(*i)));
        return std::nullopt;
      }
      push_scalar(*i, m.base, k.pos);
      m.spelled = fmt::format("{}[{}]", o->spelled, i->spelled);
    }
    m.base.push_back(insn(GOTAP_COP_INDEX, 0, 0, 0, 0, elem->size));
    ebpf_cannot(n.kids[0]->pos, fmt::format("{}[..] indexes a slice", o->spelled));
    return m;
  }

  // m[k]: the code that pushes the element's address, into m.base.
  bool map_key(const Operand& o, const Node& k, const Node& n, Operand& m) {
    const GoType* kt = bin_.types->get(o.type->key);
    const Num kn = num_of(kt);
    std::string bytes;
    uint8_t is_string = 0;
    if (kn == Num::String && k.kind == NodeKind::String) {
      bytes = k.text;
      is_string = 1;
      m.spelled = fmt::format("{}[\"{}\"]", o.spelled, k.text);
    } else if ((kn == Num::Signed || kn == Num::Unsigned) && k.kind == NodeKind::Int &&
               !(k.neg && kn == Num::Unsigned) && kt->size >= 1 && kt->size <= 8) {
      const uint64_t v = k.neg ? static_cast<uint64_t>(-static_cast<int64_t>(k.u)) : k.u;
      bytes.assign(reinterpret_cast<const char*>(&v), kt->size);  // little-endian
      m.spelled = fmt::format("{}[{}{}]", o.spelled, k.neg ? "-" : "", k.u);
    } else {
      error(k.pos, fmt::format("{} is {}: index it with a{} literal", o.spelled, o.type->name,
                               kn == Num::String ? " string" : "n integer"));
      return false;
    }
    if (bytes.size() > GOTAP_COND_MAX_LIT || pool_.size() + bytes.size() > GOTAP_COND_POOL) {
      error(k.pos, fmt::format("map key longer than {} bytes", GOTAP_COND_MAX_LIT));
      return false;
    }
    push_scalar(o, m.base, n.pos);
    m.base.push_back(insn(GOTAP_COP_CONST, 0, 0, 0, 0, o.type->id));
    m.base.push_back(insn(GOTAP_COP_MAP_INDEX, is_string, static_cast<uint8_t>(bytes.size()), 0,
                          static_cast<int32_t>(pool_.size())));
    pool_ += bytes;
    return true;
  }

  std::optional<Operand> len_of(const Node& n, Code& c) {
    if (n.kids.size() != 1) {
      error(n.pos, "len(x) takes 1 argument");
      return std::nullopt;
    }
    auto o = operand(*n.kids[0], c);
    if (!o) return std::nullopt;
    Operand r;
    r.kind = Operand::Word;
    r.num = Num::Signed;
    r.spelled = "len(" + o->spelled + ")";
    if (o->num == Num::String || o->num == Num::Slice) {
      load(*o, 8, 8, true, r.word, n.pos);
    } else if (o->type && o->type->kind == GoKind::Map) {
      // Both map layouts (hmap.count, the swiss Map.used) start with the element count.
      push_scalar(*o, r.word, n.pos);
      r.word.push_back(insn(GOTAP_COP_DEREF, 0, 8, GOTAP_CDF_NIL_ZERO, 0));
    } else if (o->type && o->type->kind == GoKind::Array) {
      r.word.push_back(insn(GOTAP_COP_CONST, 0, 0, 0, 0, static_cast<uint64_t>(o->type->count)));
    } else {
      error(n.kids[0]->pos, fmt::format("len of {} ({}): only strings, slices, maps and arrays",
                                        o->spelled, type_name(*o)));
      return std::nullopt;
    }
    return r;
  }

  static uint8_t cmp_code(const std::string& op, bool swap) {
    if (op == "==") return GOTAP_CC_EQ;
    if (op == "!=") return GOTAP_CC_NE;
    if (op == "<") return swap ? GOTAP_CC_GT : GOTAP_CC_LT;
    if (op == "<=") return swap ? GOTAP_CC_GE : GOTAP_CC_LE;
    if (op == ">") return swap ? GOTAP_CC_LT : GOTAP_CC_GT;
    return swap ? GOTAP_CC_LE : GOTAP_CC_GE;
  }

  void compare(const Node& n, Code& c) {
    const Node* l = n.kids[0].get();
    const Node* r = n.kids[1].get();
    bool swap = false;
    if (is_literal(*l) && !is_literal(*r)) {
      std::swap(l, r);
      swap = true;
    }
    if (is_literal(*l)) {
      error(n.pos, "a comparison needs something of the call on one side");
      return;
    }
    const bool eq = n.text == "==" || n.text == "!=";
    if (l->kind == NodeKind::Call && l->text == "type") {
      type_compare(n, *l, *r, c);
      return;
    }
    auto o = operand(*l, c);
    if (!o) return;
    if (r->kind == NodeKind::Nil) {
      if (!eq) {
        error(n.pos, "nil can only be compared with == or !=");
        return;
      }
      if (o->num == Num::Pointer || o->num == Num::Iface || o->num == Num::Slice) {
        if (o->num == Num::Pointer)
          push_scalar(*o, c, l->pos);
        else
          load(*o, 0, 8, false, c, l->pos);  // an interface's type word, a slice's data
        c.push_back(insn(GOTAP_COP_CONST));
        c.push_back(insn(GOTAP_COP_CMP, cmp_code(n.text, false), 0, GOTAP_CN_UNSIGNED));
        return;
      }
      error(r->pos, fmt::format("{} is {}, which cannot be nil", o->spelled, type_name(*o)));
      return;
    }
    if (stringy(*o)) {
      if (!eq) {
        error(n.pos, "strings compare with == and != (and hasPrefix, contains)");
        return;
      }
      if (r->kind == NodeKind::String) {
        string_compare(*o, r->text, GOTAP_CS_EQ, c, r->pos);
      } else if (is_literal(*r)) {
        error(r->pos, fmt::format("{} is {}: compare it with a string", o->spelled,
                                  o->num == Num::String ? "a string" : type_name(*o)));
        return;
      } else {
        auto other = operand(*r, c);
        if (!other) return;
        if (!stringy(*other)) {
          error(r->pos, fmt::format("cannot compare {} ({}) with {} ({})", o->spelled,
                                    type_name(*o), other->spelled, type_name(*other)));
          return;
        }
        if (in_ret_ && has_ret(*l) != has_ret(*r)) {
          error(n.pos, "a string argument compared with a string result is not supported");
          return;
        }
        load(*o, 0, 8, false, c, l->pos);
        load(*o, 8, 8, true, c, l->pos);
        load(*other, 0, 8, false, c, r->pos);
        load(*other, 8, 8, true, c, r->pos);
        c.push_back(insn(GOTAP_COP_STR2));
      }
      if (n.text == "!=") c.push_back(insn(GOTAP_COP_NOT));
      return;
    }
    uint8_t num = 0;
    uint64_t imm = 0;
    bool literal = is_literal(*r);
    std::optional<Operand> other;
    switch (o->num) {
      case Num::Signed:
      case Num::Unsigned:
        num = o->num == Num::Signed ? GOTAP_CN_SIGNED : GOTAP_CN_UNSIGNED;
        if (r->kind == NodeKind::Int || r->kind == NodeKind::Duration) {
          if (r->neg && o->num == Num::Unsigned) {
            error(r->pos, fmt::format("{} is {}: it is never negative", o->spelled, type_name(*o)));
            return;
          }
          imm = r->neg ? static_cast<uint64_t>(-static_cast<int64_t>(r->u)) : r->u;
        } else if (!literal) {
          other = operand(*r, c);
          if (!other) return;
          if (other->num != Num::Signed && other->num != Num::Unsigned) {
            error(r->pos, fmt::format("cannot compare {} ({}) with {} ({})", o->spelled,
                                      type_name(*o), other->spelled, type_name(*other)));
            return;
          }
          if (other->num == Num::Unsigned) num = GOTAP_CN_UNSIGNED;
        } else {
          error(r->pos,
                fmt::format("{} is {}: compare it with an integer", o->spelled, type_name(*o)));
          return;
        }
        break;
      case Num::Float: {
        const bool f32 = o->type && o->type->kind == GoKind::Float32;
        num = f32 ? GOTAP_CN_F32 : GOTAP_CN_F64;
        ebpf_cannot(l->pos, fmt::format("{} is a float", o->spelled));
        if (r->kind == NodeKind::Int || r->kind == NodeKind::Float) {
          double v = r->kind == NodeKind::Int
                         ? (r->neg ? -static_cast<double>(r->u) : static_cast<double>(r->u))
                         : r->f;
          if (f32) {
            float fv = static_cast<float>(v);
            uint32_t bits;
            std::memcpy(&bits, &fv, 4);
            imm = bits;
          } else {
            std::memcpy(&imm, &v, 8);
          }
        } else if (!literal) {
          other = operand(*r, c);
          if (!other) return;
          if (other->num != Num::Float || (other->type && other->type->size != o->type->size)) {
            error(r->pos, fmt::format("cannot compare {} ({}) with {}", o->spelled, type_name(*o),
                                      other->spelled));
            return;
          }
        } else {
          error(r->pos,
                fmt::format("{} is {}: compare it with a number", o->spelled, type_name(*o)));
          return;
        }
        break;
      }
      case Num::Bool:
        num = GOTAP_CN_UNSIGNED;
        if (r->kind != NodeKind::Bool || !eq) {
          error(r->pos,
                fmt::format("{} is a bool: compare it with == true or == false", o->spelled));
          return;
        }
        imm = r->u;
        break;
      case Num::Pointer:
        num = GOTAP_CN_UNSIGNED;
        if (literal || !eq) {
          error(r->pos, fmt::format("{} is {}: compare it with nil", o->spelled, type_name(*o)));
          return;
        }
        other = operand(*r, c);
        if (!other) return;
        if (other->num != Num::Pointer) {
          error(r->pos, fmt::format("cannot compare {} with {}", o->spelled, other->spelled));
          return;
        }
        break;
      default:
        error(l->pos, fmt::format("{} is {}: conditions compare numbers, bools, strings, "
                                  "pointers and nil (use a field, len(..) or type(..))",
                                  o->spelled, type_name(*o)));
        return;
    }
    push_side(*o, *l, c, l->pos);
    if (other)
      push_side(*other, *r, c, r->pos);
    else
      c.push_back(insn(GOTAP_COP_CONST, 0, 0, 0, 0, imm));
    c.push_back(insn(GOTAP_COP_CMP, cmp_code(n.text, swap), 0, num));
  }

  void type_compare(const Node& n, const Node& call, const Node& lit, Code& c) {
    if (call.kids.size() != 1) {
      error(call.pos, "type(x) takes 1 argument");
      return;
    }
    if (lit.kind != NodeKind::String || (n.text != "==" && n.text != "!=")) {
      error(n.pos, "type(x) compares with == or != and a type name in quotes");
      return;
    }
    auto o = operand(*call.kids[0], c);
    if (!o) return;
    if (o->num != Num::Iface) {
      error(call.kids[0]->pos,
            fmt::format("{} is {}, not an interface", o->spelled, type_name(*o)));
      return;
    }
    const bool iface = !o->type->fields.empty() && o->type->fields[0].name == "tab";
    std::vector<uint64_t> addrs;
    if (bin_.types) {
      for (const auto& [id, t] : bin_.types->all()) {
        if (!t.runtime_type || t.is_typedef) continue;
        if (t.name == lit.text || runtime_spelling(t.name) == lit.text) {
          uint64_t a = bin_.rt.types + t.runtime_type;
          if (std::find(addrs.begin(), addrs.end(), a) == addrs.end()) addrs.push_back(a);
        }
      }
    }
    // The type graph holds only what the traced signatures reach (all of DWARF's types, but
    // a stripped binary's method tables name few): the dynamic type of an interface is any
    // descriptor the binary has.
    if (bin_.type_names)
      for (uint64_t a : bin_.type_names->find(lit.text))
        if (std::find(addrs.begin(), addrs.end(), a) == addrs.end()) addrs.push_back(a);
    if (addrs.empty()) {
      error(lit.pos, fmt::format("no type {} in the binary", lit.text));
      return;
    }
    if (addrs.size() > 4) {
      error(lit.pos, fmt::format("type name {} is ambiguous", lit.text));
      return;
    }
    for (size_t i = 0; i < addrs.size(); ++i) {
      load(*o, 0, 8, false, c, call.pos);
      if (iface) c.push_back(insn(GOTAP_COP_ITAB_TYPE));
      c.push_back(insn(GOTAP_COP_CONST, 1, 0, 0, 0, addrs[i]));
      c.push_back(insn(GOTAP_COP_CMP, GOTAP_CC_EQ, 0, GOTAP_CN_UNSIGNED));
      if (i) c.push_back(insn(GOTAP_COP_OR));
    }
    if (n.text == "!=") c.push_back(insn(GOTAP_COP_NOT));
  }

  const FuncPlan& f_;
  const BinaryView& bin_;
  FuncProgram* out_;
  ExprError* err_ = nullptr;
  std::string* missing_ = nullptr;
  CompileStatus status_ = CompileStatus::Ok;
  std::string pool_;
  int nbits_ = 0;
  int nvals_ = 0;
  bool in_ret_ = false;
  Code* entry_ = nullptr;  // the entry program, while compiling a part decided at the return
  bool goid_entry_ = false;
};

}  // namespace

std::string runtime_spelling(std::string_view name) {
  std::string out;
  size_t word = 0;  // where the current name began in out
  for (char ch : name) {
    if (ch == '/') {
      out.resize(word);  // drop the path element
      continue;
    }
    out += ch;
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.' || ch == '-' ||
          static_cast<unsigned char>(ch) >= 0x80))
      word = out.size();
  }
  return out;
}

CompileStatus compile_for(const Node& root, const FuncPlan& f, const BinaryView& bin,
                          FuncProgram* out, ExprError* err, std::string* missing) {
  *out = FuncProgram{};
  Compiler c(f, bin, out);
  CompileStatus s = c.run(root, err, missing);
  if (s != CompileStatus::Ok) {
    out->prog = gotap_cond{};
    out->prog.flags = GOTAP_COND_ON | GOTAP_COND_NEVER;
  }
  return s;
}

}  // namespace gotap::cond
