// The text writer (core/output/output_text.cpp): what a person reads. Counts come at the end
// of a run and line up in columns however long a Go name is.
#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "core/output/writers.h"

namespace gotap::testing {
namespace {

std::string render(const std::vector<Event>& events) {
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* f = open_memstream(&buf, &len);
  {
    auto w = make_text_writer(f);
    for (const auto& e : events) w->emit(e);
    w->flush();
  }
  std::fclose(f);
  std::string out(buf, len);
  free(buf);
  return out;
}

TEST(TextWriter, CountColumnsLineUpOnLongNames) {
  const std::string long_name =
      "github.com/prometheus/prometheus/web/api/v1.(*API).queryRange.func3.(*Engine).exec";
  std::string out = render({
      {{"event", "count"}, {"func", "main.f"}, {"count", 7}},
      {{"event", "count"}, {"func", long_name}, {"count", 123456}},
      {{"event", "summary"}, {"backend", "ebpf"}, {"events", 2}, {"lost", 0}, {"probes", 2}},
  });
  std::istringstream in(out);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 4u) << out;
  EXPECT_EQ(lines[0].rfind("FUNC", 0), 0u) << out;
  // Every count ends in the same column as the header's COUNT.
  const size_t end = lines[0].size();
  EXPECT_EQ(lines[1].size(), end) << out;
  EXPECT_EQ(lines[2].size(), end) << out;
  EXPECT_EQ(lines[1].substr(lines[1].size() - 1), "7");
  EXPECT_EQ(lines[2].substr(end - 6), "123456");
  EXPECT_EQ(lines[2].rfind(long_name, 0), 0u);
  EXPECT_EQ(lines[3].rfind("# 2 events, 0 lost", 0), 0u) << out;
}

// Counts held for alignment are not lost when nothing follows them.
TEST(TextWriter, CountsWithoutSummaryStillPrint) {
  std::string out = render({{{"event", "count"}, {"func", "main.g"}, {"count", 3}}});
  EXPECT_NE(out.find("main.g"), std::string::npos) << out;
  EXPECT_NE(out.find(" 3\n"), std::string::npos) << out;
}

// A function with an error result has a failed count; one without shows "-". Without any,
// the table keeps its two columns.
TEST(TextWriter, FailedColumnOnlyWhenSomeFunctionHasAnErrorResult) {
  std::string out = render({
      {{"event", "count"}, {"func", "main.mayFail"}, {"count", 30}, {"failed", 10}},
      {{"event", "count"}, {"func", "main.plain"}, {"count", 30}},
  });
  EXPECT_NE(out.find("FUNC                COUNT       FAILED\n"), std::string::npos) << out;
  EXPECT_NE(out.find("main.mayFail           30           10\n"), std::string::npos) << out;
  EXPECT_NE(out.find("main.plain             30            -\n"), std::string::npos) << out;
  out = render({{{"event", "count"}, {"func", "main.plain"}, {"count", 30}}});
  EXPECT_EQ(out.find("FAILED"), std::string::npos) << out;
  out = render({{{"event", "latency"}, {"func", "main.mayFail"}, {"count", 30}, {"failed", 10}}});
  EXPECT_NE(out.find("main.mayFail: count 30  failed 10  min"), std::string::npos) << out;
}

}  // namespace
}  // namespace gotap::testing
