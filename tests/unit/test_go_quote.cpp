// Go's quoting (go_quote.h) against Go itself, and every text view against names and values
// that carry terminal escapes, bidi controls and invalid UTF-8 (issue 35, defect 7).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/events/overhead_budget.h"
#include "core/model/go_quote.h"
#include "core/output/output_views.h"
#include "core/output/value_text.h"
#include "core/output/writers.h"

namespace gotap {
namespace {

using namespace std::string_literals;

// Each input and Go's fmt.Sprintf("%q", input) of it, printed by Go 1.24 itself:
//   cd tests/tools/go-quote-truth && GOTOOLCHAIN=local GOPROXY=off go run .
// (the program writes these lines; pasted as it printed them).
const std::vector<std::pair<std::string, std::string>> kGoQuoted = {
    {"plain"s, "\"plain\""s},
    {""s, "\"\""s},
    {"a\"b\\c"s, "\"a\\\"b\\\\c\""s},
    {"\033[2J"s, "\"\\x1b[2J\""s},
    {"\000\001\007\010\014\012\015\011\013\177"s, "\"\\x00\\x01\\a\\b\\f\\n\\r\\t\\v\\x7f\""s},
    {"\342\200\256"s, "\"\\u202e\""s},
    {"\342\201\246\342\201\247\342\201\250\342\201\251"s, "\"\\u2066\\u2067\\u2068\\u2069\""s},
    {"\377"s, "\"\\xff\""s},
    {"caf\303\251"s, "\"caf\303\251\""s},
    {"\302\255"s, "\"\\u00ad\""s},
    {"\302\240"s, "\"\\u00a0\""s},
    {"\302\205\342\200\250\342\200\251"s, "\"\\u0085\\u2028\\u2029\""s},
    {"\355\240\200"s, "\"\\xed\\xa0\\x80\""s},
    {"\360\200\202\205"s, "\"\\xf0\\x80\\x82\\x85\""s},
    {"\303"s, "\"\\xc3\""s},
    {"\342\200"s, "\"\\xe2\\x80\""s},
    {"\364\220\200\200"s, "\"\\xf4\\x90\\x80\\x80\""s},
    {"\360\237\230\200"s, "\"\360\237\230\200\""s},
    {"\363\240\200\201"s, "\"\\U000e0001\""s},
    {"\364\217\277\277"s, "\"\\U0010ffff\""s},
    {"\357\273\277"s, "\"\\ufeff\""s},
    {"\357\277\275"s, "\"\357\277\275\""s},
    {"\357\277\277"s, "\"\\uffff\""s},
    {"\200"s, "\"\\x80\""s},
    {"\300\257"s, "\"\\xc0\\xaf\""s},
    {"\340\200\257"s, "\"\\xe0\\x80\\xaf\""s},
    {"\315\270"s, "\"\\u0378\""s},
    {"\363\260\200\200"s, "\"\\U000f0000\""s},
    {"F\033[2J:1"s, "\"F\\x1b[2J:1\""s},
    {"main.(*T).M"s, "\"main.(*T).M\""s},
    {"map[string]int"s, "\"map[string]int\""s},
    {"\330\234"s, "\"\\u061c\""s},
};

TEST(GoQuote, AsGoPrintsIt) {
  for (const auto& [in, go] : kGoQuoted) {
    EXPECT_EQ(quote_go_string(in), go) << go;
    std::string out = "x";
    append_quoted(out, in);
    EXPECT_EQ(out, "x" + go);
  }
}

// strconv.IsPrint over every rune, from the same program's last line:
//   printable 148998 fnv1a 0x161e5dd2
// (FNV-1a over the bitmap of printable runes, 8 runes a byte, the lowest rune in bit 0).
TEST(GoQuote, IsPrintAsGo) {
  uint32_t n = 0, h = 2166136261u;
  for (uint32_t base = 0; base < 0x110000; base += 8) {
    uint8_t b = 0;
    for (uint32_t i = 0; i < 8; ++i)
      if (go_is_print(base + i)) {
        b |= static_cast<uint8_t>(1u << i);
        ++n;
      }
    h = (h ^ b) * 16777619u;
  }
  EXPECT_EQ(n, 148998u);
  EXPECT_EQ(h, 0x161e5dd2u);
}

// A name is shown as it is when Go's quoting would only add the quotes, else quoted.
TEST(GoQuote, Names) {
  for (const auto& [in, go] : kGoQuoted) {
    const std::string name = printable(in);
    if (go == "\"" + in + "\"")
      EXPECT_EQ(name, in);
    else
      EXPECT_EQ(name, go);
  }
  EXPECT_EQ(printable("main.(*T).M"), "main.(*T).M");
  EXPECT_EQ(printable("func(int) error"), "func(int) error");
}

// Messages keep their quotes but lose every control byte.
TEST(GoQuote, Messages) {
  EXPECT_EQ(printable_text("no function 'a\x1b[2J\xe2\x80\xae\xff' \"x\""),
            "no function 'a\\x1b[2J\\u202e\\xff' \"x\"");
}

// The message both backends print on stderr when the overhead budget detaches a function.
TEST(GoQuote, DetachedMessage) {
  const std::string m = detached_message("F\x1b[2J\xe2\x80\xae", OverheadTrip{}, 5);
  EXPECT_EQ(m.find('\x1b'), std::string::npos) << m;
  EXPECT_NE(m.find(R"(detached "F\x1b[2J\u202e": )"), std::string::npos) << m;
}

// The bytes no text view may write: ESC, any C0 or C1 control, a bidi control, invalid UTF-8.
std::string raw_hazard(const std::string& s) {
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == 0x1b) return "ESC at " + std::to_string(i);
    if (c < 0x20 && c != '\n') return "control byte at " + std::to_string(i);
    if (c == 0xff || c == 0xfe || c == 0xc0 || c == 0xc1)
      return "invalid byte at " + std::to_string(i);
    if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) < 0xa0)
      return "C1 control at " + std::to_string(i);
    if (c == 0xe2 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
        (static_cast<unsigned char>(s[i + 2]) >= 0xaa &&
         static_cast<unsigned char>(s[i + 2]) <= 0xae))
      return "bidi override at " + std::to_string(i);
    if (c == 0xe2 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x81 &&
        (static_cast<unsigned char>(s[i + 2]) >= 0xa6 &&
         static_cast<unsigned char>(s[i + 2]) <= 0xa9))
      return "bidi isolate at " + std::to_string(i);
  }
  return "";
}

// A name that clears the screen, reverses the line and is not UTF-8.
const std::string kBad = "F\x1b[2J\xe2\x80\xae\xe2\x81\xa6\xff";
// Go's %q of it: "F\x1b[2J\u202e\u2066\xff" (the program above, same rules).
const std::string kBadQuoted = R"("F\x1b[2J\u202e\u2066\xff")";

std::vector<nlohmann::json> hostile_events() {
  using nlohmann::json;
  const json value = {
      {"fields", json::array({{{"name", kBad}, {"value", 1}},
                              {{"name", "s"}, {"value", kBad}},
                              {{"name", "t"}, {"value", {{"type", kBad}, {"value", kBad}}}},
                              {{"name", "f"}, {"value", {{"func", kBad}}}},
                              {{"name", "m"},
                               {"value", {{"entries", json::array({json::array({kBad, kBad})})}}}},
                              {{"name", "u"}, {"value", {{"weird", kBad}}}}})}};
  const json args = json::array({{{"name", kBad}, {"value", value}}});
  return {
      {{"event", "entry"},
       {"func", kBad},
       {"goid", 1},
       {"tid", 2},
       {"ts_ns", 10},
       {"args", args},
       {"stack", json::array({kBad})},
       {"pid", 7}},
      {{"event", "return"},
       {"func", kBad},
       {"goid", 1},
       {"tid", 2},
       {"ts_ns", 20},
       {"duration_ns", 10},
       {"results", args},
       {"pid", 7}},
      {{"event", "unfinished"},
       {"func", kBad},
       {"goid", 1},
       {"tid", 2},
       {"ts_ns", 30},
       {"reason", kBad}},
      {{"event", "gcreate"},
       {"goid", 3},
       {"parent_goid", 1},
       {"ts_ns", 31},
       {"func", kBad},
       {"created_by", kBad}},
      {{"event", "gstate"},
       {"goid", 3},
       {"ts_ns", 32},
       {"from", kBad},
       {"to", kBad},
       {"reason", kBad},
       {"func", kBad}},
      {{"event", "count"}, {"func", kBad}, {"count", 3}},
      {{"event", "latency"},
       {"func", kBad},
       {"count", 1},
       {"min_ns", 1},
       {"p50_ns", 1},
       {"p90_ns", 1},
       {"p99_ns", 1},
       {"max_ns", 1}},
      {{"event", "detached"}, {"func", kBad}},
      {{"event", kBad}, {kBad, kBad}},
      {{"event", "summary"}, {"backend", kBad}, {"events", 1}, {"lost", 0}, {kBad, kBad}},
  };
}

// What a writer prints for the hostile events.
std::string render(const std::string& format) {
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* f = open_memstream(&buf, &len);
  {
    auto sink = format == "graph-args" ? make_graph_writer(f, "", true) : make_output(format, f);
    for (const auto& ev : hostile_events()) sink->emit(ev);
    sink->flush();
  }
  std::fclose(f);
  std::string out(buf, len);
  std::free(buf);
  return out;
}

TEST(GoQuote, EveryTextViewEscapes) {
  for (const char* format :
       {"text", "latency", "graph", "graph-args", "perfetto", "folded", "svg", "goroutines"}) {
    SCOPED_TRACE(format);
    const std::string out = render(format);
    EXPECT_EQ(raw_hazard(out), "") << out;
    // Each view shows the name, escaped (XML escapes '"' in the SVG; JSON writes \\ for \).
    const std::string f = std::string(format);
    if (f == "perfetto")
      EXPECT_NE(out.find(R"(F\u001b[2J\u202e\u2066\ufffd)"), std::string::npos) << out;
    else if (f == "svg")
      EXPECT_NE(out.find(R"(&quot;F\x1b[2J\u202e\u2066\xff&quot;)"), std::string::npos) << out;
    else
      EXPECT_NE(out.find(kBadQuoted), std::string::npos) << out;
  }
}

// JSON: invalid UTF-8 in a name or a key must not make the serializer throw (nlohmann's
// default is type_error 316); it is replaced, and the line stays JSON.
TEST(GoQuote, JsonLinesTakesInvalidUtf8) {
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* f = open_memstream(&buf, &len);
  {
    auto sink = make_output("json", f);
    for (const auto& ev : hostile_events()) EXPECT_NO_THROW(sink->emit(ev));
    sink->flush();
  }
  std::fclose(f);
  std::string out(buf, len);
  std::free(buf);
  size_t lines = 0;
  for (size_t at = 0, nl; (nl = out.find('\n', at)) != std::string::npos; at = nl + 1, ++lines) {
    auto j = nlohmann::json::parse(out.substr(at, nl - at), nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << out.substr(at, nl - at);
    EXPECT_EQ(out.substr(at, nl - at).find('\x1b'), std::string::npos);
  }
  EXPECT_EQ(lines, hostile_events().size());
}

// A value nested past kMaxValueNesting prints "..." where it goes on: no stack overflow.
TEST(GoQuote, DeepValueIsBounded) {
  nlohmann::json v = 1;
  for (int i = 0; i < 200000; ++i) v = nlohmann::json::array({std::move(v)});
  const std::string s = value_to_text(v);
  EXPECT_NE(s.find("..."), std::string::npos);
  EXPECT_LT(s.size(), 4u * kMaxValueNesting);
  EXPECT_TRUE(nests_deeper_than(v, kMaxValueNesting));
  EXPECT_FALSE(nests_deeper_than(nlohmann::json::array({1}), 1));
  EXPECT_TRUE(nests_deeper_than(nlohmann::json::array({1}), 0));
}

}  // namespace
}  // namespace gotap
