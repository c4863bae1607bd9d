#include "core/binary/gccgo_symbols.h"

#include <elf.h>

#include <algorithm>
#include <array>
#include <cctype>

namespace gotap {

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// n hex digits at s[at], or nullopt.
std::optional<uint32_t> hex_at(std::string_view s, size_t at, size_t n) {
  if (at > s.size() || s.size() - at < n) return std::nullopt;
  uint32_t v = 0;
  for (size_t i = 0; i < n; ++i) {
    int d = hex_digit(s[at + i]);
    if (d < 0) return std::nullopt;
    v = v << 4 | uint32_t(d);
  }
  return v;
}

void append_utf8(std::string& out, uint32_t c) {
  if (c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) c = 0xfffd;
  if (c < 0x80) {
    out += char(c);
  } else if (c < 0x800) {
    out += char(0xc0 | c >> 6);
    out += char(0x80 | (c & 0x3f));
  } else if (c < 0x10000) {
    out += char(0xe0 | c >> 12);
    out += char(0x80 | (c >> 6 & 0x3f));
    out += char(0x80 | (c & 0x3f));
  } else {
    out += char(0xf0 | c >> 18);
    out += char(0x80 | (c >> 12 & 0x3f));
    out += char(0x80 | (c >> 6 & 0x3f));
    out += char(0x80 | (c & 0x3f));
  }
}

constexpr std::string_view kGlue = "./*,{}[]()";  // _0 .. _9

bool is_clone_word(std::string_view w) {
  for (std::string_view k : {"constprop", "isra", "part", "cold", "lto_priv", "localalias"})
    if (w == k) return true;
  return false;
}

bool all_digits(std::string_view w) {
  return !w.empty() && std::all_of(w.begin(), w.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::string_view gcc_clone_suffix(std::string_view s) {
  // Walk back over GCC's segments: ".constprop.N", ".isra.N", ".part.N", ".lto_priv.N" (a
  // number always follows), ".cold", ".localalias". A Go name never has a segment that is
  // all digits, and what is left must still be a Go name ("pkg.F"): a Go function named
  // cold or part ("main.cold") is not a clone.
  size_t start = s.size();
  size_t end = s.size();
  bool number_after = false;  // the segment after this one is all digits
  while (end > 0) {
    size_t dot = s.rfind('.', end - 1);
    if (dot == std::string_view::npos || dot == 0) break;
    std::string_view seg = s.substr(dot + 1, end - dot - 1);
    const bool standalone = seg == "cold" || seg == "localalias";
    const bool numbered = is_clone_word(seg) && !standalone;
    if (all_digits(seg)) {
      number_after = true;
    } else if ((standalone || (numbered && number_after)) &&
               s.substr(0, dot).find('.') != std::string_view::npos) {
      start = dot;
      number_after = false;
    } else {
      break;
    }
    end = dot;
  }
  return s.substr(start);
}

std::string gccgo_demangle(std::string_view symbol) {
  std::string_view clone = gcc_clone_suffix(symbol);
  std::string_view s = symbol.substr(0, symbol.size() - clone.size());
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    char c = s[i];
    if (c == '_' && i + 1 < s.size()) {
      char n = s[i + 1];
      if (n >= '0' && n <= '9') {
        out += kGlue[size_t(n - '0')];
        i += 2;
        continue;
      }
      if (n == '_' || n == 'a' || n == 'b' || n == 'c') {
        out += n == '_' ? '_' : n == 'a' ? '"' : n == 'b' ? ' ' : ';';
        i += 2;
        continue;
      }
      size_t digits = n == 'x' ? 2 : n == 'u' ? 4 : n == 'U' ? 8 : 0;
      if (auto v = digits ? hex_at(s, i + 2, digits) : std::nullopt) {
        append_utf8(out, *v);
        i += 2 + digits;
        continue;
      }
    }
    if (c == '.' && i + 2 < s.size() && s[i + 1] == '.') {
      char n = s[i + 2];
      size_t digits = n == 'z' ? 2 : n == 'u' ? 4 : n == 'U' ? 8 : 0;
      if (auto v = digits ? hex_at(s, i + 3, digits) : std::nullopt) {
        append_utf8(out, *v);
        i += 3 + digits;
        continue;
      }
      // "F..funcN": gc's "F.funcN".
      if (s.substr(i + 2, 4) == "func" && i + 6 < s.size() && all_digits(s.substr(i + 6))) {
        out += '.';
        i += 2;
        continue;
      }
    }
    out += c;
    ++i;
  }
  out += clone;
  return out;
}

std::string pointer_method_name(std::string_view symbol, std::string_view go_name) {
  std::string_view base = symbol.substr(0, symbol.size() - gcc_clone_suffix(symbol).size());
  if (base.find("..") != std::string_view::npos) return "";
  // The package path is encoded without '.' (_0), so the symbol's first '.' ends it.
  size_t pkg_end = base.find('.');
  if (pkg_end == std::string_view::npos) return "";
  size_t method_dot = base.find('.', pkg_end + 1);
  if (method_dot == std::string_view::npos || base.find('.', method_dot + 1) != base.npos)
    return "";
  // The same two dots in the Go name: after the last '/' of the package path.
  std::string_view clone = gcc_clone_suffix(symbol);
  std::string_view name = go_name.substr(0, go_name.size() - clone.size());
  size_t slash = name.rfind('/');
  size_t t = name.find('.', slash == std::string_view::npos ? 0 : slash);
  size_t m = t == std::string_view::npos ? t : name.find('.', t + 1);
  if (m == std::string_view::npos) return "";
  return std::string(name.substr(0, t + 1)) + "(*" + std::string(name.substr(t + 1, m - t - 1)) +
         ")" + std::string(name.substr(m)) + std::string(clone);
}

std::string value_method_spelling(std::string_view name) {
  size_t open = name.find(".(*");
  if (open == std::string_view::npos) return std::string(name);
  size_t close = name.find(").", open);
  if (close == std::string_view::npos) return std::string(name);
  return std::string(name.substr(0, open + 1)) +
         std::string(name.substr(open + 3, close - open - 3)) + std::string(name.substr(close + 1));
}

namespace {

struct SymTable {
  Bytes syms, strs;
};

std::optional<SymTable> table(const ElfFile& elf, std::string_view name, uint32_t type) {
  const ElfSection* s = elf.section(name);
  if (!s || s->type != type) return std::nullopt;
  // The string table is the section sh_link names; ElfSection does not keep sh_link, so the
  // usual pairing (.symtab/.strtab, .dynsym/.dynstr) is used.
  const ElfSection* str = elf.section(name == ".symtab" ? ".strtab" : ".dynstr");
  if (!str) return std::nullopt;
  return SymTable{elf.section_data(*s), elf.section_data(*str)};
}

// A NUL-terminated name in a string table.
bool contains_name(Bytes strtab, std::string_view name) {
  std::string_view all(reinterpret_cast<const char*>(strtab.data()), strtab.size());
  for (size_t at = all.find(name); at != std::string_view::npos; at = all.find(name, at + 1))
    if ((at == 0 || all[at - 1] == '\0') && at + name.size() < all.size() &&
        all[at + name.size()] == '\0')
      return true;
  return false;
}

}  // namespace

GccgoSymbols read_function_symbols(const ElfFile& elf) {
  GccgoSymbols out;
  std::optional<SymTable> t = table(elf, ".symtab", SHT_SYMTAB);
  out.table = ".symtab";
  if (!t) {
    t = table(elf, ".dynsym", SHT_DYNSYM);
    out.table = ".dynsym";
  }
  if (!t) {
    out.table.clear();
    return out;
  }
  constexpr size_t kSym = sizeof(Elf64_Sym);
  if (t->syms.size() % kSym != 0)
    out.error = out.table + " is not a whole number of symbols (truncated?)";
  for (size_t off = 0; off + kSym <= t->syms.size(); off += kSym) {
    const uint8_t* p = t->syms.data() + off;
    uint32_t name = *le32(t->syms, off);
    uint8_t info = p[4];
    uint16_t shndx = *le16(t->syms, off + 6);
    uint64_t value = *le64(t->syms, off + 8), size = *le64(t->syms, off + 16);
    if (ELF64_ST_TYPE(info) != STT_FUNC || shndx == SHN_UNDEF || value == 0) continue;
    if (name >= t->strs.size()) {
      out.error = out.table + ": a symbol name lies outside the string table";
      continue;
    }
    const char* start = reinterpret_cast<const char*>(t->strs.data()) + name;
    size_t len = std::string_view(start, t->strs.size() - name).find('\0');
    if (len == std::string_view::npos) {
      out.error = out.table + ": a symbol name is not terminated";
      continue;
    }
    if (len == 0) continue;
    uint8_t bind = ELF64_ST_BIND(info);
    out.funcs.push_back(
        {std::string(start, len), value, size, bind == STB_GLOBAL || bind == STB_WEAK});
  }
  std::sort(out.funcs.begin(), out.funcs.end(), [](const GccgoSymbol& a, const GccgoSymbol& b) {
    return a.value != b.value ? a.value < b.value : a.symbol < b.symbol;
  });
  return out;
}

GccgoFacts detect_gccgo(const ElfFile& elf) {
  GccgoFacts f;
  // DT_NEEDED entries, from .dynamic and .dynstr.
  const ElfSection* dyn = elf.section(".dynamic");
  const ElfSection* dynstr = elf.section(".dynstr");
  if (dyn && dynstr) {
    Bytes d = elf.section_data(*dyn), str = elf.section_data(*dynstr);
    for (size_t off = 0; off + 16 <= d.size(); off += 16) {
      uint64_t tag = *le64(d, off), val = *le64(d, off + 8);
      if (tag == DT_NULL) break;
      if (tag != DT_NEEDED && tag != DT_SONAME && tag != DT_RPATH && tag != DT_RUNPATH) continue;
      if (val >= str.size()) continue;
      std::string_view rest(reinterpret_cast<const char*>(str.data()) + val, str.size() - val);
      size_t len = rest.find('\0');
      if (len == std::string_view::npos) continue;
      if (tag != DT_NEEDED) {
        (tag == DT_SONAME ? f.soname : tag == DT_RPATH ? f.rpath : f.runpath) = rest.substr(0, len);
        continue;
      }
      f.needed.emplace_back(rest.substr(0, len));
      if (rest.rfind("libgo.so", 0) == 0) f.libgo = f.needed.back();
    }
  }
  if (elf.section(".go_export")) {
    f.gccgo = true;
    f.evidence = ".go_export";
  } else if (elf.symbol("__go_init_main")) {
    f.gccgo = true;
    f.evidence = "__go_init_main";
  } else if (dynstr && contains_name(elf.section_data(*dynstr), "__go_init_main")) {
    // Stripped: .symtab is gone, but the program exports its init to libgo.
    f.gccgo = true;
    f.evidence = "__go_init_main";
  } else if (!f.libgo.empty()) {
    f.gccgo = true;
    f.evidence = f.libgo;
  }
  return f;
}

std::string gccgo_go_version(int gcc_major) {
  // libgo/VERSION of each GCC release branch; only the ones checked are listed.
  if (gcc_major == 12) return "go1.18";
  return "";
}

int gnu_go_major(std::string_view producer) {
  constexpr std::string_view kPrefix = "GNU Go ";
  if (producer.rfind(kPrefix, 0) != 0) return 0;
  int v = 0;
  for (size_t i = kPrefix.size(); i < producer.size() && std::isdigit(uint8_t(producer[i])); ++i)
    v = v * 10 + (producer[i] - '0');
  return v;
}

}  // namespace gotap
