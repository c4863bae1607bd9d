// The text writer's lines for returns: a return whose entry was not seen (its entry site was
// another tracer's, or the call began before the trace) has no duration, and the text must
// not invent one ("(0 ns)" read as a call of no length).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "core/events/typed_events.h"
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

}  // namespace
}  // namespace gotap
