// A TypeGraph built from the runtime type descriptors, for binaries without DWARF: the types
// a method-table signature names (core/binary/method_table.h), with what their layouts reach, so
// the ABI assignment and the value decoders work on them as on DWARF types. A type's id is
// its descriptor's link-time address.
#pragma once

#include <cstdint>
#include <string>

#include "core/binary/rtype.h"
#include "core/model/go_types.h"

namespace gotap {

class RtypeGraphBuilder {
 public:
  // mem reads link-time addresses (an ElfMemoryReader with bias 0).
  RtypeGraphBuilder(TypeGraph& g, MemoryReader& mem, const RtypeEnv& env)
      : g_(g), mem_(mem), env_(env) {}

  // Adds the descriptor at addr and every type its layout reaches, each whole whatever the
  // order of the adds; returns its id, or 0 when it cannot be read. Call TypeGraph::index()
  // after the last add.
  TypeId add(uint64_t addr);
  // Whether any type was added since construction.
  bool added() const { return added_; }

 private:
  std::string full_name(const RType& r, std::string name);
  TypeGraph& g_;
  MemoryReader& mem_;
  RtypeEnv env_;
  bool added_ = false;
};

}  // namespace gotap
