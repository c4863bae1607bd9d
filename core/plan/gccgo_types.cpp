#include "core/plan/gccgo_types.h"

#include <string_view>

namespace gotap {

namespace {

struct Scalar {
  std::string_view name;
  GoKind kind;
  uint64_t size;
};

constexpr Scalar kScalars[] = {
    {"bool", GoKind::Bool, 1},       {"int", GoKind::Int, 8},
    {"int8", GoKind::Int8, 1},       {"int16", GoKind::Int16, 2},
    {"int32", GoKind::Int32, 4},     {"rune", GoKind::Int32, 4},
    {"int64", GoKind::Int64, 8},     {"uint", GoKind::Uint, 8},
    {"uint8", GoKind::Uint8, 1},     {"byte", GoKind::Uint8, 1},
    {"uint16", GoKind::Uint16, 2},   {"uint32", GoKind::Uint32, 4},
    {"uint64", GoKind::Uint64, 8},   {"uintptr", GoKind::Uintptr, 8},
    {"float32", GoKind::Float32, 4}, {"float64", GoKind::Float64, 8},
    {"string", GoKind::String, 16},  {"unsafe.Pointer", GoKind::UnsafePointer, 8},
};

// Nesting bound: the names come from the file.
constexpr int kMaxDepth = 8;

}  // namespace

TypeId GccgoTypes::add(const std::string& name) {
  return add(name, 0);
}

TypeId GccgoTypes::add(const SysvType& t) {
  return add(t, 0);
}

std::string GccgoTypes::key(const SysvType& t) {
  if (!t.pointee.empty()) return "*" + key(t.pointee[0]);
  if (t.fields.empty()) return t.name;
  std::string k = t.name + "{" + std::to_string(t.size);
  for (const SysvField& f : t.fields)
    k += ";" + f.name + "@" + std::to_string(f.offset) + ":" + key(f.type);
  return k + "}";
}

TypeId GccgoTypes::add(const SysvType& t, int depth) {
  const std::string k = key(t);
  if (auto it = ids_.find(k); it != ids_.end()) return it->second;
  if (depth > kMaxDepth) return 0;
  if (t.fields.empty() && t.pointee.empty()) return add(t.name, depth);
  GoType g;
  g.name = t.name;
  if (!t.pointee.empty()) {
    g.kind = GoKind::Ptr;
    g.size = 8;
    g.elem = add(t.pointee[0], depth + 1);
  } else {
    g.kind = GoKind::Struct;
    g.size = t.size;
    for (const SysvField& f : t.fields)
      g.fields.push_back({f.name, add(f.type, depth + 1), f.offset});
  }
  g.id = next_++;
  graph_.add(g);
  return ids_[k] = g.id;
}

TypeId GccgoTypes::add_interface(const std::string& name, bool empty) {
  if (auto it = ids_.find(name); it != ids_.end()) return it->second;
  GoType t;
  t.name = name;
  t.kind = GoKind::Interface;
  t.size = 16;
  // The decoder tells an empty interface by a first field named _type (value_decoder.cpp).
  if (empty) t.fields.push_back({"_type", 0, 0});
  t.id = next_++;
  graph_.add(t);
  return ids_[name] = t.id;
}

TypeId GccgoTypes::add(const std::string& name, int depth) {
  if (auto it = ids_.find(name); it != ids_.end()) return it->second;
  if (depth > kMaxDepth) return 0;
  GoType t;
  t.name = name;
  if (name.starts_with("[]")) {
    t.kind = GoKind::Slice;
    t.size = 24;
    t.elem = add(name.substr(2), depth + 1);
    if (!t.elem) return ids_[name] = 0;  // a slice of what cannot be read: raw words
  } else if (name == "error" || name == "interface {}") {
    // Two words, the first a libgo type descriptor (interface {}) or a method table that
    // starts with one (error): the decoder reads the dynamic type from them.
    t.kind = GoKind::Interface;
    t.size = 16;
  } else if (name.starts_with("*")) {
    t.kind = GoKind::Ptr;
    t.size = 8;
    t.elem = add(name.substr(1), depth + 1);  // 0: the address alone
  } else {
    for (const auto& s : kScalars)
      if (name == s.name) {
        t.kind = s.kind;
        t.size = s.size;
      }
    if (t.kind == GoKind::Invalid) return ids_[name] = 0;
  }
  t.id = next_++;
  graph_.add(t);
  return ids_[name] = t.id;
}

}  // namespace gotap
