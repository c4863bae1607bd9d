#include "core/binary/rtype_graph.h"

#include <unordered_map>

#include "core/binary/method_table.h"

namespace gotap {

namespace {

// Bounds the graph of a corrupt binary; a real one's descriptors are far fewer (caddy: ~40k).
constexpr size_t kMaxTypes = 200000;
// Bounds the chain of unnamed types a name is spelled from (*[]map[K]*T): Go's own type
// expressions stay far below; only corrupt descriptors form longer chains or cycles.
constexpr int kMaxNameDepth = 64;

}  // namespace

std::string RtypeGraphBuilder::full_name(const RType& r, std::string name) {
  // The descriptor's string uses the package's name ("*json.SyntaxError"), DWARF its path
  // ("*encoding/json.SyntaxError"). Named types carry their path in the uncommon type.
  if ((r.tflag & kTflagNamed) && (r.tflag & kTflagUncommon)) {
    uint64_t u = r.addr + descriptor_size(r.kind, env_.swiss_maps, env_.go.at_least(1, 27));
    auto off = mem_.u32(u);
    auto dot = name.find('.');
    if (off && *off && dot != std::string::npos && name.find('[') > dot) {
      auto path = read_type_name(mem_, env_.go, env_.types + *off);
      if (path && !path->empty()) name = *path + name.substr(dot);
    }
    return name;
  }
  auto named = [&](TypeId id) -> const std::string* {
    const GoType* t = id ? g_.get(id) : nullptr;
    return t && !t->name.empty() ? &t->name : nullptr;
  };
  const std::string* elem = named(r.elem);
  if (!elem) return name;
  switch (r.kind) {
    case GoKind::Ptr:
      return "*" + *elem;
    case GoKind::Slice:
      return "[]" + *elem;
    case GoKind::Array:
      return "[" + std::to_string(r.len) + "]" + *elem;
    case GoKind::Map:
      if (const std::string* key = named(r.key)) return "map[" + *key + "]" + *elem;
      return name;
    default:
      return name;
  }
}

// Every type the root's layout reaches goes in whole, however deep: a type is built once,
// from its descriptor alone, so what it holds never depends on which root reached it first
// or how deep (the decoders' own limits cut values, not the graph). A walk with a work list,
// not recursion, so that long chains of types cannot exhaust the stack.
TypeId RtypeGraphBuilder::add(uint64_t addr) {
  auto in_range = [&](uint64_t a) { return a != 0 && a >= env_.types && a < env_.etypes; };
  if (!in_range(addr)) return 0;
  if (g_.get(addr)) return addr;
  std::unordered_map<uint64_t, std::optional<RType>> read;  // the descriptors new to g_
  std::vector<uint64_t> todo{addr}, order;
  while (!todo.empty()) {
    uint64_t a = todo.back();
    todo.pop_back();
    if (!in_range(a) || g_.get(a) || read.count(a)) continue;
    if (g_.size() + order.size() >= kMaxTypes) break;
    auto r = read_rtype(mem_, env_, a);
    if (r && r->kind == GoKind::Invalid) r.reset();
    if (r) {
      order.push_back(a);
      for (const RField& f : r->fields) todo.push_back(f.type);
      todo.push_back(r->key);
      todo.push_back(r->elem);
    }
    read.emplace(a, std::move(r));
  }
  // A reference leads to a type only when that type is (or will be) in the graph.
  auto ref = [&](uint64_t a) -> TypeId {
    if (!in_range(a)) return 0;
    if (auto it = read.find(a); it != read.end()) return it->second ? a : 0;
    return g_.get(a) ? a : 0;
  };
  std::unordered_map<uint64_t, GoType*> built;  // nodes of g_'s map do not move
  for (uint64_t a : order) {
    const RType& r = *read[a];
    GoType t;
    t.id = a;
    t.kind = r.kind;
    t.size = r.size;
    t.name = rtype_name(mem_, env_, r);
    t.count = r.len;
    t.runtime_type = a - env_.types;
    t.elem = ref(r.elem);
    t.key = ref(r.key);
    if (r.kind == GoKind::Interface) {
      // The decoders tell an empty interface (type, data) from one with methods (itab, data)
      // by its first field, as DWARF names them.
      bool eface = mem_.u64(a + 64).value_or(0) == 0;
      t.fields = {GoField{eface ? "_type" : "tab", 0, 0, false}, GoField{"data", 0, 8, false}};
    }
    if (r.kind == GoKind::Struct)
      for (const RField& f : r.fields)
        t.fields.push_back(GoField{f.name, ref(f.type), f.offset, f.embedded});
    built[a] = &g_.add(std::move(t));
    added_ = true;
  }
  // Names last: an unnamed type is spelled from its element's name ("*" + "io/fs.PathError"),
  // so elements are named first.
  std::unordered_map<uint64_t, bool> named;
  auto name = [&](auto& self, uint64_t a, int depth) -> void {
    auto it = read.find(a);
    if (it == read.end() || !it->second || depth > kMaxNameDepth) return;
    if (!named.try_emplace(a, true).second) return;
    const RType& r = *it->second;
    if (!(r.tflag & kTflagNamed)) {
      if (r.elem) self(self, r.elem, depth + 1);
      if (r.key) self(self, r.key, depth + 1);
    }
    GoType* t = built[a];
    t->name = full_name(r, std::move(t->name));
  };
  for (uint64_t a : order) name(name, a, 0);
  return ref(addr);
}

}  // namespace gotap
