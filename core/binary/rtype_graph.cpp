#include "core/binary/rtype_graph.h"

#include "core/binary/method_table.h"

namespace gotap {

namespace {

// Deeper types stay out of the graph: the decoders stop at a few indirections anyway, and a
// pointer to a type that is not in the graph still shows its address.
constexpr int kMaxDepth = 12;
constexpr size_t kMaxTypes = 200000;

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

TypeId RtypeGraphBuilder::add(uint64_t addr, int depth) {
  if (addr == 0 || addr < env_.types || addr >= env_.etypes) return 0;
  if (g_.get(addr)) return addr;
  if (depth > kMaxDepth || g_.size() >= kMaxTypes) return 0;
  auto r = read_rtype(mem_, env_, addr);
  if (!r || r->kind == GoKind::Invalid) return 0;
  GoType t;
  t.id = addr;
  t.kind = r->kind;
  t.size = r->size;
  t.name = rtype_name(mem_, env_, *r);
  t.count = r->len;
  t.runtime_type = addr - env_.types;
  if (r->kind == GoKind::Interface) {
    // The decoders tell an empty interface (type, data) from one with methods (itab, data)
    // by its first field, as DWARF names them.
    bool eface = mem_.u64(addr + 64).value_or(0) == 0;
    t.fields = {GoField{eface ? "_type" : "tab", 0, 0, false}, GoField{"data", 0, 8, false}};
  }
  // Added before the walk, so that recursive types end at this entry. The reference stays
  // valid while the walk adds more (unordered_map nodes do not move).
  GoType& slot = g_.add(std::move(t));
  added_ = true;
  TypeId elem = r->elem ? add(r->elem, depth + 1) : 0;
  TypeId key = r->key ? add(r->key, depth + 1) : 0;
  std::vector<GoField> fields;
  for (const RField& f : r->fields)
    fields.push_back(GoField{f.name, add(f.type, depth + 1), f.offset, f.embedded});
  slot.name = full_name(*r, std::move(slot.name));
  slot.elem = elem;
  slot.key = key;
  if (r->kind == GoKind::Struct) slot.fields = std::move(fields);
  return addr;
}

}  // namespace gotap
