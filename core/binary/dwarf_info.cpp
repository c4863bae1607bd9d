#include "core/binary/dwarf_info.h"

#include <algorithm>

#include <dwarf.h>
#include <elfutils/libdw.h>

#include <cctype>
#include <cstring>
#include <string_view>

#include <gelf.h>

namespace gotap {

namespace {

// Go's own attributes (src/cmd/internal/dwarf/dwarf.go).
constexpr unsigned kAtGoKind = 0x2900;
constexpr unsigned kAtGoKey = 0x2901;
constexpr unsigned kAtGoElem = 0x2902;
constexpr unsigned kAtGoEmbeddedField = 0x2903;
constexpr unsigned kAtGoRuntimeType = 0x2904;

// Corrupt input can nest DIEs arbitrarily deep; real Go DWARF nests a handful of levels.
constexpr int kMaxNesting = 256;

bool is_type_tag(int tag) {
  switch (tag) {
    case DW_TAG_base_type:
    case DW_TAG_pointer_type:
    case DW_TAG_structure_type:
    case DW_TAG_array_type:
    case DW_TAG_typedef:
    case DW_TAG_subroutine_type:
    case DW_TAG_unspecified_type:
      return true;
    default:
      return false;
  }
}

std::optional<uint64_t> attr_udata(Dwarf_Attribute* a) {
  Dwarf_Word w;
  if (dwarf_formudata(a, &w) == 0) return w;
  Dwarf_Addr ad;
  if (dwarf_formaddr(a, &ad) == 0) return ad;
  return std::nullopt;
}

TypeId attr_ref(Dwarf_Attribute* a) {
  Dwarf_Die d;
  if (!dwarf_formref_die(a, &d)) return 0;
  return dwarf_dieoffset(&d);
}

std::string attr_string(Dwarf_Attribute* a) {
  const char* s = dwarf_formstring(a);
  return s ? s : "";
}

// Reads an attribute of `die`, following DW_AT_abstract_origin / DW_AT_specification.
Dwarf_Attribute* integrated(Dwarf_Die* die, unsigned name, Dwarf_Attribute* out) {
  return dwarf_attr_integrate(die, name, out);
}

std::string die_name(Dwarf_Die* die) {
  Dwarf_Attribute a;
  if (!integrated(die, DW_AT_name, &a)) return "";
  return attr_string(&a);
}

GoKind kind_from_base(uint64_t encoding, uint64_t size) {
  switch (encoding) {
    case DW_ATE_boolean:
      return GoKind::Bool;
    case DW_ATE_float:
      return size == 4 ? GoKind::Float32 : GoKind::Float64;
    case DW_ATE_complex_float:
      return size == 8 ? GoKind::Complex64 : GoKind::Complex128;
    case DW_ATE_signed:
      return size == 1   ? GoKind::Int8
             : size == 2 ? GoKind::Int16
             : size == 4 ? GoKind::Int32
                         : GoKind::Int64;
    case DW_ATE_unsigned:
    case DW_ATE_unsigned_char:
      return size == 1   ? GoKind::Uint8
             : size == 2 ? GoKind::Uint16
             : size == 4 ? GoKind::Uint32
                         : GoKind::Uint64;
    default:
      return GoKind::Invalid;
  }
}

// Turns one DWARF location expression into pieces. Go emits DW_OP_regN, DW_OP_fbreg,
// DW_OP_call_frame_cfa (a stack slot at the CFA itself) and DW_OP_piece.
std::vector<DwarfLocPiece> decode_expr(const Dwarf_Op* ops, size_t n) {
  std::vector<DwarfLocPiece> out;
  DwarfLocPiece cur;
  bool have_op = false;
  std::optional<int64_t> pending_const;
  for (size_t i = 0; i < n; ++i) {
    const Dwarf_Op& op = ops[i];
    if (op.atom >= DW_OP_reg0 && op.atom <= DW_OP_reg31) {
      cur.kind = DwarfLocPiece::Reg;
      cur.dwarf_reg = op.atom - DW_OP_reg0;
      have_op = true;
      continue;
    }
    switch (op.atom) {
      case DW_OP_regx:
        cur.kind = DwarfLocPiece::Reg;
        cur.dwarf_reg = static_cast<int>(op.number);
        have_op = true;
        break;
      case DW_OP_fbreg:
        cur.kind = DwarfLocPiece::FrameBase;
        cur.fb_offset = static_cast<int64_t>(op.number);
        have_op = true;
        break;
      case DW_OP_call_frame_cfa:
        cur.kind = DwarfLocPiece::FrameBase;
        cur.fb_offset = 0;
        have_op = true;
        break;
      case DW_OP_plus_uconst:
        if (cur.kind == DwarfLocPiece::FrameBase)
          cur.fb_offset += static_cast<int64_t>(op.number);
        else
          cur.kind = DwarfLocPiece::Other;
        have_op = true;
        break;
      case DW_OP_consts:
      case DW_OP_constu:
        pending_const = static_cast<int64_t>(op.number);
        have_op = true;
        break;
      case DW_OP_plus:
        if (cur.kind == DwarfLocPiece::FrameBase && pending_const)
          cur.fb_offset += *pending_const;
        else
          cur.kind = DwarfLocPiece::Other;
        pending_const.reset();
        have_op = true;
        break;
      case DW_OP_piece:
        cur.size = op.number;
        if (!have_op) cur.kind = DwarfLocPiece::Other;  // this part is optimized out
        out.push_back(cur);
        cur = DwarfLocPiece{};
        have_op = false;
        pending_const.reset();
        break;
      default:
        cur.kind = DwarfLocPiece::Other;
        have_op = true;
        break;
    }
  }
  if (have_op) out.push_back(cur);
  return out;
}

// 21 for "Go cmd/compile go1.21.3; regabi"; 0 when there is no version.
int go_minor_of(const std::string& producer) {
  size_t at = producer.find("go1.");
  if (at == std::string::npos) return 0;
  int v = 0;
  for (size_t i = at + 4; i < producer.size() && i < at + 8 && std::isdigit(producer[i]); ++i)
    v = v * 10 + (producer[i] - '0');
  return v;
}

// Go 1.21 and older describe a method wrapper's parameters without its receiver, though
// the receiver is passed first like any method's.
void add_wrapper_receiver(const TypeGraph& types, DwarfFunc& f) {
  // A method value ("T.M-fm") is a closure: its receiver comes in the closure context.
  if (f.name.ends_with("-fm")) return;
  std::string recv = method_receiver_type(f.name);
  if (recv.empty()) return;
  if (!f.params.empty() && !f.params[0].is_result) {
    const GoType* t = types.get(f.params[0].type);
    if (t && t->name == recv) return;
  }
  const GoType* rt = types.by_name(recv);
  if (!rt && recv[0] == '*') rt = types.by_name("unsafe.Pointer");
  if (!rt) return;  // cannot size it: leave the DWARF as it is
  DwarfParam p;
  p.name = ".this";
  p.type = rt->id;
  f.params.insert(f.params.begin(), std::move(p));
}

}  // namespace

class DwarfLoader {
 public:
  explicit DwarfLoader(DwarfInfo* out) : out_(out) {}

  void unit(Dwarf_Die* cudie, int version) {
    cu_go_minor_ = 0;
    cu_files_ = nullptr;
    cu_files_loaded_ = false;
    cudie_ = *cudie;
    Dwarf_Attribute a;
    if (dwarf_attr(cudie, DW_AT_producer, &a)) {
      std::string p = attr_string(&a);
      bool is_go = p.rfind("Go cmd/compile", 0) == 0;
      cu_go_minor_ = go_minor_of(p);
      if (!p.empty() && (out_->producer_.empty() || (is_go && !producer_is_go_))) {
        out_->producer_ = p;
        out_->version_ = version;
        producer_is_go_ = is_go;
      }
    }
    if (!out_->version_) out_->version_ = version;
    // cgo binaries carry C units too; their "int" is not Go's, and their functions do not
    // follow the Go ABI.
    Dwarf_Word lang = DW_LANG_Go;
    if (dwarf_attr(cudie, DW_AT_language, &a)) lang = attr_udata(&a).value_or(DW_LANG_Go);
    if (lang != DW_LANG_Go) return;
    children(cudie, 0);
  }

 private:
  void children(Dwarf_Die* parent, int depth) {
    if (depth > kMaxNesting) return;
    Dwarf_Die child;
    if (dwarf_child(parent, &child) != 0) return;
    do {
      int tag = dwarf_tag(&child);
      if (is_type_tag(tag)) {
        type(&child, tag);
      } else if (tag == DW_TAG_subprogram) {
        subprogram(&child, depth);
      } else if (tag == DW_TAG_inlined_subroutine) {
        inlined(&child);
        children(&child, depth + 1);
      } else if (tag == DW_TAG_lexical_block) {
        children(&child, depth + 1);
      }
    } while (dwarf_siblingof(&child, &child) == 0);
  }

  void type(Dwarf_Die* die, int tag) {
    GoType t;
    t.id = dwarf_dieoffset(die);
    if (out_->types_.get(t.id)) return;
    uint64_t encoding = 0;
    bool has_kind = false;
    Dwarf_Attribute a;
    if (dwarf_attr(die, DW_AT_name, &a)) t.name = attr_string(&a);
    if (dwarf_attr(die, DW_AT_byte_size, &a)) t.size = attr_udata(&a).value_or(0);
    if (dwarf_attr(die, kAtGoKind, &a)) {
      uint64_t k = attr_udata(&a).value_or(0);
      if (k <= static_cast<uint64_t>(GoKind::UnsafePointer)) {
        t.kind = static_cast<GoKind>(k);
        has_kind = k != 0;
      }
    }
    if (dwarf_attr(die, kAtGoRuntimeType, &a)) t.runtime_type = attr_udata(&a).value_or(0);
    if (dwarf_attr(die, kAtGoElem, &a)) t.elem = attr_ref(&a);
    if (dwarf_attr(die, kAtGoKey, &a)) t.key = attr_ref(&a);
    TypeId dw_type = dwarf_attr(die, DW_AT_type, &a) ? attr_ref(&a) : 0;
    if (tag == DW_TAG_base_type && dwarf_attr(die, DW_AT_encoding, &a))
      encoding = attr_udata(&a).value_or(0);

    switch (tag) {
      case DW_TAG_base_type:
        if (!has_kind) t.kind = kind_from_base(encoding, t.size);
        break;
      case DW_TAG_pointer_type:
        if (!has_kind) t.kind = GoKind::Ptr;
        if (!t.size) t.size = 8;
        if (!t.elem) t.elem = dw_type;
        break;
      case DW_TAG_structure_type:
        if (!has_kind) t.kind = GoKind::Struct;
        members(die, t);
        break;
      case DW_TAG_array_type:
        if (!has_kind) t.kind = GoKind::Array;
        if (!t.elem) t.elem = dw_type;
        t.count = array_count(die);
        break;
      case DW_TAG_typedef:
        t.is_typedef = true;
        t.target = dw_type;
        break;
      case DW_TAG_subroutine_type:
        if (!has_kind) t.kind = GoKind::Func;
        if (!t.size) t.size = 8;
        break;
      default:
        break;
    }
    out_->types_.add(std::move(t));
  }

  static void members(Dwarf_Die* die, GoType& t) {
    Dwarf_Die m;
    if (dwarf_child(die, &m) != 0) return;
    do {
      if (dwarf_tag(&m) != DW_TAG_member) continue;
      GoField f;
      Dwarf_Attribute a;
      if (dwarf_attr(&m, DW_AT_name, &a)) f.name = attr_string(&a);
      if (dwarf_attr(&m, DW_AT_type, &a)) f.type = attr_ref(&a);
      if (dwarf_attr(&m, DW_AT_data_member_location, &a)) {
        if (auto v = attr_udata(&a)) {
          f.offset = *v;
        } else {
          Dwarf_Op* ops;
          size_t n;
          if (dwarf_getlocation(&a, &ops, &n) == 0 && n == 1 && ops[0].atom == DW_OP_plus_uconst)
            f.offset = ops[0].number;
        }
      }
      if (dwarf_attr(&m, kAtGoEmbeddedField, &a)) {
        bool flag = false;
        if (dwarf_formflag(&a, &flag) == 0)
          f.embedded = flag;
        else
          f.embedded = attr_udata(&a).value_or(0) != 0;
      }
      t.fields.push_back(std::move(f));
    } while (dwarf_siblingof(&m, &m) == 0);
  }

  static int64_t array_count(Dwarf_Die* die) {
    Dwarf_Die s;
    if (dwarf_child(die, &s) != 0) return 0;
    do {
      if (dwarf_tag(&s) != DW_TAG_subrange_type) continue;
      Dwarf_Attribute a;
      if (dwarf_attr(&s, DW_AT_count, &a)) return static_cast<int64_t>(attr_udata(&a).value_or(0));
      if (dwarf_attr(&s, DW_AT_upper_bound, &a)) {
        Dwarf_Sword v;
        if (dwarf_formsdata(&a, &v) == 0) return v + 1;
      }
      return 0;
    } while (dwarf_siblingof(&s, &s) == 0);
    return 0;
  }

  void subprogram(Dwarf_Die* die, int depth) {
    Dwarf_Attribute a;
    // An abstract instance (DW_AT_inline) has no code; inlined and out-of-line instances
    // refer to it through DW_AT_abstract_origin.
    if (dwarf_attr(die, DW_AT_inline, &a)) return;
    Dwarf_Addr lo = 0, hi = 0;
    if (dwarf_lowpc(die, &lo) != 0) {
      children(die, depth + 1);
      return;
    }
    if (dwarf_highpc(die, &hi) != 0) hi = lo;
    DwarfFunc f;
    f.name = die_name(die);
    f.low_pc = lo;
    f.high_pc = hi;
    f.trampoline = dwarf_attr(die, DW_AT_trampoline, &a) != nullptr;
    // Go 1.19 marks promoted-method wrappers only by their file (reading it parses the
    // unit's line table, so only where needed).
    if (!f.trampoline && cu_go_minor_ < 21 && f.name.find(").") != std::string::npos) {
      const char* file = dwarf_decl_file(die);
      f.trampoline = file && std::string_view(file).ends_with("<autogenerated>");
    }
    Dwarf_Die p;
    if (dwarf_child(die, &p) == 0) {
      do {
        if (dwarf_tag(&p) != DW_TAG_formal_parameter) continue;
        DwarfParam dp = param(&p, lo);
        // Some functions list their results twice (Go 1.19-1.26, e.g. internal/poll.(*FD).
        // Write: ~r0 ~r0 ~r1 ~r1). Go names are unique apart from "_", so a repeat is one.
        bool repeat = dp.name != "_" && !dp.name.empty() &&
                      std::any_of(f.params.begin(), f.params.end(),
                                  [&](const DwarfParam& q) { return q.name == dp.name; });
        if (!repeat) f.params.push_back(std::move(dp));
      } while (dwarf_siblingof(&p, &p) == 0);
    }
    if (!f.name.empty()) out_->funcs_.try_emplace(f.name, std::move(f));
    children(die, depth + 1);
  }

  static DwarfParam param(Dwarf_Die* die, Dwarf_Addr entry) {
    DwarfParam p;
    p.name = die_name(die);
    Dwarf_Attribute a;
    if (integrated(die, DW_AT_type, &a)) p.type = attr_ref(&a);
    if (integrated(die, DW_AT_variable_parameter, &a)) {
      bool flag = false;
      if (dwarf_formflag(&a, &flag) == 0)
        p.is_result = flag;
      else
        p.is_result = attr_udata(&a).value_or(0) != 0;
    }
    if (dwarf_attr(die, DW_AT_location, &a)) {
      Dwarf_Op* ops = nullptr;
      size_t n = 0;
      if (dwarf_getlocation_addr(&a, entry, &ops, &n, 1) == 1 && n > 0) {
        auto pieces = decode_expr(ops, n);
        if (!pieces.empty()) p.entry_loc = std::move(pieces);
      }
    }
    return p;
  }

  void inlined(Dwarf_Die* die) {
    DwarfInlined in;
    in.callee = die_name(die);
    if (in.callee.empty()) return;
    Dwarf_Addr lo;
    if (dwarf_lowpc(die, &lo) == 0) {
      in.low_pc = lo;
    } else {
      Dwarf_Addr base, start, end;
      if (dwarf_ranges(die, 0, &base, &start, &end) > 0) in.low_pc = start;
    }
    Dwarf_Attribute a;
    if (dwarf_attr(die, DW_AT_call_line, &a))
      in.call_line = static_cast<int>(attr_udata(&a).value_or(0));
    if (dwarf_attr(die, DW_AT_call_file, &a)) {
      if (auto idx = attr_udata(&a)) in.call_file = file_name(*idx);
    }
    out_->inlined_[in.callee].push_back(std::move(in));
  }

  std::string file_name(uint64_t idx) {
    if (!cu_files_loaded_) {
      cu_files_loaded_ = true;
      size_t n = 0;
      if (dwarf_getsrcfiles(&cudie_, &cu_files_, &n) != 0) cu_files_ = nullptr;
    }
    if (!cu_files_) return "";
    const char* s = dwarf_filesrc(cu_files_, idx, nullptr, nullptr);
    return s ? s : "";
  }

  DwarfInfo* out_;
  Dwarf_Die cudie_{};
  Dwarf_Files* cu_files_ = nullptr;
  bool cu_files_loaded_ = false;
  bool producer_is_go_ = false;
  int cu_go_minor_ = 0;  // of this unit's producer, 0 when unknown
};

Result<Dwarf*> open_dwarf(const ElfFile& elf) {
  // libdw does not export its "no DWARF" error code, so look for the section ourselves.
  bool has_info = false;
  for (const auto& s : elf.sections())
    if ((s.name == ".debug_info" || s.name == ".zdebug_info") && s.size > 0) has_info = true;
  if (!elf.elf() || !has_info) return static_cast<Dwarf*>(nullptr);
  // libelf inflates SHF_COMPRESSED sections into a buffer of the size the header claims:
  // refuse sizes zlib cannot reach (its ratio is at most ~1032:1).
  for (const auto& s : elf.sections()) {
    if (!(s.flags & SHF_COMPRESSED) || s.name.rfind(".debug_", 0) != 0) continue;
    auto data = elf.section_data(s);
    auto ch_size = le64(data, 8);  // Elf64_Chdr: type u32, reserved u32, size u64, align u64
    if (!ch_size || *ch_size / 1032 > s.size + 4096)
      return make_error("{}: bad DWARF: section {} has an impossible size", elf.path(), s.name);
  }
  Dwarf* dw = dwarf_begin_elf(elf.elf(), DWARF_C_READ, nullptr);
  if (!dw) return make_error("{}: bad DWARF: {}", elf.path(), dwarf_errmsg(-1));
  return dw;
}

Result<std::unique_ptr<DwarfInfo>> DwarfInfo::load(const ElfFile& elf) {
  auto opened = open_dwarf(elf);
  if (!opened) return opened.error();
  Dwarf* dw = *opened;
  if (!dw) return std::unique_ptr<DwarfInfo>();
  auto info = std::make_unique<DwarfInfo>();
  DwarfLoader loader(info.get());
  Dwarf_CU* cu = nullptr;
  Dwarf_CU* next = nullptr;
  Dwarf_Half version = 0;
  uint8_t unit_type = 0;
  Dwarf_Die cudie, subdie;
  size_t units = 0;
  int rc;
  while ((rc = dwarf_get_units(dw, cu, &next, &version, &unit_type, &cudie, &subdie)) == 0) {
    cu = next;
    ++units;
    if (unit_type == DW_UT_compile || unit_type == DW_UT_partial) loader.unit(&cudie, version);
  }
  dwarf_end(dw);
  if (rc < 0 && units == 0) return make_error("{}: bad DWARF: no readable unit", elf.path());
  // Go 1.19-1.22 write uintptr's runtime type as an address instead of an offset from
  // moduledata.types like every other type's.
  if (const ElfSymbol* types = elf.symbol("runtime.types"); types && types->value) {
    for (auto& [id, t] : info->types_.types_)
      if (t.runtime_type >= types->value) t.runtime_type -= types->value;
  }
  info->types_.index();
  for (auto& [name, f] : info->funcs_)
    if (f.trampoline) add_wrapper_receiver(info->types_, f);
  return info;
}

const DwarfFunc* DwarfInfo::func(const std::string& name) const {
  auto it = funcs_.find(name);
  return it == funcs_.end() ? nullptr : &it->second;
}

const std::vector<DwarfInlined>& DwarfInfo::inlined(const std::string& callee) const {
  static const std::vector<DwarfInlined> kNone;
  auto it = inlined_.find(callee);
  return it == inlined_.end() ? kNone : it->second;
}

std::optional<uint64_t> DwarfInfo::member_offset(const std::string& type,
                                                 const std::string& member) const {
  const GoType* t = types_.by_name(type);
  if (!t) return std::nullopt;
  for (const auto& f : t->fields)
    if (f.name == member) return f.offset;
  return std::nullopt;
}

std::string method_receiver_type(const std::string& name) {
  size_t slash = name.rfind('/', name.find('['));
  size_t dot = name.find('.', slash == std::string::npos ? 0 : slash);
  if (dot == std::string::npos) return "";
  std::string pkg = name.substr(0, dot);
  std::string rest = name.substr(dot + 1);
  if (rest.rfind("(*", 0) == 0) {
    size_t close = rest.find(").");
    if (close == std::string::npos) return "";
    return "*" + pkg + "." + rest.substr(2, close - 2);
  }
  // T.M: the type ends at the last '.' outside brackets.
  int depth = 0;
  size_t last = std::string::npos;
  for (size_t i = 0; i < rest.size(); ++i) {
    if (rest[i] == '[') ++depth;
    if (rest[i] == ']') --depth;
    if (rest[i] == '.' && depth == 0) last = i;
  }
  if (last == std::string::npos) return "";
  return pkg + "." + rest.substr(0, last);
}

}  // namespace gotap
