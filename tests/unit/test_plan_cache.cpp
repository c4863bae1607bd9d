// The plan cache (core/plan/plan_cache.h): a cached plan is the plan made again, byte for
// byte; a cache file that is corrupt, truncated, of another key or replaced by anything else
// is ignored, and planning gives the identical plan and writes a good file back.
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/binary/elf_file.h"
#include "core/binary/pclntab.h"
#include "core/plan/cached_sites.h"
#include "core/plan/disasm.h"
#include "core/plan/go_binary.h"
#include "core/plan/plan.h"
#include "core/plan/plan_cache.h"
#include "tests/unit/fixtures.h"

namespace gotap {
namespace {

namespace fs = std::filesystem;
using testing::all_fixtures;
using testing::Fixture;

// Everything of a plan the commands print or the backends use, as text.
std::string dump(const ProbePlan& p) {
  std::string out;
  for (const auto& f : p.funcs) out += to_json(f).dump() + "\n";
  for (const auto& w : p.warnings) out += "warning: " + w + "\n";
  return out;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void spit(const fs::path& p, const std::string& s) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << s;
}

struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "gotap-plan-cache.XXXXXX").string();
    path = ::mkdtemp(t.data());
  }
  ~TempDir() { fs::remove_all(path); }
};

// A default, a stripped (no DWARF: method tables and ArgInfo) and a PIE binary.
// Three flavours of one program; the sanitizer stage (GOTAP_TEST_FIXTURE_SAMPLE) reads the
// stripped one alone, as its whole-binary plans under ASan took a minute.
std::vector<Fixture> some_fixtures() {
  const bool sample = std::getenv("GOTAP_TEST_FIXTURE_SAMPLE") != nullptr;
  std::vector<Fixture> out;
  for (const auto& fx : all_fixtures("args"))
    if (fx.go_version == "1.26" &&
        (fx.flavour == "stripped" || (!sample && (fx.flavour == "default" || fx.flavour == "pie"))))
      out.push_back(fx);
  return out;
}

fs::path only_file(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path());
  EXPECT_EQ(files.size(), 1u);
  return files.empty() ? fs::path() : files[0];
}

TEST(PlanCache, CachedPlanIsIdenticalAndBadFilesFallBackToPlanning) {
  auto fixtures = some_fixtures();
  const size_t want_n = std::getenv("GOTAP_TEST_FIXTURE_SAMPLE") ? 1 : 3;
  ASSERT_EQ(fixtures.size(), want_n)
      << "fixture 'args' (1.26) not built in " << testing::fixtures_dir();
  for (const auto& fx : fixtures) {
    SCOPED_TRACE(fx.label());
    TempDir tmp;
    const fs::path dir = tmp.path / "cache" / "gotap";
    auto bin = GoBinary::open(fx.path);
    ASSERT_TRUE(bin.ok()) << bin.error().what();
    const std::vector<std::string> pats = {"re:."};
    auto fresh = (*bin)->plan(pats, PlanOptions{});
    ASSERT_TRUE(fresh.ok()) << fresh.error().what();
    const std::string want = dump(*fresh);
    ASSERT_GT(fresh->funcs.size(), 256u);
    // Every site planning makes passes the check a cached plan must pass (else each warm run
    // would plan again).
    EXPECT_EQ(check_cached_sites((*bin)->elf(), (*bin)->pclntab(), fresh->funcs), "");

    PlanOptions cached;
    cached.cache_dir = dir.string();
    auto plan_again = [&] {
      // A new GoBinary each time, as a new gotap run has.
      auto b = GoBinary::open(fx.path);
      EXPECT_TRUE(b.ok());
      auto p = (*b)->plan(pats, cached);
      EXPECT_TRUE(p.ok());
      return p.ok() ? dump(*p) : std::string();
    };
    EXPECT_EQ(plan_again(), want);  // planned, stored
    const fs::path file = only_file(dir);
    struct stat st;
    ASSERT_EQ(::stat(dir.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    ASSERT_EQ(::stat(file.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    const std::string good = slurp(file);
    EXPECT_EQ(plan_again(), want);  // from the cache

    // The file is really read: a valid file of the same key with one function's source file
    // renamed gives that name.
    const std::string key = (*bin)->plan_cache_key(pats, cached);
    auto decoded = decode_plan_cache(good, key);
    ASSERT_TRUE(decoded.has_value());
    decoded->funcs[0].file = "cache.was.read";
    spit(file, encode_plan_cache(key, decoded->funcs, decoded->warnings));
    EXPECT_NE(plan_again().find("cache.was.read"), std::string::npos);

    // Corrupt, truncated, empty, garbage: ignored, planned again, identical, rewritten.
    std::string flipped = good;
    flipped[flipped.size() / 2] ^= 0x40;
    for (const std::string& bad : {flipped, good.substr(0, good.size() / 3), good.substr(0, 20),
                                   std::string(), std::string(4096, '\xff'), good + "x"}) {
      spit(file, bad);
      EXPECT_EQ(plan_again(), want);
      EXPECT_EQ(slurp(only_file(dir)), good);
    }
  }
}

// A cache file rewritten with a valid checksum (as its owner, or anyone writing as them, can):
// a site moved into data, into the middle of an instruction or out of its function is caught
// against the binary, and the plan is made again, equal to a plan made with no cache. The
// instruction boundaries come from Zydis (instruction_length), not from gotap's planner.
TEST(PlanCache, ForgedSitesArePlannedAgainNotUsed) {
  auto fixtures = some_fixtures();
  ASSERT_FALSE(fixtures.empty()) << "fixture 'args' (1.26) not built in "
                                 << testing::fixtures_dir();
  const Fixture& fx = fixtures[0];
  TempDir tmp;
  const fs::path dir = tmp.path / "plans";
  auto bin = GoBinary::open(fx.path);
  ASSERT_TRUE(bin.ok()) << bin.error().what();
  const std::vector<std::string> pats = {"re:."};
  auto fresh = (*bin)->plan(pats, PlanOptions{});
  ASSERT_TRUE(fresh.ok()) << fresh.error().what();
  const std::string want = dump(*fresh);
  PlanOptions cached;
  cached.cache_dir = dir.string();
  auto plan_again = [&] {
    auto b = GoBinary::open(fx.path);
    EXPECT_TRUE(b.ok());
    auto p = (*b)->plan(pats, cached);
    EXPECT_TRUE(p.ok());
    return p.ok() ? dump(*p) : std::string();
  };
  ASSERT_EQ(plan_again(), want);
  const fs::path file = only_file(dir);
  const std::string good = slurp(file);
  const std::string key = (*bin)->plan_cache_key(pats, cached);
  auto base = decode_plan_cache(good, key);
  ASSERT_TRUE(base.has_value());
  const ElfFile& elf = (*bin)->elf();

  // Two planned functions with RET sites, and a function's inline site.
  size_t a = SIZE_MAX, b = SIZE_MAX, in = SIZE_MAX;
  for (size_t i = 0; i < base->funcs.size(); ++i) {
    const FuncPlan& f = base->funcs[i];
    if (f.entry && !f.ret_sites.empty()) {
      if (a == SIZE_MAX)
        a = i;
      else if (b == SIZE_MAX)
        b = i;
    }
    if (!f.inline_sites.empty() && in == SIZE_MAX) in = i;
  }
  ASSERT_NE(b, SIZE_MAX);
  ASSERT_NE(in, SIZE_MAX);
  // Inside an instruction of a's code: one byte into its first instruction longer than one.
  const FuncPlan& fa = base->funcs[a];
  uint64_t inside = 0;
  for (uint64_t pc = fa.entry; pc < fa.end && !inside;) {
    unsigned len = instruction_length(elf.read(pc, fa.end - pc), pc);
    ASSERT_GT(len, 0u);
    if (len > 1) inside = pc + 1;
    pc += len;
  }
  ASSERT_NE(inside, 0u);
  // Inside an instruction of the inline site's outer function.
  const InlineSite& site = base->funcs[in].inline_sites[0];
  const PclnFunc* outer = (*bin)->pclntab().find(site.pc);
  ASSERT_NE(outer, nullptr);
  uint64_t inline_inside = 0;
  for (uint64_t pc = outer->entry; pc < outer->end && !inline_inside;) {
    unsigned len = instruction_length(elf.read(pc, outer->end - pc), pc);
    ASSERT_GT(len, 0u);
    if (len > 1) inline_inside = pc + 1;
    pc += len;
  }
  ASSERT_NE(inline_inside, 0u);

  std::vector<std::pair<std::string, std::function<void(std::vector<FuncPlan>&)>>> forgeries;
  for (const char* sec : {".rodata", ".noptrdata"})
    if (const ElfSection* s = elf.section(sec))
      forgeries.push_back({std::string("RET site in ") + sec,
                           [&, addr = s->addr + 64](auto& v) { v[a].ret_sites[0] = addr; }});
  ASSERT_GE(forgeries.size(), 1u) << "no .rodata";
  forgeries.push_back(
      {"RET site inside an instruction", [&](auto& v) { v[a].ret_sites[0] = inside; }});
  forgeries.push_back({"entry probe inside an instruction", [&](auto& v) {
                         v[a].entry_probe = inside;
                         v[a].entry_probe_kind = "push_rbp";
                       }});
  forgeries.push_back({"another function's RET",
                       [&](auto& v) { v[a].ret_sites[0] = base->funcs[b].ret_sites[0]; }});
  forgeries.push_back({"function bounds widened", [&](auto& v) {
                         v[a].end = base->funcs[b].end;
                         v[a].ret_sites[0] = base->funcs[b].ret_sites[0];
                       }});
  forgeries.push_back({"inline site inside an instruction",
                       [&](auto& v) { v[in].inline_sites[0].pc = inline_inside; }});
  forgeries.push_back({"inline site in .rodata", [&](auto& v) {
                         v[in].inline_sites[0].pc = elf.section(".rodata")->addr + 64;
                       }});
  // Each forgery is caught; three of them (in data, inside an instruction, outside the
  // function) go the whole way, file to plan: a whole plan made again costs seconds each.
  for (auto& [what, forge] : forgeries) {
    SCOPED_TRACE(what);
    auto funcs = base->funcs;
    forge(funcs);
    EXPECT_NE(check_cached_sites(elf, (*bin)->pclntab(), funcs), "");
    if (what != "RET site in .rodata" && what != "RET site inside an instruction" &&
        what != "another function's RET")
      continue;
    const std::string forged = encode_plan_cache(key, funcs, base->warnings);
    ASSERT_TRUE(decode_plan_cache(forged, key).has_value());  // a valid file, checksum and all
    spit(file, forged);
    EXPECT_EQ(plan_again(), want);
    EXPECT_EQ(slurp(only_file(dir)), good);  // and the good plan written back
  }
}

TEST(PlanCache, OtherPatternsOptionsOrFilesHaveOtherKeys) {
  auto fixtures = some_fixtures();
  ASSERT_FALSE(fixtures.empty());
  auto a = GoBinary::open(fixtures[0].path);
  auto b = GoBinary::open(fixtures[1 % fixtures.size()].path);
  ASSERT_TRUE(a.ok() && b.ok());
  PlanOptions o, no_inline;
  no_inline.probe_inline_sites = false;
  const std::string k = (*a)->plan_cache_key({"re:."}, o);
  ASSERT_FALSE(k.empty());
  EXPECT_EQ((*a)->plan_cache_key({"re:."}, o), k);
  EXPECT_NE((*a)->plan_cache_key({"re:.", "main.*"}, o), k);
  EXPECT_NE((*a)->plan_cache_key({"re:.a"}, o), k);
  EXPECT_NE((*a)->plan_cache_key({"re:."}, no_inline), k);
  if (fixtures.size() > 1) {
    EXPECT_NE((*b)->plan_cache_key({"re:."}, o), k);
  }
  // A file of one key is no file of another.
  auto plan = (*a)->plan({"main.*"}, o);
  ASSERT_TRUE(plan.ok());
  const std::string bytes = encode_plan_cache(k, plan->funcs, plan->warnings);
  EXPECT_TRUE(decode_plan_cache(bytes, k).has_value());
  EXPECT_FALSE(decode_plan_cache(bytes, k + "x").has_value());
}

TEST(PlanCache, EveryTruncationAndByteFlipIsRejected) {
  FuncPlan f;
  f.name = "main.f";
  f.entry = 0x1000;
  f.ret_sites = {0x1010, 0x1020};
  ParamLoc p;
  p.name = "x";
  p.type_name = "int";
  p.loc.pieces.push_back(LocPiece{LocPiece::IntReg, 0, 0, 0, 8});
  f.args.push_back(p);
  ParamLoc r = p;  // gccgo's results: in a register's bytes, and in memory it points to
  r.is_result = true;
  r.loc.pieces = {LocPiece{LocPiece::IntReg, 0, 0, 0, 4, 4},
                  LocPiece{LocPiece::RegMem, 0, 16, 4, 4}};
  f.results.push_back(r);
  f.inline_sites.push_back(InlineSite{"main.g", 0x2000, "g.go", 7, 8, ""});
  const std::string bytes = encode_plan_cache("key", {f}, {"a warning"});
  auto back = decode_plan_cache(bytes, "key");
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(to_json(back->funcs.at(0)), to_json(f));
  EXPECT_EQ(back->warnings, std::vector<std::string>{"a warning"});
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_FALSE(decode_plan_cache(bytes.substr(0, n), "key").has_value()) << n;
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string b = bytes;
    b[i] ^= 1;
    EXPECT_FALSE(decode_plan_cache(b, "key").has_value()) << i;
  }
}

// A cached plan's inline sites are views into the strings the plan keeps, not into the
// file's bytes, which are gone once it is read (ASan checks the reads below).
TEST(PlanCache, SiteStringsOutliveTheFileBytes) {
  FuncPlan f;
  f.name = "main.f";
  f.inline_sites.push_back(InlineSite{"main.outer", 0x2000, "/src/outer.go", 7, 8, ""});
  f.inline_skipped.push_back(
      InlineSite{"main.outer", 0x2010, "/src/outer.go", 9, 8, "a reason of some length"});
  auto bytes = std::make_unique<std::string>(encode_plan_cache("key", {f}, {}));
  auto back = decode_plan_cache(*bytes, "key");
  ASSERT_TRUE(back.has_value());
  const std::string want = to_json(f).dump();
  bytes.reset();
  ASSERT_NE(back->strings, nullptr);
  EXPECT_EQ(to_json(back->funcs.at(0)).dump(), want);
  // One copy of each string for every site that names it.
  const InlineSite &a = back->funcs[0].inline_sites.at(0), &b = back->funcs[0].inline_skipped.at(0);
  EXPECT_EQ(a.outer.data(), b.outer.data());
  EXPECT_EQ(a.file.data(), b.file.data());
}

// Sets an environment variable for one scope, and puts back what was there.
struct ScopedEnv {
  std::string name;
  std::optional<std::string> old;
  ScopedEnv(const char* n, const char* v) : name(n) {
    if (const char* o = std::getenv(n)) old = o;
    if (v)
      ::setenv(n, v, 1);
    else
      ::unsetenv(n);
  }
  ~ScopedEnv() {
    if (old)
      ::setenv(name.c_str(), old->c_str(), 1);
    else
      ::unsetenv(name.c_str());
  }
};

TEST(PlanCache, DisabledByEnvironment) {
  TempDir tmp;  // the user's own
  {
    ScopedEnv off("GOTAP_PLAN_CACHE", "off");
    EXPECT_EQ(plan_cache_dir(), "");
  }
  {
    ScopedEnv set("GOTAP_PLAN_CACHE", "/some/dir");
    EXPECT_EQ(plan_cache_dir(), "/some/dir");
  }
  ScopedEnv unset("GOTAP_PLAN_CACHE", nullptr);
  ScopedEnv xdg("XDG_CACHE_HOME", (tmp.path / "x").c_str());
  EXPECT_EQ(plan_cache_dir(), (tmp.path / "x" / "gotap" / "plans").string());
}

// Every file and directory under `root`, links not followed, with its owner.
std::vector<std::pair<fs::path, uid_t>> owners_under(const fs::path& root) {
  std::vector<std::pair<fs::path, uid_t>> out;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
       ++it) {
    struct stat st;
    if (::lstat(it->path().c_str(), &st) == 0) out.push_back({it->path(), st.st_uid});
  }
  return out;
}

// Root with a user's HOME or XDG_CACHE_HOME (`sudo -E`): the user (nobody) owns the home and
// planted ~/.cache/gotap as a link to a directory of root's. The cache is root's own
// (/root/.cache/gotap/plans), and the cache code given the user's path itself creates,
// writes, reads and prunes nothing at the link's target, and makes nothing in the home.
TEST(PlanCache, ForeignHomeIsNeitherUsedNorFollowed) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: the home is given to nobody";
  const passwd* pw = ::getpwnam("nobody");
  const uid_t nobody = pw ? pw->pw_uid : 65534;
  TempDir tmp;
  const fs::path home = tmp.path / "home", target = tmp.path / "somewhere";
  ASSERT_EQ(::mkdir(home.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((home / ".cache").c_str(), 0755), 0);
  ASSERT_EQ(::symlink(target.c_str(), (home / ".cache" / "gotap").c_str()), 0);
  ASSERT_EQ(::mkdir(target.c_str(), 0700), 0);
  ASSERT_EQ(::mkdir((target / "plans").c_str(), 0700), 0);
  for (const fs::path& p : {home, home / ".cache"})
    ASSERT_EQ(::chown(p.c_str(), nobody, nobody), 0);
  ASSERT_EQ(::lchown((home / ".cache" / "gotap").c_str(), nobody, nobody), 0);
  // 40 plans at the target: more than the cache keeps, so a prune there would remove some.
  FuncPlan f;
  f.name = "main.f";
  const std::string key = "key";
  const std::string bytes = encode_plan_cache(key, {f}, {});
  for (int i = 0; i < 40; ++i) spit(target / "plans" / fmt::format("{:016x}.plan", i), bytes);
  const std::string root_cache = std::string(::getpwuid(0)->pw_dir) + "/.cache/gotap/plans";

  {
    ScopedEnv unset("GOTAP_PLAN_CACHE", nullptr), x("XDG_CACHE_HOME", nullptr);
    ScopedEnv h("HOME", home.c_str());
    EXPECT_EQ(plan_cache_dir(), root_cache);
  }
  {
    ScopedEnv unset("GOTAP_PLAN_CACHE", nullptr), h("HOME", home.c_str());
    ScopedEnv x("XDG_CACHE_HOME", (home / ".cache").c_str());
    EXPECT_EQ(plan_cache_dir(), root_cache);
  }
  // The paths themselves, as GOTAP_PLAN_CACHE could name them.
  for (const fs::path& dir : {home / ".cache" / "gotap" / "plans", home / ".cache" / "other"}) {
    SCOPED_TRACE(dir.string());
    store_plan_cache(dir.string(), key, {f}, {});
    EXPECT_FALSE(load_plan_cache(dir.string(), key).has_value());
  }
  size_t left = 0;
  for (const auto& e : fs::directory_iterator(target / "plans")) {
    EXPECT_EQ(e.path().extension(), ".plan") << e.path();  // no temporary file either
    ++left;
  }
  EXPECT_EQ(left, 40u);
  for (const auto& [path, uid] : owners_under(home)) EXPECT_EQ(uid, nobody) << path;
}

// A link anywhere on the way that is neither the user's nor root's is not followed, even to
// a directory that would pass every other check.
TEST(PlanCache, AnotherUsersLinkOnTheWayIsNotFollowed) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: the link is given to nobody";
  const passwd* pw = ::getpwnam("nobody");
  const uid_t nobody = pw ? pw->pw_uid : 65534;
  TempDir tmp;
  ASSERT_EQ(::mkdir((tmp.path / "real").c_str(), 0700), 0);
  ASSERT_EQ(::symlink("real", (tmp.path / "link").c_str()), 0);
  FuncPlan f;
  f.name = "main.f";
  const std::string dir = (tmp.path / "link" / "plans").string();
  store_plan_cache(dir, "key", {f}, {});  // through root's own link: used
  EXPECT_TRUE(load_plan_cache(dir, "key").has_value());
  ASSERT_EQ(::lchown((tmp.path / "link").c_str(), nobody, nobody), 0);
  EXPECT_FALSE(load_plan_cache(dir, "key").has_value());
}

}  // namespace
}  // namespace gotap
