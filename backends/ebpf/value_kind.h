// What shape a parameter's value has, as far as capturing and decoding in the eBPF backend
// care: from the DWARF type when there is one, else from the type name.
#pragma once

#include "core/model/go_types.h"
#include "core/plan/abi.h"

namespace gotap::ebpf {

enum class ValueShape {
  Unknown,  // no type known: the words as numbers
  Bool,
  Int,
  Uint,
  Float,
  String,
  Pointer,  // pointer, map, chan, func, unsafe.Pointer: one address word
  Slice,
  Eface,  // interface{} / any: {*type, data}
  Iface,  // non-empty interface, error: {*itab, data}
  Other,  // struct, array, complex: raw words
};

// `types` may be null (no DWARF).
ValueShape shape_of(const ParamLoc& p, const TypeGraph* types = nullptr);

}  // namespace gotap::ebpf
