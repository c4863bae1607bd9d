// The wait-reason names gotap carries per Go release must be runtime.waitReasonStrings as
// that release's runtime2.go declares them, in waitReason order. Checked against the sources
// of every toolchain tests/tools/fetch-go.sh cached (GOTAP_GO_CACHE, ~/.cache/gotap/go).
#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
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

TEST(WaitReasons, MatchTheRuntimeSources) {
  const char* env = getenv("GOTAP_GO_CACHE");
  fs::path cache =
      env ? fs::path(env) : fs::path(getenv("HOME") ? getenv("HOME") : "/root") / ".cache/gotap/go";
  int checked = 0;
  std::error_code ec;
  for (const auto& dir : fs::directory_iterator(cache, ec)) {
    auto v = GoVersion::parse("go" + dir.path().filename().string());
    if (!v) continue;
    // Debian's GOROOT keeps the sources under share/ (src links there).
    for (const char* rel : {"share/src/runtime/runtime2.go", "src/runtime/runtime2.go"}) {
      fs::path f = dir.path() / rel;
      if (!fs::exists(f)) continue;
      SCOPED_TRACE(f.string());
      auto want = from_source(read_file(f.string()));
      ASSERT_FALSE(want.empty()) << "cannot read waitReasonStrings";
      EXPECT_EQ(wait_reason_names(*v), want);
      ++checked;
      break;
    }
  }
  if (checked == 0) GTEST_SKIP() << "no Go toolchain sources in " << cache;
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
