// gccgo executables and libgo: how to recognise one, its functions from the ELF symbol
// tables, and gccgo's symbol mangling turned back into Go names.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/binary/elf_file.h"

namespace gotap {

// Go name of a gccgo assembler name. GCC 11 and later (Debian's gccgo-12 among them) escape
// with '_': _0 '.', _1 '/', _2 '*', _3 ',', _4 '{', _5 '}', _6 '[', _7 ']', _8 '(', _9 ')',
// _a '"', _b ' ', _c ';', __ '_', _xNN, _uNNNN, _UNNNNNNNN (checked against gccgo-12's own
// output: gotap_0test_1geo.Point.Sum is gotap.test/geo.Point.Sum, its DW_AT_name). Earlier
// GCCs wrote ..zNN, ..uNNNN, ..UNNNNNNNN; both are decoded. A GCC clone suffix
// (".constprop.0", ".isra.0", ".part.0", ".cold") is kept verbatim, after the Go name.
// Nested functions ("main.main..func1") read as gc names them ("main.main.func1").
std::string gccgo_demangle(std::string_view symbol);
// "pkg/path.(*T).M" for the Go name "pkg/path.T.M" of a method (gccgo's symbols do not
// say which receiver a method has; its DWARF does: GccgoDwarfFunc::receiver_copied).
// `symbol` tells methods apart: after the package path it has exactly one more '.' and no
// "..". "" for anything else.
std::string pointer_method_name(std::string_view symbol, std::string_view go_name);
// "pkg/path.T.M" for "pkg/path.(*T).M"; the name itself otherwise.
std::string value_method_spelling(std::string_view name);
// The GCC clone suffix of a symbol (".constprop.0.isra.0"), "" when none.
std::string_view gcc_clone_suffix(std::string_view symbol);

struct GccgoSymbol {
  std::string symbol;  // as in the table
  uint64_t value = 0, size = 0;
  bool global = false;  // STB_GLOBAL or STB_WEAK (nm's T/W), else local (t)
};

// The defined functions (STT_FUNC with a section) of .symtab, else .dynsym, sorted by
// address. Bounds-checked: a truncated or corrupt table gives what could be read, and
// `error` says why it stopped.
struct GccgoSymbols {
  std::vector<GccgoSymbol> funcs;
  std::string table;  // ".symtab", ".dynsym" or "" (none)
  std::string error;
};
GccgoSymbols read_function_symbols(const ElfFile& elf);

// What marks a binary as gccgo's, and the facts `info` prints.
struct GccgoFacts {
  bool gccgo = false;
  std::string evidence;  // what gave it away: ".go_export", "__go_init_main", "libgo.so.21"
  std::string libgo;     // the DT_NEEDED libgo ("libgo.so.21"), "" when linked statically
  std::string soname;    // DT_SONAME: "libgo.so.21" for libgo itself
  std::vector<std::string> needed;
  // Where ld.so looks for them first: DT_RPATH (only without DT_RUNPATH), then, after
  // LD_LIBRARY_PATH, DT_RUNPATH; each a ':'-separated list, $ORIGIN unexpanded.
  std::string rpath, runpath;
};
// Never fails: unreadable parts count as absent.
GccgoFacts detect_gccgo(const ElfFile& elf);

// "go1.18" for the libgo that GCC `gcc_major` ships, "" when gotap does not know it. From
// each release's libgo/VERSION (GCC 12: go1.18).
std::string gccgo_go_version(int gcc_major);
// 12 for "GNU Go 12.2.0 -O2 ...", 0 when the producer is not GNU Go.
int gnu_go_major(std::string_view producer);

}  // namespace gotap
