// The consumer of a timed run's event ring (core/plan/event_ring.h): reads the records the
// program's trampolines wrote, pairs each return with its call's entry by goroutine and
// stack depth (g.stack.hi - RSP, which a stack copy keeps), and adds each call's time to its
// function's histogram (core/events/latency.h). Times are the TSC's, turned into nanoseconds
// by a rate measured against CLOCK_MONOTONIC from gotap's start to its latest read.
// A return with no entry is a call that began before the jumps were in: left out. An entry
// with no return (its goroutine ended, or a panic unwound the frame) is replaced by the next
// call at the same depth of that goroutine, or stays open at the end.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "core/events/latency.h"
#include "core/plan/event_ring.h"

namespace gotap::trampoline {

class TscClock {
 public:
  TscClock();
  // Nanoseconds for `ticks`, at the rate measured so far.
  uint64_t ns(uint64_t ticks) const;
  // CLOCK_MONOTONIC's time at TSC `tsc`.
  uint64_t at(uint64_t tsc) const;
  // Measures the rate again, from the first reading to now.
  void update();

 private:
  uint64_t tsc0_ = 0, ns0_ = 0;
  double ns_per_tick_ = 0;
};

// A call in flight: its goroutine and g.stack.hi - RSP, the same at its entry and its return
// (a stack copy moves both), different between nested calls.
struct CallKey {
  uint64_t goid;
  uint32_t depth;
  bool operator==(const CallKey&) const = default;
};
struct CallKeyHash {
  size_t operator()(const CallKey& k) const {
    return (k.goid * 0x9e3779b97f4a7c15ull ^ k.depth * 0xc2b2ae3d27d4eb4full) >> 17;
  }
};

// Reads a ring's records in position order (event_ring.h), each while its seq is the one
// expected, and frees their slots.
class RingReader {
 public:
  explicit RingReader(RingShape shape = kTimedRing) : shape_(shape) {}
  // Calls `on(record)` for each record the ring holds now, then moves the tail on. How many.
  template <class F>
  size_t drain(uint8_t* ring, F&& on);
  // The last read, once no writer is left (the program gone, or its jumps taken back):
  // positions taken whose record was never finished (a thread killed mid-record by the
  // program's exit) are skipped, and counted, instead of holding back the records after them.
  template <class F>
  size_t finish(uint8_t* ring, F&& on);
  // Records the ring had no room for, and those finish() skipped.
  uint64_t dropped(const uint8_t* ring) const;
  // Whether a position before the writers' head is still unread after a drain: a record a
  // thread is still writing (one preempted mid-record) holds back those after it.
  bool behind(const uint8_t* ring) const {
    return __atomic_load_n(reinterpret_cast<const uint64_t*>(ring + kRingHead), __ATOMIC_RELAXED) >
           next_;
  }
  const RingShape& shape() const { return shape_; }

 private:
  RingShape shape_;
  uint64_t next_ = 0, unfinished_ = 0;
};

template <class F>
size_t RingReader::drain(uint8_t* ring, F&& on) {
  uint8_t* records = ring + kRingRecords;
  auto* tail = reinterpret_cast<uint64_t*>(ring + kRingTail);
  size_t n = 0;
  for (;; ++n) {
    const uint8_t* r = records + ((next_ & (shape_.capacity() - 1)) << shape_.record_shift);
    if (__atomic_load_n(reinterpret_cast<const uint64_t*>(r), __ATOMIC_ACQUIRE) != next_ + 1) break;
    on(r);
    ++next_;
    // Slots are freed 256 at a time: the tail's cache line, which every writer reads, moves
    // to this CPU and back once per batch, not per record (a ring less full by 256 at most).
    if (next_ % 256 == 0) __atomic_store_n(tail, next_, __ATOMIC_RELEASE);
  }
  __atomic_store_n(tail, next_, __ATOMIC_RELEASE);
  return n;
}

template <class F>
size_t RingReader::finish(uint8_t* ring, F&& on) {
  size_t n = drain(ring, on);
  const uint64_t head =
      __atomic_load_n(reinterpret_cast<const uint64_t*>(ring + kRingHead), __ATOMIC_ACQUIRE);
  // Never further than a ring's worth: a head past that is no writer's (the view is ours).
  while (next_ < head && head - next_ <= shape_.capacity()) {
    ++unfinished_;
    ++next_;
    n += drain(ring, on);
  }
  return n;
}

class CallTimer {
 public:
  // `funcs`: the function of each patch index (PatchSet order).
  // `slower_ns` (latency --slower): only calls that took longer are timed.
  CallTimer(std::vector<int> funcs, size_t nfuncs, std::optional<uint64_t> slower_ns = {})
      : funcs_(std::move(funcs)), lat_(nfuncs), slower_ns_(slower_ns) {}
  // Reads what the ring at `ring` (gotap's view of it) holds now and moves its tail on.
  // How many records were read.
  size_t drain(uint8_t* ring);
  // The last read (RingReader::finish).
  size_t finish(uint8_t* ring);
  uint64_t dropped(const uint8_t* ring) const { return reader_.dropped(ring); }
  const std::vector<LatencySummary>& latencies() const { return lat_; }
  size_t open_calls() const { return open_.size() + in_slots_; }
  uint64_t unmatched_returns() const { return unmatched_; }
  TscClock& clock() { return clock_; }

 private:
  using Key = CallKey;
  using KeyHash = CallKeyHash;
  struct Open {
    int func;
    uint64_t tsc;
  };
  // The open calls: a direct-mapped table first (a call's return most often follows its
  // entry closely: no allocation, one probe), the map for those it pushes out.
  struct Slot {
    Key key{};
    Open open{};
    bool used = false;
  };
  static constexpr size_t kSlots = 4096;
  Slot& slot(const Key& k) { return slots_[KeyHash{}(k) % kSlots]; }
  bool take(const Key& k, Open& out);
  void add(const uint8_t* record);
  RingReader reader_;
  std::vector<int> funcs_;
  std::vector<LatencySummary> lat_;
  std::vector<Slot> slots_ = std::vector<Slot>(kSlots);
  size_t in_slots_ = 0;
  std::unordered_map<Key, Open, KeyHash> open_;
  uint64_t unmatched_ = 0;
  std::optional<uint64_t> slower_ns_;
  TscClock clock_;
};

}  // namespace gotap::trampoline
