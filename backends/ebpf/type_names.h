// Names and kinds of Go runtime type descriptors (the dynamic type of an interface value),
// read from the binary file: the name is at moduledata.types + Type.Str.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/elf_file.h"
#include "core/go_types.h"
#include "core/go_version.h"

namespace gotap::ebpf {

class TypeNames {
 public:
  // types/etypes: moduledata's [types, etypes) as link-time addresses; bias: what the
  // tracee's addresses exceed link-time addresses by (PIE load bias, 0 otherwise).
  TypeNames(const ElfFile* elf, uint64_t types, uint64_t etypes, GoVersion go, uint64_t bias)
      : elf_(elf), types_(types), etypes_(etypes), go_(go), bias_(bias) {}

  // nullopt when the address is not a type descriptor of this binary.
  std::optional<std::string> name(uint64_t runtime_addr) const;
  std::optional<GoKind> kind(uint64_t runtime_addr) const;
  // Whether values of this type are stored directly in the interface data word.
  bool direct_iface(uint64_t runtime_addr) const;
  std::optional<uint64_t> size(uint64_t runtime_addr) const;

 private:
  bool valid(uint64_t addr) const;
  const ElfFile* elf_;
  uint64_t types_, etypes_;
  GoVersion go_;
  uint64_t bias_;
};

}  // namespace gotap::ebpf
