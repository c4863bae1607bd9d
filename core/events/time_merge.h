// Two or more event streams, each in time order, made into one for a sink (the trampoline
// backend's ring and its kernel uprobes' fallback, backends/trampoline/fallback.h). Each
// source emits from its own thread and says, after each read of its buffer, the time up to
// which it has delivered everything (mark()). An event goes out once every source has
// marked past its ts_ns, in ts_ns order, so that a call graph nests a call of one source in a
// call of the other. A live trace stays live: an event older than `max_hold_ns` (behind a
// source that stopped marking) goes out anyway; one that arrives after a later one went out
// goes out at once, and is counted (out_of_order()).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <queue>
#include <variant>
#include <vector>

#include "core/events/events.h"
#include "core/events/typed_events.h"

namespace gotap {

class TimeMerge {
 public:
  TimeMerge(EventSink& out, size_t sources, uint64_t max_hold_ns = 80'000'000);
  ~TimeMerge();
  // Source k's sink: its events, and flush() after each read of its buffer (after mark()).
  EventSink& source(size_t k);
  // Source k has delivered every event with ts_ns < `t`; UINT64_MAX: it has ended.
  void mark(size_t k, uint64_t t);
  // Every event held goes out, in order; then the output is flushed.
  void close();
  uint64_t out_of_order() const;

 private:
  class Source;
  using Item = std::variant<Event, CallEntry, CallReturn, CallUnfinished>;
  struct Held {
    uint64_t ts;
    uint64_t seq;  // arrival order among equal times
    mutable Item item;
    bool operator>(const Held& o) const { return ts != o.ts ? ts > o.ts : seq > o.seq; }
  };
  void add(uint64_t ts, Item item);
  // With mu_ held: sends what every source has marked past, or what was held too long.
  void release(uint64_t now, bool all);
  void send(Item& item);

  EventSink& out_;
  std::vector<std::unique_ptr<Source>> sources_;
  const uint64_t max_hold_ns_;
  mutable std::mutex mu_;
  std::vector<uint64_t> marks_;
  std::priority_queue<Held, std::vector<Held>, std::greater<Held>> held_;
  uint64_t seq_ = 0, sent_ts_ = 0, out_of_order_ = 0;
};

}  // namespace gotap
