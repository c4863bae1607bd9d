// Signatures of methods from the runtime's own type data, for binaries without DWARF.
//
// A named type's descriptor carries an uncommon type with its method table: per method its
// name, its func type (`mtyp`: every parameter and result type, receiver excluded) and the
// code of the method (`tfn`). The linker keeps mtyp and tfn for the methods it decided are
// reachable, which is every method that matches an interface method the program calls; the
// others read -1. The receiver is the type whose table it is: T's table lists T's methods
// (tfn `pkg.T.M`), *T's lists (*T).M, including the wrappers of T's methods.
// Layouts: Go's src/internal/abi/type.go (runtime/type.go before Go 1.21), uncommon().
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "core/binary/elf_file.h"
#include "core/binary/pclntab.h"
#include "core/binary/rtype.h"

namespace gotap {

struct MethodSignature {
  uint64_t receiver = 0;  // type descriptor (link-time address)
  std::vector<uint64_t> params;
  std::vector<uint64_t> results;
  bool variadic = false;
};

class MethodTables {
 public:
  // Scans the descriptors in [types, etypes) of the ELF image (link-time addresses). A
  // candidate counts only when a method's code offset lands exactly on a function entry whose
  // name ends in the method's name, so stray bytes that look like a descriptor add nothing.
  static MethodTables scan(const ElfFile& elf, const Pclntab& pcln, const RtypeEnv& env);

  // The signature of the function entered at `entry`, if a method table names it.
  std::optional<MethodSignature> find(uint64_t entry) const;
  bool contains(uint64_t entry) const { return by_entry_.count(entry) != 0; }
  size_t size() const { return by_entry_.size(); }

 private:
  struct Entry {
    uint64_t receiver = 0, func_type = 0;
  };
  const ElfFile* elf_ = nullptr;
  RtypeEnv env_;
  std::unordered_map<uint64_t, Entry> by_entry_;
};

// Size of the kind-specific descriptor that the uncommon type follows (0: unknown kind).
// map_strides: the 1.27 map descriptor (KeysOff, KeyStride, ElemsOff, ElemStride, ElemOff).
uint64_t descriptor_size(GoKind kind, bool swiss_maps, bool map_strides);

}  // namespace gotap
