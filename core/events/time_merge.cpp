#include "core/events/time_merge.h"

#include <time.h>

#include <algorithm>
#include <type_traits>
#include <utility>

namespace gotap {

namespace {

uint64_t monotonic_now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

}  // namespace

class TimeMerge::Source : public EventSink {
 public:
  explicit Source(TimeMerge& m) : m_(m) {}
  // An event with no time of its own (a warning's) goes out at once, ahead of what is held.
  void emit(const Event& ev) override { m_.add(ev.value("ts_ns", uint64_t(0)), ev); }
  void emit_entry(const CallEntry& e) override { m_.add(e.ts_ns, e); }
  void emit_return(const CallReturn& r) override { m_.add(r.ts_ns, r); }
  void emit_unfinished(const CallUnfinished& u) override { m_.add(u.ts_ns, u); }
  void flush() override {
    std::lock_guard<std::mutex> lock(m_.mu_);
    m_.release(monotonic_now(), false);
  }

 private:
  TimeMerge& m_;
};

TimeMerge::TimeMerge(EventSink& out, size_t sources, uint64_t max_hold_ns)
    : out_(out), max_hold_ns_(max_hold_ns), marks_(sources, 0) {
  for (size_t k = 0; k < sources; ++k) sources_.push_back(std::make_unique<Source>(*this));
}

TimeMerge::~TimeMerge() = default;

EventSink& TimeMerge::source(size_t k) {
  return *sources_[k];
}

void TimeMerge::add(uint64_t ts, Item item) {
  std::lock_guard<std::mutex> lock(mu_);
  // An event with no time (none of a trace's has none) goes out at once.
  if (ts == 0) {
    send(item);
    out_.flush();
    return;
  }
  if (ts < sent_ts_) {
    // Behind what went out already: late, but not lost.
    ++out_of_order_;
    send(item);
    out_.flush();
    return;
  }
  held_.push(Held{ts, seq_++, std::move(item)});
}

void TimeMerge::mark(size_t k, uint64_t t) {
  std::lock_guard<std::mutex> lock(mu_);
  if (k < marks_.size() && t > marks_[k]) marks_[k] = t;
}

void TimeMerge::release(uint64_t now, bool all) {
  uint64_t due = UINT64_MAX;
  for (uint64_t m : marks_) due = std::min(due, m);
  const uint64_t stale = now > max_hold_ns_ ? now - max_hold_ns_ : 0;
  due = std::max(due, stale);
  bool sent = false;
  while (!held_.empty() && (all || held_.top().ts < due)) {
    Item item = std::move(held_.top().item);
    sent_ts_ = std::max(sent_ts_, held_.top().ts);
    held_.pop();
    send(item);
    sent = true;
  }
  if (sent || all) out_.flush();
}

void TimeMerge::send(Item& item) {
  std::visit(
      [this](auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, Event>)
          out_.emit(x);
        else if constexpr (std::is_same_v<T, CallEntry>)
          out_.emit_entry(x);
        else if constexpr (std::is_same_v<T, CallReturn>)
          out_.emit_return(x);
        else
          out_.emit_unfinished(x);
      },
      item);
}

void TimeMerge::close() {
  std::lock_guard<std::mutex> lock(mu_);
  release(0, true);
}

uint64_t TimeMerge::out_of_order() const {
  std::lock_guard<std::mutex> lock(mu_);
  return out_of_order_;
}

}  // namespace gotap
