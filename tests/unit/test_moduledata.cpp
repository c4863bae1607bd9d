// The type-data words of runtime.moduledata (types, etypes, rodata, gofunc) per Go release,
// against the linker's own symbols (runtime.types, runtime.etypes, runtime.rodata,
// go:func.*) of every unstripped fixture, and refusal rather than garbage when the words do
// not check out: the wrong release's layout, patched words, a release newer than gotap knows.
#include "core/binary/moduledata.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "core/binary/buildinfo.h"
#include "core/binary/pclntab.h"
#include "core/plan/go_binary.h"
#include "tests/unit/fixtures.h"

namespace gotap {
namespace {

using testing::all_fixtures;
using testing::Fixture;

// The layout name gotap must pick for a release ("1.18" is the 1.18-1.19 layout, ...).
std::string expected_layout(const GoVersion& v) {
  if (v.at_least(1, 27)) return "1.27";
  if (v.at_least(1, 26)) return "1.26";
  if (v.at_least(1, 25)) return "1.25";
  if (v.at_least(1, 20)) return "1.20";
  return "1.18";
}

uint64_t sym(const ElfFile& elf, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (const ElfSymbol* s = elf.symbol(n)) return s->value;
  return 0;
}

std::vector<uint8_t> bytes_of(const std::string& path) {
  std::string s = testing::read_file(path);
  return {s.begin(), s.end()};
}

// The 1.27 fixtures gotap must read (the layout that moved every word after `types`).
std::vector<Fixture> go127(const std::string& flavour) {
  std::vector<Fixture> out;
  for (const auto& f : all_fixtures("args"))
    if (f.go_version == "1.27" && f.flavour == flavour) out.push_back(f);
  return out;
}

TEST(Moduledata, TypeWordsMatchTheLinkerSymbolsOfEveryFixture) {
  auto fixtures = all_fixtures();
  if (fixtures.empty()) GTEST_SKIP() << "no Go fixtures under " << testing::fixtures_dir();
  size_t checked = 0;
  for (const auto& fx : fixtures) {
    SCOPED_TRACE(fx.label());
    auto elf = ElfFile::open(fx.path);
    ASSERT_TRUE(elf.ok());
    auto bi = read_buildinfo(**elf);
    ASSERT_TRUE(bi.ok());
    if (!bi->version.at_least(1, 18)) continue;
    auto t = Pclntab::load(**elf, bi->version);
    ASSERT_TRUE(t.ok()) << t.error().what();
    EXPECT_EQ(t->type_data_problem(), "");
    EXPECT_EQ(t->moduledata_layout(), expected_layout(bi->version));
    if (fx.flavour.ends_with("stripped")) continue;  // no symbols to compare with
    const Moduledata& md = t->moduledata();
    EXPECT_EQ(md.types, sym(**elf, {"runtime.types"}));
    EXPECT_EQ(md.etypes, sym(**elf, {"runtime.etypes"}));
    EXPECT_EQ(md.rodata, sym(**elf, {"runtime.rodata"}));
    EXPECT_EQ(md.gofunc, sym(**elf, {"go:func.*", "go.func.*"}));
    // Without the version (no build info), trying every layout finds the same words.
    auto u = Pclntab::load(**elf, GoVersion{});
    ASSERT_TRUE(u.ok());
    EXPECT_EQ(u->moduledata().types, md.types);
    EXPECT_EQ(u->moduledata().etypes, md.etypes);
    EXPECT_EQ(u->moduledata().gofunc, md.gofunc);
    ++checked;
  }
  EXPECT_GT(checked, 0u);
}

// A 1.27 binary read with 1.26's layout, and the reverse: the words at the other release's
// offsets look like addresses, and must be refused, not used.
TEST(Moduledata, TheWrongReleasesLayoutIsRefused) {
  auto fx = go127("default");
  if (fx.empty()) GTEST_SKIP() << "no Go 1.27 fixtures under " << testing::fixtures_dir();
  auto elf = ElfFile::open(fx[0].path);
  ASSERT_TRUE(elf.ok());
  auto t = Pclntab::load(**elf, *GoVersion::parse("go1.26.1"));
  ASSERT_TRUE(t.ok());  // the function table does not depend on the type words
  EXPECT_EQ(t->moduledata().types, 0u);
  EXPECT_EQ(t->moduledata().gofunc, 0u);
  EXPECT_NE(t->type_data_problem().find("unavailable"), std::string::npos);
  EXPECT_GT(t->num_funcs(), 100u);

  size_t older = 0;
  for (const auto& f : all_fixtures("args")) {
    if (f.go_version == "1.27" || f.flavour != "default") continue;
    auto e = ElfFile::open(f.path);
    ASSERT_TRUE(e.ok());
    auto bi = read_buildinfo(**e);
    if (!bi.ok() || !bi->version.at_least(1, 20)) continue;
    SCOPED_TRACE(f.label());
    auto o = Pclntab::load(**e, *GoVersion::parse("go1.27.0"));
    ASSERT_TRUE(o.ok());
    EXPECT_EQ(o->moduledata().types, 0u);
    EXPECT_FALSE(o->type_data_problem().empty());
    ++older;
  }
  EXPECT_GT(older, 0u);
}

// Each type-data word of a 1.27 moduledata, perturbed in a copy of the binary, with and
// without section headers: gotap reads nothing from it rather than a wrong value.
TEST(Moduledata, PerturbedWordsAreRefused) {
  auto fx = go127("stripped");
  if (fx.empty()) GTEST_SKIP() << "no Go 1.27 fixtures under " << testing::fixtures_dir();
  auto orig = ElfFile::open(fx[0].path);
  ASSERT_TRUE(orig.ok());
  const GoVersion go = *GoVersion::parse("go1.27.3");
  auto t0 = Pclntab::load(**orig, go);
  ASSERT_TRUE(t0.ok());
  ASSERT_NE(t0->moduledata().types, 0u) << t0->type_data_problem();
  auto md_off = (*orig)->vaddr_to_offset(t0->moduledata().addr);
  ASSERT_TRUE(md_off);
  const std::vector<uint8_t> clean = bytes_of(fx[0].path);
  // The words gotap reads (types 296, etypes 312, gofunc 344) moved by any amount, and the
  // ones it only checks (typedesclen, itaboffset, itabsize, rodata, epclntab) moved far.
  struct Case {
    int field;
    int64_t delta;
  };
  std::vector<Case> cases;
  for (int field : {296, 312, 344})
    for (int64_t d : {int64_t(0x10000), int64_t(-0x10000), int64_t(8), int64_t(1) << 40})
      cases.push_back({field, d});
  for (int field : {304, 320, 328, 336, 352}) cases.push_back({field, int64_t(1) << 40});
  cases.push_back({352, 8});  // epclntab must be exactly the end of .gopclntab
  for (bool headers : {true, false}) {
    for (const Case& c : cases) {
      // Without section headers only the words gotap reads must be refused (the others are
      // checked against sections).
      if (!headers && c.field != 296 && c.field != 312 && c.field != 344) continue;
      SCOPED_TRACE("word " + std::to_string(c.field) + " + " + std::to_string(c.delta) +
                   (headers ? "" : ", no section headers"));
      std::vector<uint8_t> b = clean;
      if (!headers) {
        // e_shoff, e_shnum and e_shstrndx zeroed: a binary without section headers.
        std::fill(b.begin() + 0x28, b.begin() + 0x30, 0);
        std::fill(b.begin() + 0x3c, b.begin() + 0x40, 0);
      }
      uint64_t v;
      std::memcpy(&v, &b[*md_off + c.field], 8);
      v += uint64_t(c.delta);
      std::memcpy(&b[*md_off + c.field], &v, 8);
      auto elf = ElfFile::from_bytes(b);
      ASSERT_TRUE(elf.ok());
      auto t = Pclntab::load(**elf, go);
      ASSERT_TRUE(t.ok());
      EXPECT_FALSE(t->type_data_problem().empty());
      EXPECT_EQ(t->moduledata().gofunc, 0u);
      if (c.field != 344) EXPECT_EQ(t->moduledata().types, 0u);
      // No ArgInfo is read through a refused gofunc (the stripped binary has no go:func.*).
      size_t with_arginfo = 0;
      for (const auto& f : t->all_funcs()) with_arginfo += t->arg_info(f).has_value();
      EXPECT_EQ(with_arginfo, 0u);
    }
  }
  // The clean copy reads ArgInfo (so the zero above means something).
  size_t clean_arginfo = 0;
  for (const auto& f : t0->all_funcs()) clean_arginfo += t0->arg_info(f).has_value();
  EXPECT_GT(clean_arginfo, 100u);
}

// A moduledata whose data/bss ranges disagree with the section headers is not the
// moduledata: nothing is read from it (the function table still loads from the pclntab).
TEST(Moduledata, RangesOutsideTheirSectionsAreRefused) {
  auto fx = go127("stripped");
  if (fx.empty()) GTEST_SKIP() << "no Go 1.27 fixtures under " << testing::fixtures_dir();
  auto orig = ElfFile::open(fx[0].path);
  ASSERT_TRUE(orig.ok());
  auto t0 = Pclntab::load(**orig, *GoVersion::parse("go1.27.3"));
  ASSERT_TRUE(t0.ok());
  ASSERT_NE(t0->moduledata().addr, 0u);
  auto md_off = (*orig)->vaddr_to_offset(t0->moduledata().addr);
  ASSERT_TRUE(md_off);
  const std::vector<uint8_t> clean = bytes_of(fx[0].path);
  // text/etext, noptrdata/enoptrdata, data/edata, bss/ebss, noptrbss/enoptrbss.
  for (int field : {176, 184, 192, 200, 208, 216, 224, 232, 240, 248}) {
    SCOPED_TRACE("word " + std::to_string(field));
    std::vector<uint8_t> b = clean;
    uint64_t v;
    std::memcpy(&v, &b[*md_off + field], 8);
    v += uint64_t(1) << 32;
    std::memcpy(&b[*md_off + field], &v, 8);
    auto elf = ElfFile::from_bytes(b);
    ASSERT_TRUE(elf.ok());
    auto t = Pclntab::load(**elf, *GoVersion::parse("go1.27.3"));
    ASSERT_TRUE(t.ok()) << t.error().what();
    EXPECT_EQ(t->moduledata().addr, 0u);
    EXPECT_EQ(t->moduledata().types, 0u);
    EXPECT_EQ(t->moduledata().gofunc, 0u);
    EXPECT_EQ(t->num_funcs(), t0->num_funcs());
  }
}

// A binary that says go1.28 (the 1.27 fixture with its build-info version patched): the
// layout that checks out is used, and a warning names the version.
TEST(Moduledata, NewerReleaseIsBestEffortWithAWarning) {
  auto fx = go127("stripped");
  if (fx.empty()) GTEST_SKIP() << "no Go 1.27 fixtures under " << testing::fixtures_dir();
  std::vector<uint8_t> b = bytes_of(fx[0].path);
  size_t patched = 0;
  const std::string from = "go1.27.", to = "go1.28.";
  for (size_t i = 0; i + from.size() <= b.size(); ++i) {
    if (std::memcmp(&b[i], from.data(), from.size()) == 0) {
      std::memcpy(&b[i], to.data(), to.size());
      ++patched;
    }
  }
  ASSERT_GT(patched, 0u);
  std::string path = ::testing::TempDir() + "gotap-go128-" + std::to_string(getpid());
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
  }
  auto bin = GoBinary::open(path);
  ::unlink(path.c_str());
  ASSERT_TRUE(bin.ok()) << bin.error().what();
  EXPECT_EQ((*bin)->buildinfo().version.minor, 28);
  size_t newer = 0;
  for (const auto& w : (*bin)->warnings())
    if (w.find("go1.28") != std::string::npos && w.find("newer") != std::string::npos) ++newer;
  EXPECT_EQ(newer, 1u);
  EXPECT_EQ((*bin)->pclntab().moduledata_layout(), "1.27");
  EXPECT_NE((*bin)->pclntab().moduledata().types, 0u);
}

}  // namespace
}  // namespace gotap
