#include "core/binary/gccgo_dwarf.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <gelf.h>

#include <algorithm>
#include <map>
#include <string_view>

#include "core/binary/dwarf_info.h"

namespace gotap {

namespace {

// Type DIEs nest (pointers to structs of pointers...): deeper than this is corrupt input.
constexpr int kMaxDepth = 32;
// Fields read of one parameter's type, nested ones included: a struct with more stays raw.
constexpr size_t kMaxFields = 64;

std::string die_name(Dwarf_Die* d) {
  const char* n = dwarf_diename(d);
  return n ? n : "";
}

std::optional<Dwarf_Die> type_of(Dwarf_Die* d) {
  Dwarf_Attribute a;
  Dwarf_Die t;
  if (!dwarf_attr_integrate(d, DW_AT_type, &a) || !dwarf_formref_die(&a, &t)) return std::nullopt;
  return t;
}

uint64_t member_offset(Dwarf_Die* m) {
  Dwarf_Attribute a;
  Dwarf_Word v = 0;
  if (dwarf_attr(m, DW_AT_data_member_location, &a) && dwarf_formudata(&a, &v) == 0) return v;
  return 0;
}

class Classifier {
 public:
  // A parameter's type, the same for every parameter of that type DIE: each is classified
  // once (libgo's *Client, *Reader... are the types of hundreds of parameters).
  const SysvType& classify_param(Dwarf_Die* d) {
    const Dwarf_Off at = dwarf_dieoffset(d);
    if (auto it = params_.find(at); it != params_.end()) return it->second;
    return params_.emplace(at, classify(d, 0)).first->second;
  }

  SysvType classify(Dwarf_Die* d, int depth = 0) {
    // A parameter's fields, all levels together, are bounded: structs of structs multiply.
    // So is its walk of scalars (leaves): per parameter, not per binary, or every aggregate
    // after the 100,000th scalar of a large program went to memory, at a wrong location.
    if (depth == 0) {
      fields_left_ = kMaxFields;
      visited_ = 0;
    }
    SysvType t;
    t.name = name(d, 0);
    Dwarf_Die s = strip_typedefs(*d);
    if (dwarf_tag(&s) == DW_TAG_structure_type) {
      auto ms = members(&s);
      if (auto empty = interface_shape(ms)) {
        t.iface = true;
        t.empty = *empty;
      } else if (depth < kFieldDepth && is_plain_struct(t.name, ms)) {
        for (auto& [n, m] : ms) {
          auto mt = type_of(&m);
          if (!mt || fields_left_ == 0) {
            t.fields.clear();  // a field whose type is unknown: the struct is raw
            break;
          }
          --fields_left_;
          t.fields.push_back({n, member_offset(&m), classify(&*mt, depth + 1)});
        }
      }
    }
    if (dwarf_tag(&s) == DW_TAG_pointer_type && depth < kFieldDepth)
      if (auto target = type_of(&s)) {
        SysvType e = classify(&*target, depth + 1);
        if (!e.fields.empty()) t.pointee.push_back(std::move(e));
      }
    Dwarf_Word size = 0;
    int bs = dwarf_bytesize(&s);
    if (bs > 0) size = Dwarf_Word(bs);
    if (dwarf_tag(&s) == DW_TAG_pointer_type && bs <= 0) size = 8;
    if (dwarf_tag(&s) == DW_TAG_array_type) size = array_size(&s, 0);
    t.size = size;
    if (size == 0) return t;
    if (size > 16) {
      t.memory = true;
      return t;
    }
    t.eightbytes.assign((size + 7) / 8, EightbyteClass::None);
    if (!leaves(&s, 0, t.eightbytes, 0)) {
      t.memory = true;
      t.eightbytes.clear();
    }
    return t;
  }

  std::string name(Dwarf_Die* d, int depth) {
    if (depth > kMaxDepth) return "?";
    switch (dwarf_tag(d)) {
      case DW_TAG_typedef:
      case DW_TAG_base_type:
        return die_name(d);
      case DW_TAG_pointer_type: {
        auto t = type_of(d);
        return t ? "*" + name(&*t, depth + 1) : "unsafe.Pointer";
      }
      case DW_TAG_const_type:
      case DW_TAG_volatile_type: {
        auto t = type_of(d);
        return t ? name(&*t, depth + 1) : "?";
      }
      case DW_TAG_array_type: {
        auto t = type_of(d);
        return "[" + std::to_string(array_count(d)) + "]" + (t ? name(&*t, depth + 1) : "?");
      }
      case DW_TAG_structure_type: {
        if (!die_name(d).empty()) return die_name(d);
        std::vector<std::pair<std::string, Dwarf_Die>> ms = members(d);
        if (!ms.empty() && ms[0].first == "__values") {
          auto p = type_of(&ms[0].second);
          auto e = p ? type_of(&*p) : std::nullopt;
          return "[]" + (e ? name(&*e, depth + 1) : std::string("?"));
        }
        if (auto empty = interface_shape(ms)) return *empty ? "interface {}" : "interface";
        std::string out = "struct {";
        for (size_t i = 0; i < ms.size(); ++i) {
          auto mt = type_of(&ms[i].second);
          out += (i ? "; " : " ") + ms[i].first + " " + (mt ? name(&*mt, depth + 1) : "?");
        }
        return out + (ms.empty() ? "}" : " }");
      }
      case DW_TAG_subroutine_type:
        return "func";
      default:
        return die_name(d).empty() ? "?" : die_name(d);
    }
  }

  // A struct whose fields are the program's: not Go's own layouts, whose members gccgo names
  // with "__" (a slice's __values, a string's __data), nor one named as a Go builtin.
  static bool is_plain_struct(const std::string& name,
                              const std::vector<std::pair<std::string, Dwarf_Die>>& ms) {
    if (ms.empty() || name == "string" || name.starts_with("[]")) return false;
    for (const auto& m : ms)
      if (m.first.starts_with("__")) return false;
    return true;
  }

  // gccgo's interface struct: {__methods, __object}, or an empty interface's
  // {__type_descriptor, __object}. Whether it is empty; nullopt for any other struct.
  static std::optional<bool> interface_shape(
      const std::vector<std::pair<std::string, Dwarf_Die>>& ms) {
    if (ms.size() != 2 || ms[1].first != "__object" ||
        (ms[0].first != "__methods" && ms[0].first != "__type_descriptor"))
      return std::nullopt;
    return ms[0].first == "__type_descriptor";
  }

  static std::vector<std::pair<std::string, Dwarf_Die>> members(Dwarf_Die* d) {
    std::vector<std::pair<std::string, Dwarf_Die>> out;
    Dwarf_Die c;
    if (dwarf_child(d, &c) != 0) return out;
    do {
      if (dwarf_tag(&c) == DW_TAG_member) out.emplace_back(die_name(&c), c);
    } while (dwarf_siblingof(&c, &c) == 0 && out.size() < 4096);
    return out;
  }

  static Dwarf_Die strip_typedefs(Dwarf_Die d) {
    for (int i = 0; i < kMaxDepth; ++i) {
      int tag = dwarf_tag(&d);
      if (tag != DW_TAG_typedef && tag != DW_TAG_const_type && tag != DW_TAG_volatile_type) break;
      auto t = type_of(&d);
      if (!t) break;
      d = *t;
    }
    return d;
  }

 private:
  static int64_t array_count(Dwarf_Die* d) {
    Dwarf_Die c;
    if (dwarf_child(d, &c) != 0) return 0;
    do {
      if (dwarf_tag(&c) != DW_TAG_subrange_type) continue;
      Dwarf_Attribute a;
      Dwarf_Word v = 0;
      if (dwarf_attr(&c, DW_AT_count, &a) && dwarf_formudata(&a, &v) == 0) return int64_t(v);
      if (dwarf_attr(&c, DW_AT_upper_bound, &a) && dwarf_formudata(&a, &v) == 0)
        return int64_t(v) + 1;
      return 0;
    } while (dwarf_siblingof(&c, &c) == 0);
    return 0;
  }

  uint64_t array_size(Dwarf_Die* d, int depth) {
    auto e = type_of(d);
    if (!e || depth > kMaxDepth) return 0;
    Dwarf_Die s = strip_typedefs(*e);
    uint64_t es = dwarf_tag(&s) == DW_TAG_array_type ? array_size(&s, depth + 1)
                                                     : uint64_t(std::max(0, dwarf_bytesize(&s)));
    if (dwarf_tag(&s) == DW_TAG_pointer_type && es == 0) es = 8;
    int64_t n = array_count(d);
    if (n <= 0 || es == 0 || uint64_t(n) > (1ull << 40) / es) return 0;
    return es * uint64_t(n);
  }

  // Marks the eightbyte of every scalar in `d` placed at `off`. False: a scalar straddles
  // an eightbyte or the type is not understood (then the value goes to memory).
  bool leaves(Dwarf_Die* d, uint64_t off, std::vector<EightbyteClass>& ebs, int depth) {
    if (depth > kMaxDepth || ++visited_ > 100000) return false;
    Dwarf_Die s = strip_typedefs(*d);
    switch (dwarf_tag(&s)) {
      case DW_TAG_base_type: {
        Dwarf_Attribute a;
        Dwarf_Word enc = 0;
        if (dwarf_attr(&s, DW_AT_encoding, &a)) dwarf_formudata(&a, &enc);
        int size = dwarf_bytesize(&s);
        if (size <= 0) return size == 0;
        bool sse = enc == DW_ATE_float || enc == DW_ATE_complex_float;
        // complex128: two eightbytes, both SSE; complex64: one.
        for (uint64_t at = off; at < off + uint64_t(size); at += 8) {
          if (at / 8 >= ebs.size()) return false;
          if (enc != DW_ATE_complex_float && (off % 8) + uint64_t(size) > 8) return false;
          mark(ebs[at / 8], sse);
        }
        return true;
      }
      case DW_TAG_pointer_type:
        if (off % 8 != 0 || off / 8 >= ebs.size()) return false;
        mark(ebs[off / 8], false);
        return true;
      case DW_TAG_structure_type:
        for (auto& [n, m] : members(&s)) {
          auto t = type_of(&m);
          if (!t || !leaves(&*t, off + member_offset(&m), ebs, depth + 1)) return false;
        }
        return true;
      case DW_TAG_array_type: {
        auto e = type_of(&s);
        int64_t n = array_count(&s);
        if (!e || n < 0) return false;
        if (n == 0) return true;
        uint64_t total = array_size(&s, 0);
        uint64_t es = total / uint64_t(n);
        for (int64_t i = 0; i < n; ++i)
          if (!leaves(&*e, off + uint64_t(i) * es, ebs, depth + 1)) return false;
        return true;
      }
      case DW_TAG_subroutine_type:  // a func value: a pointer to its descriptor
        if (off % 8 != 0 || off / 8 >= ebs.size()) return false;
        mark(ebs[off / 8], false);
        return true;
      default:
        return false;
    }
  }

  static void mark(EightbyteClass& c, bool sse) {
    // INTEGER wins over SSE within one eightbyte (System V AMD64 ABI, 3.2.3).
    if (!sse)
      c = EightbyteClass::Integer;
    else if (c == EightbyteClass::None)
      c = EightbyteClass::Sse;
  }

  size_t visited_ = 0;
  size_t fields_left_ = 0;
  std::map<Dwarf_Off, SysvType> params_;  // classify_param's
};

void read_subprogram(Dwarf_Die* d, Classifier& cls, GccgoDwarf& out) {
  Dwarf_Addr low = 0;
  if (dwarf_lowpc(d, &low) != 0 || low == 0) return;
  GccgoDwarfFunc f;
  f.name = die_name(d);
  f.low_pc = low;
  Dwarf_Attribute a;
  if (dwarf_attr_integrate(d, DW_AT_linkage_name, &a))
    if (const char* s = dwarf_formstring(&a)) f.linkage = s;
  if (auto rt = type_of(d)) {
    f.result = cls.classify_param(&*rt);
    Dwarf_Die rs = Classifier::strip_typedefs(*rt);
    bool several = dwarf_tag(&*rt) == DW_TAG_structure_type && die_name(&*rt).empty();
    auto ms = several ? Classifier::members(&rs) : decltype(Classifier::members(&rs)){};
    // An anonymous struct of Go's own layouts (a slice, an interface) is one result.
    if (!ms.empty() && ms[0].first.rfind("__", 0) == 0) several = false;
    if (several) {
      for (auto& [n, m] : ms) {
        auto mt = type_of(&m);
        if (!mt) continue;
        // gccgo names unnamed results "UNNAMED"; gc's DWARF calls them ~r0, ~r1, ...
        std::string rn = n.empty() || n == "UNNAMED" ? "~r" + std::to_string(f.results.size()) : n;
        f.results.push_back({rn, cls.classify_param(&*mt), member_offset(&m)});
      }
    } else {
      f.results.push_back({"", *f.result, 0});
    }
  }
  Dwarf_Die c;
  std::optional<Dwarf_Off> pointee;  // what a first parameter named "pointer" points at
  if (dwarf_child(d, &c) == 0) {
    do {
      if (dwarf_tag(&c) == DW_TAG_variable && pointee) {
        auto vt = type_of(&c);
        if (vt && dwarf_dieoffset(&*vt) == *pointee) f.receiver_copied = true;
        continue;
      }
      if (dwarf_tag(&c) != DW_TAG_formal_parameter) continue;
      if (f.params.empty() && die_name(&c) == "pointer") {
        auto pt = type_of(&c);
        auto target = pt && dwarf_tag(&*pt) == DW_TAG_pointer_type ? type_of(&*pt) : std::nullopt;
        if (target) pointee = dwarf_dieoffset(&*target);
      }
      auto t = type_of(&c);
      f.params.push_back(
          {die_name(&c), t ? cls.classify_param(&*t) : SysvType{"?", 0, {}, true}, 0});
      if (f.params.size() > 1024) break;
    } while (dwarf_siblingof(&c, &c) == 0);
    // An unnamed single result is "~r0", as gc's DWARF names it.
    if (f.results.size() == 1 && f.results[0].name.empty()) f.results[0].name = "~r0";
  }
  out.funcs.push_back(std::move(f));
}

}  // namespace

Result<std::unique_ptr<GccgoDwarf>> read_gccgo_dwarf(const ElfFile& elf) {
  auto opened = open_dwarf(elf);
  if (!opened) return opened.error();
  Dwarf* dw = *opened;
  if (!dw) return std::unique_ptr<GccgoDwarf>();
  auto out = std::make_unique<GccgoDwarf>();
  Classifier cls;
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
    if (unit_type != DW_UT_compile) continue;
    Dwarf_Attribute a;
    const char* producer = dwarf_attr(&cudie, DW_AT_producer, &a) ? dwarf_formstring(&a) : nullptr;
    bool go = producer && std::string_view(producer).rfind("GNU Go", 0) == 0;
    if (go && out->producer.empty()) out->producer = producer;
    if (!go) continue;  // libgo's C parts and the C runtime: no Go functions
    Dwarf_Die c;
    if (dwarf_child(&cudie, &c) != 0) continue;
    do {
      if (dwarf_tag(&c) == DW_TAG_subprogram) read_subprogram(&c, cls, *out);
    } while (dwarf_siblingof(&c, &c) == 0);
  }
  dwarf_end(dw);
  if (rc < 0 && units == 0) return make_error("{}: bad DWARF: no readable unit", elf.path());
  std::sort(out->funcs.begin(), out->funcs.end(),
            [](const GccgoDwarfFunc& a, const GccgoDwarfFunc& b) { return a.low_pc < b.low_pc; });
  return out;
}

}  // namespace gotap
