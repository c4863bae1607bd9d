/* The error-result check and the --rate limit of gotap.bpf.c (included there, after
 * load_regs and bump). Both read one small map per hit and never touch the event record. */
#ifndef GOTAP_CALL_LIMITS_H
#define GOTAP_CALL_LIMITS_H

#include "gotap_limits.h"
#include "rate_window.h"

/* --rate N: at most N reported calls per second per function; 0: no limit. */
const volatile __u32 rate_per_s = 0;

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1); /* resized to the number of probe sites */
  __type(key, __u32);
  __type(value, struct gotap_site_extra);
} site_extra SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1); /* resized to the number of functions with an error result */
  __type(key, __u32);
  __type(value, __u64);
} errors SEC(".maps");

/* Per function: the calls let through in the last seconds (rate_window.h). */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1); /* resized to the number of functions */
  __type(key, __u32);
  __type(value, struct gotap_rate_ring);
} rate_state SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1); /* resized to the number of functions */
  __type(key, __u32);
  __type(value, __u64);
} rate_dropped SEC(".maps");

/* At a RET of a function with an error result: counts the call as failed when the error's
 * itab word is not zero. */
static __always_inline void count_error(struct pt_regs* ctx, __u32 idx) {
  struct gotap_site_extra* x = bpf_map_lookup_elem(&site_extra, &idx);
  if (!x) return;
  struct gotap_word* w = &x->err;
  __u64 v = 0;
  if (w->src == GOTAP_SRC_REG) {
    __u64 regs[16];
    load_regs(ctx, regs);
    v = regs[w->reg & 15];
  } else if (w->src == GOTAP_SRC_STACK) {
    if (bpf_probe_read_user(&v, sizeof(v), (void*)(ctx->sp + (__s64)w->off))) return;
  } else if (w->src == GOTAP_SRC_REGMEM) {
    __u64 regs[16];
    load_regs(ctx, regs);
    if (bpf_probe_read_user(&v, sizeof(v), (void*)(regs[w->reg & 15] + (__s64)w->off))) return;
  } else {
    return;
  }
  if (!v) return;
  __u32 slot = x->err_slot;
  __u64* c = bpf_map_lookup_elem(&errors, &slot);
  if (c) *c += 1;
}

/* Whether a call of `func` may be reported now: at most rate_per_s in any second of the clock
 * the events' ts_ns use (rate_window.h). Functions past the map's end (the goroutine probes)
 * are never limited. A call left out is counted. */
static __always_inline int rate_allows(__u32 func, __u64 now) {
  if (!rate_per_s) return 1;
  struct gotap_rate_ring* ring = bpf_map_lookup_elem(&rate_state, &func);
  if (!ring) return 1;
  if (gotap_rate_take(ring, now, rate_per_s)) return 1;
  __u64* d = bpf_map_lookup_elem(&rate_dropped, &func);
  if (d) *d += 1;
  return 0;
}

#endif /* GOTAP_CALL_LIMITS_H */
