/* --stack N on eBPF: the return addresses of the hit's call stack, walked through Go's frame
 * pointers in the kernel (every Go function with a frame saves RBP; docs/design.md) and sent
 * with the event; user space puts the probed pc first and symbolizes them through the
 * pclntab, as the ptrace backend does with the same walk (backends/ptrace/unwind.cpp).
 * Included by gotap.bpf.c after call_limits.h (site_extra). */
#ifndef GOTAP_STACK_WALK_H
#define GOTAP_STACK_WALK_H

#include "gotap_limits.h"

/* --stack N: frames per event, the probed pc included; 0: no stack. */
const volatile __u32 stack_depth = 0;

/* Stores one address at data[pos]; false when it would not fit. */
static __always_inline int put_pc(struct gotap_event* ev, __u32 pos, __u64 pc) {
  /* The barrier keeps clang from folding the bound into the mask: the verifier needs both. */
  asm volatile("" : "+r"(pos));
  if (pos > 2 * GOTAP_DATA_MAX - sizeof(__u64)) return 0;
  asm volatile("" : "+r"(pos));
  pos &= 2 * GOTAP_DATA_MAX - 1;
  if (pos > 2 * GOTAP_DATA_MAX - sizeof(__u64)) return 0;
  __builtin_memcpy(&ev->data[pos], &pc, sizeof(pc));
  return 1;
}

/* Writes up to stack_depth - 1 return addresses at data[off..] and returns how many. At an
 * entry or a RET the hit function has no frame record (not set up yet, or torn down): its
 * return address is at RSP + ret_off and RBP is still its caller's. At an inlined call's
 * mark the outer function's frame is set up: RBP points at the record whose return address
 * is the same slot, so the walk continues from the record it saved. */
static __always_inline __u32 walk_stack(struct pt_regs* ctx, __u32 idx, struct gotap_event* ev,
                                        __u32 off) {
  /* The goroutine probes' events (casgstatus, newproc1) carry no stack. */
  if (stack_depth < 2 || off > GOTAP_DATA_MAX || ev->func_id >= GOTAP_FUNC_GSTATUS) return 0;
  __u32 want = stack_depth - 1;
  if (want > GOTAP_MAX_STACK) want = GOTAP_MAX_STACK;
  struct gotap_site_extra* x = bpf_map_lookup_elem(&site_extra, &idx);
  __s64 ret_off = x ? x->ret_off : 0;
  __u64 sp = ctx->sp, fp = ctx->bp;
  __u64 slot = sp + ret_off, ra = 0;
  if (bpf_probe_read_user(&ra, sizeof(ra), (void*)slot) || !put_pc(ev, off, ra)) return 0;
  __u32 n = 1;
  if (fp == slot - 8 && bpf_probe_read_user(&fp, sizeof(fp), (void*)fp)) return n;
  __u64 lo = sp;
  for (__u32 i = 0; i < GOTAP_MAX_STACK; i++) {
    if (n >= want || fp <= lo || (fp & 7)) break;
    __u64 rec[2]; /* {saved rbp, return address} */
    if (bpf_probe_read_user(rec, sizeof(rec), (void*)fp) || rec[1] == 0) break;
    if (!put_pc(ev, off + n * 8, rec[1])) break;
    n++;
    lo = fp;
    fp = rec[0];
  }
  return n;
}

#endif /* GOTAP_STACK_WALK_H */
