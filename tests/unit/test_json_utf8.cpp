// The UTF-8 rule of the JSON writers (core/model/json_utf8.h) against nlohmann's own strict
// serializer, which throws (type_error 316) on what it takes for invalid UTF-8: a string
// valid_utf8 accepts must dump, one it rejects must not, and sanitize_utf8's output always
// dumps, so that no value can end a trace in a writer.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/model/json_utf8.h"

namespace gotap {
namespace {

bool strict_dumps(const std::string& s) {
  try {
    (void)nlohmann::json(s).dump();
    return true;
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
}

void check(const std::string& s) {
  SCOPED_TRACE(::testing::PrintToString(s));
  EXPECT_EQ(valid_utf8(s), strict_dumps(s));
  const std::string clean = sanitize_utf8(s);
  EXPECT_TRUE(strict_dumps(clean));
  if (valid_utf8(s)) EXPECT_EQ(clean, s);
}

TEST(JsonUtf8, AgreesWithTheStrictSerializer) {
  // Every string of one and two bytes.
  for (int a = 0; a < 256; ++a) {
    check(std::string(1, char(a)));
    for (int b = 0; b < 256; ++b) check({char(a), char(b)});
  }
  // Three and four bytes: every lead past ASCII, continuations at the edges of each range.
  const std::vector<int> edges = {0x00, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xff};
  for (int a = 0x80; a < 256; ++a)
    for (int b : edges)
      for (int c : edges) {
        check({char(a), char(b), char(c)});
        for (int d : edges) check({char(a), char(b), char(c), char(d)});
      }
}

TEST(JsonUtf8, InvalidBytesBecomeTheirCodePoints) {
  // 0xFF as U+00FF, a lone 0xC3 as U+00C3; the valid "ÿ" and U+202E stay as they are.
  EXPECT_EQ(sanitize_utf8("a\xff|\xc3|\xc3\xbf|\xe2\x80\xae"),
            "a\xc3\xbf|\xc3\x83|\xc3\xbf|\xe2\x80\xae");
  // An overlong '/', a surrogate, a code point past U+10FFFF: byte by byte.
  EXPECT_EQ(sanitize_utf8("\xc0\xaf"), "\xc3\x80\xc2\xaf");
  EXPECT_EQ(sanitize_utf8("\xed\xa0\x80"), "\xc3\xad\xc2\xa0\xc2\x80");
  EXPECT_EQ(sanitize_utf8("\xf4\x90\x80\x80"), "\xc3\xb4\xc2\x90\xc2\x80\xc2\x80");
}

}  // namespace
}  // namespace gotap
