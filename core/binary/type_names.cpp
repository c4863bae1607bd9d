#include "core/binary/type_names.h"

#include <algorithm>
#include <cstring>

#include "core/binary/method_table.h"

namespace gotap {

namespace {

constexpr uint64_t kTypeSize = 48;  // abi.Type on 64-bit

}  // namespace

void TypeNames::build() const {
  if (!env_.types || env_.etypes <= env_.types) return;
  Bytes region = elf_.at_vaddr(env_.types);
  const uint64_t n = std::min<uint64_t>(region.size(), env_.etypes - env_.types);
  if (n < kTypeSize) return;
  const uint8_t* base = region.data();
  ElfMemoryReader mem(elf_, 0);
  auto header_at = [&](uint64_t addr) -> const uint8_t* {
    if (addr < env_.types || addr - env_.types > n - kTypeSize) return nullptr;
    const uint8_t* p = base + (addr - env_.types);
    return descriptor_kind(p, env_.go) == GoKind::Invalid ? nullptr : p;
  };
  // The runtime's name of a descriptor that passes, with its element's checked.
  auto name_of = [&](uint64_t addr, const uint8_t* p) -> std::string {
    int32_t str;
    std::memcpy(&str, p + 40, 4);
    uint64_t at = env_.types + static_cast<int64_t>(str);
    if (at >= env_.etypes) return "";
    auto s = read_type_name(mem, env_.go, at);
    if (!s || s->empty()) return "";
    if (p[20] & kTflagExtraStar) {
      if ((*s)[0] != '*') return "";
      s->erase(0, 1);
    }
    GoKind kind = descriptor_kind(p, env_.go);
    if (kind == GoKind::Ptr || kind == GoKind::Slice || kind == GoKind::Array ||
        kind == GoKind::Chan) {
      uint64_t elem = 0;
      if (addr + 56 > env_.types + n) return "";
      std::memcpy(&elem, p + 48, 8);
      if (!header_at(elem)) return "";
    }
    return *s;
  };
  // The package path of a named type, from its uncommon type ("" when it has none).
  auto path_of = [&](const uint8_t* p, uint64_t addr) -> std::string {
    if ((p[20] & (kTflagNamed | kTflagUncommon)) != (kTflagNamed | kTflagUncommon)) return "";
    uint64_t u = addr + descriptor_size(descriptor_kind(p, env_.go), env_.swiss_maps,
                                        env_.go.at_least(1, 27));
    auto off = mem.u32(u);
    if (!off || !*off) return "";
    return read_type_name(mem, env_.go, env_.types + *off).value_or("");
  };
  // "io/fs" + "fs.PathError" -> "io/fs.PathError"; "" when that says nothing more.
  auto with_path = [](const std::string& path, const std::string& name) -> std::string {
    auto dot = name.find('.');
    if (path.empty() || dot == std::string::npos || name.find('[') < dot) return "";
    std::string full = path + name.substr(dot);
    return full == name ? "" : full;
  };
  auto add = [&](const std::string& name, uint64_t addr) {
    auto& v = by_name_[name];
    if (std::find(v.begin(), v.end(), addr) == v.end()) v.push_back(addr);
  };
  const uint64_t first = (8 - (env_.types & 7)) & 7;
  for (uint64_t off = first; off + kTypeSize <= n; off += 8) {
    const uint64_t addr = env_.types + off;
    const uint8_t* p = header_at(addr);
    if (!p) continue;
    std::string name = name_of(addr, p);
    if (name.empty()) continue;
    add(name, addr);
    GoKind kind = descriptor_kind(p, env_.go);
    std::string full;
    if (p[20] & kTflagNamed) {
      full = with_path(path_of(p, addr), name);
    } else if (kind == GoKind::Ptr && name[0] == '*') {
      uint64_t elem;
      std::memcpy(&elem, p + 48, 8);
      if (const uint8_t* e = header_at(elem); e && (e[20] & kTflagNamed)) {
        std::string inner = with_path(path_of(e, elem), name.substr(1));
        if (!inner.empty()) full = "*" + inner;
      }
    }
    if (!full.empty()) add(full, addr);
  }
}

std::vector<uint64_t> TypeNames::find(const std::string& name) const {
  std::call_once(once_, [this] { build(); });
  auto it = by_name_.find(name);
  return it == by_name_.end() ? std::vector<uint64_t>{} : it->second;
}

size_t TypeNames::size() const {
  std::call_once(once_, [this] { build(); });
  return by_name_.size();
}

}  // namespace gotap
