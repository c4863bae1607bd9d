// What shape a parameter's value has, as far as capturing in the eBPF backend cares (which
// bytes behind its words to copy): from the DWARF type when there is one, else from the type
// name. Decoding is core's ValueDecoder's.
#pragma once

#include "core/model/go_types.h"
#include "core/plan/abi.h"

namespace gotap::ebpf {

enum class ValueShape {
  Other,   // nothing behind the words is copied (a struct's string fields aside)
  String,  // the bytes at the data word
  Bytes,   // []byte: copied as a string is, up to --max-str
  Eface,   // interface{} / any: {*type, data}; the payload at data
  Iface,   // non-empty interface, error: {*itab, data}; the itab's type word and the payload
};

// Whether a type is a slice of bytes: []byte (named []uint8) or a named one such as
// json.RawMessage, whose element DWARF gives through the slice's array field.
bool is_byte_slice(const GoType* t, const TypeGraph* types);

// `types` may be null (no DWARF).
ValueShape shape_of(const ParamLoc& p, const TypeGraph* types = nullptr);

}  // namespace gotap::ebpf
