#include "backends/ebpf/value_kind.h"

#include <string>

namespace gotap::ebpf {

namespace {

ValueShape shape_of_kind(const GoType& t) {
  switch (t.kind) {
    case GoKind::Bool:
      return ValueShape::Bool;
    case GoKind::Int:
    case GoKind::Int8:
    case GoKind::Int16:
    case GoKind::Int32:
    case GoKind::Int64:
      return ValueShape::Int;
    case GoKind::Uint:
    case GoKind::Uint8:
    case GoKind::Uint16:
    case GoKind::Uint32:
    case GoKind::Uint64:
    case GoKind::Uintptr:
      return ValueShape::Uint;
    case GoKind::Float32:
    case GoKind::Float64:
      return ValueShape::Float;
    case GoKind::String:
      return ValueShape::String;
    case GoKind::Ptr:
    case GoKind::Map:
    case GoKind::Chan:
    case GoKind::Func:
    case GoKind::UnsafePointer:
      return ValueShape::Pointer;
    case GoKind::Slice:
      return ValueShape::Slice;
    case GoKind::Interface:
      // DWARF lays interfaces out as runtime.iface {tab, data} or runtime.eface {_type, data}.
      if (!t.fields.empty() && t.fields[0].name == "tab") return ValueShape::Iface;
      if (!t.fields.empty()) return ValueShape::Eface;
      return t.name == "interface {}" || t.name == "any" ? ValueShape::Eface : ValueShape::Iface;
    default:
      return ValueShape::Other;
  }
}

ValueShape shape_of_name(const std::string& n) {
  if (n == "bool") return ValueShape::Bool;
  if (n == "int" || n == "int8" || n == "int16" || n == "int32" || n == "int64" || n == "rune")
    return ValueShape::Int;
  if (n == "uint" || n == "uint8" || n == "uint16" || n == "uint32" || n == "uint64" ||
      n == "uintptr" || n == "byte")
    return ValueShape::Uint;
  if (n == "float32" || n == "float64") return ValueShape::Float;
  if (n == "string") return ValueShape::String;
  if (n == "error") return ValueShape::Iface;
  if (n == "interface {}" || n == "any") return ValueShape::Eface;
  if (n.rfind("[]", 0) == 0) return ValueShape::Slice;
  if (n.rfind("*", 0) == 0 || n.rfind("map[", 0) == 0 || n.rfind("chan ", 0) == 0 ||
      n.rfind("func(", 0) == 0 || n == "unsafe.Pointer")
    return ValueShape::Pointer;
  return ValueShape::Unknown;
}

}  // namespace

ValueShape shape_of(const ParamLoc& p, const TypeGraph* types) {
  if (types && p.type) {
    if (const GoType* t = types->get(p.type)) return shape_of_kind(*t);
  }
  ValueShape s = shape_of_name(p.type_name);
  if (s == ValueShape::Unknown && p.size > 8) return ValueShape::Other;
  return s;
}

}  // namespace gotap::ebpf
