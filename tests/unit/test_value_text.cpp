// The text view of decoded values (core/output/value_text.cpp): every shape of docs/json.md's
// Values table prints as a Go engineer reads it, a struct whose fields are named like
// gotap's marks prints as a struct, and no shape, known or not, makes it throw.
#include <chrono>
#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "core/decode/go_time.h"
#include "core/output/value_text.h"
#include "tests/unit/big_stack.h"

namespace gotap {
namespace {

using nlohmann::json;

std::string t(const char* j) {
  return value_to_text(json::parse(j));
}

TEST(ValueText, Scalars) {
  EXPECT_EQ(t("null"), "nil");
  EXPECT_EQ(t("true"), "true");
  EXPECT_EQ(t("-42"), "-42");
  EXPECT_EQ(t("18446744073709551615"), "18446744073709551615");
  EXPECT_EQ(t("1.5"), "1.5");
  EXPECT_EQ(t(R"("a\"b\n\u001b")"), R"("a\"b\n\x1b")");
  EXPECT_EQ(t(R"({"real":1.5,"imag":-2})"), "(1.5-2i)");
}

TEST(ValueText, StringsCutOrNotRead) {
  EXPECT_EQ(t(R"({"str":"ab","len":5,"truncated":true})"), R"("ab"...(len 5))");
  EXPECT_EQ(t(R"({"str":"","len":5,"truncated":true,"unreadable":true})"),
            "<not captured (len 5)>");
}

TEST(ValueText, SlicesArraysMaps) {
  EXPECT_EQ(t(R"({"len":3,"cap":4,"elems":[1,2,3]})"), "[1, 2, 3]");
  EXPECT_EQ(t(R"({"len":5,"cap":5,"elems":[1,2],"truncated":true})"), "[1, 2, ...+3]");
  EXPECT_EQ(t(R"({"len":5,"cap":5,"elems":[],"truncated":true})"), "[...+5]");
  EXPECT_EQ(t("[1,2,3]"), "[1, 2, 3]");
  // An array cut at --max-elems is marked like a slice (restic's [32]byte showed 16).
  EXPECT_EQ(t(R"({"len":32,"elems":[1,2],"truncated":true})"), "[1, 2, ...+30]");
  EXPECT_EQ(t(R"({"len":2,"entries":[["a",1],["b",2]]})"), R"(map["a":1, "b":2])");
  // A map cut by --max-depth: no entries read, how many there are is said.
  EXPECT_EQ(t(R"({"len":3,"entries":[],"truncated":true})"), "map[...+3]");
  EXPECT_EQ(t(R"({"len":3,"entries":[["a",1]],"truncated":true})"), R"(map["a":1, ...+2])");
}

TEST(ValueText, BytesAsGoQuotesOrHex) {
  EXPECT_EQ(t(R"({"len":5,"cap":8,"bytes":"68656c6c6f"})"), R"("hello")");
  EXPECT_EQ(t(R"({"len":3,"cap":3,"bytes":"61090a"})"), R"("a\t\n")");
  EXPECT_EQ(t(R"({"len":4,"bytes":"deadbeef"})"), "0xdeadbeef");
  EXPECT_EQ(t(R"({"len":12,"cap":16,"bytes":"68656c6c6f","truncated":true})"), R"("hello"...+7)");
  EXPECT_EQ(t(R"({"len":0,"cap":0,"bytes":""})"), R"("")");
  EXPECT_EQ(t(R"({"len":3,"cap":3,"bytes":"","unreadable":true})"), "<not captured (len 3)>");
}

TEST(ValueText, PointersInterfacesFuncsChans) {
  EXPECT_EQ(t(R"({"addr":"0x10","elem":7})"), "&7");
  EXPECT_EQ(t(R"({"addr":"0x10"})"), "(*)0x10");
  EXPECT_EQ(t(R"({"addr":"0x10","unreadable":true})"), "<unreadable at 0x10>");
  EXPECT_EQ(t(R"({"type":"int","value":42})"), "int(42)");
  EXPECT_EQ(t(R"({"raw":["0x1","0x2"],"type":"*errors.errorString","value":null})"),
            "*errors.errorString(nil)");
  EXPECT_EQ(t(R"({"addr":"0x4000","func":"main.f"})"), "main.f");
  EXPECT_EQ(t(R"({"addr":"0x5000","len":1,"cap":4})"), "chan(0x5000, len 1, cap 4)");
  EXPECT_EQ(t(R"({"raw":[]})"), "<not captured>");
  EXPECT_EQ(t(R"({"raw":["0x1"]})"), R"(raw["0x1"])");
  EXPECT_EQ(t(R"({"raw":[],"location":"unknown"})"), "<location unknown>");
}

TEST(ValueText, StructsInDeclarationOrder) {
  EXPECT_EQ(t(R"({"fields":[{"name":"wall","value":1},{"name":"ext","value":2},
                            {"name":"loc","value":null}]})"),
            "{wall:1, ext:2, loc:nil}");
  EXPECT_EQ(t(R"({"fields":[]})"), "{}");
}

// Issue 19 item 4: fields named like gotap's marks printed the struct as "&<not captured>",
// a bare pointer, or threw ([json.exception.type_error.302] on a field "location").
TEST(ValueText, StructFieldsNamedLikeMarks) {
  const char* v = R"({"fields":[
      {"name":"location","value":{"fields":[{"name":"file","value":"a.md"}]}},
      {"name":"raw","value":{"len":2,"cap":2,"bytes":"6869"}},
      {"name":"unreadable","value":"no"},
      {"name":"addr","value":3},
      {"name":"elem","value":4},
      {"name":"str","value":"s"},
      {"name":"len","value":5},
      {"name":"type","value":"t"},
      {"name":"value","value":6},
      {"name":"fields","value":7},
      {"name":"name","value":"n"}]})";
  EXPECT_EQ(t(v), R"({location:{file:"a.md"}, raw:"hi", unreadable:"no", addr:3, elem:4, str:"s", )"
                  R"(len:5, type:"t", value:6, fields:7, name:"n"})");
}

TEST(ValueText, DurationAndTime) {
  EXPECT_EQ(t(R"({"duration":"5m0s","ns":300000000000})"), "5m0s");
  EXPECT_EQ(t(R"({"fields":[{"name":"wall","value":0}],"time":"2026-11-24 19:40:05 +0000 UTC"})"),
            "2026-11-24 19:40:05 +0000 UTC");
  EXPECT_EQ(
      t(R"({"fields":[],"time":"2026-11-24 19:40:05 +0000 UTC","time_location_unread":true})"),
      "2026-11-24 19:40:05 +0000 UTC (location not read)");
}

// Total: malformed or unknown shapes (a newer record, a hand-edited file) print something.
TEST(ValueText, NeverThrowsOnAnyShape) {
  const char* odd[] = {
      R"({"location":{"x":1}})",
      R"({"str":5,"len":"x"})",
      R"({"type":{"a":1},"value":1})",
      R"({"elems":5,"len":"x","truncated":"yes"})",
      R"({"entries":{"a":1},"len":[]})",
      R"({"addr":7,"cap":"x"})",
      R"({"func":[1]})",
      R"({"real":"a","imag":"b"})",
      R"({"fields":[1,{"name":{"x":1}},{"value":2}]})",
      R"({"bytes":"zz","len":"q"})",
      R"({"bytes":7})",
      R"({"time":3,"time_location_unread":"x"})",
      R"({"duration":[1]})",
      R"({"raw":5})",
      R"({"unreadable":true})",
      R"({"something":"new"})",
      R"({})",
  };
  for (const char* o : odd) {
    SCOPED_TRACE(o);
    std::string s;
    EXPECT_NO_THROW(s = t(o));
    EXPECT_FALSE(s.empty());
  }
  EXPECT_EQ(t(R"({"something":"new"})"), R"({"something":"new"})");
  // A mark of the wrong JSON type is not an error either: the rest still reads.
  EXPECT_EQ(t(R"({"location":{"x":1},"raw":["0x1"]})"), R"(raw["0x1"])");
}

// Go's own Duration.String() output for these values (time/time.go, its tests).
TEST(GoTime, DurationString) {
  EXPECT_EQ(format_go_duration(0), "0s");
  EXPECT_EQ(format_go_duration(1), "1ns");
  EXPECT_EQ(format_go_duration(1100), "1.1\u00b5s");
  EXPECT_EQ(format_go_duration(2200000), "2.2ms");
  EXPECT_EQ(format_go_duration(3300000000), "3.3s");
  EXPECT_EQ(format_go_duration(300000000000), "5m0s");
  EXPECT_EQ(format_go_duration(4 * 60000000000 + 5001000000), "4m5.001s");
  EXPECT_EQ(format_go_duration(5 * 3600000000000 + 6 * 60000000000 + 7001000000), "5h6m7.001s");
  EXPECT_EQ(format_go_duration(8 * 60000000000 + 1), "8m0.000000001s");
  EXPECT_EQ(format_go_duration(-1), "-1ns");
  EXPECT_EQ(format_go_duration(INT64_MIN), "-2562047h47m16.854775808s");
  EXPECT_EQ(format_go_duration(INT64_MAX), "2562047h47m16.854775807s");
}

// Time.String() of instants with and without a monotonic reading.
TEST(GoTime, TimeString) {
  // time.Unix(0, 0).UTC()
  GoInstant epoch = go_instant(0, 62135596800);
  EXPECT_EQ(epoch.unix_sec, 0);
  EXPECT_EQ(format_go_time(epoch, 0, "UTC"), "1970-01-01 00:00:00 +0000 UTC");
  // Before 1970 and a negative offset.
  GoInstant old = go_instant(123000000, 62135596800 - 86400 - 1);
  EXPECT_EQ(format_go_time(old, -5 * 3600 - 30 * 60, "X"), "1969-12-30 18:29:59.123 -0530 X");
  // A time.Now() reading: wall = hasMonotonic | secs since 1885 << 30 | nsec; ext = mono.
  uint64_t secs_since_1885 = 62135596800 + 1700000000 - 59453308800;
  GoInstant now = go_instant((1ull << 63) | (secs_since_1885 << 30) | 7, 1234567890);
  EXPECT_EQ(now.unix_sec, 1700000000);
  EXPECT_EQ(format_go_time(now, 0, "UTC"),
            "2023-11-14 22:13:20.000000007 +0000 UTC m=+1.234567890");
  // Words that are no instant (tracee garbage): no reading, and no overflow on the way.
  EXPECT_FALSE(go_instant(0, INT64_MIN).valid);
  EXPECT_EQ(format_go_time(go_instant(0, INT64_MIN), 0, "UTC"), "");
  EXPECT_EQ(format_go_time(go_instant(0, INT64_MAX), 0, "UTC"), "");
  EXPECT_EQ(format_go_time(epoch, 1 << 30, "X"), "");
}

}  // namespace
}  // namespace gotap

namespace gotap {
namespace {

// The decoded value of a list `depth` nodes deep, as the decoder shapes it: a pointer to
// main.Node{next *Node; v int}. Built from the innermost node out, each node moved in.
json deep_list(int depth) {
  json cur = nullptr;
  for (int i = depth - 1; i >= 0; --i) {
    json fields = json::array(
        {json{{"name", "next"}, {"value", std::move(cur)}}, json{{"name", "v"}, {"value", i}}});
    cur = json{{"addr", "0xc000010000"}, {"elem", json{{"fields", std::move(fields)}}}};
  }
  return cur;
}

// A value 4,000 levels deep renders in time and memory in proportion to its text: each level
// appends to one string. Before, each level copied its subtree's JSON (json::value) and its
// text into its parent's: 4,000 levels took seconds here, and 10-12 GB in a real trace.
TEST(ValueText, ADeepValueRendersInLinearTime) {
  test::run_on_big_stack([] {
    constexpr int kDepth = 4000;
    const json v = deep_list(kDepth);
    // A list level is two JSON levels (the pointer, the struct): past kMaxValueNesting the
    // pointee prints as "...".
    constexpr int kShown = kMaxValueNesting / 2;
    std::string want;
    for (int i = 0; i < kShown; ++i) want += "&{next:";
    want += "&...";
    for (int i = kShown - 1; i >= 0; --i) want += ", v:" + std::to_string(i) + "}";
    const auto t0 = std::chrono::steady_clock::now();
    const std::string got = value_to_text(v);
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    EXPECT_EQ(got, want);
    EXPECT_LT(ms, 500);
  });
}

}  // namespace
}  // namespace gotap
