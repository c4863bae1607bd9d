// The text writer's lines for returns: a return whose entry was not seen (its entry site was
// another tracer's, or the call began before the trace) has no duration, and the text must
// not invent one ("(0 ns)" read as a call of no length).
#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "core/events/typed_events.h"
#include "core/output/output_views.h"
#include "core/output/writers.h"

namespace gotap {
namespace {

std::string text_of(const Event& ev) {
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* f = open_memstream(&buf, &len);
  {
    auto w = make_text_writer(f);
    w->emit(ev);
    w->flush();
  }
  std::fclose(f);
  std::string out(buf, len);
  free(buf);
  return out;
}

TEST(TextWriter, UnmatchedReturnShowsNoDuration) {
  CallReturn r{CallSite{1000, 10, 11, 7, "main.handle"}};
  const std::string line = text_of(to_event(r));
  EXPECT_NE(line.find("<- main.handle"), std::string::npos) << line;
  EXPECT_EQ(line.find("ns)"), std::string::npos) << line;
  EXPECT_NE(line.find("(unmatched: its entry was not seen)"), std::string::npos) << line;
}

TEST(TextWriter, MatchedReturnShowsItsDuration) {
  CallReturn r{CallSite{1000, 10, 11, 7, "main.handle"}};
  r.duration_ns = 0;  // a real zero stays a duration
  EXPECT_NE(text_of(to_event(r)).find("(0 ns)"), std::string::npos);
  r.duration_ns = 333;
  EXPECT_NE(text_of(to_event(r)).find("(333 ns)"), std::string::npos) << text_of(to_event(r));
}

// `format` of these events, as `trace --format FORMAT` or `report` prints them.
std::string output_of(const std::string& format, const std::vector<Event>& evs) {
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* f = open_memstream(&buf, &len);
  {
    auto w = make_output(format, f);
    for (const auto& ev : evs) w->emit(ev);
    w->flush();
  }
  std::fclose(f);
  std::string out(buf, len);
  free(buf);
  return out;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

// count --all: a function's processes follow its row, indented and named by pid and comm (a
// comm with a control byte is quoted, not printed raw), and calls no process was kept for
// are said; the FAILED column stays the function's.
TEST(TextWriter, CountByProcessFollowsItsFunction) {
  FuncCount c{"strconv.Atoi", 32, 10};
  c.processes = std::vector<ProcessCount>{{4242, "calls", 25}, {4243, "ev\x1bil", 5}};
  c.processes_lost = 2;
  RunSummary summary;
  summary.backend = "ebpf";
  const Event ev = to_event(c);
  ASSERT_TRUE(ev.contains("processes"));
  EXPECT_EQ(ev["processes"][0]["pid"], 4242);
  EXPECT_EQ(ev["processes"][1]["comm"], "ev\x1bil");
  EXPECT_EQ(ev["processes_lost"], 2);
  EXPECT_FALSE(to_event(FuncCount{"main.f", 2}).contains("processes"));
  const auto lines = lines_of(output_of("text", {ev, to_event(summary)}));
  std::vector<std::string> rows;
  for (const auto& l : lines)
    if (!l.starts_with("#")) rows.push_back(l);
  ASSERT_EQ(rows.size(), 5u) << output_of("text", {ev, to_event(summary)});
  EXPECT_TRUE(rows[0].starts_with("FUNC")) << rows[0];
  EXPECT_NE(rows[0].find("FAILED"), std::string::npos) << rows[0];
  EXPECT_TRUE(rows[1].starts_with("strconv.Atoi ")) << rows[1];
  EXPECT_TRUE(rows[1].ends_with(" 32           10")) << rows[1];
  EXPECT_TRUE(rows[2].starts_with("  pid 4242 (calls) ")) << rows[2];
  EXPECT_TRUE(rows[2].ends_with(" 25")) << rows[2];
  EXPECT_EQ(rows[3].find('\x1b'), std::string::npos) << rows[3];
  EXPECT_TRUE(rows[3].starts_with("  pid 4243 (")) << rows[3];
  EXPECT_TRUE(rows[3].ends_with(" 5")) << rows[3];
  EXPECT_TRUE(rows[4].starts_with("  (process not kept) ")) << rows[4];
  EXPECT_TRUE(rows[4].ends_with(" 2")) << rows[4];
}

// One long generic name does not pad every row of `count` to its length: the column stops
// at 60, the long name runs past it, and every name is printed whole.
TEST(TextWriter, CountColumnIsCappedForLongNames) {
  const std::string longname =
      "main.Map[" + std::string(400, 'x') + "].Get";  // 421 characters, as seen on a generic
  RunSummary summary;
  summary.backend = "ptrace";
  std::vector<Event> evs = {to_event(FuncCount{"main.a", 3, std::nullopt}),
                            to_event(FuncCount{longname, 5, std::nullopt}),
                            to_event(FuncCount{"main.b", 7, std::nullopt}), to_event(summary)};
  const auto lines = lines_of(output_of("text", evs));
  bool saw_long = false;
  size_t rows = 0;
  for (const auto& l : lines) {
    if (l.starts_with("#")) continue;
    ++rows;
    if (l.find(longname) != std::string::npos) {
      saw_long = true;
      EXPECT_NE(l.find(" 5"), std::string::npos) << l;
      continue;
    }
    EXPECT_LE(l.size(), 100u + 1 + 12) << l;
  }
  EXPECT_TRUE(saw_long);
  EXPECT_GE(rows, 3u);
  // The short rows still line up with each other.
  std::vector<size_t> ends;
  for (const auto& l : lines)
    if (l.starts_with("main.a ") || l.starts_with("main.b ")) ends.push_back(l.size());
  ASSERT_EQ(ends.size(), 2u);
  EXPECT_EQ(ends[0], ends[1]);
}

// `--format latency` of a trace with goroutine events: the histograms, not a line per
// goroutine transition before them.
TEST(TextWriter, LatencyViewLeavesOutGoroutineStates) {
  std::vector<Event> evs;
  for (uint64_t g = 1; g <= 50; ++g) {
    evs.push_back(to_event(GoroutineCreate{g * 10, 1, 1, g, {1, "main.work", "main.main"}}));
    evs.push_back(to_event(GoroutineState{g * 10 + 1, 1, 1, g, "runnable", "running", "", {}}));
    evs.push_back(to_event(GoroutineExit{g * 10 + 2, 1, g}));
  }
  CallReturn r{CallSite{1000, 1, 1, 7, "main.handle"}};
  r.duration_ns = 1500;
  evs.push_back(to_event(r));
  RunSummary summary;
  summary.backend = "ebpf";
  evs.push_back(to_event(summary));
  const std::string out = output_of("latency", evs);
  EXPECT_EQ(out.find("runnable"), std::string::npos) << out;
  EXPECT_EQ(out.find("created by"), std::string::npos) << out;
  EXPECT_EQ(out.find("exited"), std::string::npos) << out;
  EXPECT_EQ(out.find("TRANSITION"), std::string::npos) << out;
  // The histogram is there, and first.
  EXPECT_EQ(out.rfind("main.handle: count 1", 0), 0u) << out;
}

}  // namespace
}  // namespace gotap
