// The cap on one event's decoded values (--max-line): a large value is cut where the budget
// ends and marked, so that the text and JSON views show that something was left out.
#include <gtest/gtest.h>

#include <chrono>

#include "core/output/line_cap.h"
#include "core/output/value_text.h"
#include "tests/unit/big_stack.h"

namespace gotap {
namespace {

using nlohmann::json;

json entry_with(json value) {
  return json{{"event", "entry"},
              {"func", "main.f"},
              {"args", json::array({json{{"name", "a"}, {"type", "T"}, {"value", value}}})}};
}

TEST(LineCap, SmallEventsUnchanged) {
  json ev = entry_with(json{{"len", 2}, {"cap", 2}, {"elems", {1, 2}}});
  EXPECT_EQ(cap_event_values(ev, 1000), ev);
  json other = {{"event", "summary"}, {"events", 3}};
  EXPECT_EQ(cap_event_values(other, 1), other);
}

TEST(LineCap, LargeSliceIsCutAndMarked) {
  json elems = json::array();
  for (int i = 0; i < 5000; ++i) elems.push_back(std::string(20, 'x'));
  json ev = entry_with(json{{"len", 5000}, {"cap", 5000}, {"elems", elems}});
  ASSERT_GT(ev.dump().size(), 100000u);
  json got = cap_event_values(ev, 4096);
  EXPECT_LT(got.dump().size(), 4096u + 512u);
  EXPECT_EQ(got["truncated"], true);
  const json& v = got["args"][0]["value"];
  EXPECT_EQ(v["truncated"], true);
  EXPECT_EQ(v["len"], 5000);
  ASSERT_FALSE(v["elems"].empty());
  EXPECT_LT(v["elems"].size(), 5000u);
  // The text view says how many were left out.
  size_t shown = v["elems"].size();
  EXPECT_NE(value_to_text(v).find("...+" + std::to_string(5000 - shown) + "]"), std::string::npos);
}

TEST(LineCap, StructFieldsPastTheBudgetAreMarked) {
  json fields = json::array();
  for (int i = 0; i < 200; ++i)
    fields.push_back(json{{"name", "f" + std::to_string(i)}, {"value", std::string(50, 'y')}});
  json ev = entry_with(json{{"fields", fields}});
  json got = cap_event_values(ev, 2048);
  const json& v = got["args"][0]["value"];
  ASSERT_FALSE(v["fields"].empty());
  ASSERT_LT(v["fields"].size(), 200u);  // the first fields, in order; the rest left out
  EXPECT_EQ(v["fields"][0]["name"], "f0");
  EXPECT_EQ(v["fields"][0]["value"], std::string(50, 'y'));
  EXPECT_EQ(v["truncated"], true);
  std::string text = value_to_text(v);
  EXPECT_EQ(text.substr(text.size() - 6), ", ...}");
  EXPECT_LT(got.dump().size(), 2048u + 512u);
}

TEST(LineCap, PointeePastTheBudgetIsDropped) {
  json big = json::array();
  for (int i = 0; i < 1000; ++i) big.push_back(i);
  json ev = entry_with(
      json::array({json{{"addr", "0x1"}, {"elem", big}}, json{{"addr", "0x2"}, {"elem", big}}}));
  json got = cap_event_values(ev, 1024);
  EXPECT_EQ(got["truncated"], true);
  EXPECT_LT(got.dump().size(), 3000u);
}

}  // namespace
}  // namespace gotap

namespace gotap {
namespace {

// Arrays nested 4,000 deep, cut by the cap and not: linear in their size. Before, each array
// level copied its subtree before cutting it (seconds for this one).
TEST(LineCap, DeepArraysAreCutInLinearTime) {
  test::run_on_big_stack([] {
    constexpr int kDepth = 4000;
    json v = json::array({1});
    for (int i = 0; i < kDepth; ++i) v = json::array({std::move(v), i});
    const json ev = entry_with(v);
    const size_t size = ev.dump().size();
    for (size_t cap : {size_t(200), size_t(10000), size_t(64) << 20}) {
      SCOPED_TRACE(cap);
      const auto t0 = std::chrono::steady_clock::now();
      json out = cap_event_values(ev, cap);
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now() - t0)
                          .count();
      EXPECT_LT(ms, 500);
      // Cut: the outer arrays become the marked shape, and the event says so; not cut: as it was.
      if (cap < size) {
        EXPECT_EQ(out["truncated"], true);
        EXPECT_EQ(out["args"][0]["value"]["truncated"], true);
        EXPECT_LT(out.dump().size(), cap + 64 * kDepth);  // the marks the cut adds
      } else {
        EXPECT_EQ(out, ev);
      }
    }
  });
}

}  // namespace
}  // namespace gotap

namespace gotap {
namespace {

json param(const char* name, json value) {
  return json{{"name", name}, {"type", "T"}, {"value", std::move(value)}};
}

// A pointer whose pointee the cap left out says so in text too, not only in JSON.
TEST(LineCap, CutPointerIsMarkedInText) {
  json big = json::array();
  for (int i = 0; i < 1000; ++i) big.push_back(i);
  // A budget too small for any pointee.
  json got = cap_event_values(entry_with(json{{"addr", "0xc00036aa00"}, {"elem", big}}), 10);
  const json& v = got["args"][0]["value"];
  ASSERT_EQ(v, (json{{"addr", "0xc00036aa00"}, {"truncated", true}}));
  EXPECT_EQ(value_to_text(v), "(*)0xc00036aa00...");
  // Not cut (the depth limit): no mark.
  EXPECT_EQ(value_to_text(json{{"addr", "0xc00036aa00"}}), "(*)0xc00036aa00");
}

// The budget is shared: a large first argument (a receiver) does not take it all, and every
// argument shows its top level; a small one is kept whole.
TEST(LineCap, BudgetIsSharedAmongArguments) {
  json recv_fields = json::array();
  for (int i = 0; i < 2000; ++i)
    recv_fields.push_back(json{{"name", "f" + std::to_string(i)}, {"value", i}});
  json req_fields = json::array();
  for (int i = 0; i < 2000; ++i)
    req_fields.push_back(json{{"name", "g" + std::to_string(i)}, {"value", i}});
  json ev = {
      {"event", "entry"},
      {"func", "main.(*Server).HandleVarz"},
      {"args", json::array({param("s", {{"addr", "0x1"}, {"elem", {{"fields", recv_fields}}}}),
                            param("n", 42),
                            param("r", {{"addr", "0x2"}, {"elem", {{"fields", req_fields}}}})})}};
  json got = cap_event_values(ev, 4096);
  EXPECT_EQ(got["truncated"], true);
  EXPECT_EQ(got["args"][1]["value"], 42);
  for (int a : {0, 2}) {
    SCOPED_TRACE(a);
    const json& v = got["args"][a]["value"];
    ASSERT_TRUE(v.contains("elem")) << v.dump().substr(0, 200);
    const json& fields = v["elem"]["fields"];
    // Each got about half: many fields shown, not all.
    EXPECT_GT(fields.size(), 50u);
    EXPECT_LT(fields.size(), 2000u);
    EXPECT_EQ(v["elem"]["truncated"], true);
  }
  EXPECT_LT(got.dump().size(), 4096u + 1024u);
}

}  // namespace
}  // namespace gotap
