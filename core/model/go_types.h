// The Go type graph the value decoders need, built from DWARF (struct fields, element types,
// DW_AT_go_kind, and the runtime-type-to-DWARF mapping).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace gotap {

// reflect.Kind values (DW_AT_go_kind uses the same numbering).
enum class GoKind : uint8_t {
  Invalid = 0,
  Bool,
  Int,
  Int8,
  Int16,
  Int32,
  Int64,
  Uint,
  Uint8,
  Uint16,
  Uint32,
  Uint64,
  Uintptr,
  Float32,
  Float64,
  Complex64,
  Complex128,
  Array,
  Chan,
  Func,
  Interface,
  Map,
  Ptr,
  Slice,
  String,
  Struct,
  UnsafePointer,
};
const char* kind_name(GoKind k);

using TypeId = uint64_t;  // DWARF DIE offset; 0 = none

struct GoField {
  std::string name;
  TypeId type = 0;
  uint64_t offset = 0;
  bool embedded = false;
};

struct GoType {
  TypeId id = 0;
  std::string name;  // Go spelling, e.g. "map[string]int", "*main.Point", "main.Shape"
  GoKind kind = GoKind::Invalid;
  uint64_t size = 0;
  std::vector<GoField> fields;  // Struct; also the DWARF-level layout of string, slice,
                                // interface, (hmap / swiss map structs when reached)
  TypeId elem = 0;              // Ptr, Slice, Array, Chan, Map (value)
  TypeId key = 0;               // Map
  int64_t count = 0;            // Array length
  uint64_t runtime_type = 0;    // DW_AT_go_runtime_type: offset from moduledata.types (0 = none)
  bool is_typedef = false;      // a named type whose layout is its target's (resolved for you)
  TypeId target = 0;            // typedef: the DIE it names (before resolution)
  uint32_t align = 0;           // alignment in bytes, computed from the layout (0 = unknown)
};

class TypeGraph {
 public:
  const GoType* get(TypeId id) const;
  const GoType* by_runtime_type(uint64_t offset_from_types) const;
  const GoType* by_name(const std::string& name) const;
  size_t size() const { return types_.size(); }

  // Builder interface (used by DwarfInfo).
  GoType& add(GoType t);
  // Resolves typedefs (copying their target's layout), computes alignments, and builds the
  // name and runtime-type indices; call once after all adds.
  void index();
  // The type's alignment under Go's rules (1 for zero-size structs, 8 for words).
  uint32_t align_of(TypeId id) const;
  // Every type, keyed by DIE offset (for dumps and the fuzz target).
  const std::unordered_map<TypeId, GoType>& all() const { return types_; }

 private:
  uint32_t compute_align(TypeId id, int depth, std::unordered_map<TypeId, uint32_t>& memo) const;

  std::unordered_map<TypeId, GoType> types_;
  friend class DwarfInfo;
  std::unordered_map<uint64_t, TypeId> by_rtype_;
  std::unordered_map<std::string, TypeId> by_name_;
};

}  // namespace gotap
