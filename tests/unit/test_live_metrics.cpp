// LiveMetrics: what --prometheus and -i read while a backend traces.
#include "core/events/live_metrics.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

namespace gotap {
namespace {

using namespace std::chrono_literals;
using Key = std::tuple<std::string, std::string, std::string>;

FuncMetrics row(const std::string& func, uint64_t calls) {
  FuncMetrics m;
  m.func = func;
  m.calls = calls;
  return m;
}

// A backend emits its events while it holds the lock its metrics reader takes (the
// trampoline's ring, ptrace's per-function state). A scrape that waits for that lock must
// not hold up the events' own way in (a return's `why`, a goroutine's status): with one
// mutex for both, gotap deadlocked between a scrape and a return (trampoline, trace --why
// --prometheus, CI). Here the reader gives up after 3 s, and the test fails on that.
TEST(LiveMetrics, AScrapeWaitingForTheBackendDoesNotHoldUpItsEvents) {
  LiveMetrics m;
  std::timed_mutex backend;
  std::atomic<bool> in_reader{false}, gave_up{false};
  m.begin(42, [&](MetricsSnapshot& s) {
    in_reader = true;
    if (!backend.try_lock_for(3s)) {
      gave_up = true;
      return;
    }
    s.funcs.push_back(row("main.f", 5));
    backend.unlock();
  });
  backend.lock();  // the tracing thread, emitting
  MetricsSnapshot served;
  std::thread scraper([&] { served = m.scrape(); });
  for (auto until = std::chrono::steady_clock::now() + 10s;
       !in_reader && std::chrono::steady_clock::now() < until;)
    std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(in_reader);
  std::this_thread::sleep_for(20ms);  // the scrape is waiting for the backend's lock
  m.add_why("main.f", Event{{"running_ns", 7u}});
  m.observe(Event{{"event", "gstate"}, {"goid", 3u}, {"to", "waiting"}});
  backend.unlock();
  scraper.join();
  EXPECT_FALSE(gave_up) << "the events waited for the scrape, which waited for them";
  ASSERT_EQ(served.funcs.size(), 1u);
  EXPECT_EQ(served.funcs[0].calls, 5u);
  EXPECT_EQ(served.pid, 42);
  const MetricsSnapshot now = m.read();
  EXPECT_EQ(now.why_ns.at(Key("main.f", "running", "")), 7u);
  EXPECT_EQ(now.gstates.at("waiting"), 1u);
}

// What the reader gives replaces the counters each read; sums added by add_why stay unless
// the reader gives whole sums of its own (eBPF's latency --why); after end(), the final
// values are served and counted as final scrapes.
TEST(LiveMetrics, ReadsReplaceCountersAndKeepAddedSums) {
  LiveMetrics m;
  uint64_t calls = 1;
  bool whole_sums = false;
  m.begin(7, [&](MetricsSnapshot& s) {
    s.funcs.push_back(row("main.f", calls));
    s.lost = calls;
    if (whole_sums) s.why_ns[Key("main.f", "running", "")] = 100;
  });
  m.add_why("main.f", Event{{"running_ns", 3u}});
  EXPECT_EQ(m.read().funcs.at(0).calls, 1u);
  calls = 2;
  auto s = m.read();
  ASSERT_EQ(s.funcs.size(), 1u);
  EXPECT_EQ(s.funcs[0].calls, 2u);
  EXPECT_EQ(s.lost, 2u);
  EXPECT_EQ(s.why_ns.at(Key("main.f", "running", "")), 3u);
  whole_sums = true;
  EXPECT_EQ(m.read().why_ns.at(Key("main.f", "running", "")), 100u);
  EXPECT_EQ(m.final_scrapes(), 0u);
  calls = 9;
  m.end();
  calls = 1000;  // the backend is gone: never read again
  s = m.scrape();
  EXPECT_TRUE(s.ended);
  EXPECT_EQ(s.funcs.at(0).calls, 9u);
  EXPECT_EQ(s.pid, 7);
  EXPECT_EQ(m.final_scrapes(), 1u);
  EXPECT_EQ(m.read().funcs.at(0).calls, 9u);
  EXPECT_EQ(m.final_scrapes(), 1u) << "gotap's own read is not a scrape";
}

}  // namespace
}  // namespace gotap
