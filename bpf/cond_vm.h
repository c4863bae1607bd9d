/* The in-kernel interpreter of compiled --if conditions (bytecode: gotap_cond.h; compiler:
 * core/cond/compile.cpp; its twin for ptrace: core/cond/eval.cpp). Included by gotap.bpf.c
 * after its maps and load_regs(). Bounded: at most GOTAP_COND_MAX_INSNS steps, string reads
 * of at most GOTAP_COND_HAYSTACK bytes. The interpreter's state lives in a per-CPU map value,
 * not on the BPF stack: the verifier then sees the stack index as an unknown bounded scalar
 * at each step, and the paths through the step's switch prune to one state. */
#ifndef GOTAP_COND_VM_H
#define GOTAP_COND_VM_H

#include "gotap_cond.h"

const volatile __u32 has_cond = 0; /* set by the loader when --if/--slower/--errors is given */

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1); /* resized to the number of functions */
  __type(key, __u32);
  __type(value, struct gotap_cond);
} conds SEC(".maps");

/* Entry events of calls whose condition is decided at the return: sent when it holds. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 1); /* resized by the loader (trace mode with a return-side condition) */
  __type(key, struct gotap_call_key);
  __type(value, struct gotap_event);
} held SEC(".maps");

struct gotap_cond_state {
  __u64 regs[16];
  __u64 st[GOTAP_COND_STACK];
  __u64 ok; /* bit i: st[i] is valid */
  __u64 top;
  __u32 hay_len; /* contains(): bytes of the haystack in buf */
  __u32 lit_len;
  __u32 found;
  __u32 pad;
  __u8 buf[GOTAP_COND_HAYSTACK];
  __u8 lit[GOTAP_COND_MAX_LIT];
  __u8 buf2[GOTAP_COND_HAYSTACK]; /* a == b of two strings: b's bytes */
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct gotap_cond_state);
} cond_state SEC(".maps");

static __always_inline void cvm_push(struct gotap_cond_state* s, __u64 v, int valid) {
  __u64 top = *(volatile __u64*)&s->top;
  if (top >= GOTAP_COND_STACK) return;
  s->st[top & (GOTAP_COND_STACK - 1)] = v;
  if (valid)
    s->ok |= 1ull << (top & (GOTAP_COND_STACK - 1));
  else
    s->ok &= ~(1ull << (top & (GOTAP_COND_STACK - 1)));
  *(volatile __u64*)&s->top = top + 1;
}

/* The popped word in *v; whether it is valid. */
static __always_inline int cvm_pop(struct gotap_cond_state* s, __u64* v) {
  __u64 top = *(volatile __u64*)&s->top;
  if (top == 0 || top > GOTAP_COND_STACK) {
    *v = 0;
    return 0;
  }
  top -= 1;
  *(volatile __u64*)&s->top = top;
  *v = s->st[top & (GOTAP_COND_STACK - 1)];
  return (s->ok >> (top & (GOTAP_COND_STACK - 1))) & 1;
}

static __always_inline __u64 cvm_ext(__u64 v, __u32 size, int sign) {
  if (size == 0 || size >= 8) return v;
  __u32 sh = 64 - size * 8;
  v <<= sh;
  return sign ? (__u64)((__s64)v >> sh) : v >> sh;
}

static __always_inline int cvm_cmp(__u8 op, __u8 num, __u64 x, __u64 y) {
  if (num != GOTAP_CN_SIGNED && num != GOTAP_CN_UNSIGNED)
    return 0; /* floats: refused at compile time for eBPF */
  return gotap_cond_cmp_int(op, num, x, y);
}

/* bpf_loop callback of contains(): does the literal occur at offset i of the haystack? */
static long cvm_contains_at(__u64 i, void* unused) {
  __u32 zero = 0;
  struct gotap_cond_state* s = bpf_map_lookup_elem(&cond_state, &zero);
  if (!s) return 1;
  __u32 n = s->lit_len;
  __u32 hay = s->hay_len;
  if (n > GOTAP_COND_MAX_LIT || hay > GOTAP_COND_HAYSTACK || i + n > hay) return 1;
  for (__u32 j = 0; j < GOTAP_COND_MAX_LIT; j++) {
    if (j >= n) break;
    if (s->buf[(i + j) & (GOTAP_COND_HAYSTACK - 1)] != s->lit[j]) return 0;
  }
  s->found = 1;
  return 1;
}

/* String op `kind` on (ptr, len) with the literal at pool[off], n bytes. */
static __always_inline int cvm_str(struct gotap_cond_state* s, const struct gotap_cond* p,
                                   __u8 kind, __u32 off, __u32 n, __u64 ptr, __u64 len) {
  if (n > GOTAP_COND_MAX_LIT) return 0;
  if (kind == GOTAP_CS_EQ ? len != n : len < n) return 0;
  __u32 want = n;
  if (kind == GOTAP_CS_CONTAINS)
    want = len < GOTAP_COND_HAYSTACK ? (__u32)len : GOTAP_COND_HAYSTACK;
  if (want > GOTAP_COND_HAYSTACK) return 0;
  if (want && bpf_probe_read_user(s->buf, want, (void*)ptr)) return 0;
  for (__u32 j = 0; j < GOTAP_COND_MAX_LIT; j++) {
    if (j >= n) break;
    s->lit[j] = p->pool[(off + j) & (GOTAP_COND_POOL - 1)];
  }
  if (kind != GOTAP_CS_CONTAINS) {
    for (__u32 j = 0; j < GOTAP_COND_MAX_LIT; j++) {
      if (j >= n) break;
      if (s->buf[j] != s->lit[j]) return 0;
    }
    return 1;
  }
  s->hay_len = want;
  s->lit_len = n;
  s->found = 0;
  if (n > want) return 0;
  bpf_loop(want - n + 1, cvm_contains_at, 0, 0);
  return s->found;
}

/* a == b of two strings, len1 == len2: 1 equal, 0 not, -1 unknown (longer than
 * GOTAP_COND_STR2_MAX, unreadable), as core/cond/eval.cpp decides. */
static __always_inline int cvm_str2(struct gotap_cond_state* s, __u64 p1, __u64 p2, __u64 len) {
  for (__u32 at = 0; at < GOTAP_COND_STR2_MAX; at += GOTAP_COND_HAYSTACK) {
    if (at >= len) return 1;
    __u64 n = len - at;
    if (n > GOTAP_COND_HAYSTACK) n = GOTAP_COND_HAYSTACK;
    __u64* w1 = (__u64*)s->buf;
    __u64* w2 = (__u64*)s->buf2;
    for (int j = 0; j < GOTAP_COND_HAYSTACK / 8; j++) {
      w1[j] = 0;
      w2[j] = 0;
    }
    if (bpf_probe_read_user(s->buf, n, (void*)(p1 + at))) return -1;
    if (bpf_probe_read_user(s->buf2, n, (void*)(p2 + at))) return -1;
    for (int j = 0; j < GOTAP_COND_HAYSTACK / 8; j++)
      if (w1[j] != w2[j]) return 0;
  }
  return len <= GOTAP_COND_STR2_MAX ? 1 : -1;
}

/* What a condition reads besides registers and memory; `bits` carries the entry's parts to
 * the return, `vals` the arguments a result is compared with. */
struct gotap_cond_io {
  __u64 goid;
  __u64 dur;
  __u64 bits;
  __u64 vals[GOTAP_COND_VALS];
  __u32 at_ret;
  __u32 func;
};

/* One step, as a bpf_loop callback: the verifier checks it once, however many steps run. */
static long cvm_step(__u64 k, struct gotap_cond_io* io) {
  __u32 zero = 0;
  struct gotap_cond_state* s = bpf_map_lookup_elem(&cond_state, &zero);
  __u32 func = io->func;
  const struct gotap_cond* p = bpf_map_lookup_elem(&conds, &func);
  if (!s || !p) return 1;
  __u32 at_ret = io->at_ret;
  __u32 i = (at_ret ? p->n_entry : 0) + (__u32)k;
  if (i >= GOTAP_COND_MAX_INSNS) return 1;
  const struct gotap_cond_insn* in = &p->insns[i];
  __u64 x = 0, y = 0, v = 0;
  int vx, vy;
  switch (in->op) {
    case GOTAP_COP_CONST:
      cvm_push(s, in->imm, 1);
      break;
    case GOTAP_COP_REG:
      /* The ABIInternal registers and RDX (a System V argument of a gccgo function). */
      cvm_push(s, s->regs[in->a & 15], in->a <= GOTAP_RDX);
      break;
    case GOTAP_COP_STACK:
      vx = bpf_probe_read_user(&v, sizeof(v), (void*)(s->regs[GOTAP_RSP] + (__s64)in->off)) == 0;
      cvm_push(s, v, vx);
      break;
    case GOTAP_COP_GOID:
      cvm_push(s, io->goid, 1);
      break;
    case GOTAP_COP_DURATION:
      cvm_push(s, io->dur, at_ret);
      break;
    case GOTAP_COP_DEREF: {
      vx = cvm_pop(s, &x);
      if (!vx) {
        cvm_push(s, 0, 0);
        break;
      }
      if (x == 0) {
        cvm_push(s, 0, (in->c & GOTAP_CDF_NIL_ZERO) != 0);
        break;
      }
      void* at = (void*)(x + (__s64)in->off);
      long r;
      switch (in->b) {
        case 1:
          r = bpf_probe_read_user(&v, 1, at);
          break;
        case 2:
          r = bpf_probe_read_user(&v, 2, at);
          break;
        case 4:
          r = bpf_probe_read_user(&v, 4, at);
          break;
        default:
          r = bpf_probe_read_user(&v, 8, at);
          break;
      }
      cvm_push(s, cvm_ext(v, in->b, in->c & GOTAP_CDF_SIGNED), r == 0);
      break;
    }
    case GOTAP_COP_EXT:
      vx = cvm_pop(s, &x);
      cvm_push(s, cvm_ext(x >> ((in->a & 7) * 8), in->b, in->c & GOTAP_CDF_SIGNED), vx);
      break;
    case GOTAP_COP_CMP:
      vy = cvm_pop(s, &y);
      vx = cvm_pop(s, &x);
      cvm_push(s, vx && vy && cvm_cmp(in->a, in->c, x, y), 1);
      break;
    case GOTAP_COP_NOT:
      vx = cvm_pop(s, &x);
      cvm_push(s, !x, vx);
      break;
    case GOTAP_COP_AND:
    case GOTAP_COP_OR:
      cvm_pop(s, &y);
      cvm_pop(s, &x);
      cvm_push(s, in->op == GOTAP_COP_AND ? (x && y) : (x || y), 1);
      break;
    case GOTAP_COP_STR:
      vy = cvm_pop(s, &y); /* len */
      vx = cvm_pop(s, &x); /* ptr */
      v = vx && vy ? cvm_str(s, p, in->a, (__u32)in->off, in->b, x, y) : 0;
      cvm_push(s, v, 1);
      break;
    case GOTAP_COP_SETBIT:
      vx = cvm_pop(s, &x);
      if (vx && x) io->bits |= 1ull << (in->a & 63);
      break;
    case GOTAP_COP_BIT:
      cvm_push(s, (io->bits >> (in->a & 63)) & 1, 1);
      break;
    case GOTAP_COP_ITAB_TYPE:
      vx = cvm_pop(s, &x);
      if (vx && x) vx = bpf_probe_read_user(&x, sizeof(x), (void*)(x + 8)) == 0;
      cvm_push(s, x, vx);
      break;
    case GOTAP_COP_STR2: {
      __u64 l2 = 0, p2 = 0, l1 = 0, p1 = 0;
      int v4 = cvm_pop(s, &l2);
      v4 &= cvm_pop(s, &p2);
      v4 &= cvm_pop(s, &l1);
      v4 &= cvm_pop(s, &p1);
      if (!v4) {
        cvm_push(s, 0, 0);
        break;
      }
      if (l1 != l2) {
        cvm_push(s, 0, 1);
        break;
      }
      if (l1 > GOTAP_COND_STR2_MAX) {
        cvm_push(s, 0, 0);
        break;
      }
      int eq = cvm_str2(s, p1, p2, l1);
      cvm_push(s, eq == 1, eq >= 0);
      break;
    }
    case GOTAP_COP_SAVE:
      vx = cvm_pop(s, &x);
      io->vals[in->a & (GOTAP_COND_VALS - 1)] = x;
      if (vx)
        io->bits |= 1ull << GOTAP_COND_VAL_BIT(in->a & (GOTAP_COND_VALS - 1));
      else
        io->bits &= ~(1ull << GOTAP_COND_VAL_BIT(in->a & (GOTAP_COND_VALS - 1)));
      break;
    case GOTAP_COP_LOAD:
      cvm_push(s, io->vals[in->a & (GOTAP_COND_VALS - 1)],
               (io->bits >> GOTAP_COND_VAL_BIT(in->a & (GOTAP_COND_VALS - 1))) & 1);
      break;
    default:
      break;
  }
  return 0;
}

/* Runs p's entry program (io->at_ret 0) or its return program; p is conds[io->func]. The
 * verdict, except for the entry program of a return-side condition, which only sets
 * io->bits. */
static __always_inline int cond_run(struct pt_regs* ctx, const struct gotap_cond* p,
                                    struct gotap_cond_io* io) {
  __u32 zero = 0;
  struct gotap_cond_state* s = bpf_map_lookup_elem(&cond_state, &zero);
  if (!s) return 0;
  if (p->flags & GOTAP_COND_NEVER) return 0;
  load_regs(ctx, s->regs);
  s->top = 0;
  s->ok = 0;
  __u32 n = io->at_ret ? p->n_ret : p->n_entry;
  if (n > GOTAP_COND_MAX_INSNS) n = GOTAP_COND_MAX_INSNS;
  bpf_loop(n, cvm_step, io, 0);
  if (!io->at_ret && (p->flags & GOTAP_COND_AT_RET)) return 1;
  __u64 r = 0;
  return cvm_pop(s, &r) && r != 0;
}

#endif /* GOTAP_COND_VM_H */
