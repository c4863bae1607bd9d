/* latency --why on eBPF (issue 37): each traced call's time split into running, preempted,
 * runnable, system calls (by number) and waits (by reason, where the goroutine parked and who
 * woke it), added up in the kernel per function and latency bucket. No event crosses the ring
 * buffer, per call or per status change; user space reads the sums at the end
 * (backends/ebpf/why_sums.h) and takes the slowest 1% of the calls from the top buckets.
 *
 * The same rules as user space's (core/why/why_tracker.cpp), kept per goroutine with a traced
 * call open (why_gs): the time in each part so far (cum), which a call's entry copies
 * (why_frames, keyed as `inflight`) and its return subtracts, so that nested calls each get
 * their own split. Waits and system calls are added, by name, to a table of each open call
 * of the goroutine (the outermost GOTAP_WHY_DEPTH of them, with room for GOTAP_WHY_NAMES
 * waits and GOTAP_WHY_SYSCALLS system calls),
 * read at its return. A name that finds no room loses its name, not its time (it stays in
 * waiting_ns and syscall_ns): counted in GOTAP_CNT_WHY_LOST. A call whose split finds no
 * room at all (65,536 goroutines or calls open at once) is left out of the sums, counted in
 * GOTAP_CNT_WHY_CALLS_LOST.
 * Included by gotap.bpf.c after why_walk.h and before why_kernel.h. */
#ifndef GOTAP_WHY_AGG_H
#define GOTAP_WHY_AGG_H

/* Set by the loader for latency --why. */
const volatile __u32 why_agg = 0;
const volatile __u32 g_waitreason_off = 0; /* 0: not known, waits have no reason */
/* Before Go 1.20 only park_m sets g.waitreason before the change to waiting
 * (core/events/goroutine_events.h): a value read at another caller's change is stale. */
const volatile __u32 why_reason_park_only = 0;
/* Written after the load, once the process's load bias is known: park_m's text, and how many
 * entries of why_ranges hold the text of functions outside the runtime, sync and internal/. */
__u64 why_park_lo = 0, why_park_hi = 0;
__u32 why_nranges = 0;
/* Set when --max-overhead takes the goroutine probes away: the calls that return after that
 * are left out (their splits would miss the changes since). */
__u32 why_stopped = 0;

#define GOTAP_WHY_DEPTH 4 /* open calls of a goroutine with names: a power of two */
#define GOTAP_WHY_NAMES 8 /* waits by name per call: a power of two */
#define GOTAP_WHY_SYSCALLS                                                                     \
  16                             /* system calls by name per call (a file's open, read, fstat, \
                                  * fcntl, close... are 8 alone): a power of two */
#define GOTAP_WHY_RANGE_STEPS 15 /* a binary search of GOTAP_WHY_RANGES entries */

/* A goroutine's time so far, by part; the kernel's share inside Go's parts apart, as the
 * tracker keeps it (preempted while running or in a system call, and system calls Go does not
 * wrap, inside its running time). */
enum { WC_RUN, WC_RUNNABLE, WC_SYS, WC_WAIT, WC_PRE, WC_PRE_RUN, WC_PRE_SYS, WC_SYS_RUN, WC_N };
/* The part a status is in (why_tracker.cpp, part_of). */
enum { WP_RUN = 0, WP_RUNNABLE = 1, WP_SYS = 2, WP_WAIT = 3, WP_OTHER = 4 };

struct why_wait_rec {
  __u64 parked_pc, waker_pc, ns, count;
  __u32 reason, waker;
};
struct why_sys_rec {
  __u64 nr, ns, count;
};
/* One open call's waits and system calls by name (the first nw and ns records). */
struct why_names {
  struct why_wait_rec w[GOTAP_WHY_NAMES];
  struct why_sys_rec s[GOTAP_WHY_SYSCALLS];
  __u32 nw, ns;
};
struct why_g {
  __u64 since; /* in `part` since */
  __u64 cum[WC_N];
  __u64 parked_pc; /* while waiting */
  __u32 depth, part, reason, pad;
  struct why_names calls[GOTAP_WHY_DEPTH]; /* by depth, outermost first */
};
struct why_frame {
  __u64 cum[WC_N];
  __u32 depth, pad;
};

/* Entries are made as goroutines enter traced calls (no preallocation: a why_g is 3 KiB),
 * and go at their last return or their end. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __uint(max_entries, 65536);
  __type(key, __u64); /* goid */
  __type(value, struct why_g);
} why_gs SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH); /* as inflight: a call that never returns goes */
  __uint(max_entries, 65536);
  __type(key, struct gotap_call_key);
  __type(value, struct why_frame);
} why_frames SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __uint(max_entries, 65536);
  __type(key, struct gotap_why_key);
  __type(value, struct gotap_why_parts);
} why_parts SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __uint(max_entries, 65536);
  __type(key, struct gotap_why_wait_key);
  __type(value, struct gotap_why_sum);
} why_waits SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __uint(max_entries, 65536);
  __type(key, struct gotap_why_sys_key);
  __type(value, struct gotap_why_sum);
} why_sys SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, GOTAP_WHY_RANGES);
  __type(key, __u32);
  __type(value, struct gotap_why_range);
} why_ranges SEC(".maps");

/* A zeroed value to make entries from (too large for the BPF stack): never written. */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct why_g);
} why_zero SEC(".maps");

/* map's value at key, made from `zero` when there is none (NULL: no room). */
static __always_inline void* why_lookup_or_make(void* map, const void* key, const void* zero) {
  void* v = bpf_map_lookup_elem(map, key);
  if (v) return v;
  bpf_map_update_elem(map, key, zero, BPF_NOEXIST);
  return bpf_map_lookup_elem(map, key);
}

static __always_inline __u32 why_part_of(__u32 status) {
  if (status == 2 || status == 8) return WP_RUN;      /* running, copystack */
  if (status == 1 || status == 9) return WP_RUNNABLE; /* runnable, preempted */
  if (status == 3) return WP_SYS;
  if (status == 4 || status == 10) return WP_WAIT; /* waiting, leaked */
  return WP_OTHER;
}

/* The stretch since the last change, to the part it was in. */
static __always_inline void why_credit(struct why_g* g, __u64 now) {
  if (now <= g->since) return;
  __u64 d = now - g->since;
  g->since = now;
  if (g->part == WP_RUN)
    g->cum[WC_RUN] += d;
  else if (g->part == WP_RUNNABLE)
    g->cum[WC_RUNNABLE] += d;
  else if (g->part == WP_SYS)
    g->cum[WC_SYS] += d;
  else if (g->part == WP_WAIT)
    g->cum[WC_WAIT] += d;
}

/* Whether pc is in a function outside the runtime, sync and internal/: the last range that
 * starts at or before it holds it. A binary search in bpf_loop's callback, which the verifier
 * checks once (unrolled, its branches would be checked path by path). */
struct why_search {
  __u64 pc;
  __u32 lo, hi;
};

static long why_search_step(__u32 i, void* arg) {
  struct why_search* s = arg;
  if (s->lo >= s->hi) return 1;
  __u32 mid = s->lo + (s->hi - s->lo) / 2;
  struct gotap_why_range* r = bpf_map_lookup_elem(&why_ranges, &mid);
  if (!r) {
    s->lo = 0; /* not kept */
    return 1;
  }
  if (r->lo <= s->pc)
    s->lo = mid + 1;
  else
    s->hi = mid;
  return 0;
}

static __always_inline int why_keeps(__u64 pc) {
  struct why_search s = {pc, 0, why_nranges};
  if (s.hi > GOTAP_WHY_RANGES) s.hi = GOTAP_WHY_RANGES;
  bpf_loop(GOTAP_WHY_RANGE_STEPS, why_search_step, &s, 0);
  if (s.lo == 0) return 0;
  __u32 k = s.lo - 1;
  struct gotap_why_range* r = bpf_map_lookup_elem(&why_ranges, &k);
  return r && pc < r->hi;
}

/* The innermost frame outside the runtime, sync and internal/ of a stack starting at pc (a
 * return address, or a saved pc + 1) with frame pointer fp: the same 16 frames as
 * why_walk.h's, the same choice as first_user_frame. 0: none. */
static __noinline __u64 why_pick(__u64 pc, __u64 fp) {
  for (int i = 0; i < GOTAP_WHY_FRAMES; i++) {
    if (pc && why_keeps(pc - 1)) return pc;
    if (!fp || (fp & 7)) return 0;
    __u64 rec[2]; /* {saved frame pointer, return address} */
    if (bpf_probe_read_user(rec, sizeof(rec), (void*)fp) || rec[1] == 0) return 0;
    pc = rec[1];
    fp = rec[0] > fp ? rec[0] : 0; /* frames go up the stack: this one is the last */
  }
  return 0;
}

/* A wait that ended, to each open call's names. */
static __always_inline void why_name_wait(struct why_g* g, __u32 reason, __u32 waker, __u64 parked,
                                          __u64 waker_pc, __u64 ns) {
  if (g->depth > GOTAP_WHY_DEPTH) bump(GOTAP_CNT_WHY_LOST); /* the calls deeper than those */
  for (int d = 0; d < GOTAP_WHY_DEPTH; d++) {
    if (d >= g->depth) break;
    struct why_names* t = &g->calls[d];
    __u32 n = t->nw, i = 0;
    for (; i < GOTAP_WHY_NAMES; i++) {
      if (i >= n) break;
      struct why_wait_rec* r = &t->w[i];
      if (r->reason == reason && r->waker == waker && r->parked_pc == parked &&
          r->waker_pc == waker_pc) {
        r->ns += ns;
        r->count += 1;
        break;
      }
    }
    if (i < n) continue;
    if (n >= GOTAP_WHY_NAMES) {
      bump(GOTAP_CNT_WHY_LOST);
      continue;
    }
    struct why_wait_rec* r = &t->w[n & (GOTAP_WHY_NAMES - 1)];
    r->parked_pc = parked;
    r->waker_pc = waker_pc;
    r->reason = reason;
    r->waker = waker;
    r->ns = ns;
    r->count = 1;
    t->nw = n + 1;
  }
}

/* A system call that returned, to each open call's names. */
static __always_inline void why_name_sys(struct why_g* g, __u64 nr, __u64 ns) {
  if (g->depth > GOTAP_WHY_DEPTH) bump(GOTAP_CNT_WHY_LOST);
  for (int d = 0; d < GOTAP_WHY_DEPTH; d++) {
    if (d >= g->depth) break;
    struct why_names* t = &g->calls[d];
    __u32 n = t->ns, i = 0;
    for (; i < GOTAP_WHY_SYSCALLS; i++) {
      if (i >= n) break;
      struct why_sys_rec* r = &t->s[i];
      if (r->nr == nr) {
        r->ns += ns;
        r->count += 1;
        break;
      }
    }
    if (i < n) continue;
    if (n >= GOTAP_WHY_SYSCALLS) {
      bump(GOTAP_CNT_WHY_LOST);
      continue;
    }
    struct why_sys_rec* r = &t->s[n & (GOTAP_WHY_SYSCALLS - 1)];
    r->nr = nr;
    r->ns = ns;
    r->count = 1;
    t->ns = n + 1;
  }
}

/* Who ends goid's wait at a change from waiting to runnable: the goroutine the waking thread
 * runs (m.curg of the g in R14: casgstatus is ABIInternal) and its innermost frame outside
 * the runtime, from the registers when the thread runs it, else from its saved state
 * (why_walk.h reads the same). */
static __always_inline __u32 why_waker(struct pt_regs* ctx, __u64 goid, __u64* pc_out) {
  __u64 cur = ctx->r14, m = 0, curg = 0, wgoid = 0, pc = 0, fp = 0;
  if (!cur || bpf_probe_read_user(&m, sizeof(m), (void*)(cur + g_m_off)) || !m ||
      bpf_probe_read_user(&curg, sizeof(curg), (void*)(m + m_curg_off)))
    return GOTAP_WAKER_UNKNOWN;
  if (!curg) return GOTAP_WAKER_SCHEDULER; /* its network poll, or a timer */
  if (bpf_probe_read_user(&wgoid, sizeof(wgoid), (void*)(curg + g_goid_off)) || wgoid == goid)
    return GOTAP_WAKER_UNKNOWN;
  if (curg == cur) {
    bpf_probe_read_user(&pc, sizeof(pc), (void*)(ctx->sp + gstatus_ret_off));
    fp = ctx->bp;
  } else if (bpf_probe_read_user(&pc, sizeof(pc), (void*)(curg + g_sched_pc_off)) ||
             bpf_probe_read_user(&fp, sizeof(fp), (void*)(curg + g_sched_bp_off))) {
    pc = 0;
  } else {
    pc += 1; /* a saved pc, not a return address */
  }
  *pc_out = pc ? why_pick(pc, fp) : 0;
  return GOTAP_WAKER_GOROUTINE;
}

/* A status change (runtime.casgstatus, or Go 1.26's entersyscall and exitsyscall for the g in
 * R14): of a goroutine inside a traced call, the stretch in its old part is credited, and a
 * wait that ends is logged with its waker; one that begins reads where it parked and why.
 * goid: the changing goroutine's when the caller read it already, else 0. */
__noinline int why_agg_status(struct pt_regs* ctx, __u32 func, __u64 now, __u8 flags, __u64 goid) {
  __u64 gp = 0;
  __u32 from = 0, to = 0;
  if (func == GOTAP_FUNC_GSTATUS) {
    gp = ctx->ax;
    from = (__u32)ctx->bx;
    to = (__u32)ctx->cx;
  } else if (func == GOTAP_FUNC_GSYSENTER || func == GOTAP_FUNC_GSYSEXIT) {
    gp = current_g(ctx, flags, 0);
    from = func == GOTAP_FUNC_GSYSENTER ? 2 : 3;
    to = func == GOTAP_FUNC_GSYSENTER ? 3 : 2;
  } else {
    return 0;
  }
  /* goid: casgstatus's gp's as why_status read it (0: not read yet) */
  if (!goid && (!gp || bpf_probe_read_user(&goid, sizeof(goid), (void*)(gp + g_goid_off))))
    return 0;
  struct why_g* g = bpf_map_lookup_elem(&why_gs, &goid);
  if (!g) return 0;
  if (to == 6) { /* dead: its open calls never return */
    bpf_map_delete_elem(&why_gs, &goid);
    return 0;
  }
  __u32 part = why_part_of(to);
  if (g->part == WP_WAIT && part != WP_WAIT) {
    __u64 waker_pc = 0;
    __u32 waker = from == 4 && to == 1 ? why_waker(ctx, goid, &waker_pc) : GOTAP_WAKER_UNKNOWN;
    __u64 ns = now > g->since ? now - g->since : 0;
    why_credit(g, now);
    why_name_wait(g, g->reason, waker, g->parked_pc, waker_pc, ns);
  } else {
    why_credit(g, now);
  }
  g->part = part;
  if (part != WP_WAIT) return 0;
  __u32 reason = GOTAP_WHY_NO_REASON;
  __u8 r = 0;
  if (g_waitreason_off && !bpf_probe_read_user(&r, sizeof(r), (void*)(gp + g_waitreason_off)))
    reason = r;
  if (why_reason_park_only) {
    __u64 ret = 0;
    bpf_probe_read_user(&ret, sizeof(ret), (void*)(ctx->sp + gstatus_ret_off));
    if (!ret || ret - 1 < why_park_lo || ret - 1 >= why_park_hi) reason = GOTAP_WHY_NO_REASON;
  }
  g->reason = reason;
  __u64 pc = 0, fp = 0;
  g->parked_pc = 0;
  /* mcall saved its pc and frame pointer in gp.sched on the way here */
  if (!bpf_probe_read_user(&pc, sizeof(pc), (void*)(gp + g_sched_pc_off)) &&
      !bpf_probe_read_user(&fp, sizeof(fp), (void*)(gp + g_sched_bp_off)) && pc)
    g->parked_pc = why_pick(pc + 1, fp);
  return 0;
}

/* A traced call's entry (its inflight key) on goid, the goroutine running. */
__noinline int why_agg_entry(struct gotap_call_key* key, __u64 goid, __u64 now) {
  if (!key) return 0;
  __u32 zero = 0;
  struct why_g* z = bpf_map_lookup_elem(&why_zero, &zero);
  if (!z) return 0;
  struct why_g* g = why_lookup_or_make(&why_gs, &goid, z);
  if (!g) {
    bump(GOTAP_CNT_WHY_CALLS_LOST);
    return 0;
  }
  if (g->depth == 0) {
    /* Its status before is none of this call's business: from here it runs. */
    g->part = WP_RUN;
    g->since = now;
  }
  why_credit(g, now);
  /* why_frame is smaller than why_g: the zeroed value serves both */
  if (bpf_map_update_elem(&why_frames, key, z, BPF_ANY)) {
    bump(GOTAP_CNT_WHY_CALLS_LOST);
    return 0;
  }
  struct why_frame* f = bpf_map_lookup_elem(&why_frames, key);
  if (!f) return 0;
  for (int i = 0; i < WC_N; i++) f->cum[i] = g->cum[i];
  __u32 d = g->depth;
  f->depth = d;
  if (d < GOTAP_WHY_DEPTH) {
    struct why_names* t = &g->calls[d & (GOTAP_WHY_DEPTH - 1)];
    t->nw = 0;
    t->ns = 0;
  }
  g->depth = d + 1;
  return 0;
}

static __always_inline void why_add_sum(void* map, void* key, __u64 ns, __u64 count) {
  struct gotap_why_sum z = {};
  struct gotap_why_sum* v = why_lookup_or_make(map, key, &z);
  if (!v) {
    bump(GOTAP_CNT_WHY_LOST);
    return;
  }
  __sync_fetch_and_add(&v->ns, ns);
  __sync_fetch_and_add(&v->count, count);
}

static __always_inline __u64 why_sub(__u64 a, __u64 b) {
  return a > b ? a - b : 0;
}

/* A traced call's return, dur after its entry: its split added to its function's bucket
 * (record 0: a call its condition left out, forgotten). */
__noinline int why_agg_return(struct gotap_call_key* key, __u64 goid, __u64 now, __u64 dur,
                              int record) {
  if (!key) return 0;
  struct why_frame* f = bpf_map_lookup_elem(&why_frames, key);
  if (!f) return 0;
  struct why_g* g = bpf_map_lookup_elem(&why_gs, &goid);
  if (!g) {
    bpf_map_delete_elem(&why_frames, key);
    return 0;
  }
  why_credit(g, now);
  if (record && !why_stopped) {
    __u32 func = key->func_id, bucket = gotap_bucket(dur);
    /* The kernel's time, out of the Go parts it was credited to (why_tracker.cpp, ret). */
    __u64 run = why_sub(g->cum[WC_RUN], f->cum[WC_RUN]);
    __u64 sys = why_sub(g->cum[WC_SYS], f->cum[WC_SYS]);
    __u64 sys_run = why_sub(g->cum[WC_SYS_RUN], f->cum[WC_SYS_RUN]);
    __u64 to_sys = sys_run < run ? sys_run : run;
    run -= to_sys;
    sys += to_sys;
    run = why_sub(run, why_sub(g->cum[WC_PRE_RUN], f->cum[WC_PRE_RUN]));
    sys = why_sub(sys, why_sub(g->cum[WC_PRE_SYS], f->cum[WC_PRE_SYS]));
    struct gotap_why_key k = {func, bucket};
    struct gotap_why_parts z = {};
    struct gotap_why_parts* p = why_lookup_or_make(&why_parts, &k, &z);
    if (p) {
      __sync_fetch_and_add(&p->calls, 1);
      __sync_fetch_and_add(&p->running_ns, run);
      __sync_fetch_and_add(&p->preempted_ns, why_sub(g->cum[WC_PRE], f->cum[WC_PRE]));
      __sync_fetch_and_add(&p->runnable_ns, why_sub(g->cum[WC_RUNNABLE], f->cum[WC_RUNNABLE]));
      __sync_fetch_and_add(&p->syscall_ns, sys);
      __sync_fetch_and_add(&p->waiting_ns, why_sub(g->cum[WC_WAIT], f->cum[WC_WAIT]));
    } else {
      bump(GOTAP_CNT_WHY_CALLS_LOST);
    }
    __u32 d = f->depth;
    if (d < GOTAP_WHY_DEPTH) {
      struct why_names* t = &g->calls[d & (GOTAP_WHY_DEPTH - 1)];
      for (int i = 0; i < GOTAP_WHY_NAMES; i++) {
        if (i >= t->nw) break;
        struct why_wait_rec* r = &t->w[i];
        struct gotap_why_wait_key wk = {func,     bucket,       r->reason,
                                        r->waker, r->parked_pc, r->waker_pc};
        why_add_sum(&why_waits, &wk, r->ns, r->count);
      }
      for (int i = 0; i < GOTAP_WHY_SYSCALLS; i++) {
        if (i >= t->ns) break;
        struct why_sys_rec* r = &t->s[i];
        struct gotap_why_sys_key sk = {func, bucket, r->nr};
        why_add_sum(&why_sys, &sk, r->ns, r->count);
      }
    }
  }
  /* and the calls above it, which a panic unwound */
  g->depth = f->depth;
  bpf_map_delete_elem(&why_frames, key);
  if (g->depth == 0) bpf_map_delete_elem(&why_gs, &goid);
  return 0;
}

/* The kernel's side (why_kernel.h's tracepoints): goid's thread off the CPU outside a system
 * call (nr < 0), or in system call nr, over [from, to). Only a goroutine on its thread can be
 * preempted there (why_tracker.cpp, preempted). */
static __always_inline void why_agg_kernel(__u64 goid, __u64 from, __u64 to, __s64 nr) {
  struct why_g* g = bpf_map_lookup_elem(&why_gs, &goid);
  if (!g || (g->part != WP_RUN && g->part != WP_SYS)) return;
  __u64 d = why_sub(to, from);
  if (nr < 0) {
    g->cum[WC_PRE] += d;
    if (g->part == WP_SYS)
      g->cum[WC_PRE_SYS] += d;
    else
      g->cum[WC_PRE_RUN] += d;
    return;
  }
  /* One Go does not wrap (RawSyscall, the runtime's own) is running time to Go. */
  if (g->part == WP_RUN) g->cum[WC_SYS_RUN] += d;
  why_name_sys(g, (__u64)nr, d);
}

#endif /* GOTAP_WHY_AGG_H */
