// Parameters, results and types from DWARF (libdw), when the binary has it. Compressed
// sections (SHF_COMPRESSED, .zdebug) and DWARF 4 and 5 are handled by libdw.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/binary/elf_file.h"
#include "core/model/go_types.h"
#include "core/model/result.h"

struct Dwarf;  // libdw's

namespace gotap {

// libdw's reader of elf's DWARF (the caller ends it with dwarf_end), or nullptr when elf has
// none (no .debug_info, as -ldflags=-w and Debian's packaging leave). A compressed debug
// section whose header claims a size zlib cannot reach is refused: libelf would allocate it.
Result<Dwarf*> open_dwarf(const ElfFile& elf);

// Where a value lives at a given PC, as DWARF says: one piece per register or memory slot.
struct DwarfLocPiece {
  enum Kind : uint8_t { Reg, FrameBase, Other } kind = Other;
  int dwarf_reg = -1;     // DWARF register number (0 rax, 1 rdx, 2 rcx, 3 rbx, 4 rsi, 5 rdi,
                          // 8..15 r8..r15, 17..32 xmm0..xmm15)
  int64_t fb_offset = 0;  // FrameBase: offset from the frame base (CFA = entry RSP + 8)
  uint64_t size = 0;      // piece size in bytes (0 = whole value)
};

struct DwarfParam {
  std::string name;
  TypeId type = 0;
  bool is_result = false;  // DW_AT_variable_parameter
  // The location at the function's entry PC, when the location list covers it.
  std::optional<std::vector<DwarfLocPiece>> entry_loc;
};

// The receiver type of a method named "pkg/path.T.M" or "pkg/path.(*T).M": "pkg/path.T"
// or "*pkg/path.T"; empty for a function. A closure ("pkg.F.func1") reads as a method of a
// type "pkg.F": callers look the type up, and there is none.
std::string method_receiver_type(const std::string& name);

struct DwarfFunc {
  std::string name;
  uint64_t low_pc = 0, high_pc = 0;
  std::vector<DwarfParam> params;  // declaration order: receiver, args, then results
  // A compiler-generated method wrapper (DW_AT_trampoline). Go before 1.22 leaves the
  // receiver out of their DWARF; load() adds it back as ".this" (no location).
  bool trampoline = false;
};

// One inlined instance of a function (DW_TAG_inlined_subroutine).
struct DwarfInlined {
  std::string callee;
  uint64_t low_pc = 0;  // first address of its first range
  std::string call_file;
  int call_line = 0;
};

class DwarfInfo {
 public:
  // Reads everything at once (about 0.8 s for a 33 MB Go 1.26 binary, half of it zlib).
  // Returns an error only on corrupt DWARF; a binary without DWARF gives a null pointer.
  // Nothing refers back to `elf` afterwards.
  static Result<std::unique_ptr<DwarfInfo>> load(const ElfFile& elf);

  const std::string& producer() const { return producer_; }  // "Go cmd/compile go1.24.4; regabi"
  int version() const { return version_; }
  const TypeGraph& types() const { return types_; }
  const DwarfFunc* func(const std::string& name) const;
  // Every function with code, by name.
  const std::unordered_map<std::string, DwarfFunc>& funcs() const { return funcs_; }
  const std::vector<DwarfInlined>& inlined(const std::string& callee) const;
  // The byte offset of a member of a runtime struct, e.g. ("runtime.g", "goid").
  std::optional<uint64_t> member_offset(const std::string& type, const std::string& member) const;

 private:
  std::string producer_;
  int version_ = 0;
  TypeGraph types_;
  std::unordered_map<std::string, DwarfFunc> funcs_;
  std::unordered_map<std::string, std::vector<DwarfInlined>> inlined_;
  friend class DwarfLoader;
};

}  // namespace gotap
