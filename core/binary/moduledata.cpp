#include "core/binary/moduledata.h"

#include <fmt/format.h>

#include <cstdlib>
#include <vector>

#include "core/binary/rtype.h"

namespace gotap {

namespace {

// Offsets from `type moduledata struct` (src/runtime/symtab.go) of each release, counted on
// 64-bit: 7 slices and 20 words put `types` at 280 in 1.18-1.19; covctrs (1.20) adds 16.
constexpr ModuledataTypeLayout kGo118 = {"1.18", 280, -1, 288, -1, -1, 296, 304, -1, 336, -1};
constexpr ModuledataTypeLayout kGo120 = {"1.20", 296, -1, 304, -1, -1, 312, 320, -1, 352, -1};
// 1.25 is not in the toolchain cache: its typelinks sit where 1.24's or 1.26's do.
constexpr ModuledataTypeLayout kGo125 = {"1.25", 296, -1, 304, -1, -1, 312, 320, -1, 352, 360};
// 1.26 adds epclntab after gofunc, which moves typelinks by a word.
constexpr ModuledataTypeLayout kGo126 = {"1.26", 296, -1, 304, -1, -1, 312, 320, 328, 360, -1};
// 1.27: `types, typedesclen, etypes`, `itaboffset, itabsize`; typelinks and itablinks gone.
constexpr ModuledataTypeLayout kGo127 = {"1.27", 296, 304, 312, 320, 328, 336, 344, 352, -1, -1};

constexpr uint64_t kMaxTypesSize = uint64_t(1) << 30;

std::vector<const ModuledataTypeLayout*> candidates(int pcln_format, const GoVersion& go) {
  if (pcln_format == 118) return {&kGo118};
  bool known = go.major == 1 && go.minor >= 20 && go.minor <= kNewestKnownGoMinor;
  if (!known) return {&kGo127, &kGo126, &kGo125};  // newest first; kGo125 covers 1.20-1.24 too
  if (go.minor >= 27) return {&kGo127};
  if (go.minor == 26) return {&kGo126};
  if (go.minor == 25) return {&kGo125};
  return {&kGo120};
}

const ElfSection* first_section(const ElfFile& elf, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (const ElfSection* s = elf.section(n)) return s;
  return nullptr;
}

// A type descriptor of release `go` at addr, inside [types, etypes), whose name offset
// stays inside them too.
bool descriptor_at(const ElfFile& elf, uint64_t addr, uint64_t types, uint64_t etypes,
                   const GoVersion& go) {
  if (addr < types || addr >= etypes || etypes - addr < 48) return false;
  Bytes b = elf.read(addr, 48);
  if (b.size() != 48 || descriptor_kind(b.data(), go) == GoKind::Invalid) return false;
  int32_t str = static_cast<int32_t>(le32(b, 40).value_or(0));
  return str > 0 && uint64_t(str) < etypes - types;
}

// The descriptors the layout's own tables point at: a few typelinks entries (offsets from
// types) before 1.27; in 1.27 the first descriptor (one word after types, as the runtime's
// typelinksinit walks them) and the first itab's interface and concrete type.
std::string check_descriptors(const ElfFile& elf, Bytes md, const ModuledataTypeLayout& L,
                              uint64_t types, uint64_t etypes, int typelinks_off) {
  auto w = [&](int off) -> uint64_t { return off < 0 ? 0 : le64(md, off).value_or(0); };
  const GoVersion go{1, std::atoi(L.name + 2), 0, ""};
  if (typelinks_off >= 0) {
    uint64_t ptr = w(typelinks_off), n = w(typelinks_off + 8);
    for (uint64_t i = 0; i < n && i < 8; ++i) {
      uint64_t at = ptr + 4 * (i * (n / 8 ? n / 8 : 1));
      auto off = elf.read_u32(at);
      if (!off || !descriptor_at(elf, types + *off, types, etypes, go))
        return fmt::format("typelinks[{}] is no type descriptor", (at - ptr) / 4);
    }
    return "";
  }
  if (L.itaboffset < 0) return "";
  if (!descriptor_at(elf, (types + 8 + 7) & ~uint64_t(7), types, etypes, go))
    return fmt::format("no type descriptor at types {:#x}", types);
  if (w(L.itabsize) == 0) return "";
  uint64_t itab = types + w(L.itaboffset);
  auto inter = elf.read_u64(itab), typ = elf.read_u64(itab + 8);
  if (!inter || !typ || !descriptor_at(elf, *inter, types, etypes, go) ||
      !descriptor_at(elf, *typ, types, etypes, go))
    return fmt::format("the itab at {:#x} does not point at type descriptors", itab);
  return "";
}

// Empty when the words at `md` check out for layout L; otherwise why not.
std::string check(const ElfFile& elf, Bytes md, const ModuledataTypeLayout& L,
                  const PclntabExtent& pcln, ModuledataTypeFields& out) {
  auto w = [&](int off) -> uint64_t { return off < 0 ? 0 : le64(md, off).value_or(0); };
  const uint64_t types = w(L.types), etypes = w(L.etypes), rodata = w(L.rodata),
                 gofunc = w(L.gofunc);
  if (!types || etypes <= types || etypes - types > kMaxTypesSize)
    return fmt::format("types {:#x}..{:#x} is not a range", types, etypes);
  if (elf.read(types, etypes - types).empty())
    return fmt::format("types {:#x}..{:#x} is not in the file's data", types, etypes);
  const uint64_t len = etypes - types;
  if (L.typedesclen >= 0 && (w(L.typedesclen) == 0 || w(L.typedesclen) > len))
    return fmt::format("typedesclen {:#x} does not fit types (size {:#x})", w(L.typedesclen), len);
  // 1.27's linker puts the itabs last among the type descriptors: they end at etypes.
  if (L.itaboffset >= 0 && (w(L.itaboffset) > len || w(L.itabsize) != len - w(L.itaboffset)))
    return fmt::format("itabs {:#x}+{:#x} do not end types (size {:#x})", w(L.itaboffset),
                       w(L.itabsize), len);
  if (elf.read(rodata, 1).empty() || rodata > types)
    return fmt::format("rodata {:#x} is not read-only data before types {:#x}", rodata, types);
  if (const ElfSection* s = elf.section(".rodata");
      s && (rodata < s->addr || rodata > s->addr + s->size))
    return fmt::format("rodata {:#x} is outside section .rodata", rodata);
  if (elf.read(gofunc, 1).empty() || gofunc < rodata)
    return fmt::format("gofunc {:#x} is not in read-only data", gofunc);
  if (L.epclntab >= 0) {
    uint64_t e = w(L.epclntab);
    bool ok = pcln.from_section ? e == pcln.addr + pcln.size
                                : e > pcln.addr && e - pcln.addr <= pcln.size;
    if (!ok) return fmt::format("epclntab {:#x} is not the end of the pclntab", e);
  }
  // The type descriptors' own section (1.27 names it; earlier releases keep types in .rodata
  // or .data.rel.ro, whose typelinks table is checked instead).
  const ElfSection* gotype = first_section(elf, {".go.type", ".data.rel.ro.go.type"});
  const ElfSection* typelink = first_section(elf, {".typelink", ".data.rel.ro.typelink"});
  if (L.typelinks < 0) {
    if (typelink) return "the binary has a .typelink section, which this layout has not";
    if (gotype && (types != gotype->addr || etypes != gotype->addr + gotype->size))
      return fmt::format("types {:#x}..{:#x} is not section {} at {:#x}..{:#x}", types, etypes,
                         gotype->name, gotype->addr, gotype->addr + gotype->size);
  } else {
    if (gotype)
      return fmt::format("the binary has a {} section, which this layout has not", gotype->name);
    int found = -1;
    for (int off : {L.typelinks, L.typelinks_alt}) {
      if (off < 0) continue;
      uint64_t ptr = w(off), n = w(off + 8), cap = w(off + 16);
      if (n != cap || n > kMaxTypesSize / 4) continue;
      if (typelink ? ptr == typelink->addr && n * 4 == typelink->size
                   : !elf.read(ptr, n * 4).empty()) {
        found = off;
        break;
      }
    }
    if (found < 0)
      return typelink ? fmt::format("the typelinks slice is not section {}", typelink->name)
                      : "the typelinks slice does not point at data";
    if (auto p = check_descriptors(elf, md, L, types, etypes, found); !p.empty()) return p;
  }
  if (L.typelinks < 0)
    if (auto p = check_descriptors(elf, md, L, types, etypes, -1); !p.empty()) return p;
  out.types = types;
  out.etypes = etypes;
  out.rodata = rodata;
  out.gofunc = gofunc;
  out.layout = L.name;
  return "";
}

}  // namespace

ModuledataTypeFields read_moduledata_types(const ElfFile& elf, uint64_t md_addr, int pcln_format,
                                           const GoVersion& go, const PclntabExtent& pcln) {
  ModuledataTypeFields out;
  Bytes md = elf.at_vaddr(md_addr);
  std::string why;
  for (const ModuledataTypeLayout* L : candidates(pcln_format, go)) {
    std::string p = check(elf, md, *L, pcln, out);
    if (p.empty()) return out;
    if (why.empty()) why = fmt::format("as Go {}: {}", L->name, p);
  }
  out = {};
  out.problem = fmt::format(
      "runtime.moduledata at {:#x} does not check out ({}): type descriptors, method-table "
      "signatures and argument info (ArgInfo) are unavailable",
      md_addr, why);
  return out;
}

}  // namespace gotap
