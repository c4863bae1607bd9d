#include "backends/trampoline/call_timer.h"

#include <time.h>
#include <x86intrin.h>

#include <cmath>
#include <cstring>

#include "core/sys/timing.h"

namespace gotap::trampoline {

namespace {

// A TSC reading and the clock's at the same moment: the pair whose two clock readings are
// closest, of a few.
void both(uint64_t& tsc, uint64_t& ns) {
  uint64_t best = UINT64_MAX;
  for (int i = 0; i < 5; ++i) {
    const uint64_t a = sys::monotonic_ns(), t = __rdtsc(), b = sys::monotonic_ns();
    if (b - a < best) {
      best = b - a;
      tsc = t;
      ns = a + (b - a) / 2;
    }
  }
}

}  // namespace

TscClock::TscClock() {
  both(tsc0_, ns0_);
  // A first rate over 10 ms, refined by each update.
  timespec d{0, 10'000'000};
  nanosleep(&d, nullptr);
  update();
}

void TscClock::update() {
  uint64_t tsc = 0, ns = 0;
  both(tsc, ns);
  if (tsc > tsc0_ && ns > ns0_) ns_per_tick_ = double(ns - ns0_) / double(tsc - tsc0_);
}

uint64_t TscClock::at(uint64_t tsc) const {
  const int64_t d = static_cast<int64_t>(tsc - tsc0_);
  // Signed: a record's TSC may be just before the first reading.
  return static_cast<uint64_t>(static_cast<int64_t>(ns0_) +
                               std::llround(static_cast<double>(d) * ns_per_tick_));
}

uint64_t TscClock::ns(uint64_t ticks) const {
  return static_cast<uint64_t>(double(ticks) * ns_per_tick_ + 0.5);
}

size_t CallTimer::drain(uint8_t* ring) {
  return reader_.drain(ring, [this](const uint8_t* r) { add(r); });
}

void CallTimer::add(const uint8_t* record) {
  RingRecord rec;
  std::memcpy(&rec, record, sizeof rec);
  const size_t patch = rec.id >> 1;
  if (patch >= funcs_.size()) return;
  const int func = funcs_[patch];
  const Key key{rec.goid, rec.depth};
  if (!(rec.id & 1)) {
    // A call left open at the same depth of the same goroutine is over (a panic unwound
    // it): the new one replaces it.
    Open old;
    (void)take(key, old);
    Slot& s = slot(key);
    if (s.used)
      open_[s.key] = s.open;  // pushed out to the map
    else
      ++in_slots_;
    s = Slot{key, Open{func, rec.tsc}, true};
    return;
  }
  Open o;
  if (!take(key, o) || o.func != func) {
    ++unmatched_;
    return;
  }
  const uint64_t ns = clock_.ns(rec.tsc > o.tsc ? rec.tsc - o.tsc : 0);
  if (slower_ns_ && ns <= *slower_ns_) return;
  lat_[func].add(ns);
}

bool CallTimer::take(const Key& k, Open& out) {
  Slot& s = slot(k);
  if (s.used && s.key == k) {
    out = s.open;
    s.used = false;
    --in_slots_;
    return true;
  }
  auto it = open_.find(k);
  if (it == open_.end()) return false;
  out = it->second;
  open_.erase(it);
  return true;
}

size_t CallTimer::finish(uint8_t* ring) {
  return reader_.finish(ring, [this](const uint8_t* r) { add(r); });
}

uint64_t RingReader::dropped(const uint8_t* ring) const {
  return unfinished_ +
         __atomic_load_n(reinterpret_cast<const uint64_t*>(ring + kRingDropped), __ATOMIC_RELAXED);
}

}  // namespace gotap::trampoline
