/* --why on eBPF, the kernel's side of a call's time (issue 37): how long the thread of a
 * goroutine inside a traced call was off the CPU while the goroutine ran (preempted_ns), and
 * its system calls by number (syscalls). The uprobes keep two maps: the goroutines with a
 * traced call open (why_goids, from the calls' entries and returns) and the threads running
 * one of them now (why_threads, from runtime.casgstatus: a goroutine runs on the thread that
 * set it running until it leaves running, a system call included). The scheduler and
 * system-call tracepoints then do nothing for any other thread past one lookup in
 * why_threads. Each interval goes to user space as a header-only gotap_event
 * (GOTAP_FUNC_KPREEMPT, GOTAP_FUNC_KSYSCALL), credited there to the goroutine's open calls.
 * With latency --why (why_agg.h) the intervals go to the sums in the kernel instead.
 * Included by gotap.bpf.c after the ring buffer, `bump` and why_agg.h. */
#ifndef GOTAP_WHY_KERNEL_H
#define GOTAP_WHY_KERNEL_H

/* Set by the loader for trace --why on eBPF. */
const volatile __u32 why_kernel = 0;
/* --why without --goroutines (why_kernel set too): only the status changes of goroutines
 * with a traced call open are wanted, and the goroutine probes' work for any other ends at
 * the lookup in why_goids (its creation and its end still go, which name goroutines). */
const volatile __u32 why_only = 0;
/* The traced calls' entries and returns are not this program's to see (the trampoline
 * backend's jumps take them, backends/trampoline/fallback.h): every goroutine counts as one
 * with a traced call open, so that the thread running it is followed. */
const volatile __u32 why_every = 0;

/* include/linux/sched.h: a thread stopped by a signal or a tracer (ptrace) is off the CPU
 * by no choice of the scheduler's, and not for lack of a CPU. */
#define GOTAP_TASK_STOPPED 0x4
#define GOTAP_TASK_TRACED 0x8

struct gotap_why_thread {
  __u64 goid;
  __u64 off_ts; /* switched out outside a system call at this time (0: on a CPU) */
  __u64 sys_ts; /* in the system call sys_nr since this time (0: not in one) */
  __u64 sys_nr;
};

struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH); /* a call that never returns must not fill it */
  __uint(max_entries, 16384);
  __type(key, __u64);   /* goid */
  __type(value, __u32); /* traced calls open */
} why_goids SEC(".maps");

/* Not an LRU map: an eviction would drop a thread inside a traced call unseen. Entries go when
 * the goroutine leaves the thread and when the thread exits; a thread that finds no room
 * (more than 4,096 in traced calls at once: core/why/why_threads.h) is counted in
 * GOTAP_CNT_WHY_FULL, and that stretch's kernel time stays in running_ns. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 4096);
  __type(key, __u32); /* thread id */
  __type(value, struct gotap_why_thread);
} why_threads SEC(".maps");

static __always_inline void why_runs_on(__u32 tid, __u64 goid) {
  struct gotap_why_thread* t = bpf_map_lookup_elem(&why_threads, &tid);
  if (t && t->goid == goid) return;
  struct gotap_why_thread n = {goid, 0, 0, 0};
  if (bpf_map_update_elem(&why_threads, &tid, &n, BPF_ANY) != 0) bump(GOTAP_CNT_WHY_FULL);
}

static __always_inline void why_leaves(__u32 tid, __u64 goid) {
  struct gotap_why_thread* t = bpf_map_lookup_elem(&why_threads, &tid);
  if (t && t->goid == goid) bpf_map_delete_elem(&why_threads, &tid);
}

/* A traced call's entry on thread tid, run by goid. */
static __always_inline void why_call_entry(__u32 tid, __u64 goid) {
  if (why_every) return;
  __u32* n = bpf_map_lookup_elem(&why_goids, &goid);
  if (n) {
    *n += 1;
  } else {
    __u32 one = 1;
    bpf_map_update_elem(&why_goids, &goid, &one, BPF_ANY);
  }
  why_runs_on(tid, goid);
}

/* A traced call's return whose entry was seen. */
static __always_inline void why_call_return(__u32 tid, __u64 goid) {
  if (why_every) return;
  __u32* n = bpf_map_lookup_elem(&why_goids, &goid);
  if (!n) return;
  if (*n > 1) {
    *n -= 1;
    return;
  }
  bpf_map_delete_elem(&why_goids, &goid);
  why_leaves(tid, goid);
}

/* runtime.casgstatus(gp, old, new) on thread tid (RAX, RBX, RCX: it is ABIInternal). To
 * running (2) in execute: the thread runs gp now, and no other goroutine (an entry a missed
 * change left behind goes). From running, or from a system call (3) in exitsyscall's slow
 * path, to anything but those two: the thread no longer runs it. Returns whether the change
 * is wanted under why_only: gp has a traced call open, or it begins or ends (dead, 6). gp's
 * goid goes to goid_out when it was read. */
static __always_inline int why_status(struct pt_regs* ctx, __u32 tid, __u64* goid_out) {
  __u64 gp = ctx->ax;
  __u32 from = (__u32)ctx->bx, to = (__u32)ctx->cx;
  int runs = to == 2;
  int leaves = (from == 2 || from == 3) && to != 2 && to != 3;
  __u64 goid = 0;
  /* Unread, it is not dropped: user space counts what it cannot read. */
  if (!gp || bpf_probe_read_user(&goid, sizeof(goid), (void*)(gp + g_goid_off))) return 1;
  *goid_out = goid;
  int inside = why_every || bpf_map_lookup_elem(&why_goids, &goid) != 0;
  if (leaves) {
    why_leaves(tid, goid);
  } else if (runs && inside) {
    why_runs_on(tid, goid);
  } else if (runs) {
    bpf_map_delete_elem(&why_threads, &tid);
  }
  return inside || from == 6 || to == 6;
}

static __always_inline void why_kernel_event(__u32 func_id, __u32 tid, __u64 goid, __u64 from,
                                             __u64 to, __u64 nr) {
  struct gotap_event* ev = bpf_ringbuf_reserve(&events, offsetof(struct gotap_event, data), 0);
  if (!ev) {
    bump(GOTAP_CNT_LOST);
    return;
  }
  __builtin_memset(ev, 0, offsetof(struct gotap_event, data));
  ev->ts_ns = to;
  ev->goid = goid;
  ev->pid = target_tgid;
  ev->tid = tid;
  ev->func_id = func_id;
  ev->nwords = 2;
  ev->words[0] = from;
  ev->words[1] = nr;
  __u64 avail = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
  bpf_ringbuf_submit(ev, avail > wake_bytes ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
}

/* Off the CPU outside a system call (preempted by another thread, throttled, or blocked in
 * a page fault) until the thread is switched back in. Time off the CPU inside a system call
 * is that call's. */
SEC("tp_btf/sched_switch")
int BPF_PROG(gotap_why_switch, bool preempt, struct task_struct* prev, struct task_struct* next,
             unsigned int prev_state) {
  __u32 tid = prev->pid;
  struct gotap_why_thread* t = bpf_map_lookup_elem(&why_threads, &tid);
  if (t && !t->sys_ts && !(prev_state & (GOTAP_TASK_STOPPED | GOTAP_TASK_TRACED)))
    t->off_ts = bpf_ktime_get_ns();
  tid = next->pid;
  t = bpf_map_lookup_elem(&why_threads, &tid);
  if (!t || !t->off_ts) return 0;
  __u64 from = t->off_ts;
  t->off_ts = 0;
  if (why_agg)
    why_agg_kernel(t->goid, from, bpf_ktime_get_ns(), -1);
  else
    why_kernel_event(GOTAP_FUNC_KPREEMPT, tid, t->goid, from, bpf_ktime_get_ns(), 0);
  return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(gotap_why_sys_enter, struct pt_regs* regs, long id) {
  __u32 tid = (__u32)bpf_get_current_pid_tgid();
  struct gotap_why_thread* t = bpf_map_lookup_elem(&why_threads, &tid);
  if (!t) return 0;
  t->sys_nr = (__u64)id;
  t->sys_ts = bpf_ktime_get_ns();
  return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(gotap_why_sys_exit, struct pt_regs* regs, long ret) {
  __u32 tid = (__u32)bpf_get_current_pid_tgid();
  struct gotap_why_thread* t = bpf_map_lookup_elem(&why_threads, &tid);
  if (!t || !t->sys_ts) return 0;
  __u64 from = t->sys_ts;
  t->sys_ts = 0;
  if (why_agg)
    why_agg_kernel(t->goid, from, bpf_ktime_get_ns(), (__s64)t->sys_nr);
  else
    why_kernel_event(GOTAP_FUNC_KSYSCALL, tid, t->goid, from, bpf_ktime_get_ns(), t->sys_nr);
  return 0;
}

/* A thread that exits takes its entry along (an exit is a system call that never returns). */
static __always_inline void why_thread_exit(__u32 tid) {
  if (why_kernel) bpf_map_delete_elem(&why_threads, &tid);
}

#endif /* GOTAP_WHY_KERNEL_H */
