// SPDX-License-Identifier: GPL-2.0
/* gotap's uprobe program. One program serves every probe site: the attach cookie says which
 * function the site belongs to and whether it is an entry or a RET (gotap_cookie). In trace
 * mode it also indexes the `probes` map, which says where the argument or result words live.
 * Count and latency aggregate here; trace streams events through the ring buffer. */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "gotap_shared.h"

char LICENSE[] SEC("license") = "GPL";

/* Set by the loader before load. */
const volatile __u32 target_tgid = 0; /* 0: every process (--all) */
const volatile __u32 mode = GOTAP_MODE_TRACE;
const volatile __u32 g_goid_off = 152;
const volatile __u32 g_stack_hi_off = 8;
const volatile __s64 tls_g_off = -8;
/* A gccgo program: libgo's g is not gc's, so no gc g is read; calls pair by RSP (a goroutine
 * keeps its stack, split stacks aside), and events carry goid 0 unless gccgo_g reads it. */
const volatile __u32 no_g = 0;
/* A gccgo program's goroutine ids (core/plan/gccgo_g.h): libgo's g pointer is at FS base +
 * tls_g_off (GOTAP_GCCGO_G_EXEC), or at gccgo_dtpoff in the TLS block dtv[gccgo_modid] of
 * the thread's DTV, *(FS base + 8) (GOTAP_GCCGO_G_DTV). With GOTAP_GCCGO_G_DTV_SELF the two
 * come from the GOT pair at link-time address gccgo_modid of the probed libgo, found through
 * the hit's own address (site_extra's link_addr). Only g_goid_off is read from g. */
const volatile __u32 gccgo_g = 0;
const volatile __u64 gccgo_modid = 0;
const volatile __u64 gccgo_dtpoff = 0;
const volatile __u64 wake_bytes = 1 << 20; /* wake the reader past this much pending data */
/* --prometheus in trace and latency modes: also count calls in `counts` and (trace) time them
 * in `lat_stats`/`lat_hist`, so that a scrape reads exact numbers from the maps even when
 * the ring buffer drops events. */
const volatile __u32 live_metrics = 0;
/* count --all: also count each call under its process in `proc_counts`. */
const volatile __u32 per_process = 0;
/* Benchmark only (GOTAP_EBPF_CUT=nosubmit): capture every event, send none. */
const volatile __u32 bench_no_submit = 0;

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1); /* resized to the number of probe sites in trace mode */
  __type(key, __u32);
  __type(value, struct gotap_probe);
} probes SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1); /* resized to the number of functions */
  __type(key, __u32);
  __type(value, __u64);
} counts SEC(".maps");

/* count --all: calls by function and process. Not per CPU: a process's first call names it
 * (its comm) once. A call that finds the map full is in `counts` alone, and user space says
 * how many of a function's calls no process was found for. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, GOTAP_PROC_COUNTS_MAX);
  __type(key, struct gotap_proc_key);
  __type(value, struct gotap_proc_count);
} proc_counts SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1); /* resized to the number of functions */
  __type(key, __u32);
  __type(value, struct gotap_lat_stats);
} lat_stats SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1); /* resized to functions * GOTAP_NBUCKETS */
  __type(key, __u32);
  __type(value, __u64);
} lat_hist SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 65536);
  __type(key, struct gotap_call_key);
  __type(value, struct gotap_inflight);
} inflight SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, GOTAP_CNT_NUM);
  __type(key, __u32);
  __type(value, __u64);
} counters SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct gotap_event);
} scratch SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 1 << 22); /* resized by the loader */
} events SEC(".maps");

static __always_inline void bump(__u32 which) {
  __u64* c = bpf_map_lookup_elem(&counters, &which);
  if (c) *c += 1;
}

/* The registers a probe may name, indexed by gotap_reg. Loaded with constant offsets: the
 * verifier rejects ctx accesses at computed offsets. */
static __always_inline void load_regs(struct pt_regs* ctx, __u64* r) {
  r[GOTAP_RAX] = ctx->ax;
  r[GOTAP_RBX] = ctx->bx;
  r[GOTAP_RCX] = ctx->cx;
  r[GOTAP_RDI] = ctx->di;
  r[GOTAP_RSI] = ctx->si;
  r[GOTAP_R8] = ctx->r8;
  r[GOTAP_R9] = ctx->r9;
  r[GOTAP_R10] = ctx->r10;
  r[GOTAP_R11] = ctx->r11;
  r[GOTAP_RDX] = ctx->dx;
  r[GOTAP_R12] = ctx->r12;
  r[GOTAP_R13] = ctx->r13;
  r[GOTAP_R14] = ctx->r14;
  r[GOTAP_R15] = ctx->r15;
  r[GOTAP_RBP] = ctx->bp;
  r[GOTAP_RSP] = ctx->sp;
}

#include "call_limits.h"
#include "cond_vm.h"
#include "overhead.h"
#include "stack_walk.h"
#include "value_chain.h"

/* The current goroutine's g: R14 in ABIInternal code, else the TLS slot below FS base. */
static __always_inline __u64 current_g(struct pt_regs* ctx, __u8 flags, __u32 idx) {
  if (gccgo_g) {
    struct task_struct* t = bpf_get_current_task_btf();
    __u64 fs = BPF_CORE_READ(t, thread.fsbase), dtv = 0, slot = fs + tls_g_off, g = 0;
    __u64 tls[2] = {gccgo_modid, gccgo_dtpoff}; /* module id, offset in its block */
    if (!fs) return 0;
    if (gccgo_g == GOTAP_GCCGO_G_DTV_SELF) {
      /* A uprobe's handler sees the probed instruction's address in ip. */
      struct gotap_site_extra* x = bpf_map_lookup_elem(&site_extra, &idx);
      if (!x || !x->link_addr ||
          bpf_probe_read_user(tls, sizeof(tls), (void*)(ctx->ip - x->link_addr + gccgo_modid)) ||
          !tls[0])
        return 0;
    }
    if (gccgo_g >= GOTAP_GCCGO_G_DTV) {
      if (bpf_probe_read_user(&dtv, sizeof(dtv), (void*)(fs + 8)) || !dtv || tls[0] > 4096 ||
          bpf_probe_read_user(&slot, sizeof(slot), (void*)(dtv + tls[0] * 16)) || !slot)
        return 0;
      slot += tls[1];
    }
    if (bpf_probe_read_user(&g, sizeof(g), (void*)slot)) return 0;
    return g;
  }
  if (no_g) return 0;
  if (!(flags & GOTAP_PROBE_TLS_G)) return ctx->r14;
  struct task_struct* t = bpf_get_current_task_btf();
  __u64 fs = BPF_CORE_READ(t, thread.fsbase);
  __u64 g = 0;
  if (bpf_probe_read_user(&g, sizeof(g), (void*)(fs + tls_g_off))) return 0;
  return g;
}

/* In this order, each apart (a sort would undo it): each uses the one before. */
#include "why_walk.h"

#include "why_agg.h"

#include "why_kernel.h"

/* Sends the event, or with `hold` keeps it in `held` until the return decides the call's
 * condition. */
static __always_inline void emit(struct pt_regs* ctx, struct gotap_probe* p, __u32 idx,
                                 __u64 pid_tgid, __u64 goid, __u64 now, __u64 dur, __u8 kind,
                                 __u8 evflags, struct gotap_call_key* hold) {
  __u32 zero = 0;
  struct gotap_event* ev = bpf_map_lookup_elem(&scratch, &zero);
  if (!ev) return;
  ev->ts_ns = now;
  ev->goid = goid;
  ev->duration_ns = dur;
  ev->pid = pid_tgid >> 32;
  ev->tid = (__u32)pid_tgid;
  ev->probe = idx;
  ev->func_id = p->func_id;
  ev->kind = kind;
  ev->flags = evflags;
  ev->cap_ok = 0;
  __u32 nwords = p->nwords;
  if (nwords > GOTAP_MAX_WORDS) nwords = GOTAP_MAX_WORDS;
  ev->nwords = nwords;
  __u64 regs[16];
  load_regs(ctx, regs);
  __u64 sp = regs[GOTAP_RSP];
  for (__u32 i = 0; i < GOTAP_MAX_WORDS; i++) {
    if (i >= nwords) break;
    struct gotap_word* w = &p->words[i];
    __u64 v = 0;
    if (w->src == GOTAP_SRC_REG)
      v = regs[w->reg & 15];
    else if (w->src == GOTAP_SRC_STACK)
      bpf_probe_read_user(&v, sizeof(v), (void*)(sp + (__s64)w->off));
    else if (w->src == GOTAP_SRC_REGMEM)
      bpf_probe_read_user(&v, sizeof(v), (void*)(regs[w->reg & 15] + (__s64)w->off));
    ev->words[i] = v;
  }
  __u32 ncaps = p->ncaps;
  if (ncaps > GOTAP_MAX_CAPS) ncaps = GOTAP_MAX_CAPS;
  ev->ncaps = ncaps;
  __u32 off = 0;
  for (__u32 i = 0; i < GOTAP_MAX_CAPS; i++) {
    if (i >= ncaps) break;
    struct gotap_cap* c = &p->caps[i];
    ev->cap_len[i] = 0;
    __u32 wi = c->word;
    if (wi >= GOTAP_MAX_WORDS) continue;
    __u64 ptr = ev->words[wi];
    __u64 want = c->max;
    if (c->kind == GOTAP_CAP_CHAIN) {
      __u32 di = c->aux;
      if (di >= GOTAP_MAX_WORDS || off >= GOTAP_DATA_MAX) continue;
      __u32 start = off;
      off = copy_chain(off, ptr, ev->words[di], c->off, c->max);
      if (off > GOTAP_DATA_MAX) off = GOTAP_DATA_MAX;
      if (off > start) {
        ev->cap_len[i] = off - start;
        ev->cap_ok |= 1 << i;
      }
      continue;
    } else if (c->kind == GOTAP_CAP_STRING) {
      __u32 li = c->aux;
      if (li >= GOTAP_MAX_WORDS) continue;
      __u64 len = ev->words[li];
      if (len < want) want = len;
    } else if (c->kind == GOTAP_CAP_ITAB) {
      ptr += 8;
      want = 8;
    } else if (ptr) {
      ptr += c->off;
    }
    if (off >= GOTAP_DATA_MAX) break;
    __u64 room = GOTAP_DATA_MAX - off;
    if (want > room) want = room;
    if (want == 0 || ptr == 0) continue;
    /* Keep clang from dropping the masks: they are what bounds the access for the verifier. */
    asm volatile("" : "+r"(off), "+r"(want));
    off &= GOTAP_DATA_MAX - 1;
    want &= GOTAP_DATA_MAX - 1;
    if (want == 0) continue;
    if (bpf_probe_read_user(&ev->data[off], want, (void*)ptr) == 0) {
      ev->cap_len[i] = want;
      ev->cap_ok |= 1 << i;
      off += want;
    }
  }
  ev->data_len = off;
  ev->nstack = walk_stack(ctx, idx, ev, off);
  if (why_walk && ev->func_id == GOTAP_FUNC_GSTATUS) ev->nstack = why_stack(ctx, ev, off);
  if (hold) {
    if (bpf_map_update_elem(&held, hold, ev, BPF_ANY)) bump(GOTAP_CNT_HELD_FULL);
    return;
  }
  __u64 size = offsetof(struct gotap_event, data) + (off & (2 * GOTAP_DATA_MAX - 1)) +
               ev->nstack * sizeof(__u64);
  if (size > sizeof(*ev)) size = sizeof(*ev);
  if (bench_no_submit) return;
  /* Waking the reader per event costs more than the probe itself; user space polls every
   * few milliseconds anyway, so wake it only when the buffer fills up. */
  __u64 avail = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
  __u64 wake = avail > wake_bytes ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
  if (bpf_ringbuf_output(&events, ev, size, wake)) bump(GOTAP_CNT_LOST);
}

/* The held entry of a call whose condition held at its return: sent now, before the return. */
static __always_inline void release_held(struct gotap_call_key* key) {
  struct gotap_event* ev = bpf_map_lookup_elem(&held, key);
  if (!ev) return;
  __u64 size = offsetof(struct gotap_event, data) + (ev->data_len & (2 * GOTAP_DATA_MAX - 1)) +
               (ev->nstack & 127) * sizeof(__u64);
  if (size > sizeof(*ev)) size = sizeof(*ev);
  __u64 avail = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
  __u64 wake = avail > wake_bytes ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
  if (bpf_ringbuf_output(&events, ev, size, wake)) bump(GOTAP_CNT_LOST);
  bpf_map_delete_elem(&held, key);
}

static __always_inline void record_latency(__u32 func, __u64 dur) {
  struct gotap_lat_stats* s = bpf_map_lookup_elem(&lat_stats, &func);
  if (s) {
    if (s->count == 0 || dur < s->min_ns) s->min_ns = dur;
    if (dur > s->max_ns) s->max_ns = dur;
    s->count += 1;
    s->sum_ns += dur;
  }
  __u32 b = func * GOTAP_NBUCKETS + gotap_bucket(dur);
  __u64* h = bpf_map_lookup_elem(&lat_hist, &b);
  if (h) __sync_fetch_and_add(h, 1);
}

/* A call counted in count mode: `counts` (per CPU, exact), and with --all its process's entry
 * of `proc_counts`. `delta` is 1, or -1 (as a u64) for an UNCOUNT site: sums stay exact. */
static __always_inline void count_call(__u32 func, __u64 pid_tgid, __u64 delta) {
  __u64* c = bpf_map_lookup_elem(&counts, &func);
  if (c) *c += delta;
  if (!per_process) return;
  struct gotap_proc_key k = {func, (__u32)(pid_tgid >> 32)};
  struct gotap_proc_count* pc = bpf_map_lookup_elem(&proc_counts, &k);
  if (!pc) {
    struct gotap_proc_count fresh = {};
    bpf_get_current_comm(fresh.comm, sizeof(fresh.comm));
    /* Another CPU may have made it meanwhile: then this finds it below. */
    bpf_map_update_elem(&proc_counts, &k, &fresh, BPF_NOEXIST);
    pc = bpf_map_lookup_elem(&proc_counts, &k);
    if (!pc) return;
  }
  __sync_fetch_and_add(&pc->count, delta);
}

/* One site's work: the site, its flags and function are the cookie's; `at` is the hit's time
 * when the caller read it (0: read it here). A subprogram, so that a GOTAP_PROBE_ALSO_ENTRY hit
 * runs it twice without a second copy of it in the program. */
static __noinline int probe_hit(struct pt_regs* ctx, __u64 cookie, __u64 at) {
  __u64 pid_tgid = bpf_get_current_pid_tgid();
  if (target_tgid && (pid_tgid >> 32) != target_tgid) return 0;
  __u32 idx = gotap_cookie_site(cookie);
  __u32 func = gotap_cookie_func(cookie);
  __u8 flags = gotap_cookie_flags(cookie);
  /* Only trace's events read the site's record (its words and copies); the other modes have
   * no records (the verifier drops this with the mode's constant). */
  struct gotap_probe* p = 0;
  if (mode == GOTAP_MODE_TRACE) {
    p = bpf_map_lookup_elem(&probes, &idx);
    if (!p) return 0;
  }
  int is_ret = flags & GOTAP_PROBE_RET;
  /* --if: the function's compiled condition (goroutine probes' ids are past the map's end). */
  struct gotap_cond* cp = 0;
  if (has_cond) {
    cp = bpf_map_lookup_elem(&conds, &func);
    if (cp && !(cp->flags & GOTAP_COND_ON)) cp = 0;
  }
  int cond_at_ret = cp && (cp->flags & GOTAP_COND_AT_RET);

  /* count mode probes such a RET for the error alone (with a condition it is tracked, and the
   * failure is counted below, once the call is known to be selected) */
  if ((flags & GOTAP_PROBE_ERRCHECK) && mode == GOTAP_MODE_COUNT && !(flags & GOTAP_PROBE_TRACK)) {
    count_error(ctx, idx);
    return 0;
  }

  /* The common count case needs no goroutine state at all. */
  if (mode == GOTAP_MODE_COUNT && !(flags & GOTAP_PROBE_TRACK)) {
    if (cp) {
      struct gotap_cond_io io = {};
      io.func = func;
      if (cp->flags & GOTAP_COND_NEEDS_GOID) {
        __u64 cg = current_g(ctx, flags, idx);
        if (!cg || bpf_probe_read_user(&io.goid, sizeof(io.goid), (void*)(cg + g_goid_off)))
          io.goid = 0;
      }
      if (!cond_run(ctx, cp, &io)) return 0;
    }
    /* Per-CPU counters may wrap below zero; their sum is still exact. */
    count_call(func, pid_tgid, (flags & GOTAP_PROBE_UNCOUNT) ? (__u64)-1 : 1);
    return 0;
  }

  __u64 status_goid = 0; /* casgstatus's gp's, once why_status read it */
  if (why_kernel && func == GOTAP_FUNC_GSTATUS && !why_status(ctx, (__u32)pid_tgid, &status_goid) &&
      why_only)
    return 0;
  /* latency --why: the goroutine probes feed the sums in the kernel (why_agg.h), and no more. */
  if (why_agg && func >= GOTAP_FUNC_GSTATUS) {
    why_agg_status(ctx, func, at ? at : bpf_ktime_get_ns(), flags, status_goid);
    return 0;
  }
  __u64 now = at ? at : bpf_ktime_get_ns();
  __u64 g = current_g(ctx, flags, idx);
  __u64 goid = 0, hi = 0;
  if (gccgo_g) {
    /* libgo's g has no stack bounds: the key's frame is -RSP, as without a g. */
    if (!g || bpf_probe_read_user(&goid, sizeof(goid), (void*)(g + g_goid_off))) {
      bump(GOTAP_CNT_READ_ERR);
      goid = 0;
    }
  } else if (!no_g && (!g || bpf_probe_read_user(&goid, sizeof(goid), (void*)(g + g_goid_off)) ||
                       bpf_probe_read_user(&hi, sizeof(hi), (void*)(g + g_stack_hi_off)))) {
    bump(GOTAP_CNT_READ_ERR);
    goid = 0;
    hi = 0;
  }
  struct gotap_call_key key = {};
  key.goid = goid;
  key.frame = hi - ctx->sp;
  key.func_id = func;

  if (flags & GOTAP_PROBE_INLINE) {
    /* Go 1.26+'s system-call path, of the goroutine running here (why_only: see above). */
    if (why_only && (func == GOTAP_FUNC_GSYSENTER || func == GOTAP_FUNC_GSYSEXIT) &&
        !bpf_map_lookup_elem(&why_goids, &goid))
      return 0;
    if (live_metrics) {
      /* Goroutine probes' func ids are past the map's end: the lookup fails for them. */
      __u64* c = bpf_map_lookup_elem(&counts, &func);
      if (c) *c += 1;
    }
    if (mode == GOTAP_MODE_TRACE && rate_allows(func, now))
      emit(ctx, p, idx, pid_tgid, goid, now, 0, GOTAP_EV_ENTRY, 0, 0);
    return 0;
  }

  if (!is_ret) {
    if (flags & GOTAP_PROBE_DEDUPE) {
      if (bpf_map_lookup_elem(&inflight, &key)) {
        bump(GOTAP_CNT_REFIRE);
        return 0;
      }
    }
    struct gotap_inflight in = {now, (__u32)(pid_tgid >> 32), (__u32)pid_tgid, 0};
    if (cp) {
      struct gotap_cond_io io = {};
      io.func = func;
      io.goid = goid;
      int ok = cond_run(ctx, cp, &io);
      in.cond_bits = io.bits;
      in.cond_vals[0] = io.vals[0];
      in.cond_vals[1] = io.vals[1];
      if (!ok) {
        /* Rejected: the frame is remembered (ts 0) only so that its return stays silent and
         * a refire after morestack is recognised. */
        in.ts = 0;
        if (bpf_map_update_elem(&inflight, &key, &in, BPF_ANY)) bump(GOTAP_CNT_INFLIGHT_FULL);
        return 0;
      }
    }
    if ((mode == GOTAP_MODE_COUNT || live_metrics) && !cond_at_ret) count_call(func, pid_tgid, 1);
    /* A call whose condition is decided at the return takes its --rate token there. */
    int report = mode == GOTAP_MODE_TRACE && (cond_at_ret || rate_allows(func, now));
    if (mode == GOTAP_MODE_TRACE && !report) in.flags = GOTAP_INFLIGHT_DROPPED;
    if (bpf_map_update_elem(&inflight, &key, &in, BPF_ANY)) bump(GOTAP_CNT_INFLIGHT_FULL);
    if (why_kernel && goid) why_call_entry((__u32)pid_tgid, goid);
    if (why_agg && goid) why_agg_entry(&key, goid, now);
    if (report)
      emit(ctx, p, idx, pid_tgid, goid, now, 0, GOTAP_EV_ENTRY, 0, cond_at_ret ? &key : 0);
    return 0;
  }

  struct gotap_inflight* start = bpf_map_lookup_elem(&inflight, &key);
  __u64 dur = 0;
  __u8 evflags = 0;
  int dropped = 0;
  if (start) {
    __u64 ts = start->ts;
    __u64 bits = start->cond_bits;
    __u64 vals[GOTAP_COND_VALS] = {start->cond_vals[0], start->cond_vals[1]};
    dropped = start->flags & GOTAP_INFLIGHT_DROPPED;
    bpf_map_delete_elem(&inflight, &key);
    if (ts == 0) return 0; /* rejected at the entry */
    if (why_kernel) why_call_return((__u32)pid_tgid, goid);
    dur = now - ts;
    if (cond_at_ret) {
      struct gotap_cond_io io = {};
      io.func = func;
      io.goid = goid;
      io.dur = dur;
      io.bits = bits;
      io.vals[0] = vals[0];
      io.vals[1] = vals[1];
      io.at_ret = 1;
      if (!cond_run(ctx, cp, &io)) {
        if (mode == GOTAP_MODE_TRACE) bpf_map_delete_elem(&held, &key);
        if (why_agg) why_agg_return(&key, goid, now, dur, 0);
        return 0;
      }
      if (mode == GOTAP_MODE_COUNT || live_metrics) count_call(func, pid_tgid, 1);
      if (mode == GOTAP_MODE_TRACE) {
        if (rate_allows(func, now)) {
          release_held(&key);
        } else {
          bpf_map_delete_elem(&held, &key);
          dropped = 1;
        }
      }
    }
  } else if (cp) {
    /* No entry seen: the condition cannot be decided, so the call is not reported. */
    bump(GOTAP_CNT_UNMATCHED_RET);
    return 0;
  } else {
    bump(GOTAP_CNT_UNMATCHED_RET);
    evflags = GOTAP_EVF_UNMATCHED;
    /* A return alone is a call reported too: it takes a token of its own. */
    dropped = mode == GOTAP_MODE_TRACE && !rate_allows(func, now);
  }
  if (flags & GOTAP_PROBE_ERRCHECK) count_error(ctx, idx);
  if (mode == GOTAP_MODE_LATENCY || live_metrics) {
    if (start) record_latency(func, dur);
  }
  if (why_agg && start) why_agg_return(&key, goid, now, dur, 1);
  if (mode == GOTAP_MODE_TRACE && !dropped) {
    emit(ctx, p, idx, pid_tgid, goid, now, dur, GOTAP_EV_RETURN, evflags, 0);
  }
  return 0;
}

SEC("uprobe")
int gotap_probe(struct pt_regs* ctx) {
  /* --max-overhead: only the traced process's hits are its cost (the filter is in probe_hit,
   * so another process's hit costs the site a few ns more, never a hit). */
  __u64 t0 = 0;
  if (measure_cost) {
    if (site_is_off(ctx)) return 0;
    t0 = bpf_ktime_get_ns();
  }
  __u64 cookie = bpf_get_attach_cookie(ctx);
  /* A function whose body is one RET: its entry, then its return, from one uprobe and at one
   * time (the call took the RET's few ns; the program's own time between them is not the
   * call's). */
  __u64 at = 0;
  if (gotap_cookie_flags(cookie) & GOTAP_PROBE_ALSO_ENTRY) {
    at = bpf_ktime_get_ns();
    probe_hit(ctx, gotap_folded_entry(cookie), at);
  }
  probe_hit(ctx, cookie, at);
  if (measure_cost && (!target_tgid || (bpf_get_current_pid_tgid() >> 32) == target_tgid))
    add_site_cost(ctx, t0);
  return 0;
}

/* An empty program at the same sites: the baseline for measuring probe cost. */
SEC("uprobe")
int gotap_empty(struct pt_regs* ctx) {
  return 0;
}

/* -p: the attached process's wait status, as its parent's waitpid would see it: gotap is not
 * its parent and cannot wait for it (nor can a pidfd: waitid(P_PIDFD) is a parent's too), and
 * /proc/PID/stat's exit code is readable only until the zombie is reaped. Taken when its last
 * thread exits (the group is dead), as the kernel's wait_task_zombie computes it: the group's
 * code after exit_group or a fatal signal, else the main thread's own. */
#define GOTAP_SIGNAL_GROUP_EXIT 0x00000004 /* include/linux/sched/signal.h */
__u32 target_exit_seen = 0;
__u32 target_exit_status = 0;

SEC("tp_btf/sched_process_exit")
int BPF_PROG(gotap_exit, struct task_struct* task) {
  if (!target_tgid || (__u32)task->tgid != target_tgid) return 0;
  why_thread_exit((__u32)task->pid);
  struct signal_struct* sig = task->signal;
  if (sig->live.counter != 0) return 0;
  target_exit_status = (sig->flags & GOTAP_SIGNAL_GROUP_EXIT)
                           ? (__u32)sig->group_exit_code
                           : (__u32)task->group_leader->exit_code;
  target_exit_seen = 1;
  return 0;
}

/* The target replaced itself (exec): its probes went with the old image, unless the new one is
 * the same file, where the inode's uprobes would go on firing in a program that has started
 * over. The trace ends there on both backends (ended_by "exec"), as ptrace's must. */
__u32 target_exec_seen = 0;

SEC("tp_btf/sched_process_exec")
int BPF_PROG(gotap_exec, struct task_struct* p, pid_t old_pid, struct linux_binprm* bprm) {
  if (!target_tgid || (__u32)p->tgid != target_tgid) return 0;
  target_exec_seen = 1;
  return 0;
}
