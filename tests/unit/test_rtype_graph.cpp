// The type graph of a stripped binary (core/binary/rtype_graph.h).
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/binary/method_table.h"
#include "core/binary/rtype_graph.h"
#include "core/binary/type_names.h"
#include "core/plan/go_binary.h"
#include "tests/unit/fixtures.h"

namespace gotap::testing {
namespace {

// Every type the method tables' signatures name, in the order a plan of the
// whole binary adds them (function address order).
std::vector<uint64_t> signature_roots(const GoBinary& b) {
  std::vector<uint64_t> roots;
  const MethodTables* mt = b.method_tables();
  if (!mt) return roots;
  for (const auto& f : b.pclntab().all_funcs()) {
    auto sig = mt->find(f.entry);
    if (!sig) continue;
    roots.push_back(sig->receiver);
    roots.insert(roots.end(), sig->params.begin(), sig->params.end());
    roots.insert(roots.end(), sig->results.begin(), sig->results.end());
  }
  return roots;
}

TypeGraph graph_of(const GoBinary& b, const std::vector<uint64_t>& roots) {
  TypeGraph g;
  ElfMemoryReader mem(b.elf(), 0);
  RtypeGraphBuilder builder(g, mem, b.rtype_env());
  for (uint64_t r : roots) builder.add(r);
  g.index();
  return g;
}

std::string describe(const GoType& t) {
  std::string s = t.name + " kind=" + std::to_string(int(t.kind)) +
                  " elem=" + std::to_string(t.elem) + " key=" + std::to_string(t.key);
  for (const auto& f : t.fields)
    s += " " + f.name + ":" + std::to_string(f.type) + "@" + std::to_string(f.offset);
  return s;
}

// A type is the same whichever root reached it first and how deep: the graphs
// built from the same roots in opposite orders hold the same types, field for
// field.
TEST(RtypeGraph, SameTypesWhateverTheOrder) {
  size_t checked = 0;
  for (const char* program : {"rtypes", "methods"}) {
    for (const Fixture& f : all_fixtures(program)) {
      if (f.flavour != "stripped") continue;
      SCOPED_TRACE(f.label());
      auto bin = GoBinary::open(f.path);
      ASSERT_TRUE(bin.ok());
      auto roots = signature_roots(**bin);
      ASSERT_FALSE(roots.empty());
      TypeGraph fwd = graph_of(**bin, roots);
      std::reverse(roots.begin(), roots.end());
      TypeGraph rev = graph_of(**bin, roots);
      EXPECT_EQ(fwd.size(), rev.size());
      size_t differ = 0;
      for (const auto& [id, t] : fwd.all()) {
        const GoType* u = rev.get(id);
        if (!u) {
          ADD_FAILURE() << "only in the forward graph: " << describe(t);
        } else if (describe(t) != describe(*u) && ++differ <= 5) {
          ADD_FAILURE() << "forward: " << describe(t) << "\nreverse: " << describe(*u);
        }
      }
      EXPECT_EQ(differ, 0u);
      ++checked;
    }
  }
  if (checked == 0) GTEST_SKIP() << "no stripped rtypes/methods fixtures built";
}

// The rtypes fixture's Target is twelve levels inside (*L1)'s layout: reached
// from there first, it still has its fields' types (string, int, []string), as
// reached alone.
TEST(RtypeGraph, DeepTypeIsWhole) {
  size_t checked = 0;
  for (const Fixture& f : all_fixtures("rtypes")) {
    SCOPED_TRACE(f.label());
    auto bin = GoBinary::open(f.path);
    ASSERT_TRUE(bin.ok());
    TypeNames names((*bin)->elf(), (*bin)->rtype_env());
    auto l1 = names.find("*main.L1"), target = names.find("*main.Target");
    ASSERT_EQ(l1.size(), 1u);
    ASSERT_EQ(target.size(), 1u);
    TypeGraph g = graph_of(**bin, {l1[0], target[0]});
    const GoType* pt = g.get(target[0]);
    ASSERT_NE(pt, nullptr);
    const GoType* t = g.get(pt->elem);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->name, "main.Target");
    std::vector<std::string> fields;
    for (const auto& fld : t->fields) {
      const GoType* ft = g.get(fld.type);
      fields.push_back(fld.name + " " + (ft ? ft->name : "<none>"));
    }
    EXPECT_EQ(fields, (std::vector<std::string>{"Name string", "N int", "Tags []string"}));
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no rtypes fixtures built";
}

}  // namespace
}  // namespace gotap::testing
