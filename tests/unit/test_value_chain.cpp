// The types eBPF follows behind an interface (backends/ebpf/value_chain.h): their layouts,
// taken from the runtime type descriptors (what a stripped binary has), must be the ones the
// compiler's DWARF gives for the same release: the value's size, and each string, []byte and
// interface field at its offset, in declaration order. The errstr fixture holds every error
// type of the list; its stripped build must yield the same layouts.
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backends/ebpf/value_chain.h"
#include "backends/ebpf/value_kind.h"
#include "core/binary/type_names.h"
#include "core/plan/go_binary.h"
#include "tests/unit/fixtures.h"

namespace gotap::testing {
namespace {

using Layout = std::vector<std::pair<int, int>>;  // size first, then (kind, offset) per field

Layout layout_of(const gotap_chain_type& t) {
  Layout l = {{t.size, t.nfields}};
  for (int i = 0; i < t.nfields && i < GOTAP_CHAIN_FIELDS; ++i)
    l.push_back({t.fields[i].kind, t.fields[i].off});
  return l;
}

// The same from DWARF: the pointer type's element.
Layout dwarf_layout(const TypeGraph& g, const GoType& ptr) {
  const GoType* s = g.get(ptr.elem);
  if (!s) return {};
  Layout fields;
  for (const auto& f : s->fields) {
    const GoType* ft = g.get(f.type);
    if (!ft) continue;
    if (ft->kind == GoKind::String || ebpf::is_byte_slice(ft, &g))  // net.IP too
      fields.push_back({GOTAP_CHAIN_STR, int(f.offset)});
    else if (ft->kind == GoKind::Interface)
      fields.push_back({!ft->fields.empty() && ft->fields[0].name == "tab" ? GOTAP_CHAIN_IFACE
                                                                           : GOTAP_CHAIN_EFACE,
                        int(f.offset)});
  }
  Layout l = {{int(s->size), int(fields.size())}};
  l.insert(l.end(), fields.begin(), fields.end());
  return l;
}

std::map<uint64_t, Layout> chain_layouts(const GoBinary& bin) {
  TypeNames names(bin.elf(), bin.rtype_env());
  std::map<uint64_t, Layout> out;
  for (const auto& t : ebpf::chain_types(bin.elf(), bin.rtype_env(), names))
    out[t.addr] = layout_of(t.layout);
  return out;
}

TEST(ValueChain, LayoutsAreDwarfsOnEveryRelease) {
  const std::vector<std::string> errors = {
      "*errors.errorString", "*fmt.wrapError", "*io/fs.PathError", "*os.SyscallError",
      "*net.OpError",        "*net/url.Error", "*net.TCPAddr",     "*net.UDPAddr"};
  size_t checked = 0;
  for (const Fixture& f : all_fixtures("errstr")) {
    if (f.flavour != "default") continue;
    SCOPED_TRACE(f.label());
    auto bin = GoBinary::open(f.path);
    ASSERT_TRUE(bin.ok());
    const TypeGraph* dw = (*bin)->types();
    ASSERT_NE(dw, nullptr);
    const auto got = chain_layouts(**bin);
    std::map<std::string, Layout> by_name;
    for (const std::string& name : errors) {
      const GoType* p = dw->by_name(name);
      ASSERT_TRUE(p && p->runtime_type) << name;
      const uint64_t addr = (*bin)->rtype_env().types + p->runtime_type;
      auto it = got.find(addr);
      ASSERT_NE(it, got.end()) << name << " not followed";
      EXPECT_EQ(it->second, dwarf_layout(*dw, *p)) << name;
      by_name[name] = it->second;
    }
    // DWARF's names lead to the same descriptors and layouts as the scan's.
    for (const auto& t : ebpf::chain_types((*bin)->elf(), (*bin)->rtype_env(), *dw)) {
      auto it = got.find(t.addr);
      ASSERT_NE(it, got.end()) << std::hex << t.addr;
      EXPECT_EQ(it->second, layout_of(t.layout)) << std::hex << t.addr;
    }
    // Stripped: the same layouts, found by name without DWARF.
    const std::string stripped =
        f.path.substr(0, f.path.rfind("/default/")) + "/stripped/" + f.program;
    if (!file_exists(stripped)) continue;
    auto sbin = GoBinary::open(stripped);
    ASSERT_TRUE(sbin.ok());
    TypeNames names((*sbin)->elf(), (*sbin)->rtype_env());
    const auto sgot = chain_layouts(**sbin);
    for (const auto& [name, layout] : by_name) {
      auto at = names.find(name);
      ASSERT_EQ(at.size(), 1u) << name;
      auto it = sgot.find(at[0]);
      ASSERT_NE(it, sgot.end()) << name << " not followed (stripped)";
      EXPECT_EQ(it->second, layout) << name << " (stripped)";
    }
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no errstr fixtures in " << fixtures_dir();
}

}  // namespace
}  // namespace gotap::testing
