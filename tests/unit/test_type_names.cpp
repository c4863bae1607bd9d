// The index of a binary's type descriptors by name (core/binary/type_names.h).
#include <algorithm>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/binary/type_names.h"
#include "core/cond/compile.h"
#include "core/plan/go_binary.h"
#include "tests/unit/fixtures.h"

namespace gotap::testing {
namespace {

// Every named type (and pointer to one) that DWARF gives a runtime type descriptor is found
// by its DWARF name at that descriptor, and by the name %T prints when the package's name is
// its path's last element: the truth is the compiler's DWARF, not the scan.
TEST(TypeNames, FindsEveryDescriptorDwarfNames) {
  const std::regex simple(R"(\*?[A-Za-z0-9_./-]+\.[A-Za-z0-9_]+)");
  size_t checked = 0;
  for (const Fixture& f : all_fixtures("cond")) {
    if (f.flavour != "default") continue;
    SCOPED_TRACE(f.label());
    auto bin = GoBinary::open(f.path);
    ASSERT_TRUE(bin.ok());
    const TypeGraph* dw = (*bin)->types();
    ASSERT_NE(dw, nullptr);
    const RtypeEnv env = (*bin)->rtype_env();
    TypeNames names((*bin)->elf(), env);
    size_t n = 0, missing = 0;
    for (const auto& [id, t] : dw->all()) {
      if (!t.runtime_type || t.is_typedef || !std::regex_match(t.name, simple)) continue;
      const uint64_t addr = env.types + t.runtime_type;
      auto has = [&](const std::string& name) {
        auto v = names.find(name);
        return std::find(v.begin(), v.end(), addr) != v.end();
      };
      ++n;
      if (!has(t.name) && ++missing <= 5) ADD_FAILURE() << t.name << " at " << std::hex << addr;
      const std::string rt = cond::runtime_spelling(t.name);
      const std::string pkg = t.name.substr(0, t.name.rfind('.'));
      if (rt != t.name && pkg.find('/') != std::string::npos &&
          !std::regex_search(pkg, std::regex(R"(/v[0-9]+$|[-.])"))) {
        EXPECT_TRUE(has(rt)) << rt;
      }
    }
    EXPECT_EQ(missing, 0u) << "of " << n;
    EXPECT_GT(n, 100u);
    for (const char* name : {"*errors.errorString", "*fs.PathError", "*io/fs.PathError"})
      EXPECT_FALSE(names.find(name).empty()) << name;
    EXPECT_TRUE(names.find("*no.SuchType").empty());
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no cond fixtures built";
}

// On stripped builds the same standard types are found, and each address found is a
// descriptor of that name.
TEST(TypeNames, FindsStandardTypesStripped) {
  size_t checked = 0;
  for (const char* program : {"rtypes", "cond"}) {
    for (const Fixture& f : all_fixtures(program)) {
      if (f.flavour != "stripped") continue;
      SCOPED_TRACE(f.label());
      auto bin = GoBinary::open(f.path);
      ASSERT_TRUE(bin.ok());
      ASSERT_EQ((*bin)->dwarf(), nullptr);
      const RtypeEnv env = (*bin)->rtype_env();
      TypeNames names((*bin)->elf(), env);
      ElfMemoryReader mem((*bin)->elf(), 0);
      for (const char* name : {"*errors.errorString", "*fs.PathError", "*io/fs.PathError"}) {
        auto v = names.find(name);
        ASSERT_EQ(v.size(), 1u) << name;
        auto r = read_rtype(mem, env, v[0]);
        ASSERT_TRUE(r.has_value()) << name;
        EXPECT_EQ(r->kind, GoKind::Ptr);
        EXPECT_EQ("*" + rtype_name(mem, env, *read_rtype(mem, env, r->elem)),
                  std::string(name).find('/') == std::string::npos ? name : "*fs.PathError");
      }
      ++checked;
    }
  }
  if (checked == 0) GTEST_SKIP() << "no stripped rtypes/cond fixtures built";
}

}  // namespace
}  // namespace gotap::testing
