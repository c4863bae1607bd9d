#include "core/binary/pclntab.h"

#include <elf.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "core/binary/moduledata.h"

namespace gotap {

namespace {

constexpr uint32_t kMagic12 = 0xfffffffb;
constexpr uint32_t kMagic116 = 0xfffffffa;
constexpr uint32_t kMagic118 = 0xfffffff0;
constexpr uint32_t kMagic120 = 0xfffffff1;

enum class Layout { V12, V116, V118, V120 };

// Non-empty, well-formed UTF-8 with no control characters.
bool plausible_symbol(std::string_view s) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<uint8_t>(s[i]);
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f) return false;
      ++i;
      continue;
    }
    size_t n = c >= 0xc2 && c < 0xe0   ? 1
               : c >= 0xe0 && c < 0xf0 ? 2
               : c >= 0xf0 && c < 0xf5 ? 3
                                       : 0;
    if (n == 0 || i + n >= s.size()) return false;
    for (size_t k = 1; k <= n; ++k)
      if ((static_cast<uint8_t>(s[i + k]) & 0xc0) != 0x80) return false;
    i += n + 1;
  }
  return true;
}

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::V12:
      return "1.2";
    case Layout::V116:
      return "1.16";
    case Layout::V118:
      return "1.18";
    case Layout::V120:
      return "1.20";
  }
  return "?";
}

std::optional<Layout> layout_of(uint32_t magic) {
  switch (magic) {
    case kMagic12:
      return Layout::V12;
    case kMagic116:
      return Layout::V116;
    case kMagic118:
      return Layout::V118;
    case kMagic120:
      return Layout::V120;
  }
  return std::nullopt;
}

// Byte offset of pcdata[0] in a _func record.
uint32_t pcdata_start(Layout l) {
  switch (l) {
    case Layout::V12:
      return 40;
    case Layout::V116:
      return 44;
    case Layout::V118:
      return 40;
    case Layout::V120:
      return 44;
  }
  return 44;
}

// Header checks shared by the section path and the scan: the magic, two zero pad bytes, a
// plausible instruction quantum and 8-byte pointers (gotap reads x86-64 only).
bool plausible_header(Bytes d) {
  auto magic = le32(d, 0);
  if (!magic || !layout_of(*magic)) return false;
  if (d.size() < 16 || d[4] != 0 || d[5] != 0) return false;
  if (d[6] != 1 && d[6] != 2 && d[6] != 4) return false;
  return d[7] == 8;
}

// Reads an unsigned LEB128 value; advances pos. nullopt on truncation or overflow.
std::optional<uint32_t> uvarint(Bytes d, uint64_t& pos) {
  uint32_t v = 0;
  for (int shift = 0; shift < 35; shift += 7) {
    if (pos >= d.size()) return std::nullopt;
    uint8_t b = d[pos++];
    v |= uint32_t(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  return std::nullopt;
}

}  // namespace

class PclntabParser {
 public:
  PclntabParser(const ElfFile& elf, Pclntab& t, const GoVersion& go) : elf_(elf), t_(t), go_(go) {}

  Result<void> run();

 private:
  Result<void> parse_all();
  Result<void> locate();
  Result<void> parse_header();
  void find_moduledata();
  bool try_moduledata(uint64_t addr);
  Result<void> choose_text_start();
  Result<void> parse_functab();
  void mark_wrappers();
  void check_gofunc();

  const ElfFile& elf_;
  Pclntab& t_;
  const GoVersion& go_;
  Layout layout_ = Layout::V120;
  uint64_t nfunc_ = 0;
  uint64_t header_text_start_ = 0;
  uint64_t functab_off_ = 0;  // offset of the functab from the pclntab start
  bool parsed_ = false;       // locate() parsed a scanned candidate completely
};

Result<Pclntab> Pclntab::load(const ElfFile& elf, const GoVersion& go) {
  Pclntab t;
  t.elf_ = &elf;
  PclntabParser p(elf, t, go);
  GOTAP_TRY(p.run());
  return t;
}

Result<void> PclntabParser::run() {
  GOTAP_TRY(locate());
  if (parsed_) return {};
  return parse_all();
}

Result<void> PclntabParser::parse_all() {
  GOTAP_TRY(parse_header());
  find_moduledata();
  GOTAP_TRY(choose_text_start());
  GOTAP_TRY(parse_functab());
  mark_wrappers();
  check_gofunc();
  return {};
}

// moduledata.gofunc is the base of every 1.18+ funcdata offset: a wrong one (a word of a
// layout gotap misjudged) turns ArgInfo and inline trees into garbage. The ArgInfo of a
// spread of functions must parse under it, or it is not used.
void PclntabParser::check_gofunc() {
  if (!t_.md_.gofunc) return;
  const auto& funcs = t_.funcs_;
  const size_t step = std::max<size_t>(1, funcs.size() / 64);
  for (size_t i = 0; i < funcs.size(); i += step) {
    const PclnFunc& f = funcs[i];
    if (!t_.funcdata(f, kFuncdataArgInfo) || t_.arg_info(f)) continue;
    std::string why = fmt::format(
        "runtime.moduledata at {:#x}: gofunc {:#x} does not check out (the ArgInfo of {} does "
        "not parse): argument info (ArgInfo) and inline trees are unavailable",
        t_.md_.addr, t_.md_.gofunc, f.name);
    t_.md_.gofunc = 0;
    if (t_.type_data_problem_.empty()) t_.type_data_problem_ = why;
    return;
  }
}

Result<void> PclntabParser::locate() {
  for (const char* name : {".gopclntab", ".data.rel.ro.gopclntab"}) {
    if (const ElfSection* s = elf_.section(name)) {
      Bytes d = elf_.section_data(*s);
      if (!plausible_header(d)) return make_error("{}: {} has no valid header", elf_.path(), name);
      t_.addr_ = s->addr;
      t_.data_ = d;
      t_.from_section_ = true;
      return {};
    }
  }
  if (const ElfSymbol* sym = elf_.symbol("runtime.pclntab")) {
    Bytes d = elf_.at_vaddr(sym->value);
    if (const ElfSymbol* end = elf_.symbol("runtime.epclntab");
        end && end->value > sym->value && end->value - sym->value <= d.size())
      d = d.first(end->value - sym->value);
    if (plausible_header(d)) {
      t_.addr_ = sym->value;
      t_.data_ = d;
      return {};
    }
  }
  // No section headers (or a renamed section): scan the PT_LOADs, read-only ones first (Go
  // puts the pclntab there; external PIE links put it in RELRO data), for the
  // magic at 8-byte alignment, and keep the first candidate whose whole table parses. Real
  // binaries have one; the cap bounds the work on hostile input.
  constexpr int kMaxCandidates = 64;
  int tried = 0;
  // Old releases (and some external links) put read-only data in the text segment: last.
  for (uint32_t want : {uint32_t(PF_R), uint32_t(PF_R | PF_W), uint32_t(PF_R | PF_X)}) {
    for (const auto& seg : elf_.segments()) {
      if (seg.type != PT_LOAD || (seg.flags & (PF_R | PF_W | PF_X)) != want) continue;
      Bytes d = elf_.at_vaddr(seg.vaddr);
      uint64_t start = (8 - (seg.vaddr & 7)) & 7;
      for (uint64_t off = start; off + 16 <= d.size() && tried < kMaxCandidates; off += 8) {
        if (d[off + 4] != 0 || d[off + 5] != 0 || d[off + 7] != 8 || d[off + 3] != 0xff) continue;
        Bytes cand = d.subspan(off);
        if (!plausible_header(cand)) continue;
        ++tried;
        Pclntab trial;
        trial.elf_ = &elf_;
        trial.addr_ = seg.vaddr + off;
        trial.data_ = cand;
        PclntabParser p(elf_, trial, go_);
        if (p.parse_all().ok()) {
          t_ = std::move(trial);
          parsed_ = true;
          return {};
        }
      }
    }
  }
  return make_error("{}: no Go function table (pclntab) found", elf_.path());
}

Result<void> PclntabParser::parse_header() {
  Bytes d = t_.data_;
  if (!plausible_header(d)) return make_error("{}: bad pclntab header", elf_.path());
  layout_ = *layout_of(*le32(d, 0));
  t_.format_ = layout_name(layout_);
  t_.quantum_ = d[6];
  t_.pcdata_start_ = pcdata_start(layout_);
  t_.funcdata_offsets_ = layout_ == Layout::V118 || layout_ == Layout::V120;
  auto word = [&](int i) { return le64(d, 8 + 8 * i); };
  auto nfunc = word(0);
  if (!nfunc) return make_error("{}: truncated pclntab header", elf_.path());
  nfunc_ = *nfunc;
  if (nfunc_ == 0) return make_error("{}: pclntab lists no functions", elf_.path());
  const uint64_t size = d.size();
  if (layout_ == Layout::V12) {
    // Header, nfunc, then {entry, funcoff} pairs, the end PC and the file table offset.
    functab_off_ = 16;
    if (nfunc_ > (size - functab_off_) / 16)
      return make_error("{}: pclntab function count {} exceeds the table", elf_.path(), nfunc_);
    auto filetab = le32(d, functab_off_ + nfunc_ * 16 + 8);
    if (!filetab || *filetab >= size) return make_error("{}: bad pclntab file table", elf_.path());
    t_.filetab_off_ = *filetab;
    auto nfiles = le32(d, *filetab);
    t_.nfiles_ = nfiles.value_or(0);
    t_.funcname_off_ = 0;
    t_.pctab_off_ = 0;
    t_.funcdata_off_ = 0;
    return {};
  }
  bool has_text = layout_ == Layout::V118 || layout_ == Layout::V120;
  int i = 1;
  auto nfiles = word(i++);
  if (has_text) header_text_start_ = word(i++).value_or(0);
  auto funcname = word(i++), cu = word(i++), filetab = word(i++), pctab = word(i++),
       pcln = word(i++);
  if (!nfiles || !funcname || !cu || !filetab || !pctab || !pcln)
    return make_error("{}: truncated pclntab header", elf_.path());
  for (uint64_t off : {*funcname, *cu, *filetab, *pctab, *pcln})
    if (off >= size) return make_error("{}: pclntab offset {:#x} out of range", elf_.path(), off);
  t_.nfiles_ = static_cast<uint32_t>(std::min<uint64_t>(*nfiles, UINT32_MAX));
  t_.funcname_off_ = *funcname;
  t_.cu_off_ = *cu;
  t_.filetab_off_ = *filetab;
  t_.pctab_off_ = *pctab;
  t_.funcdata_off_ = *pcln;
  functab_off_ = *pcln;
  uint64_t entsize = has_text ? 8 : 16;
  if (nfunc_ >= (size - functab_off_) / entsize)
    return make_error("{}: pclntab function count {} exceeds the table", elf_.path(), nfunc_);
  return {};
}

// Byte offsets of the moduledata fields that locate the function table, per layout (1.2
// means Go 1.8-1.15 here). The type-data words that follow moved between releases that share
// a pclntab layout: core/binary/moduledata.cpp reads those (1.18+).
struct MdLayout {
  int pcheader, funcnametab, ftab, minpc, maxpc, text, etext, types, etypes;
};

static MdLayout md_layout(Layout l) {
  switch (l) {
    case Layout::V12:
      return {0, -1, 24, 80, 88, 96, 104, 200, 208};
    case Layout::V116:
      return {0, 8, 128, 160, 168, 176, 184, 280, 288};
    case Layout::V118:
    case Layout::V120:
      return {0, 8, 128, 160, 168, 176, 184, -1, -1};
  }
  return {};
}

bool PclntabParser::try_moduledata(uint64_t addr) {
  Bytes m = elf_.read(addr, 336);
  if (m.empty()) m = elf_.read(addr, 216);  // the shorter pre-1.16 struct at a segment end
  if (m.empty()) return false;
  MdLayout L = md_layout(layout_);
  auto w = [&](int off) -> uint64_t { return off < 0 ? 0 : le64(m, off).value_or(0); };
  if (w(L.pcheader) != t_.addr_) return false;
  if (layout_ != Layout::V12) {
    if (w(L.funcnametab) != t_.addr_ + t_.funcname_off_) return false;
    if (w(L.ftab) != t_.addr_ + functab_off_) return false;
  } else if (w(L.ftab) != t_.addr_ + functab_off_) {
    return false;
  }
  uint64_t minpc = w(L.minpc), maxpc = w(L.maxpc), text = w(L.text), etext = w(L.etext);
  if (minpc > maxpc || text > minpc || etext < text) return false;
  // Where section headers exist, the ranges the moduledata names lie inside the sections of
  // those names (inside, not equal: an external link merges C's .data/.bss/.text in).
  if (layout_ != Layout::V12) {
    struct Range {
      const char* section;
      uint64_t lo, hi;
    };
    const Range ranges[] = {{".text", text, etext},
                            {".noptrdata", w(192), w(200)},
                            {".data", w(208), w(216)},
                            {".bss", w(224), w(232)},
                            {".noptrbss", w(240), w(248)}};
    for (const Range& r : ranges) {
      const ElfSection* s = elf_.section(r.section);
      if (s && (r.lo > r.hi || r.lo < s->addr || r.hi > s->addr + s->size)) return false;
    }
  }
  // The first function's entry is minpc.
  if (layout_ == Layout::V118 || layout_ == Layout::V120) {
    auto off0 = le32(t_.data_, functab_off_);
    if (!off0 || text + *off0 != minpc) return false;
  } else {
    auto e0 = le64(t_.data_, functab_off_);
    if (!e0 || *e0 != minpc) return false;
  }
  Moduledata& md = t_.md_;
  md.addr = addr;
  md.pclntab = t_.addr_;
  md.minpc = minpc;
  md.maxpc = maxpc;
  md.text = text;
  md.etext = etext;
  if (layout_ == Layout::V118 || layout_ == Layout::V120) {
    PclntabExtent ext{t_.addr_, t_.data_.size(), t_.from_section_};
    ModuledataTypeFields f =
        read_moduledata_types(elf_, addr, layout_ == Layout::V118 ? 118 : 120, go_, ext);
    md.types = f.types;
    md.etypes = f.etypes;
    md.rodata = f.rodata;
    md.gofunc = f.gofunc;
    t_.md_layout_ = f.layout;
    t_.type_data_problem_ = f.problem;
  } else {
    // Before 1.18 only types/etypes are read: keep them when they are a range of file data.
    uint64_t types = w(L.types), etypes = w(L.etypes);
    if (types && etypes > types && !elf_.read(types, etypes - types).empty()) {
      md.types = types;
      md.etypes = etypes;
    }
  }
  return true;
}

void PclntabParser::find_moduledata() {
  if (const ElfSection* s = elf_.section(".go.module"); s && try_moduledata(s->addr)) return;
  if (const ElfSymbol* s = elf_.symbol("runtime.firstmoduledata"); s && try_moduledata(s->value))
    return;
  // Its first word is the pclntab's address: scan writable segments at 8-byte alignment.
  for (const auto& seg : elf_.segments()) {
    if (seg.type != PT_LOAD || !(seg.flags & PF_W)) continue;
    Bytes d = elf_.at_vaddr(seg.vaddr);
    uint64_t start = (8 - (seg.vaddr & 7)) & 7;
    for (uint64_t off = start; off + 8 <= d.size(); off += 8) {
      uint64_t v;
      std::memcpy(&v, d.data() + off, 8);  // x86-64 host: little endian
      if (v == t_.addr_ && try_moduledata(seg.vaddr + off)) return;
    }
  }
}

Result<void> PclntabParser::choose_text_start() {
  if (layout_ != Layout::V118 && layout_ != Layout::V120) {
    t_.text_start_ = t_.md_.text;
    t_.text_source_ = t_.md_.addr ? "moduledata" : "";
    return {};
  }
  if (t_.md_.addr) {
    t_.text_start_ = t_.md_.text;
    t_.text_source_ = "moduledata";
  } else if (header_text_start_) {
    t_.text_start_ = header_text_start_;
    t_.text_source_ = "header";
  } else if (const ElfSymbol* s = elf_.symbol("runtime.text")) {
    t_.text_start_ = s->value;
    t_.text_source_ = "symbol";
  } else if (const ElfSection* s = elf_.section(".text")) {
    t_.text_start_ = s->addr;
    t_.text_source_ = "section";
  } else {
    return make_error("{}: cannot find the start of Go text (no moduledata)", elf_.path());
  }
  return {};
}

Result<void> PclntabParser::parse_functab() {
  Bytes d = t_.data_;
  const bool u32tab = layout_ == Layout::V118 || layout_ == Layout::V120;
  const uint64_t entsize = u32tab ? 8 : 16;
  const uint64_t fbase = t_.funcdata_off_;
  const uint32_t pcstart = pcdata_start(layout_);
  auto& funcs = t_.funcs_;
  funcs.clear();
  funcs.reserve(nfunc_);
  auto entry_at = [&](uint64_t i) -> std::optional<uint64_t> {
    uint64_t off = functab_off_ + i * entsize;
    if (u32tab) {
      auto e = le32(d, off);
      if (!e) return std::nullopt;
      return t_.text_start_ + *e;
    }
    return le64(d, off);
  };
  auto end_pc = entry_at(nfunc_);
  if (!end_pc) return make_error("{}: truncated pclntab function table", elf_.path());
  std::optional<uint64_t> next = entry_at(0);
  for (uint64_t i = 0; i < nfunc_; ++i) {
    uint64_t off = functab_off_ + i * entsize;
    std::optional<uint64_t> funcoff =
        u32tab ? std::optional<uint64_t>(le32(d, off + 4)) : le64(d, off + 8);
    std::optional<uint64_t> entry = next;
    next = entry_at(i + 1);
    if (!entry || !funcoff || !next)
      return make_error("{}: truncated pclntab function table", elf_.path());
    if (*next < *entry)
      return make_error("{}: pclntab function table is not sorted at {}", elf_.path(), i);
    uint64_t fo = fbase + *funcoff;
    if (*funcoff > d.size() || fo + pcstart > d.size())
      return make_error("{}: pclntab function record {} out of range", elf_.path(), i);
    const uint8_t* r = d.data() + fo;
    auto u32 = [&](uint32_t o) {
      return uint32_t(r[o]) | uint32_t(r[o + 1]) << 8 | uint32_t(r[o + 2]) << 16 |
             uint32_t(r[o + 3]) << 24;
    };
    PclnFunc f;
    f.entry = *entry;
    f.end = *next;
    f.func_off = static_cast<uint32_t>(*funcoff);
    // The fixed fields after the entry are at the same offsets in every layout, shifted by
    // the entry's width (a pointer before 1.18, a u32 after).
    uint32_t b = u32tab ? 4 : 8;
    uint32_t nameoff = u32(b);
    f.args = static_cast<int32_t>(u32(b + 4));
    f.deferreturn = u32(b + 8);
    f.pcsp = u32(b + 12);
    f.pcfile = u32(b + 16);
    f.pcln = u32(b + 20);
    f.npcdata = u32(b + 24);
    uint32_t tail = 36;  // offset of funcID (every layout sets it)
    switch (layout_) {
      case Layout::V12:
        tail = 36;
        break;
      case Layout::V116:
        f.cu_offset = u32(36);
        tail = 40;
        break;
      case Layout::V118:
        f.cu_offset = u32(32);
        tail = 36;
        break;
      case Layout::V120:
        f.cu_offset = u32(32);
        f.start_line = static_cast<int32_t>(u32(36));
        tail = 40;
        break;
    }
    f.func_id = r[tail];
    f.flag = layout_ == Layout::V12 ? 0 : r[tail + 1];
    f.nfuncdata = r[tail + 3];
    if (f.npcdata > (d.size() - fo - pcstart) / 4)
      return make_error("{}: pclntab function record {} out of range", elf_.path(), i);
    f.name = t_.func_name(nameoff);
    // Go symbol names are printable UTF-8; anything else means the name table (or the
    // record pointing into it) is corrupt, and names we would print and match are garbage.
    if (!plausible_symbol(f.name))
      return make_error("{}: pclntab function record {} has a corrupt name", elf_.path(), i);
    funcs.push_back(f);
  }
  if (!funcs.empty() && end_pc && *end_pc < funcs.back().entry)
    return make_error("{}: pclntab end PC precedes the last function", elf_.path());
  return {};
}

void PclntabParser::mark_wrappers() {
  auto& funcs = t_.funcs_;
  std::vector<uint32_t> order(funcs.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  auto by_name = [&](uint32_t a, uint32_t b) {
    if (funcs[a].name != funcs[b].name) return funcs[a].name < funcs[b].name;
    return funcs[a].entry < funcs[b].entry;
  };
  std::sort(order.begin(), order.end(), by_name);

  // funcID Wrapper is the last FuncID; runtime.systemstack_switch is the one before it in
  // every release from 1.19 (21/22/23). Otherwise (older releases, or the name is missing)
  // take the funcID that most often tells apart two records sharing one name: an ABI wrapper
  // and its target.
  uint8_t wrapper = 0;
  if (t_.format_ == "1.18" || t_.format_ == "1.20") {
    for (const auto& f : funcs) {
      if (f.name == "runtime.systemstack_switch" && f.func_id != 0 && f.func_id < 255) {
        wrapper = f.func_id + 1;
        break;
      }
    }
  }
  if (!wrapper) {
    uint32_t count[256] = {};
    for (size_t i = 0; i + 1 < order.size(); ++i) {
      const PclnFunc &a = funcs[order[i]], &b = funcs[order[i + 1]];
      if (a.name != b.name || a.func_id == b.func_id) continue;
      if (a.func_id) ++count[a.func_id];
      if (b.func_id) ++count[b.func_id];
    }
    uint32_t best = 0;
    for (int id = 1; id < 256; ++id)
      if (count[id] > best) best = count[id], wrapper = static_cast<uint8_t>(id);
  }
  t_.wrapper_func_id_ = wrapper;

  // Some real functions carry funcID Wrapper too (reflect.callMethod, so tracebacks hide
  // it), so within a same-name group an ABI wrapper is told apart by its file as well: the
  // linker generates it, and its pcfile says "<autogenerated>". Only duplicate names pay
  // for the file lookup.
  auto generated = [&](const PclnFunc& f) {
    if (f.func_id != wrapper) return false;
    auto fl = t_.file_line(f, f.entry);
    return fl && fl->first == "<autogenerated>";
  };
  std::vector<bool> gen;
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j < order.size() && funcs[order[j]].name == funcs[order[i]].name) ++j;
    if (j - i > 1 && wrapper) {
      gen.assign(j - i, false);
      bool has_real = false;
      for (size_t k = i; k < j; ++k) has_real |= !(gen[k - i] = generated(funcs[order[k]]));
      if (has_real)
        for (size_t k = i; k < j; ++k)
          if (gen[k - i]) funcs[order[k]].is_wrapper = true;
    }
    i = j;
  }
  t_.by_name_.clear();
  t_.by_name_.reserve(order.size());
  for (uint32_t i : order)
    if (!funcs[i].is_wrapper) t_.by_name_.push_back(i);
}

std::string_view Pclntab::func_name(uint32_t name_off) const {
  uint64_t off = funcname_off_ + name_off;
  if (off >= data_.size()) return {};
  const char* p = reinterpret_cast<const char*>(data_.data() + off);
  const void* nul = std::memchr(p, 0, data_.size() - off);
  if (!nul) return {};
  return std::string_view(p, static_cast<const char*>(nul) - p);
}

const PclnFunc* Pclntab::find(uint64_t pc) const {
  auto it = std::upper_bound(funcs_.begin(), funcs_.end(), pc,
                             [](uint64_t p, const PclnFunc& f) { return p < f.entry; });
  if (it == funcs_.begin()) return nullptr;
  --it;
  if (pc >= it->end) return nullptr;
  // Records never overlap, but an empty record may share an entry with the next one.
  const PclnFunc* best = &*it;
  while (it != funcs_.begin() && (it - 1)->entry == best->entry) {
    --it;
    if (best->is_wrapper && !it->is_wrapper) best = &*it;
  }
  return best;
}

std::vector<const PclnFunc*> Pclntab::lookup(std::string_view name) const {
  auto lo = std::lower_bound(by_name_.begin(), by_name_.end(), name,
                             [&](uint32_t i, std::string_view n) { return funcs_[i].name < n; });
  std::vector<const PclnFunc*> out;
  for (; lo != by_name_.end() && funcs_[*lo].name == name; ++lo) out.push_back(&funcs_[*lo]);
  return out;
}

std::vector<std::pair<uint64_t, int32_t>> Pclntab::decode_pcvalue(uint32_t table_off,
                                                                  uint64_t entry,
                                                                  uint64_t limit_pc) const {
  std::vector<std::pair<uint64_t, int32_t>> runs;
  // Before 1.16 offsets are from the pclntab start and 0 still means "no table".
  if (table_off == 0) return runs;
  uint64_t pos = pctab_off_ + table_off;
  if (pos >= data_.size()) return runs;
  int32_t val = -1;
  uint64_t pc = entry;
  for (bool first = true;; first = false) {
    auto uv = uvarint(data_, pos);
    if (!uv || (*uv == 0 && !first)) break;
    int32_t delta =
        (*uv & 1) ? -static_cast<int32_t>(*uv >> 1) - 1 : static_cast<int32_t>(*uv >> 1);
    val = static_cast<int32_t>(static_cast<uint32_t>(val) + static_cast<uint32_t>(delta));
    auto pcd = uvarint(data_, pos);
    if (!pcd) break;
    uint64_t next = pc + uint64_t(*pcd) * quantum_;
    if (next < pc) break;  // wrapped: corrupt
    pc = next;
    runs.emplace_back(pc, val);
    if (pc > limit_pc) break;
  }
  return runs;
}

std::optional<int32_t> Pclntab::pcvalue(uint32_t table_off, uint64_t entry, uint64_t pc) const {
  if (table_off == 0 || pc < entry) return std::nullopt;
  uint64_t pos = pctab_off_ + table_off;
  if (pos >= data_.size()) return std::nullopt;
  int32_t val = -1;
  uint64_t cur = entry;
  for (bool first = true;; first = false) {
    auto uv = uvarint(data_, pos);
    if (!uv || (*uv == 0 && !first)) return std::nullopt;
    int32_t delta =
        (*uv & 1) ? -static_cast<int32_t>(*uv >> 1) - 1 : static_cast<int32_t>(*uv >> 1);
    val = static_cast<int32_t>(static_cast<uint32_t>(val) + static_cast<uint32_t>(delta));
    auto pcd = uvarint(data_, pos);
    if (!pcd) return std::nullopt;
    uint64_t next = cur + uint64_t(*pcd) * quantum_;
    if (next < cur) return std::nullopt;
    cur = next;
    if (pc < cur) return val;
  }
}

std::optional<int32_t> Pclntab::sp_delta(const PclnFunc& f, uint64_t pc) const {
  return pcvalue(f.pcsp, f.entry, pc);
}

std::optional<std::pair<std::string_view, int32_t>> Pclntab::file_line(const PclnFunc& f,
                                                                       uint64_t pc) const {
  auto line = pcvalue(f.pcln, f.entry, pc);
  auto fileno = pcvalue(f.pcfile, f.entry, pc);
  if (!line || !fileno) return std::nullopt;
  auto name = file_name(f, *fileno);
  if (!name) return std::nullopt;
  return std::make_pair(*name, *line);
}

FuncPcTables::FuncPcTables(const Pclntab& t, const PclnFunc& f)
    : t_(t),
      f_(f),
      sp_(t.decode_pcvalue(f.pcsp, f.entry, UINT64_MAX)),
      line_(t.decode_pcvalue(f.pcln, f.entry, UINT64_MAX)),
      file_(t.decode_pcvalue(f.pcfile, f.entry, UINT64_MAX)) {}

std::optional<int32_t> FuncPcTables::at(const Runs& runs, uint64_t pc, size_t& hint) const {
  // pcvalue's answer: the value of the first run that ends after pc.
  if (pc < f_.entry) return std::nullopt;
  auto first_after = [&](size_t k) {
    return k < runs.size() && pc < runs[k].first && (k == 0 || runs[k - 1].first <= pc);
  };
  if (first_after(hint)) return runs[hint].second;
  if (first_after(hint + 1)) return runs[++hint].second;
  auto it = std::upper_bound(
      runs.begin(), runs.end(), pc,
      [](uint64_t v, const std::pair<uint64_t, int32_t>& r) { return v < r.first; });
  if (it == runs.end()) return std::nullopt;
  hint = static_cast<size_t>(it - runs.begin());
  return it->second;
}

std::optional<std::pair<std::string_view, int32_t>> FuncPcTables::file_line(uint64_t pc) const {
  auto line = at(line_, pc, line_hint_);
  auto fileno = at(file_, pc, file_hint_);
  if (!line || !fileno) return std::nullopt;
  std::optional<std::string_view> name;
  constexpr int32_t kCached = 4096;  // file numbers count a compilation unit's files
  if (*fileno >= 0 && *fileno < kCached) {
    const size_t k = static_cast<size_t>(*fileno);
    if (k >= named_.size()) {
      named_.resize(k + 1, 0);
      names_.resize(k + 1);
    }
    if (!named_[k]) {
      names_[k] = t_.file_name(f_, *fileno);
      named_[k] = 1;
    }
    name = names_[k];
  } else {
    name = t_.file_name(f_, *fileno);
  }
  if (!name) return std::nullopt;
  return std::make_pair(*name, *line);
}

std::optional<std::string_view> Pclntab::file_name(const PclnFunc& f, int32_t fileno) const {
  if (fileno < 0) return std::nullopt;
  uint64_t name_off;
  if (format_ == "1.2") {
    // {nfiles, off[nfiles]}: file numbers start at 1, offsets are from the pclntab start.
    if (fileno < 1 || static_cast<uint32_t>(fileno) >= nfiles_) return std::nullopt;
    auto o = le32(data_, filetab_off_ + 4 * uint64_t(fileno));
    if (!o) return std::nullopt;
    name_off = *o;
  } else {
    auto o = le32(data_, cu_off_ + 4 * (uint64_t(f.cu_offset) + uint64_t(fileno)));
    if (!o || *o == UINT32_MAX) return std::nullopt;
    name_off = filetab_off_ + *o;
  }
  if (name_off >= data_.size()) return std::nullopt;
  const char* p = reinterpret_cast<const char*>(data_.data() + name_off);
  const void* nul = std::memchr(p, 0, data_.size() - name_off);
  if (!nul) return std::nullopt;
  return std::string_view(p, static_cast<const char*>(nul) - p);
}

uint32_t Pclntab::pcdata(const PclnFunc& f, int i) const {
  if (i < 0 || static_cast<uint32_t>(i) >= f.npcdata) return 0;
  return le32(data_, funcdata_off_ + f.func_off + pcdata_start_ + 4 * uint64_t(i)).value_or(0);
}

std::optional<uint64_t> Pclntab::funcdata(const PclnFunc& f, int i) const {
  if (i < 0 || i >= f.nfuncdata) return std::nullopt;
  uint64_t off = funcdata_off_ + f.func_off + pcdata_start_ + 4 * uint64_t(f.npcdata);
  if (funcdata_offsets_) {
    auto v = le32(data_, off + 4 * uint64_t(i));
    if (!v || *v == UINT32_MAX) return std::nullopt;
    uint64_t base = md_.gofunc;
    if (!base && elf_) {
      const ElfSymbol* s = elf_->symbol("go:func.*");
      if (!s) s = elf_->symbol("go.func.*");
      if (s) base = s->value;
    }
    if (!base) return std::nullopt;
    return base + *v;
  }
  // Absolute pointers, 8-aligned in memory.
  if ((addr_ + off) & 4) off += 4;
  auto v = le64(data_, off + 8 * uint64_t(i));
  if (!v || *v == 0) return std::nullopt;
  return *v;
}

std::vector<InlinedCall> Pclntab::inline_tree(const PclnFunc& f) const {
  std::vector<InlinedCall> out;
  uint32_t table = pcdata(f, kPcdataInlTreeIndex);
  auto tree = funcdata(f, kFuncdataInlTree);
  if (!table || !tree || !elf_) return out;
  // The tree's length is not stored: it is one more than the largest index any PC uses.
  auto runs = decode_pcvalue(table, f.entry, f.end);
  int32_t max_index = -1;
  for (auto& [pc, v] : runs) max_index = std::max(max_index, v);
  auto index_at = [&](uint64_t pc) -> std::optional<int32_t> {
    if (pc < f.entry) return std::nullopt;
    auto it = std::upper_bound(runs.begin(), runs.end(), pc,
                               [](uint64_t p, const auto& run) { return p < run.first; });
    if (it == runs.end()) return std::nullopt;
    return it->second;
  };
  constexpr int32_t kMaxNodes = 1 << 16;
  if (max_index < 0 || max_index >= kMaxNodes) return out;
  const bool v120 = format_ == "1.20";
  const uint64_t entsize = v120 ? 16 : 20;
  Bytes d = elf_->read(*tree, entsize * (uint64_t(max_index) + 1));
  if (d.empty()) return out;
  out.resize(max_index + 1);
  for (int32_t i = 0; i <= max_index; ++i) {
    uint64_t o = entsize * i;
    InlinedCall& c = out[i];
    c.index = i;
    if (v120) {
      c.func_id = d[o];
      c.name = func_name(le32(d, o + 4).value_or(UINT32_MAX));
      int32_t parent_pc = static_cast<int32_t>(le32(d, o + 8).value_or(0));
      c.parent_pc = f.entry + static_cast<int64_t>(parent_pc);
      c.start_line = static_cast<int32_t>(le32(d, o + 12).value_or(0));
      auto p = index_at(c.parent_pc);
      c.parent = p && *p >= 0 && *p <= max_index && *p != i ? *p : -1;
    } else {
      c.parent = static_cast<int16_t>(le16(d, o).value_or(0xffff));
      c.func_id = d[o + 2];
      c.name = func_name(le32(d, o + 12).value_or(UINT32_MAX));
      int32_t parent_pc = static_cast<int32_t>(le32(d, o + 16).value_or(0));
      c.parent_pc = f.entry + static_cast<int64_t>(parent_pc);
      if (c.parent < -1 || c.parent > max_index) c.parent = -1;
    }
  }
  return out;
}

std::vector<InlineRange> Pclntab::inline_ranges(const PclnFunc& f) const {
  std::vector<InlineRange> out;
  uint32_t table = pcdata(f, kPcdataInlTreeIndex);
  if (!table) return out;
  uint64_t lo = f.entry;
  for (auto& [hi, v] : decode_pcvalue(table, f.entry, f.end)) {
    uint64_t h = std::min(hi, f.end);
    if (v >= 0 && h > lo) {
      if (!out.empty() && out.back().index == v && out.back().hi == lo)
        out.back().hi = h;
      else
        out.push_back({lo, h, v});
    }
    lo = hi;
    if (lo >= f.end) break;
  }
  return out;
}

std::optional<std::vector<ArgInfoItem>> Pclntab::arg_info(const PclnFunc& f) const {
  auto addr = funcdata(f, kFuncdataArgInfo);
  if (!addr || !elf_) return std::nullopt;
  Bytes d = elf_->at_vaddr(*addr);
  // abi.TraceArgsMaxLen = (TraceArgsMaxDepth*3+2)*TraceArgsLimit + 1 = 171.
  d = d.first(std::min<size_t>(d.size(), 171));
  std::vector<ArgInfoItem> out;
  for (size_t i = 0; i < d.size();) {
    uint8_t o = d[i++];
    switch (o) {
      case 0xff:
        return out;
      case 0xfe:
        out.push_back({ArgInfoItem::StartAgg, 0, 0});
        break;
      case 0xfd:
        out.push_back({ArgInfoItem::EndAgg, 0, 0});
        break;
      case 0xfc:
        out.push_back({ArgInfoItem::Dotdotdot, 0, 0});
        break;
      case 0xfb:
        out.push_back({ArgInfoItem::OffsetTooLarge, 0, 0});
        break;
      default: {
        if (i >= d.size()) return std::nullopt;
        uint8_t size = d[i++];
        // A word of the argument frame: 1-8 bytes inside _func.args (when known; assembly
        // declares its frame by hand, `$0-0` for runtime.procyield(uint32)). Anything else
        // means the bytes are not this function's ArgInfo (a wrong funcdata base).
        constexpr uint8_t kFlagAsm = 4;
        bool frame_known = f.args >= 0 && !(f.flag & kFlagAsm);
        if (size == 0 || size > 8 || (frame_known && o + size > f.args)) return std::nullopt;
        out.push_back({ArgInfoItem::Word, o, size});
      }
    }
  }
  return std::nullopt;  // no end marker: not ArgInfo
}

}  // namespace gotap
