// SPDX-License-Identifier: GPL-2.0
/* When each thread of a ptrace-traced program really stopped, and when it first got a CPU
 * after gotap resumed it (backends/ptrace/stop_times.h). gotap's own timestamps are taken once
 * waitid returns and the tracer gets to the thread, which a loaded machine delays by
 * milliseconds; the thread's schedstat dates a stop only when the thread never slept, and its
 * CPU time leaves out what the hypervisor stole. The SIGTRAP an int3 raises, the scheduler's
 * switch away from a thread entering a tracer stop, and its next switch to it, are the
 * moments themselves. */
#include "vmlinux.h"

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "ptrace_stops.h"

char LICENSE[] SEC("license") = "GPL";

/* The traced process, set by gotap once loaded (first its own calibration child's). */
volatile __u32 target_tgid = 0;

/* include/linux/sched.h: __TASK_TRACED, set in a thread's state by a tracer stop. */
#define STOPS_TASK_TRACED 0x8
/* __TASK_STOPPED: a job-control stop. A thread preempted on its way into either stop (the
 * tracer it woke took its CPU) waits for gotap, not for a CPU. */
#define STOPS_TASK_STOPPED 0x4

struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH); /* threads that exit leave no slot taken for good */
  __uint(max_entries, 16384);
  __type(key, __u32); /* thread id */
  __type(value, struct ptrace_stop_times);
} stop_times SEC(".maps");

/* --why (set by gotap, with the system-call programs attached): a wait for a CPU inside a
 * system call is that call's time, as on eBPF (bpf/why_kernel.h), not preempted_ns. */
volatile __u32 why_syscalls = 0;

/* Not an LRU map: an eviction would drop a live thread's calls unseen. A thread's entry goes
 * when it exits (gotap_stop_thread_exit); a call of a thread that finds no room is counted in
 * syscalls_lost. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 1); /* 4096 under --why (core/why/why_threads.h), set before loading */
  __type(key, __u32);     /* thread id */
  __type(value, struct ptrace_syscalls);
} stop_syscalls SEC(".maps");

/* --why: system calls of the program's threads that stop_syscalls had no room to keep. */
__u64 syscalls_lost = 0;

/* The first value of a thread's entry: larger than the BPF stack. Never written. */
struct ptrace_syscalls empty_syscalls = {};

static __always_inline int in_syscall(__u32 tid) {
  if (!why_syscalls) return 0;
  struct ptrace_syscalls* s = bpf_map_lookup_elem(&stop_syscalls, &tid);
  return s && s->sys_at;
}

/* The thread ran since its last tracer stop (it switches away, or raises SIGTRAP), yet no
 * switch to a CPU since that stop was seen: about one run in 40 of a program whose goroutine
 * parks between hits (the thread was still on its CPU when resumed, it seems). Its first run
 * is then taken as its resume, when the kernel saw one after the stop, else as `now`, the
 * latest it can have been. Before, its next wake-up passed for its first run, and the time
 * it then slept (a 30 ms park) for its resume's wait, which was taken off the call. */
static __always_inline void ran_unseen(struct ptrace_stop_times* t, __u64 now) {
  if (!t->out || t->in) return;
  t->in = t->woken > t->out && t->woken <= now ? t->woken : now;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(gotap_stop_switch, bool preempt, struct task_struct* prev, struct task_struct* next,
             unsigned int prev_state) {
  if (prev->tgid == target_tgid && !preempt && (prev_state & STOPS_TASK_TRACED)) {
    __u32 tid = prev->pid;
    struct ptrace_stop_times* t = bpf_map_lookup_elem(&stop_times, &tid);
    struct ptrace_stop_times n = {
        bpf_ktime_get_ns(), 0, t ? t->in : 0, t ? t->trap : 0, t ? t->preempted : 0, 0, 0};
    bpf_map_update_elem(&stop_times, &tid, &n, BPF_ANY);
  } else if (prev->tgid == target_tgid && (preempt || prev_state == 0 /* TASK_RUNNING */) &&
             !(prev_state & (STOPS_TASK_TRACED | STOPS_TASK_STOPPED)) && !in_syscall(prev->pid)) {
    /* Switched away though it could run (a user-mode thread is preempted on its way back to
     * user mode, still TASK_RUNNING, without the `preempt` flag, which is kernel preemption's):
     * its wait for a CPU starts. */
    __u32 tid = prev->pid;
    struct ptrace_stop_times* t = bpf_map_lookup_elem(&stop_times, &tid);
    if (t) t->preempted_at = bpf_ktime_get_ns();
  }
  if (prev->tgid == target_tgid && !(prev_state & STOPS_TASK_TRACED)) {
    __u32 tid = prev->pid;
    struct ptrace_stop_times* t = bpf_map_lookup_elem(&stop_times, &tid);
    if (t) ran_unseen(t, bpf_ktime_get_ns());
  }
  if (next->tgid == target_tgid) {
    __u32 tid = next->pid;
    struct ptrace_stop_times* t = bpf_map_lookup_elem(&stop_times, &tid);
    if (t) {
      __u64 now = bpf_ktime_get_ns();
      if (!t->in) t->in = now;
      if (t->preempted_at && now > t->preempted_at) t->preempted += now - t->preempted_at;
      t->preempted_at = 0;
    } else {
      /* A thread stopped before the program was attached (gotap's attach), resumed now:
       * its first run is known for its next stop. */
      struct ptrace_stop_times n = {0, bpf_ktime_get_ns(), 0, 0, 0, 0, 0};
      bpf_map_update_elem(&stop_times, &tid, &n, BPF_NOEXIST);
    }
  }
  return 0;
}

/* The tracer wakes a thread in a tracer stop: gotap's resume, as the kernel saw it. */
SEC("tp_btf/sched_waking")
int BPF_PROG(gotap_stop_resume, struct task_struct* p) {
  if (p->tgid != target_tgid || !(p->__state & STOPS_TASK_TRACED)) return 0;
  __u32 tid = p->pid;
  struct ptrace_stop_times* t = bpf_map_lookup_elem(&stop_times, &tid);
  if (t) t->woken = bpf_ktime_get_ns();
  return 0;
}

/* An int3 in the program raises SIGTRAP on the thread that ran it, at once (do_int3_user):
 * the moment of the hit, before the kernel's way to the tracer stop (signal delivery, the
 * tracer's notification, the switch away), which is not the program's time. */
SEC("tp_btf/signal_generate")
int BPF_PROG(gotap_stop_trap, int sig, struct kernel_siginfo* info, struct task_struct* task,
             int group, int result) {
  if (sig != 5 /* SIGTRAP */ || task->tgid != target_tgid) return 0;
  __u32 tid = task->pid;
  struct ptrace_stop_times* t = bpf_map_lookup_elem(&stop_times, &tid);
  if (t) {
    t->trap = bpf_ktime_get_ns();
    ran_unseen(t, t->trap);
  } else {
    struct ptrace_stop_times n = {0, 0, 0, bpf_ktime_get_ns(), 0, 0, 0};
    bpf_map_update_elem(&stop_times, &tid, &n, BPF_NOEXIST);
  }
  return 0;
}

/* The calling thread's id when it is one of the traced process's, else 0 (no thread has id
 * 0): the system-call programs run on every thread of the machine. */
static __always_inline __u32 target_thread(void) {
  __u64 pid_tgid = bpf_get_current_pid_tgid();
  return (__u32)(pid_tgid >> 32) == target_tgid ? (__u32)pid_tgid : 0;
}

/* --why: each system call of the program's threads, kept per thread until gotap takes them at
 * the thread's next stop (every change of the goroutine a thread runs is one under --why). */
SEC("tp_btf/sys_enter")
int BPF_PROG(gotap_stop_sys_enter, struct pt_regs* regs, long id) {
  __u32 tid = target_thread();
  if (!tid) return 0;
  struct ptrace_syscalls* s = bpf_map_lookup_elem(&stop_syscalls, &tid);
  if (!s) {
    bpf_map_update_elem(&stop_syscalls, &tid, &empty_syscalls, BPF_NOEXIST);
    s = bpf_map_lookup_elem(&stop_syscalls, &tid);
    if (!s) {
      __sync_fetch_and_add(&syscalls_lost, 1);
      return 0;
    }
  }
  s->sys_nr = (__u32)id;
  s->sys_at = bpf_ktime_get_ns();
  return 0;
}

static __always_inline void add_syscall(struct ptrace_syscall_slot* sl, __u64 from, __u64 to) {
  if (!sl->count) sl->from = from;
  sl->to = to;
  sl->ns += to - from;
  sl->count += 1;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(gotap_stop_sys_exit, struct pt_regs* regs, long ret) {
  __u32 tid = target_thread();
  if (!tid) return 0;
  struct ptrace_syscalls* s = bpf_map_lookup_elem(&stop_syscalls, &tid);
  if (!s || !s->sys_at) return 0;
  __u64 from = s->sys_at, to = bpf_ktime_get_ns();
  __u32 nr = s->sys_nr, n = s->n;
  s->sys_at = 0;
  if (to < from) return 0;
  if (n < PTRACE_SYSCALL_SLOTS) {
    struct ptrace_syscall_slot* sl = &s->slot[n];
    sl->nr = nr;
    sl->count = 0;
    sl->ns = 0;
    add_syscall(sl, from, to);
    s->n = n + 1;
    return 0;
  }
  for (int i = PTRACE_SYSCALL_SLOTS - 1; i >= 0; --i) {
    if (s->slot[i].nr == nr) {
      add_syscall(&s->slot[i], from, to);
      return 0;
    }
  }
  add_syscall(&s->other, from, to);
  return 0;
}

/* --why: a thread that exits frees its entry (an exit is a system call that never returns).
 * What it called since its last stop went with it: a Go thread exits only once its goroutine
 * (locked to it) is done, and no call of that goroutine is open any more. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(gotap_stop_thread_exit, struct task_struct* task) {
  if ((__u32)task->tgid != target_tgid) return 0;
  __u32 tid = task->pid;
  bpf_map_delete_elem(&stop_syscalls, &tid);
  return 0;
}
