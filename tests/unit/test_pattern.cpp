// Function-name patterns (docs/cli.md): globs, `re:REGEX`, exact names.
#include <fnmatch.h>

#include <functional>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/plan/pattern.h"

namespace gotap {
namespace {

bool m(const std::string& pat, const std::string& name) {
  auto p = Pattern::parse(pat);
  EXPECT_TRUE(p.ok()) << pat;
  return p.ok() && p->matches(name);
}

TEST(Pattern, ExactNames) {
  EXPECT_TRUE(m("main.probe", "main.probe"));
  EXPECT_FALSE(m("main.probe", "main.probe2"));
  EXPECT_FALSE(m("main.probe", "xmain.probe"));
  // `(*` is a pointer receiver, not a wildcard: this is an exact name.
  auto p = Pattern::parse("net/http.(*conn).serve");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->is_exact());
  EXPECT_TRUE(p->matches("net/http.(*conn).serve"));
  EXPECT_FALSE(p->matches("net/http.(Xconn).serve"));
  EXPECT_FALSE(p->matches("net/http.(*conn).serveX"));
}

TEST(Pattern, Globs) {
  EXPECT_TRUE(m("main.*", "main.probe"));
  EXPECT_TRUE(m("main.*", "main.(*T).M"));
  EXPECT_FALSE(m("main.*", "xmain.probe"));
  EXPECT_TRUE(m("*.ServeHTTP", "net/http.HandlerFunc.ServeHTTP"));
  EXPECT_TRUE(m("*.ServeHTTP", "net/http.(*ServeMux).ServeHTTP"));
  EXPECT_FALSE(m("*.ServeHTTP", "net/http.(*ServeMux).ServeHTTPX"));
  EXPECT_TRUE(m("main.f?o", "main.foo"));
  EXPECT_FALSE(m("main.f?o", "main.fo"));
  EXPECT_TRUE(m("main.[abc]x", "main.bx"));
  EXPECT_FALSE(m("main.[abc]x", "main.dx"));
  EXPECT_TRUE(m("main.[!abc]x", "main.dx"));
  EXPECT_TRUE(m("main.[^abc]x", "main.dx"));
  EXPECT_TRUE(m("main.[a-c]x", "main.cx"));
  // `(*` literal, the trailing `*` a wildcard.
  EXPECT_TRUE(m("net/http.(*conn).*", "net/http.(*conn).serve"));
  EXPECT_FALSE(m("net/http.(*conn).*", "net/http.(Xconn).serve"));
  EXPECT_FALSE(m("net/http.(*conn).*", "net/http.(*connX).serve"));
  // An unterminated class is a literal `[`.
  EXPECT_TRUE(m("main.Sum[*", "main.Sum[go.shape.int]"));
}

TEST(Pattern, Regex) {
  // Search semantics, like grep and Go's regexp.MatchString.
  EXPECT_TRUE(m("re:Serve", "net/http.(*conn).serve") == false);
  EXPECT_TRUE(m("re:serve", "net/http.(*conn).serve"));
  EXPECT_TRUE(m("re:^main\\.", "main.probe"));
  EXPECT_FALSE(m("re:^main\\.", "xmain.probe"));
  EXPECT_TRUE(m("re:^main\\.(probe|other)$", "main.other"));
  EXPECT_FALSE(m("re:^main\\.(probe|other)$", "main.others"));
}

TEST(Pattern, BadInput) {
  for (const char* bad : {"re:(", "re:[a-", "re:*x", ""}) {
    auto p = Pattern::parse(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.error().kind, ErrorKind::BadInput);
  }
}

// glob_match against the C library's fnmatch(3) (no flags: `*` crosses `/` and `.`), on
// random patterns and names over a small alphabet so that matches are frequent. Patterns
// avoid `(` (our `(*` rule) and `\` (fnmatch escapes).
TEST(Pattern, GlobAgreesWithFnmatch) {
  std::mt19937 rng(42);
  const std::string name_chars = "ab./";
  const std::string pat_chars = "ab./*?[]!-";
  auto pick = [&](const std::string& from, int len) {
    std::string s;
    for (int i = 0; i < len; ++i) s += from[rng() % from.size()];
    return s;
  };
  int compared = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string pat = pick(pat_chars, 1 + rng() % 6);
    std::string name = pick(name_chars, rng() % 7);
    // fnmatch and shells disagree on corner cases of malformed classes ("[]", "[!]", a `]`
    // or `-` in odd places); compare only well-formed or class-free patterns.
    if (pat.find('[') != std::string::npos) {
      auto o = pat.find('[');
      auto c = pat.find(']', o + 2);
      if (c == std::string::npos || pat.find('[', o + 1) < c || pat[o + 1] == ']' ||
          (pat[o + 1] == '!' && pat[o + 2] == ']') || pat.find(']') < o ||
          pat.find('[', c) != std::string::npos || pat.find(']', c + 1) != std::string::npos)
        continue;
    } else if (pat.find(']') != std::string::npos) {
      // A lone `]` is literal in both.
    }
    bool want = fnmatch(pat.c_str(), name.c_str(), 0) == 0;
    EXPECT_EQ(glob_match(pat, name), want) << "pattern '" << pat << "' name '" << name << "'";
    ++compared;
  }
  EXPECT_GT(compared, 5000);
}

// 100k names must be matched quickly: the CLI plans `net/http.*` on big binaries.
// A large name set, as in a 50 MB binary: every match agrees with fnmatch(3) or std::regex.
// (Speed is measured by bench/funcs.sh, not asserted in a test.)
TEST(Pattern, ManyNamesAgreeWithReference) {
  std::vector<std::string> names;
  for (int i = 0; i < 100000; ++i)
    names.push_back("example.com/pkg" + std::to_string(i % 300) + ".(*T" + std::to_string(i) +
                    ").Method" + std::to_string(i % 7));
  struct Case {
    const char* pattern;
    std::function<bool(const std::string&)> reference;
  };
  std::regex re("^example\\.com/pkg2[0-9]\\.");
  std::vector<Case> cases = {
      {"example.com/pkg1.*",
       [](const std::string& s) { return fnmatch("example.com/pkg1.*", s.c_str(), 0) == 0; }},
      {"*.Method3", [](const std::string& s) { return fnmatch("*.Method3", s.c_str(), 0) == 0; }},
      {"re:^example\\.com/pkg2[0-9]\\.",
       [&](const std::string& s) { return std::regex_search(s, re); }},
  };
  for (const auto& c : cases) {
    auto p = Pattern::parse(c.pattern);
    ASSERT_TRUE(p.ok());
    size_t n = 0, want = 0;
    for (const auto& s : names) {
      bool m = p->matches(s);
      n += m;
      want += c.reference(s);
      ASSERT_EQ(m, c.reference(s)) << c.pattern << " on " << s;
    }
    EXPECT_EQ(n, want) << c.pattern;
    EXPECT_GT(n, 0u) << c.pattern;
  }
}

}  // namespace
}  // namespace gotap
