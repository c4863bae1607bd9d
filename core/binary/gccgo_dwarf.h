// The functions of a gccgo binary as its DWARF describes them. gccgo writes C-like DWARF
// (no DW_AT_go_kind): a string is a struct {__data, __length}, a slice {__values, __count,
// __capacity}, an interface {__methods or __type_descriptor, __object}; several results
// are one anonymous struct whose members are the results, and each result is also a local
// variable. So the types here carry what the System V ABI needs (size and the class of each
// eightbyte) and a Go-like name, not the gc type graph.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/binary/elf_file.h"
#include "core/model/result.h"

namespace gotap {

enum class EightbyteClass : uint8_t { None, Integer, Sse };

struct SysvField;

struct SysvType {
  std::string name;  // "int", "string", "[]int", "*Point", "interface" ...
  uint64_t size = 0;
  // The System V class of each eightbyte; empty with `memory` (over 16 bytes, or a field
  // not at its natural alignment) and for zero-size types.
  std::vector<EightbyteClass> eightbytes;
  bool memory = false;
  // An interface, whatever its name ("Reader", "error"): a struct of a method table (or, empty,
  // a type descriptor) and the object. `empty`: interface {} under any name.
  bool iface = false, empty = false;
  // A struct of the program's own (not a string, slice or interface): its fields, to a
  // bounded depth (kFieldDepth). Empty for any other type, or deeper.
  std::vector<SysvField> fields;
  // A pointer to such a struct: that struct (one element), so that ptrace can decode it.
  std::vector<SysvType> pointee;
};

struct SysvField {
  std::string name;
  uint64_t offset = 0;
  SysvType type;
};

// How deep struct fields and pointers' structs are read (a struct in a struct in a
// parameter...): deeper, a value's words are shown raw.
constexpr int kFieldDepth = 4;

struct GccgoParam {
  std::string name;
  SysvType type;
  uint64_t offset = 0;  // a result's offset in the results struct
};

struct GccgoDwarfFunc {
  std::string name;     // DW_AT_name: the Go name, e.g. "gotap.test/geo.Point.Sum"
  std::string linkage;  // DW_AT_linkage_name when given (methods and exported names)
  uint64_t low_pc = 0;
  std::vector<GccgoParam> params;  // receiver first
  // The declared result type: one result, or the anonymous struct of several.
  std::optional<SysvType> result;
  std::vector<GccgoParam> results;  // each result, at its offset in `result`
  // gccgo-12 compiles a method with a value receiver to take a pointer: its first parameter
  // is "pointer *T", and a local variable of type T (the receiver's own name) holds the
  // copy (time.Time.Unix in libgo: a nil check, then a copy of *rdi). A method with a
  // pointer receiver takes it under the receiver's name.
  bool receiver_copied = false;
};

struct GccgoDwarf {
  std::string producer;               // the first "GNU Go ..." unit's DW_AT_producer
  std::vector<GccgoDwarfFunc> funcs;  // those with code (DW_AT_low_pc), by low_pc
};

// Null without .debug_info; BadInput on DWARF libdw cannot read.
Result<std::unique_ptr<GccgoDwarf>> read_gccgo_dwarf(const ElfFile& elf);

}  // namespace gotap
