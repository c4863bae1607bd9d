#include "core/binary/buildinfo.h"

#include <elf.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>

#include "core/binary/pclntab.h"

namespace gotap {

namespace {

constexpr char kMagic[] = "\xff Go buildinf:";
constexpr size_t kMagicLen = 14;
constexpr size_t kHeaderSize = 32;
constexpr size_t kAlign = 16;

std::optional<uint64_t> uvarint64(Bytes d, uint64_t& pos) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (pos >= d.size()) return std::nullopt;
    uint8_t b = d[pos++];
    v |= uint64_t(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  return std::nullopt;
}

// The first 16-byte aligned magic in [vaddr, vaddr + d.size()), as an offset into d.
std::optional<uint64_t> search_magic(Bytes d, uint64_t vaddr) {
  uint64_t off = (kAlign - (vaddr % kAlign)) % kAlign;
  for (; off + kHeaderSize <= d.size(); off += kAlign)
    if (std::memcmp(d.data() + off, kMagic, kMagicLen) == 0) return off;
  return std::nullopt;
}

// A Go string {ptr, len} stored at vaddr, read through the file image.
std::optional<std::string> read_go_string(const ElfFile& elf, uint64_t vaddr) {
  auto ptr = elf.read_u64(vaddr);
  auto len = elf.read_u64(vaddr + 8);
  if (!ptr || !len || *len > (1u << 24)) return std::nullopt;
  Bytes b = elf.read(*ptr, *len);
  if (b.size() != *len) return std::nullopt;
  return std::string(b.begin(), b.end());
}

// The version and modinfo strings of the blob at d (which starts at the magic).
bool decode_blob(const ElfFile& elf, Bytes d, std::string& vers, std::string& mod) {
  if (d.size() < kHeaderSize) return false;
  uint8_t ptr_size = d[14], flags = d[15];
  if (flags & 2) {  // 1.18+: two uvarint-prefixed strings inline after the header
    uint64_t pos = kHeaderSize;
    for (std::string* out : {&vers, &mod}) {
      auto len = uvarint64(d, pos);
      if (!len || *len > d.size() - pos) return false;
      out->assign(reinterpret_cast<const char*>(d.data() + pos), *len);
      pos += *len;
    }
  } else {                                           // before 1.18: pointers to Go string headers
    if (ptr_size != 8 || (flags & 1)) return false;  // x86-64 only: 8-byte little endian
    auto v = read_go_string(elf, le64(d, 16).value_or(0));
    auto m = read_go_string(elf, le64(d, 24).value_or(0));
    if (!v) return false;
    vers = *v;
    mod = m.value_or("");
  }
  return !vers.empty();
}

// A string that is exactly a Go release token: "go1.N", "go1.N.M", "go1.NrcK", "go1.NbetaK",
// optionally followed by " " and experiment/suffix text (e.g. "go1.24.4 X:nodwarf5").
bool is_version_token(std::string_view s) {
  if (s.size() < 5 || s.size() > 64 || s.substr(0, 4) != "go1.") return false;
  size_t i = 4, n = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++n;
  if (n == 0 || n > 2) return false;
  if (i < s.size() && s[i] == '.') {
    size_t m = 0;
    for (++i; i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])); ++i) ++m;
    if (m == 0 || m > 3) return false;
  } else {
    for (std::string_view pre : {"rc", "beta"}) {
      if (s.substr(i, pre.size()) == pre) {
        i += pre.size();
        size_t m = 0;
        while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++m;
        if (m == 0) return false;
        break;
      }
    }
  }
  if (i == s.size()) return true;
  if (s[i] != ' ') return false;
  for (; i < s.size(); ++i)
    if (!std::isprint(static_cast<unsigned char>(s[i]))) return false;
  return true;
}

bool non_exec_load(const ElfSegment& s) {
  return s.type == PT_LOAD && !(s.flags & PF_X);
}

// Heuristic for binaries with neither buildinfo nor .symtab (runtime.buildVersion is then
// only reachable as data). Two passes, stronger first:
//  1. A string header {ptr, len} in writable data whose bytes are exactly a version token:
//     that is what the linker emits for runtime.buildVersion (it is a Go string variable).
//     False positives need a pointer/length pair landing exactly on "go1.N..." with nothing
//     after it, which other data does not produce.
//  2. Raw "go1.N[.M]" byte sequences in read-only data (the string bytes, which the linker
//     packs back to back with no separator, so no boundary can be required after the token
//     beyond "the next byte is not a digit or '.'"). The most frequent token wins, ties going
//     to the longer (more specific) one.
std::optional<std::string> scan_version(const ElfFile& elf) {
  std::map<std::string, int> hits;
  for (const auto& seg : elf.segments()) {
    if (!non_exec_load(seg) || !(seg.flags & PF_W)) continue;
    Bytes d = elf.at_vaddr(seg.vaddr);
    for (uint64_t off = (8 - (seg.vaddr & 7)) & 7; off + 16 <= d.size(); off += 8) {
      uint64_t len = le64(d, off + 8).value_or(0);
      if (len < 5 || len > 64) continue;
      Bytes s = elf.read(le64(d, off).value_or(0), len);
      if (s.size() < 4 || std::memcmp(s.data(), "go1.", 4) != 0) continue;
      std::string str(s.begin(), s.end());
      if (is_version_token(str)) ++hits[str];
    }
  }
  if (hits.empty()) {
    for (const auto& seg : elf.segments()) {
      if (!non_exec_load(seg) || (seg.flags & PF_W)) continue;
      Bytes d = elf.at_vaddr(seg.vaddr);
      std::string_view sv(reinterpret_cast<const char*>(d.data()), d.size());
      for (size_t pos = sv.find("go1."); pos != std::string_view::npos;
           pos = sv.find("go1.", pos + 4)) {
        size_t e = pos + 4;
        while (e < sv.size() && e - pos < 12 &&
               (std::isdigit(static_cast<unsigned char>(sv[e])) || sv[e] == '.'))
          ++e;
        std::string_view tok = sv.substr(pos, e - pos);
        while (!tok.empty() && tok.back() == '.') tok.remove_suffix(1);
        if (e < sv.size() && e - pos >= 12) continue;
        if (is_version_token(tok)) ++hits[std::string(tok)];
      }
    }
  }
  if (hits.empty()) return std::nullopt;
  auto best = std::max_element(hits.begin(), hits.end(), [](const auto& a, const auto& b) {
    if (a.second != b.second) return a.second < b.second;
    return a.first.size() < b.first.size();
  });
  return best->first;
}

// build settings may be quoted with strconv.Quote when they hold spaces, quotes or '='.
std::string unquote(std::string_view v) {
  if (v.size() < 2 || v.front() != '"' || v.back() != '"') return std::string(v);
  std::string out;
  for (size_t i = 1; i + 1 < v.size(); ++i) {
    char c = v[i];
    if (c != '\\' || i + 2 >= v.size()) {
      out += c;
      continue;
    }
    char e = v[++i];
    switch (e) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case '\\':
        out += '\\';
        break;
      case '"':
        out += '"';
        break;
      default:
        out += '\\';
        out += e;
    }
  }
  return out;
}

bool looks_like_go(const ElfFile& elf) {
  if (elf.section(".gopclntab") || elf.section(".data.rel.ro.gopclntab") ||
      elf.section(".go.buildinfo") || elf.symbol("runtime.text"))
    return true;
  return Pclntab::load(elf).ok();
}

}  // namespace

std::string BuildInfo::setting(const std::string& key) const {
  for (const auto& [k, v] : settings)
    if (k == key) return v;
  return "";
}

void parse_modinfo(std::string_view mod, BuildInfo& out) {
  // Strip the sentinels that delimit modinfo (cmd/go/internal/modload infoStart/infoEnd).
  if (mod.size() >= 33 && mod[mod.size() - 17] == '\n') mod = mod.substr(16, mod.size() - 32);
  while (!mod.empty()) {
    size_t nl = mod.find('\n');
    std::string_view line = mod.substr(0, nl);
    mod = nl == std::string_view::npos ? std::string_view() : mod.substr(nl + 1);
    size_t tab = line.find('\t');
    if (tab == std::string_view::npos) continue;
    std::string_view key = line.substr(0, tab), rest = line.substr(tab + 1);
    // "mod"/"dep" lines: path, version and an optional sum, tab separated.
    auto path_version = [](std::string_view r) {
      size_t t1 = r.find('\t');
      if (t1 == std::string_view::npos) return std::string(r);
      size_t t2 = r.find('\t', t1 + 1);
      return std::string(r.substr(0, t1)) + " " +
             std::string(r.substr(t1 + 1, t2 == std::string_view::npos ? t2 : t2 - t1 - 1));
    };
    if (key == "path") {
      out.module_path = std::string(rest);
    } else if (key == "mod") {
      out.main_module = path_version(rest);
    } else if (key == "dep") {
      out.deps.push_back(path_version(rest));
    } else if (key == "=>") {
      // A replacement of the line before it.
      std::string* target = !out.deps.empty() ? &out.deps.back() : &out.main_module;
      *target += " => " + path_version(rest);
    } else if (key == "build") {
      size_t eq = rest.find('=');
      if (eq == std::string_view::npos) {
        out.settings.emplace_back(std::string(rest), "");
      } else {
        out.settings.emplace_back(std::string(rest.substr(0, eq)), unquote(rest.substr(eq + 1)));
      }
    }
  }
}

Result<BuildInfo> read_buildinfo(const ElfFile& elf) {
  BuildInfo bi;
  // The blob: its own section, else near the start of a writable, non-executable segment.
  // debug/buildinfo only looks at the first one; PIE links put RELRO data first and the
  // blob in the next, so try each in order.
  std::vector<std::pair<Bytes, uint64_t>> areas;
  if (const ElfSection* s = elf.section(".go.buildinfo")) {
    areas.emplace_back(elf.section_data(*s), s->addr);
  } else {
    for (const auto& seg : elf.segments())
      if (seg.type == PT_LOAD && (seg.flags & (PF_X | PF_W)) == PF_W)
        areas.emplace_back(elf.at_vaddr(seg.vaddr), seg.vaddr);
  }
  for (auto [area, area_vaddr] : areas) {
    std::string vers, mod;
    auto off = search_magic(area, area_vaddr);
    if (!off || !decode_blob(elf, area.subspan(*off), vers, mod)) continue;
    if (auto v = GoVersion::parse(vers)) {
      bi.version = *v;
      bi.version_source = "buildinfo";
    }
    parse_modinfo(mod, bi);
    if (bi.version.known()) return bi;
  }

  if (const ElfSymbol* s = elf.symbol("runtime.buildVersion")) {
    if (auto str = read_go_string(elf, s->value)) {
      if (auto v = GoVersion::parse(*str)) {
        bi.version = *v;
        bi.version_source = "runtime.buildVersion";
        return bi;
      }
    }
  }
  if (auto str = scan_version(elf)) {
    if (auto v = GoVersion::parse(*str)) {
      bi.version = *v;
      bi.version_source = "rodata";
      return bi;
    }
  }
  if (looks_like_go(elf)) return bi;
  return make_error("{}: not a Go binary", elf.path());
}

}  // namespace gotap
