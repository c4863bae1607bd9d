#include "core/model/go_types.h"

#include <algorithm>

namespace gotap {

const char* kind_name(GoKind k) {
  static const char* const kNames[] = {
      "invalid", "bool",      "int",        "int8",   "int16",  "int32",          "int64",
      "uint",    "uint8",     "uint16",     "uint32", "uint64", "uintptr",        "float32",
      "float64", "complex64", "complex128", "array",  "chan",   "func",           "interface",
      "map",     "ptr",       "slice",      "string", "struct", "unsafe.Pointer",
  };
  auto i = static_cast<size_t>(k);
  return i < std::size(kNames) ? kNames[i] : "invalid";
}

const GoType* TypeGraph::get(TypeId id) const {
  auto it = types_.find(id);
  return it == types_.end() ? nullptr : &it->second;
}

const GoType* TypeGraph::by_runtime_type(uint64_t offset_from_types) const {
  auto it = by_rtype_.find(offset_from_types);
  return it == by_rtype_.end() ? nullptr : get(it->second);
}

const GoType* TypeGraph::by_name(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : get(it->second);
}

GoType& TypeGraph::add(GoType t) {
  TypeId id = t.id;
  auto [it, inserted] = types_.try_emplace(id, std::move(t));
  return it->second;
}

namespace {

// Bounds every walk through the graph: corrupt DWARF may contain reference cycles.
constexpr int kMaxDepth = 64;

uint32_t scalar_align(const GoType& t) {
  switch (t.kind) {
    case GoKind::Bool:
    case GoKind::Int8:
    case GoKind::Uint8:
      return 1;
    case GoKind::Int16:
    case GoKind::Uint16:
      return 2;
    case GoKind::Int32:
    case GoKind::Uint32:
    case GoKind::Float32:
    case GoKind::Complex64:
      return 4;
    case GoKind::Int:
    case GoKind::Int64:
    case GoKind::Uint:
    case GoKind::Uint64:
    case GoKind::Uintptr:
    case GoKind::Float64:
    case GoKind::Complex128:
    case GoKind::Chan:
    case GoKind::Func:
    case GoKind::Interface:
    case GoKind::Map:
    case GoKind::Ptr:
    case GoKind::Slice:
    case GoKind::String:
    case GoKind::UnsafePointer:
      return 8;
    default:
      return 0;
  }
}

}  // namespace

uint32_t TypeGraph::align_of(TypeId id) const {
  const GoType* t = get(id);
  if (!t) return 1;
  if (t->align) return t->align;
  std::unordered_map<TypeId, uint32_t> memo;
  return compute_align(id, 0, memo);
}

// Memoized, so shared and (in corrupt input) cyclic type graphs cost linear time; a cycle
// is cut with alignment 1 (it marks the type in progress before recursing).
uint32_t TypeGraph::compute_align(TypeId id, int depth,
                                  std::unordered_map<TypeId, uint32_t>& memo) const {
  const GoType* t = get(id);
  if (!t || depth > kMaxDepth) return 1;
  if (t->align) return t->align;
  if (uint32_t a = scalar_align(*t)) return a;
  auto [it, inserted] = memo.try_emplace(id, 1);
  if (!inserted) return it->second;
  uint32_t a = 1;
  if (t->kind == GoKind::Array) {
    a = compute_align(t->elem, depth + 1, memo);
  } else if (t->kind == GoKind::Struct || !t->fields.empty()) {
    for (const auto& f : t->fields) a = std::max(a, compute_align(f.type, depth + 1, memo));
  } else {
    uint64_t s = std::min<uint64_t>(t->size, 8);
    while (a < s) a <<= 1;
  }
  memo[id] = a;
  return a;
}

void TypeGraph::index() {
  // Typedefs first: a named type takes its target's layout. Targets are resolved before the
  // typedefs naming them, so chains (typedef -> typedef -> struct) pass their layout along.
  std::unordered_map<TypeId, bool> done;
  struct Resolver {
    TypeGraph* g;
    std::unordered_map<TypeId, bool>* done;
    void operator()(TypeId id, int depth) {
      auto it = g->types_.find(id);
      if (it == g->types_.end() || !it->second.is_typedef || depth > kMaxDepth) return;
      if (!done->try_emplace(id, true).second) return;
      (*this)(it->second.target, depth + 1);
      GoType& t = it->second;
      auto tit = g->types_.find(t.target);
      if (tit == g->types_.end() || tit->first == id) return;
      const GoType& target = tit->second;
      GoKind own = t.kind;
      if (own == GoKind::Invalid) t.kind = target.kind;
      if (!t.size) t.size = target.size;
      if (t.fields.empty()) t.fields = target.fields;
      // A map or chan typedef names a pointer to the runtime's structure; its elem and key
      // are its own go_elem/go_key, not the pointer's target.
      if (own == GoKind::Invalid || own == target.kind) {
        if (!t.elem) t.elem = target.elem;
        if (!t.key) t.key = target.key;
        if (!t.count) t.count = target.count;
      }
    }
  };
  Resolver resolve{this, &done};
  for (auto& [id, t] : types_)
    if (t.is_typedef) resolve(id, 0);
  for (auto& [id, t] : types_) t.align = 0;
  std::unordered_map<TypeId, uint32_t> memo;
  std::vector<std::pair<TypeId, uint32_t>> aligns;
  aligns.reserve(types_.size());
  for (auto& [id, t] : types_) aligns.emplace_back(id, compute_align(id, 0, memo));
  for (auto& [id, a] : aligns) types_[id].align = a;

  by_rtype_.clear();
  by_name_.clear();
  for (auto& [id, t] : types_) {
    if (t.runtime_type) {
      auto [it, ins] = by_rtype_.try_emplace(t.runtime_type, id);
      // Prefer the DIE that is not a typedef, then the lowest offset, so lookups are stable.
      if (!ins) {
        const GoType& cur = types_[it->second];
        if ((cur.is_typedef && !t.is_typedef) ||
            (cur.is_typedef == t.is_typedef && id < it->second))
          it->second = id;
      }
    }
    if (t.name.empty()) continue;
    auto [it, ins] = by_name_.try_emplace(t.name, id);
    if (!ins) {
      const GoType& cur = types_[it->second];
      auto rank = [](const GoType& x) { return (x.is_typedef ? 2 : 0) + (x.runtime_type ? 0 : 1); };
      if (rank(t) < rank(cur) || (rank(t) == rank(cur) && id < it->second)) it->second = id;
    }
  }
}

}  // namespace gotap
