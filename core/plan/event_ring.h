// The ring a timed trampoline (trampoline_code.h, issue 38) writes its events into: shared
// memory between the program, whose trampolines are its producers (any thread, lock-free),
// and gotap, its one consumer. A producer takes a position with a compare-and-swap on `head`
// unless the ring is full (head - tail >= capacity: the event is dropped and `dropped`
// counted, never waited for), fills the record at position & mask, and writes its `seq`
// (position + 1) last: x86 keeps stores in order, so a reader that sees seq sees the rest.
// gotap reads records in position order while their seq is the one it expects, then moves
// `tail` on. The three words are a cache line apart.
#pragma once

#include <cstdint>

namespace gotap {

constexpr uint64_t kRingHead = 0, kRingTail = 64, kRingDropped = 128;
constexpr uint64_t kRingRecords = 4096;  // the records begin a page in
constexpr unsigned kRingOrder = 16;      // 65,536 records, 2 MiB
constexpr uint64_t kRingCapacity = uint64_t(1) << kRingOrder;

struct RingRecord {
  uint64_t seq;    // position + 1 once written
  uint64_t tsc;    // rdtsc
  uint64_t goid;   // g.goid, through R14
  uint32_t id;     // the site: patch index << 1, | 1 at a return
  uint32_t depth;  // g.stack.hi - RSP: the same at a call's entry and its return, wherever
                   // the stack has been copied meanwhile
};
static_assert(sizeof(RingRecord) == 32);

constexpr uint64_t ring_bytes() {
  return kRingRecords + kRingCapacity * sizeof(RingRecord);
}

}  // namespace gotap
