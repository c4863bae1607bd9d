// The type-data words of runtime.moduledata (types, etypes, rodata, gofunc) per Go release,
// read and cross-checked against the ELF before anything trusts them. Their offsets moved in
// 1.18, 1.20 and 1.27 (1.27: `types, typedesclen, etypes` and `itaboffset, itabsize`, with
// typelinks/itablinks gone); a word read from the wrong offset is a plausible-looking
// address, so every value is checked against the section headers where they exist and
// against each other, and a layout that does not check out yields nothing instead of garbage.
// Source: `type moduledata struct` in src/runtime/symtab.go of each release.
#pragma once

#include <cstdint>
#include <string>

#include "core/binary/elf_file.h"
#include "core/model/go_version.h"

namespace gotap {

// Byte offsets inside runtime.moduledata on 64-bit; -1 = the release has no such field.
struct ModuledataTypeLayout {
  const char* name;  // "1.18", "1.20", "1.26", "1.27": the first release with the layout
  int types, typedesclen, etypes, itaboffset, itabsize, rodata, gofunc, epclntab;
  int typelinks, typelinks_alt;  // the typelinks slice (two candidates for 1.25), -1 none
};

struct ModuledataTypeFields {
  uint64_t types = 0, etypes = 0, rodata = 0, gofunc = 0;
  std::string layout;   // the layout that checked out ("" when none)
  std::string problem;  // why none did (empty when one did)
};

// What the caller knows about the pclntab the moduledata was found from.
struct PclntabExtent {
  uint64_t addr = 0;
  uint64_t size = 0;          // bytes available from addr (the section, else the segment)
  bool from_section = false;  // size is the section's exact size
};

// The newest release whose moduledata layout gotap knows.
constexpr int kNewestKnownGoMinor = 27;

// Reads the type-data words of the moduledata at `md_addr` for a 1.18+ pclntab (`pcln_format`
// 118 or 120) of a binary of Go release `go` (unknown: every 1.20+ layout is tried, newest
// first; newer than gotap knows: the same, best effort) and checks them. Never throws.
ModuledataTypeFields read_moduledata_types(const ElfFile& elf, uint64_t md_addr, int pcln_format,
                                           const GoVersion& go, const PclntabExtent& pcln);

}  // namespace gotap
