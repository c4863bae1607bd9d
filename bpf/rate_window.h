/* --rate N: at most N calls of a function reported in any window of one second of the
 * events' clock (CLOCK_MONOTONIC, bpf_ktime_get_ns). Shared by the BPF program
 * (bpf/call_limits.h) and the ptrace backend (core/events/rate_limit.h), so that both keep
 * the same promise.
 *
 * Time is cut into slots of 1/16 s; a ring of 32 words counts the calls let through in the
 * last 32 slots, each word its slot's number and count, so that one compare-and-swap updates
 * it (the kernel refuses bpf_spin_lock in uprobe programs: "tracing progs cannot use
 * bpf_spin_lock yet", 6.18). A call at `now` first counts itself in its slot, then sums the
 * slots within a second of its own (16 before, 15 after: another CPU's hit may count a later
 * time first), and goes through only when the sum, itself included, is N at most; else it
 * takes its count back. For any window of one second, the call of the window that counted
 * itself last saw every other call of the window that went through, so that at most N did.
 *
 * The price: a steady stream gets N calls per 1 to 1.0625 s, not per 1 s (the oldest slot
 * counted may start up to 1/16 s more than a second back), and calls racing on other CPUs
 * may refuse each other. A queue of the last N call times would be exact, but takes N words
 * per function where this takes 32. */
#ifndef GOTAP_RATE_WINDOW_H
#define GOTAP_RATE_WINDOW_H

#include "gotap_shared.h"

#define GOTAP_RATE_SLOT_NS 62500000ull /* 1 s / 16 */
#define GOTAP_RATE_WINDOW 16           /* slots in a second */
#define GOTAP_RATE_SLOTS 32            /* the ring: a second either way of a slot */
/* A ring word: the slot's number (time / GOTAP_RATE_SLOT_NS: 34 bits last 34 years of
 * uptime) above the count of the calls let through in it (30 bits hold 10^9, --rate's most). */
#define GOTAP_RATE_COUNT_BITS 30
#define GOTAP_RATE_COUNT_MASK ((1ull << GOTAP_RATE_COUNT_BITS) - 1)

struct gotap_rate_ring {
  gotap_u64 slot[GOTAP_RATE_SLOTS]; /* slot k at k % GOTAP_RATE_SLOTS */
};

/* Adds 1 (`up`) to slot `k`'s count in its word, or takes 1 back. 0: not done (the word holds a
 * later slot, or other CPUs kept changing it). */
static inline int gotap_rate_add(gotap_u64* w, gotap_u64 k, int up) {
  for (int i = 0; i < 8; i++) {
    gotap_u64 old = *(volatile gotap_u64*)w;
    gotap_u64 at = old >> GOTAP_RATE_COUNT_BITS;
    gotap_u64 count = old & GOTAP_RATE_COUNT_MASK;
    gotap_u64 next;
    if (up) {
      if (at > k) return 0;
      next = (k << GOTAP_RATE_COUNT_BITS) | ((at == k ? count : 0) + 1);
    } else {
      if (at != k || count == 0) return 1;
      next = old - 1;
    }
    if (__sync_val_compare_and_swap(w, old, next) == old) return 1;
  }
  return 0;
}

/* Whether a call at `now` may be reported under a limit of n per second; counted if so. */
static inline int gotap_rate_take(struct gotap_rate_ring* r, gotap_u64 now, gotap_u64 n) {
  gotap_u64 k = now / GOTAP_RATE_SLOT_NS;
  gotap_u64* mine = &r->slot[k & (GOTAP_RATE_SLOTS - 1)];
  if (!gotap_rate_add(mine, k, 1)) return 0;
  gotap_u64 sum = 0;
  int stale = 0;
  for (gotap_u32 i = 0; i < GOTAP_RATE_SLOTS; i++) {
    gotap_u64 v = *(volatile gotap_u64*)&r->slot[i];
    gotap_u64 at = v >> GOTAP_RATE_COUNT_BITS;
    if (at + GOTAP_RATE_WINDOW < k) continue; /* more than a second before */
    if (at >= k + GOTAP_RATE_WINDOW) {
      /* A second or more after `now`: the ring no longer holds all of now's window. */
      stale = 1;
      break;
    }
    sum += v & GOTAP_RATE_COUNT_MASK;
  }
  if (!stale && sum <= n) return 1;
  gotap_rate_add(mine, k, 0);
  return 0;
}

#endif /* GOTAP_RATE_WINDOW_H */
