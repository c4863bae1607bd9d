// The ring a timed or tracing trampoline (trampoline_code.h, issue 38) writes its events
// into: shared memory between the program, whose trampolines are its producers (any thread,
// lock-free), and gotap, its one consumer. A producer takes a position with a compare-and-swap
// on `head` unless the ring is full (head - tail >= capacity: the event is dropped and
// `dropped` counted, never waited for), fills the record at position & mask, and writes its
// `seq` (position + 1) last: x86 keeps stores in order, so a reader that sees seq sees the
// rest. gotap reads records in position order while their seq is the one it expects, then
// moves `tail` on. The three words are a cache line apart.
#pragma once

#include <cstdint>

namespace gotap {

constexpr uint64_t kRingHead = 0, kRingTail = 64, kRingDropped = 128;
constexpr uint64_t kRingRecords = 4096;  // the records begin a page in

// How many records a ring has (1 << order) and how large each is (1 << record_shift).
struct RingShape {
  unsigned order = 16, record_shift = 5;
  constexpr uint64_t capacity() const { return uint64_t(1) << order; }
  constexpr uint64_t record_size() const { return uint64_t(1) << record_shift; }
  constexpr uint64_t bytes() const { return kRingRecords + (capacity() << record_shift); }
};

// `latency`: 65,536 records of 32 bytes (2 MiB).
constexpr RingShape kTimedRing{16, 5};
constexpr unsigned kRingOrder = kTimedRing.order;
constexpr uint64_t kRingCapacity = kTimedRing.capacity();

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
  return kTimedRing.bytes();
}

// `trace` and `graph`: at most 8,192 records of 512 bytes (4 MiB; a run whose captures copy
// nothing has smaller records, more of them: record_ring_shape). A record is a RingRecord, the
// thread's id (g.m.procid), how many bytes each copy took, the site's words (registers and
// stack slots, as its capture lists them), then the copies' bytes, each at its own offset
// (trampoline_code.h, RecordCapture).
constexpr RingShape kTraceRing{13, 9};
constexpr uint32_t kTraceTid = 32;      // uint32_t
constexpr uint32_t kTraceCopyLen = 36;  // uint16_t per copy
constexpr uint32_t kTraceMaxCopies = 6;
constexpr uint32_t kTraceWords = 48;  // uint64_t per word
constexpr uint32_t kTraceMaxWords = 24;
static_assert(kTraceCopyLen + 2 * kTraceMaxCopies <= kTraceWords);

}  // namespace gotap
