// read_buildinfo against `go version -m` (Go's own reader) on every fixture, the fallbacks
// when the blob is gone, a Debian-built Go program, and non-Go input.
#include "core/binary/buildinfo.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "core/binary/pclntab.h"
#include "tests/unit/fixtures.h"

namespace gotap {
namespace {

using testing::Fixture;

std::string go_cache() {
  if (const char* e = std::getenv("GOTAP_GO_CACHE")) return e;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "/root") + "/.cache/gotap/go";
}

// A `go` command of any cached toolchain (newer ones read every older format).
std::string go_tool() {
  for (const char* v : {"1.27", "1.26", "1.24", "1.23", "1.22", "1.21", "1.19"}) {
    std::string p = go_cache() + "/" + v + "/bin/go";
    if (testing::file_exists(p)) return p;
  }
  return "";
}

std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

struct GoVersionM {
  std::string version, path, mod;
  std::vector<std::string> deps;
  std::vector<std::pair<std::string, std::string>> settings;
};

// `go version -m BINARY`: "BINARY: go1.x.y" then tab-indented modinfo lines.
std::optional<GoVersionM> go_version_m(const std::string& bin) {
  std::string go = go_tool();
  if (go.empty()) return std::nullopt;
  std::string out = run(
      "GOTOOLCHAIN=local GOROOT=" + std::filesystem::path(go).parent_path().parent_path().string() +
      " " + go + " version -m '" + bin + "' 2>/dev/null");
  std::istringstream in(out);
  std::string line;
  GoVersionM r;
  if (!std::getline(in, line)) return std::nullopt;
  auto colon = line.rfind(": ");
  if (colon == std::string::npos) return std::nullopt;
  r.version = line.substr(colon + 2);
  while (std::getline(in, line)) {
    if (line.empty() || line[0] != '\t') continue;
    std::vector<std::string> f;
    std::stringstream ss(line.substr(1));
    std::string part;
    while (std::getline(ss, part, '\t')) f.push_back(part);
    if (f.empty()) continue;
    if (f[0] == "path" && f.size() > 1) r.path = f[1];
    if (f[0] == "mod" && f.size() > 2) r.mod = f[1] + " " + f[2];
    if (f[0] == "dep" && f.size() > 2) r.deps.push_back(f[1] + " " + f[2]);
    if (f[0] == "=>" && f.size() > 2) {
      std::string& t = r.deps.empty() ? r.mod : r.deps.back();
      t += " => " + f[1] + " " + f[2];
    }
    if (f[0] == "build" && f.size() > 1) {
      auto eq = f[1].find('=');
      r.settings.emplace_back(f[1].substr(0, eq),
                              eq == std::string::npos ? "" : f[1].substr(eq + 1));
    }
  }
  return r;
}

std::string unquoted(const std::string& v) {  // go version -m prints quoted values as-is
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') return v.substr(1, v.size() - 2);
  return v;
}

void expect_matches_go(const std::string& path, const BuildInfo& bi, const GoVersionM& want) {
  EXPECT_EQ(bi.version.raw, want.version);
  EXPECT_EQ(bi.version_source, "buildinfo");
  EXPECT_EQ(bi.module_path, want.path);
  EXPECT_EQ(bi.main_module, want.mod);
  EXPECT_EQ(bi.deps, want.deps);
  ASSERT_EQ(bi.settings.size(), want.settings.size());
  for (size_t i = 0; i < want.settings.size(); ++i) {
    EXPECT_EQ(bi.settings[i].first, want.settings[i].first);
    EXPECT_EQ(bi.settings[i].second, unquoted(want.settings[i].second)) << want.settings[i].first;
  }
}

#define REQUIRE_FIXTURES(list)                                       \
  if ((list).empty())                                                \
  GTEST_SKIP() << "no Go fixtures under " << testing::fixtures_dir() \
               << " (run tests/tools/build-fixtures.sh)"

TEST(BuildInfo, MatchesGoVersionOnEveryFixture) {
  auto fixtures = testing::all_fixtures();
  REQUIRE_FIXTURES(fixtures);
  if (go_tool().empty()) GTEST_SKIP() << "no Go toolchain under " << go_cache();
  for (const auto& fx : fixtures) {
    SCOPED_TRACE(fx.label());
    auto elf = ElfFile::open(fx.path);
    ASSERT_TRUE(elf.ok());
    auto bi = read_buildinfo(**elf);
    ASSERT_TRUE(bi.ok()) << bi.error().what();
    auto want = go_version_m(fx.path);
    ASSERT_TRUE(want);
    expect_matches_go(fx.path, *bi, *want);
    // The toolchain directory the fixture was built with names the same release.
    EXPECT_EQ(std::to_string(bi->version.major) + "." + std::to_string(bi->version.minor),
              fx.go_version);
    if (fx.flavour == "cgo") EXPECT_EQ(bi->setting("CGO_ENABLED"), "1");
    // The build script's own record of `go version BINARY`, when present.
    if (testing::file_exists(fx.path + ".version")) {
      std::string v = testing::read_file(fx.path + ".version");
      EXPECT_NE(v.find(": " + bi->version.raw), std::string::npos) << v;
    }
  }
}

// Removes the blob's magic so only the fallbacks remain: runtime.buildVersion through
// .symtab, or the rodata heuristics when stripped.
TEST(BuildInfo, FallsBackWithoutTheBlob) {
  auto fixtures = testing::all_fixtures();
  REQUIRE_FIXTURES(fixtures);
  for (const auto& fx : fixtures) {
    SCOPED_TRACE(fx.label());
    auto orig = ElfFile::open(fx.path);
    ASSERT_TRUE(orig.ok());
    auto want = read_buildinfo(**orig);
    ASSERT_TRUE(want.ok());
    std::string s = testing::read_file(fx.path);
    size_t n = 0;
    for (size_t pos = s.find("\xff Go buildinf:"); pos != std::string::npos;
         pos = s.find("\xff Go buildinf:", pos + 1), ++n)
      s[pos] = 0;
    ASSERT_EQ(n, 1u);
    auto elf = ElfFile::from_bytes({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
    ASSERT_TRUE(elf.ok());
    auto bi = read_buildinfo(**elf);
    ASSERT_TRUE(bi.ok()) << bi.error().what();
    EXPECT_EQ(bi->version.raw, want->version.raw);
    EXPECT_EQ(bi->version_source, (*orig)->has_symtab() ? "runtime.buildVersion" : "rodata");
    EXPECT_TRUE(bi->module_path.empty());
  }
}

TEST(BuildInfo, ParseModinfo) {
  // The layout cmd/go writes (modload.infoStart/infoEnd sentinels are 16 bytes each).
  auto unhex = [](const char* h) {
    std::string out;
    for (; h[0] && h[1]; h += 2)
      out += static_cast<char>(std::stoi(std::string(h, 2), nullptr, 16));
    return out;
  };
  std::string start = unhex("3077af0c9274080241e1c107e6d618e6");
  std::string end = unhex("f932433186182072008242104116d8f2");  // holds a NUL byte
  std::string mod =
      "path\texample.com/app\n"
      "mod\texample.com/app\tv1.2.3\th1:abc=\n"
      "dep\tgolang.org/x/sys\tv0.3.0\th1:def=\n"
      "dep\texample.com/lib\tv1.0.0\n"
      "=>\t../lib\t(devel)\t\n"
      "build\t-compiler=gc\n"
      "build\t-ldflags=\"-s -w\"\n"
      "build\tCGO_ENABLED=0\n";
  BuildInfo bi;
  parse_modinfo(start + mod + end, bi);
  EXPECT_EQ(bi.module_path, "example.com/app");
  EXPECT_EQ(bi.main_module, "example.com/app v1.2.3");
  ASSERT_EQ(bi.deps.size(), 2u);
  EXPECT_EQ(bi.deps[0], "golang.org/x/sys v0.3.0");
  EXPECT_EQ(bi.deps[1], "example.com/lib v1.0.0 => ../lib (devel)");
  EXPECT_EQ(bi.setting("-ldflags"), "-s -w");
  EXPECT_EQ(bi.setting("CGO_ENABLED"), "0");
  EXPECT_EQ(bi.setting("missing"), "");
  BuildInfo empty;
  parse_modinfo("", empty);
  parse_modinfo("\n\t\t\n", empty);
  EXPECT_TRUE(empty.module_path.empty());
}

TEST(BuildInfo, NonGoElfIsBadInput) {
  int n = 0;
  for (const char* path : {"/bin/true", "/bin/sh", "/usr/lib/x86_64-linux-gnu/libc.so.6"}) {
    if (!testing::file_exists(path)) continue;
    auto elf = ElfFile::open(path);
    if (!elf.ok()) continue;
    auto bi = read_buildinfo(**elf);
    ASSERT_FALSE(bi.ok()) << path;
    EXPECT_EQ(bi.error().kind, ErrorKind::BadInput);
    EXPECT_NE(bi.error().message.find("not a Go binary"), std::string::npos);
    ++n;
  }
  if (!n) GTEST_SKIP() << "no system ELF files";
}

// Go programs as distributions ship them: built by Debian's toolchain, externally linked,
// stripped (tests/tools/fetch-real-binaries.sh: fzf, rclone from Debian; esbuild from npm).
// GOTAP_DEBIAN_GO_BINARY names another; installed copies of a few packages are tried too.
std::vector<std::string> debian_go_binaries() {
  std::vector<std::string> out;
  if (const char* e = std::getenv("GOTAP_DEBIAN_GO_BINARY")) out.push_back(e);
  for (const auto& b : testing::real_binaries()) out.push_back(b.path);
  for (const char* p : {"/usr/bin/fzf", "/usr/bin/gron", "/usr/bin/shfmt", "/usr/bin/direnv"})
    if (testing::file_exists(p)) out.push_back(p);
  return out;
}

TEST(BuildInfo, DebianPackagedGoBinary) {
  auto bins = debian_go_binaries();
  if (bins.empty())
    GTEST_SKIP() << "no Debian Go binary (apt-get install fzf, or set GOTAP_DEBIAN_GO_BINARY)";
  for (const auto& path : bins) {
    SCOPED_TRACE(path);
    auto elf = ElfFile::open(path);
    ASSERT_TRUE(elf.ok());
    auto bi = read_buildinfo(**elf);
    ASSERT_TRUE(bi.ok()) << bi.error().what();
    auto t = Pclntab::load(**elf);
    ASSERT_TRUE(t.ok()) << t.error().what();
    if (auto want = go_version_m(path)) {
      expect_matches_go(path, *bi, *want);
    } else {
      // No blob (esbuild's npm build has no .go.buildinfo, and `go version` gives up): the
      // runtime's version string must still be found, and agree with the table layout.
      EXPECT_TRUE(bi->version.known());
      EXPECT_EQ(bi->version_source, (*elf)->has_symtab() ? "runtime.buildVersion" : "rodata");
      EXPECT_EQ(t->format(), bi->version.at_least(1, 20)   ? "1.20"
                             : bi->version.at_least(1, 18) ? "1.18"
                             : bi->version.at_least(1, 16) ? "1.16"
                                                           : "1.2");
    }
    EXPECT_GT(t->num_funcs(), 1000u);
    auto m = t->lookup("main.main");
    ASSERT_EQ(m.size(), 1u);
    EXPECT_TRUE(t->file_line(*m[0], m[0]->entry));
    const Moduledata& md = t->moduledata();
    EXPECT_NE(md.addr, 0u);
    EXPECT_EQ(md.minpc, t->all_funcs().front().entry);
    for (const auto& f : t->all_funcs()) {
      ASSERT_GE(f.entry, md.text) << f.name;
      ASSERT_LE(f.end, md.maxpc) << f.name;
    }
    if (const ElfSection* text = (*elf)->section(".text")) {
      EXPECT_GE(md.text, text->addr);
      EXPECT_LE(md.etext, text->addr + text->size);
    }
  }
}

}  // namespace
}  // namespace gotap
