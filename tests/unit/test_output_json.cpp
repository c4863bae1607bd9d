// The JSON Lines writer: "event" first, the other keys in order, invalid UTF-8 from the
// tracee escaped rather than aborting the dump, and each line whole (the writer reuses one
// buffer from line to line).
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "core/output/writers.h"

namespace gotap {
namespace {

std::string lines_of(const std::vector<nlohmann::json>& evs) {
  char* buf = nullptr;
  size_t n = 0;
  std::FILE* f = open_memstream(&buf, &n);
  {
    auto w = make_json_lines_writer(f);
    for (const auto& ev : evs) w->emit(ev);
    w->flush();
  }
  std::fclose(f);
  std::string out(buf, n);
  std::free(buf);
  return out;
}

TEST(JsonLines, EventFirstThenTheKeysInOrderOneLineEach) {
  nlohmann::json a = {{"args", {{{"name", "s"}, {"value", "x\"y"}}}},
                      {"event", "entry"},
                      {"goid", 1},
                      {"ts_ns", 5}};
  nlohmann::json b = {{"event", "return"}, {"d", 2.5}};
  EXPECT_EQ(lines_of({a, b, nlohmann::json::array({1, 2})}),
            "{\"event\":\"entry\",\"args\":[{\"name\":\"s\",\"value\":\"x\\\"y\"}],\"goid\":1,"
            "\"ts_ns\":5}\n{\"event\":\"return\",\"d\":2.5}\n[1,2]\n");
}

TEST(JsonLines, InvalidUtf8FromTheTraceeIsReplacedNotFatal) {
  nlohmann::json ev = {{"event", "entry"},
                       {"s", std::string("a\xff"
                                         "b")}};
  EXPECT_EQ(lines_of({ev}),
            "{\"event\":\"entry\",\"s\":\"a\xEF\xBF\xBD"
            "b\"}\n");
}

}  // namespace
}  // namespace gotap
