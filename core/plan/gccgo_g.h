// Goroutine ids in gccgo programs. libgo keeps the running goroutine's g in the
// thread-local variable `runtime.g`, and the id at a fixed offset of that C struct:
// - linked in (-static-libgo), the executable's own TLS block, local-exec: the g pointer
//   is at FS base + a constant that PT_TLS and the symbol's offset give;
// - in libgo.so, a general-dynamic variable: its module id and offset are in libgo's GOT
//   (an R_X86_64_DTPMOD64/DTPOFF64 pair), filled by ld.so when it loads libgo, so they are
//   read per process. A thread's block is then dtv[modid] with dtv = *(FS base + 8).
// The goid offset is known per GCC release (libgo's g is checked against its DWARF by
// test_gccgo_g.cpp); an unknown release reads no goid, and says so.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/binary/elf_file.h"
#include "core/binary/gccgo_symbols.h"
#include "core/model/result.h"
#include "core/plan/plan.h"
#include "core/sys/proc_maps.h"

namespace gotap {

// Where `elf` (a gccgo executable, or libgo itself) keeps runtime.g, from its file alone.
// gcc_major: the GCC release of its DWARF producer, 0 when unknown.
GccgoG place_gccgo_g(const ElfFile& elf, const GccgoFacts& facts, int gcc_major);

// g.goid's offset in libgo's g for a GCC release; nullopt when gotap does not know it.
std::optional<uint32_t> libgo_goid_offset(int gcc_major);
// The GCC release a libgo soname comes from (libgo.so.21: GCC 12), 0 when unknown.
int libgo_gcc_major(std::string_view soname);

// The address (link-time) of the GOT pair ld.so fills with `symbol`'s TLS module id and
// offset (R_X86_64_DTPMOD64, then DTPOFF64 at +8). nullopt when no relocation names it.
std::optional<uint64_t> tls_module_slot(const ElfFile& lib, std::string_view symbol);

// Where the g pointer is in one process's threads.
struct GccgoGAt {
  bool dtv = false;  // Module: through the thread's DTV
  // Module in every process that maps libgo (--all, libgo the target): modid holds the GOT
  // pair's link-time address, and each hit reads the pair there, in the libgo it ran in.
  bool self = false;
  int64_t fs_offset = 0;           // Exec: at FS base + fs_offset
  uint64_t modid = 0, dtpoff = 0;  // Module: block = dtv[modid] (16-byte entries), g at +dtpoff
  uint32_t g_goid = 0;
};

// Resolves `g` in process `pid`. A Module needs libgo mapped and relocated in it (from
// ld.so's relocation on): before that, Runtime error "not loaded yet". Reads the libgo
// the process maps through /proc/PID/map_files, never a path that could have changed.
Result<GccgoGAt> locate_gccgo_g(const GccgoG& g, int pid);

// The mapping of file offset 0 of the library `soname` in process pid ("libgo.so.21" also
// names libgo.so.21.0.0, the file the link leads to); nullopt when pid maps none.
std::optional<sys::Mapping> library_mapping(int pid, std::string_view soname);

// locate_gccgo_g in two steps, for a process on its way there (ld.so running): where the
// GOT pair is in the process (nullopt while libgo is not mapped; an error when it never
// will be found), then the pair, once ld.so has filled it.
Result<std::optional<uint64_t>> libgo_tls_slot_in(const GccgoG& g, int pid);
Result<GccgoGAt> read_gccgo_g(const GccgoG& g, int pid, uint64_t slot);

// The g pointer's address in a thread whose FS base is `fs`, reading the DTV with `read`
// (a Module); 0 when unreadable.
template <typename Read>
uint64_t gccgo_g_slot(const GccgoGAt& at, uint64_t fs, Read&& read) {
  if (!fs) return 0;
  if (!at.dtv) return fs + uint64_t(at.fs_offset);
  uint64_t dtv = 0, block = 0;
  if (!read(fs + 8, &dtv) || !dtv || !read(dtv + at.modid * 16, &block) || !block) return 0;
  return block + at.dtpoff;
}

}  // namespace gotap
