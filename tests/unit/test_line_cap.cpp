// The cap on one event's decoded values (--max-line): a large value is cut where the budget
// ends and marked, so that the text and JSON views show that something was left out.
#include <gtest/gtest.h>

#include "core/output/line_cap.h"
#include "core/output/value_text.h"

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
