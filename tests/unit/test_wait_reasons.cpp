// The wait-reason names gotap carries per Go release must be runtime.waitReasonStrings as
// that release's runtime2.go declares them, in waitReason order. Checked against the sources
// of every toolchain tests/tools/fetch-go.sh cached (GOTAP_GO_CACHE, ~/.cache/gotap/go).
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/model/wait_reasons.h"
#include "tests/unit/fixtures.h"

namespace gotap::testing {
namespace {

namespace fs = std::filesystem;

// The names, indexed by the waitReason constants (const block order, from iota).
std::vector<std::string> from_source(const std::string& src) {
  std::smatch m;
  std::regex block(R"(const \(\s*\n\s*waitReasonZero\s+waitReason = iota([\s\S]*?)\n\))");
  if (!std::regex_search(src, m, block)) return {};
  std::vector<std::string> consts = {"waitReasonZero"};
  std::string body = m[1];
  std::regex name(R"(\n\s*(waitReason\w+))");
  for (auto it = std::sregex_iterator(body.begin(), body.end(), name); it != std::sregex_iterator();
       ++it)
    consts.push_back((*it)[1]);
  std::regex array(R"(var waitReasonStrings = \[\.\.\.\]string\{([\s\S]*?)\n\})");
  if (!std::regex_search(src, m, array)) return {};
  std::string entries = m[1];
  std::map<std::string, std::string> text;
  std::regex entry(R"re((waitReason\w+):\s*"([^"]*)")re");
  for (auto it = std::sregex_iterator(entries.begin(), entries.end(), entry);
       it != std::sregex_iterator(); ++it)
    text[(*it)[1]] = (*it)[2];
  std::vector<std::string> out;
  for (const auto& c : consts) out.push_back(text.count(c) ? text[c] : "?" + c);
  return out;
}

// The cached Go toolchains' runtime source directories (Debian's GOROOT keeps the sources
// under share/, src links there), with their releases.
struct RuntimeSources {
  GoVersion go;
  fs::path dir;
};
fs::path toolchain_cache() {
  const char* env = getenv("GOTAP_GO_CACHE");
  return env ? fs::path(env)
             : fs::path(getenv("HOME") ? getenv("HOME") : "/root") / ".cache/gotap/go";
}
std::vector<RuntimeSources> runtime_sources() {
  std::vector<RuntimeSources> out;
  std::error_code ec;
  for (const auto& dir : fs::directory_iterator(toolchain_cache(), ec)) {
    auto v = GoVersion::parse("go" + dir.path().filename().string());
    if (!v) continue;
    for (const char* rel : {"share/src/runtime", "src/runtime"})
      if (fs::exists(dir.path() / rel / "proc.go")) {
        out.push_back({*v, dir.path() / rel});
        break;
      }
  }
  return out;
}

TEST(WaitReasons, MatchTheRuntimeSources) {
  int checked = 0;
  for (const auto& [v, dir] : runtime_sources()) {
    const fs::path f = dir / "runtime2.go";
    SCOPED_TRACE(f.string());
    auto want = from_source(read_file(f.string()));
    ASSERT_FALSE(want.empty()) << "cannot read waitReasonStrings";
    EXPECT_EQ(wait_reason_names(v), want);
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no Go toolchain sources in " << toolchain_cache();
}

// The function a line of Go begins, or "": "func park_m(", "func (c *gcControllerState) f(".
std::string func_begun(const std::string& line) {
  if (line.rfind("func ", 0) != 0) return "";
  size_t at = 5;
  if (line.compare(at, 1, "(") == 0) {
    at = line.find(") ", at);
    if (at == std::string::npos) return "";
    at += 2;
  }
  size_t end = at;
  while (end < line.size() &&
         (std::isalnum(static_cast<unsigned char>(line[end])) || line[end] == '_'))
    ++end;
  return line.substr(at, end - at);
}

// Whether some change to _Gwaiting in the runtime's sources, outside park_m (whose caller,
// gopark, sets the reason), is not just after a store to .waitreason: then the value read at
// casgstatus may be stale. From _Gleaked (1.27's leak detection) a goroutine goes back to
// the wait it was in, reason and all.
bool reason_may_be_stale(const fs::path& runtime_dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(runtime_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() != ".go" || name.find("_test.go") != std::string::npos) continue;
    std::vector<std::string> lines;
    std::istringstream in(read_file(e.path().string()));
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    for (size_t i = 0; i < lines.size(); ++i) {
      const std::string& l = lines[i];
      const size_t call = l.find("casgstatus(");
      if (call == std::string::npos || l.find(", _Gwaiting)", call) == std::string::npos ||
          l.find(", _Gleaked, ", call) != std::string::npos)
        continue;
      bool set_before = false;
      std::string in_func;
      for (size_t j = i; j-- > 0;) {
        in_func = func_begun(lines[j]);
        if (!in_func.empty()) break;
        if (j + 8 >= i && lines[j].find(".waitreason = ") != std::string::npos) set_before = true;
      }
      if (in_func != "park_m" && !set_before) return true;
    }
  }
  return false;
}

TEST(WaitReasons, StaleOnlyWhereTheRuntimeSetsItAfterTheChange) {
  int checked = 0;
  for (const auto& [v, dir] : runtime_sources()) {
    SCOPED_TRACE(dir.string());
    EXPECT_EQ(wait_reason_only_from_park(v), reason_may_be_stale(dir));
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no Go toolchain sources in " << toolchain_cache();
}

// Releases without sources in the cache, from their binaries: go1.20.1's runtime (buf 1.15.0)
// stores g.waitreason just before each of its 8 calls of casgstatus to _Gwaiting but park_m's
// (gcMarkTermination, gcBgMarkWorker, markroot, gcAssistAlloc1, stopTheWorld, gcMarkDone,
// debugCallWrap: casGToWaiting), where 12 of 31 changes to waiting had gone unnamed.
TEST(WaitReasons, Go120NamesEveryWait) {
  EXPECT_FALSE(wait_reason_only_from_park(*GoVersion::parse("go1.20.1")));
  EXPECT_FALSE(wait_reason_only_from_park(*GoVersion::parse("go1.20.4")));
  EXPECT_FALSE(wait_reason_only_from_park(*GoVersion::parse("go1.25.4")));
  EXPECT_TRUE(wait_reason_only_from_park(*GoVersion::parse("go1.19.8")));
  EXPECT_TRUE(wait_reason_only_from_park(*GoVersion::parse("go1.17.5")));
  EXPECT_TRUE(wait_reason_only_from_park(GoVersion{}));  // unknown: only what is sure
}

TEST(WaitReasons, UnknownReleasesHaveNoNames) {
  EXPECT_TRUE(wait_reason_names(*GoVersion::parse("go1.20.1")).empty());
  EXPECT_TRUE(wait_reason_names(GoVersion{}).empty());
  auto v = wait_reason_names(*GoVersion::parse("go1.26.0"));
  ASSERT_GT(v.size(), 20u);
  EXPECT_EQ(v[0], "");
}

}  // namespace
}  // namespace gotap::testing
