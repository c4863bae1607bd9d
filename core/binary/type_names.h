// Every type descriptor of a binary by the name Go's %T prints ("*errors.errorString") and,
// for named types and pointers to them, by the name with the package path
// ("*io/fs.PathError"). For `--if 'type(x) == "T"'`: an interface's dynamic type can be any
// type the program converts to an interface, which on a stripped binary no signature names.
//
// Found by scanning [types, etypes) as the method-table scan does, which needs neither
// typelinks/itablinks (before 1.27) nor typedesclen/itaboffset (1.27): each 8-byte boundary
// whose bytes pass as a descriptor header (known kind, power-of-two alignments, pointer
// bytes within the size, a name inside the type data and, for a pointer, slice, array or
// chan, an element that passes too). Built on first use, once, so a trace without a type
// condition pays nothing.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/binary/rtype.h"

namespace gotap {

class TypeNames {
 public:
  // elf must outlive this; env's addresses are link-time.
  TypeNames(const ElfFile& elf, const RtypeEnv& env) : elf_(elf), env_(env) {}

  // The link-time addresses of the descriptors named `name`, in address order (several when
  // two packages of one name declare it, or a descriptor is duplicated); empty when none.
  std::vector<uint64_t> find(const std::string& name) const;
  // How many names are indexed (builds the index).
  size_t size() const;

 private:
  void build() const;
  const ElfFile& elf_;
  RtypeEnv env_;
  mutable std::once_flag once_;
  mutable std::unordered_map<std::string, std::vector<uint64_t>> by_name_;
};

}  // namespace gotap
