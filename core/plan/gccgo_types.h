// The Go types of a gccgo program's parameters, for the value decoder: gccgo's DWARF is
// C-like (core/binary/gccgo_dwarf.h), but its strings, slices and pointers have gc's
// layouts, so a type graph built from the names alone decodes them as gc's. Interfaces are
// decoded through libgo's type descriptors. Structs (and pointers to them) are decoded from
// the fields DWARF gives. Maps and other named types get no type: their words are shown raw
// (libgo's map layouts are not read).
#pragma once

#include <string>
#include <unordered_map>

#include "core/binary/gccgo_dwarf.h"
#include "core/model/go_types.h"

namespace gotap {

class GccgoTypes {
 public:
  // The type a parameter of this name decodes as ("int", "string", "[]int", "*int",
  // "[][]string", "*Point"), added on first use; 0 when the name is not one of those (and for
  // "*T" with such a T: a pointer whose target is not read).
  TypeId add(const std::string& name);
  // The type of a parameter DWARF describes: a struct from its fields, a pointer to one with
  // it; by name (add) otherwise. A struct is keyed by its name and layout, not its name
  // alone: gccgo's DWARF names types without their package (strings.Reader and bufio.Reader
  // are both "Reader"), and each must decode as its own fields.
  TypeId add(const SysvType& t);
  // The type add gave this parameter's type; 0 when none.
  TypeId find(const SysvType& t) const { return find(key(t)); }
  // An interface DWARF shows under `name` ("Reader", "Shape"): two words whose first is a
  // method table that starts with the dynamic type's descriptor (empty: the descriptor
  // itself), as for error. Call before add() sees the name; a name that is an interface in
  // one place and another type in another is left to add().
  TypeId add_interface(const std::string& name, bool empty);
  // The type add gave this name; 0 when it gave none or was not asked.
  TypeId find(const std::string& name) const {
    auto it = ids_.find(name);
    return it == ids_.end() ? 0 : it->second;
  }
  // Call once the parameters are in, before the graph is read.
  void finish() { graph_.index(); }
  const TypeGraph& graph() const { return graph_; }

 private:
  TypeId add(const std::string& name, int depth);
  TypeId add(const SysvType& t, int depth);
  static std::string key(const SysvType& t);
  TypeGraph graph_;
  std::unordered_map<std::string, TypeId> ids_;
  TypeId next_ = 1;
};

}  // namespace gotap
