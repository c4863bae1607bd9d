// The ptrace tracer's second thread (backends/ptrace/event_queue.h): events keep their
// order, a full queue holds the tracer instead of losing events, the output is flushed on a
// timer (not per event) and always within the live trace's 100 ms, and a failing output
// stops the writing and says why.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "backends/ptrace/event_queue.h"

namespace gotap::ptrace {
namespace {

using Clock = std::chrono::steady_clock;

struct RecordingSink : EventSink {
  void emit(const Event& ev) override {
    if (slow_us) std::this_thread::sleep_for(std::chrono::microseconds(slow_us));
    if (throw_at && ++emitted == throw_at) throw std::runtime_error("output failed");
    std::lock_guard<std::mutex> lock(mu);
    seen.push_back(ev["n"].get<int>());
  }
  void flush() override {
    std::lock_guard<std::mutex> lock(mu);
    flushes.push_back({Clock::now(), seen.size()});
  }
  std::vector<int> written() {
    std::lock_guard<std::mutex> lock(mu);
    return seen;
  }
  std::mutex mu;
  std::vector<int> seen;
  std::vector<std::pair<Clock::time_point, size_t>> flushes;
  int slow_us = 0;
  int throw_at = 0, emitted = 0;
};

struct QueueTest : ::testing::Test {
  TraceeMemory live{getpid()};
  void push(EventQueue& q, int n) {
    std::vector<QueuedEvent> items;
    items.push_back({Event{{"n", n}}});
    q.push(items);
    EXPECT_TRUE(items.empty());
  }
};

TEST_F(QueueTest, EventsAreWrittenInTheOrderPushedAndFlushedOnItsTimerWithin100Ms) {
  RecordingSink sink;
  EventQueue q(sink, live, DecodeEnv{}, DecodeLimits{}, 64, 20'000'000);  // 20 ms
  const auto first = Clock::now();
  for (int i = 0; i < 200; ++i) push(q, i);
  // Written at once, flushed by the timer: no flush per event, and the first within 100 ms.
  for (int i = 0; i < 100; ++i) {
    {
      std::lock_guard<std::mutex> lock(sink.mu);
      if (!sink.flushes.empty()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  {
    std::lock_guard<std::mutex> lock(sink.mu);
    ASSERT_FALSE(sink.flushes.empty()) << "nothing flushed 200 ms after the first event";
    EXPECT_LT(sink.flushes.front().first - first, std::chrono::milliseconds(100));
    EXPECT_LE(sink.flushes.size(), 3u) << "a flush per event, not per timer";
  }
  q.stop();
  std::vector<int> want(200);
  for (int i = 0; i < 200; ++i) want[i] = i;
  EXPECT_EQ(sink.written(), want);
  EXPECT_EQ(sink.flushes.back().second, 200u) << "stop() flushes what is left";
  EXPECT_FALSE(q.failure());
}

TEST_F(QueueTest, AFullQueueHoldsThePusherAndLosesNothing) {
  RecordingSink sink;
  sink.slow_us = 2000;  // a slow reader: 2 ms an event
  EventQueue q(sink, live, DecodeEnv{}, DecodeLimits{}, 2, 0);
  const auto start = Clock::now();
  for (int i = 0; i < 20; ++i) push(q, i);
  // 20 events through room for 2 at 2 ms each: the pusher waited for most of them.
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(20));
  q.stop();
  std::vector<int> want(20);
  for (int i = 0; i < 20; ++i) want[i] = i;
  EXPECT_EQ(sink.written(), want);
}

TEST_F(QueueTest, AFailingOutputStopsTheWritingAndSaysWhy) {
  RecordingSink sink;
  sink.throw_at = 3;
  EventQueue q(sink, live, DecodeEnv{}, DecodeLimits{}, 64, 0);
  for (int i = 0; i < 10; ++i) push(q, i);
  q.stop();
  ASSERT_TRUE(q.failure());
  EXPECT_EQ(*q.failure(), "output failed");
  EXPECT_EQ(sink.written(), (std::vector<int>{0, 1}));
}

}  // namespace
}  // namespace gotap::ptrace
