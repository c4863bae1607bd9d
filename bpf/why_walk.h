/* --why on eBPF: at a runtime.casgstatus hit, the stack of the goroutine that parks (on the
 * way to waiting: mcall saved its pc and frame pointer in gp.sched) or, at a wake-up
 * (waiting to runnable), the goroutine the waking thread runs (m.curg of the g in R14:
 * casgstatus is ABIInternal) and its stack: from curg.sched when the thread is on its system
 * stack (systemstack saved it there), else from the registers. The pcs go where --stack puts
 * its return addresses (nstack after the copied bytes); at a wake-up ev->goid becomes the
 * waker's goid (0: the thread ran none) and GOTAP_EVF_WAKER is set. user space picks the
 * innermost frame outside the runtime (core/events/goroutine_events.h, StatusStacks).
 * Included by gotap.bpf.c after stack_walk.h. */
#ifndef GOTAP_WHY_WALK_H
#define GOTAP_WHY_WALK_H

/* Set by the loader: 0 leaves goroutine hits without stacks. */
const volatile __u32 why_walk = 0;
const volatile __u32 g_m_off = 48;
const volatile __u32 m_curg_off = 184;
const volatile __u32 g_sched_pc_off = 64;
const volatile __u32 g_sched_bp_off = 104;
const volatile __s32 gstatus_ret_off = 0; /* casgstatus's return address: RSP + this */

#define GOTAP_WHY_FRAMES 16

static __always_inline __u32 why_stack(struct pt_regs* ctx, struct gotap_event* ev, __u32 off) {
  if (!why_walk || ev->func_id != GOTAP_FUNC_GSTATUS || off > GOTAP_DATA_MAX || ev->nwords < 3)
    return 0;
  __u64 from = ev->words[1], to = ev->words[2];
  __u64 pc = 0, fp = 0, g = 0;
  if (to == 4) { /* _Gwaiting */
    g = ev->words[0];
    if (!g || bpf_probe_read_user(&pc, sizeof(pc), (void*)(g + g_sched_pc_off)) ||
        bpf_probe_read_user(&fp, sizeof(fp), (void*)(g + g_sched_bp_off)))
      return 0;
    pc += 1; /* a saved pc, not a return address: user space looks up pc - 1 */
  } else if (from == 4 && to == 1) {
    __u64 cur = ctx->r14, m = 0, curg = 0, goid = 0;
    if (!cur || bpf_probe_read_user(&m, sizeof(m), (void*)(cur + g_m_off)) || !m ||
        bpf_probe_read_user(&curg, sizeof(curg), (void*)(m + m_curg_off)))
      return 0;
    ev->flags |= GOTAP_EVF_WAKER;
    ev->goid = 0;
    if (!curg) return 0; /* the scheduler's own: its network poll or a timer */
    if (bpf_probe_read_user(&goid, sizeof(goid), (void*)(curg + g_goid_off))) {
      ev->flags &= ~GOTAP_EVF_WAKER;
      return 0;
    }
    ev->goid = goid;
    if (curg == cur) {
      bpf_probe_read_user(&pc, sizeof(pc), (void*)(ctx->sp + gstatus_ret_off));
      fp = ctx->bp;
    } else if (bpf_probe_read_user(&pc, sizeof(pc), (void*)(curg + g_sched_pc_off)) ||
               bpf_probe_read_user(&fp, sizeof(fp), (void*)(curg + g_sched_bp_off))) {
      return 0;
    } else {
      pc += 1;
    }
  } else {
    return 0;
  }
  if (!put_pc(ev, off, pc)) return 0;
  __u32 n = 1;
  for (__u32 i = 0; i < GOTAP_WHY_FRAMES - 1; i++) {
    if (!fp || (fp & 7)) break;
    __u64 rec[2]; /* {saved frame pointer, return address} */
    if (bpf_probe_read_user(rec, sizeof(rec), (void*)fp) || rec[1] == 0) break;
    if (!put_pc(ev, off + n * 8, rec[1])) break;
    n++;
    if (rec[0] <= fp) break; /* frames go up the stack */
    fp = rec[0];
  }
  return n;
}

#endif /* GOTAP_WHY_WALK_H */
