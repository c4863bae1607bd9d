/* The value of ptrace_stops.bpf.c's map, shared with backends/ptrace/stop_times.cpp. */
#ifndef GOTAP_PTRACE_STOPS_H
#define GOTAP_PTRACE_STOPS_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

struct ptrace_stop_times {
  __u64 out;     /* CLOCK_MONOTONIC ns: switched away entering its last tracer stop */
  __u64 in;      /* its first switch to a CPU since then (0: none yet) */
  __u64 prev_in; /* `in` as it was at that stop: the first run after the resume before it */
  __u64 trap;    /* the last SIGTRAP raised on it (an int3): a probe hit's own moment */
  /* --why: the time it spent off the CPU because the scheduler preempted it (another thread
   * took its CPU, cgroup throttling), in all; and since when it waits now (0: it does not). */
  __u64 preempted;
  __u64 preempted_at;
  /* when the tracer last woke it from a tracer stop (its resume, sched_waking) */
  __u64 woken;
};

/* --why: a thread's system calls since gotap last took them (at its stops), for `syscalls` by
 * name on ptrace. Each slot is one call; once they are all taken, a call goes into the last
 * slot of its number (count > 1), or into `other` when its number has none. */
#define PTRACE_SYSCALL_SLOTS 16
struct ptrace_syscall_slot {
  __u64 from, to, ns; /* CLOCK_MONOTONIC ns: the first's entry, the last's exit; time inside */
  __u32 nr, count;
};
struct ptrace_syscalls {
  __u64 sys_at; /* in system call sys_nr since then (0: not in one) */
  __u32 sys_nr, n;
  struct ptrace_syscall_slot other; /* nr unused */
  struct ptrace_syscall_slot slot[PTRACE_SYSCALL_SLOTS];
};

#endif
