#include "backends/ebpf/value_kind.h"

#include <string>

namespace gotap::ebpf {

bool is_byte_slice(const GoType* t, const TypeGraph* types) {
  if (!t || t->kind != GoKind::Slice) return false;
  if (t->name == "[]uint8" || t->name == "[]byte") return true;
  if (!types) return false;
  TypeId elem = t->elem;
  if (!elem && !t->fields.empty())
    if (const GoType* arr = types->get(t->fields[0].type)) elem = arr->elem;
  const GoType* e = elem ? types->get(elem) : nullptr;
  return e && e->size == 1 && (e->kind == GoKind::Uint8 || e->kind == GoKind::Int8);
}

ValueShape shape_of(const ParamLoc& p, const TypeGraph* types) {
  const GoType* t = types && p.type ? types->get(p.type) : nullptr;
  if (t && t->kind == GoKind::String) return ValueShape::String;
  if (is_byte_slice(t, types)) return ValueShape::Bytes;
  if (t && t->kind == GoKind::Interface) {
    // DWARF lays interfaces out as runtime.iface {tab, data} or runtime.eface {_type, data}.
    if (!t->fields.empty())
      return t->fields[0].name == "tab" ? ValueShape::Iface : ValueShape::Eface;
    return t->name == "interface {}" || t->name == "any" ? ValueShape::Eface : ValueShape::Iface;
  }
  if (t) return ValueShape::Other;
  const std::string& n = p.type_name;
  if (n == "string") return ValueShape::String;
  if (n == "[]uint8" || n == "[]byte") return ValueShape::Bytes;
  if (n == "error") return ValueShape::Iface;
  if (n == "interface {}" || n == "any") return ValueShape::Eface;
  return ValueShape::Other;
}

}  // namespace gotap::ebpf
