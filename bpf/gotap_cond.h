/* The bytecode of a compiled --if condition (core/cond/compile.h), shared by the BPF
 * interpreter (bpf/cond_vm.h) and the ptrace backend's (core/cond/eval.h), so that both
 * backends select calls by the same program. Plain C, fixed-width types only.
 *
 * A program runs on a stack of 64-bit words, each with a "valid" bit: a load that fails (an
 * unreadable address, a nil pointer followed) pushes an invalid word, and a comparison with an
 * invalid operand is false. A function's condition has two programs: `entry` runs at the
 * entry probe; when the condition needs results or the duration, it only records the values
 * of its argument-only parts as bits (GOTAP_COND_SETBIT) and `ret` decides at the return. */
#ifndef GOTAP_COND_H
#define GOTAP_COND_H

#include "gotap_shared.h"

#define GOTAP_COND_MAX_INSNS 48
#define GOTAP_COND_STACK 8    /* a power of two: the BPF side masks indices with it */
#define GOTAP_COND_POOL 128   /* bytes of string literals per function */
#define GOTAP_COND_MAX_LIT 32 /* bytes of one string literal */
/* contains(s, "..") looks at the first GOTAP_COND_HAYSTACK bytes of s on both backends. */
#define GOTAP_COND_HAYSTACK 64
/* a == b between two strings compares at most GOTAP_COND_STR2_MAX bytes: longer strings of
 * equal length make the comparison unknown (false, whether == or !=) on both backends. */
#define GOTAP_COND_STR2_MAX 128
/* Argument values an entry program keeps for its return program (a result compared with an
 * argument); their validity travels in the top bits of the entry bits. */
#define GOTAP_COND_VALS 2
#define GOTAP_COND_VAL_BIT(a) (63 - (a))

enum gotap_cond_op {
  GOTAP_COP_NOP = 0,
  GOTAP_COP_CONST = 1,      /* push imm (+ the load bias when a = 1: a type descriptor) */
  GOTAP_COP_REG = 2,        /* push integer register a (gotap_reg numbering) */
  GOTAP_COP_STACK = 3,      /* push the word at RSP + off */
  GOTAP_COP_XMM = 4,        /* push the low 8 bytes of X<a> (ptrace only) */
  GOTAP_COP_GOID = 5,       /* push the goroutine id */
  GOTAP_COP_DURATION = 6,   /* push the call's duration in ns (return only) */
  GOTAP_COP_DEREF = 7,      /* pop p; push the b bytes at p + off (c: GOTAP_CDF_*) */
  GOTAP_COP_EXT = 8,        /* shift the top right by a bytes (a gccgo result in a register's
                               upper bytes), truncate it to b bytes; sign-extend when c & SIGNED */
  GOTAP_COP_CMP = 9,        /* pop y, x; push x <a> y (gotap_cond_cmp), c: gotap_cond_num */
  GOTAP_COP_NOT = 10,       /* top = !top */
  GOTAP_COP_AND = 11,       /* pop y, x; push x && y */
  GOTAP_COP_OR = 12,        /* pop y, x; push x || y */
  GOTAP_COP_STR = 13,       /* pop len, ptr; push (string a: gotap_cond_str) the literal at
                               pool[off], b bytes */
  GOTAP_COP_SETBIT = 14,    /* pop x; bit a of the entry bits = x */
  GOTAP_COP_BIT = 15,       /* push bit a of the entry bits */
  GOTAP_COP_ITAB_TYPE = 16, /* top = the type word of the itab at top (0 stays 0) */
  /* ptrace only (the compiler reports them as what eBPF cannot evaluate): */
  GOTAP_COP_INDEX = 17,     /* pop i, len, ptr; push ptr + i * imm when 0 <= i < len, else an
                               invalid word (a slice element's address) */
  GOTAP_COP_MAP_INDEX = 18, /* pop the map type (a DWARF type id), the map pointer; push the
                               address of the element whose key is the b bytes at pool[off]
                               (a = 1: a string key's bytes), an invalid word when absent */
  /* both backends: */
  GOTAP_COP_STR2 = 19, /* pop len2, ptr2, len1, ptr1; push string 1 == string 2 (an
                          invalid word past GOTAP_COND_STR2_MAX bytes or unreadable) */
  GOTAP_COP_SAVE = 20, /* pop x; entry value a = x (its validity: GOTAP_COND_VAL_BIT) */
  GOTAP_COP_LOAD = 21, /* push entry value a */
};

enum gotap_cond_deref_flags {
  GOTAP_CDF_SIGNED = 1,  /* sign-extend */
  GOTAP_CDF_NIL_ZERO = 2 /* a nil pointer gives 0 (len of a nil map), not an invalid word */
};

enum gotap_cond_cmp {
  GOTAP_CC_EQ = 0,
  GOTAP_CC_NE,
  GOTAP_CC_LT,
  GOTAP_CC_LE,
  GOTAP_CC_GT,
  GOTAP_CC_GE
};
enum gotap_cond_num {
  GOTAP_CN_SIGNED = 0,
  GOTAP_CN_UNSIGNED = 1,
  GOTAP_CN_F64 = 2,
  GOTAP_CN_F32 = 3
};
enum gotap_cond_str { GOTAP_CS_EQ = 0, GOTAP_CS_PREFIX = 1, GOTAP_CS_CONTAINS = 2 };

struct gotap_cond_insn {
  gotap_u8 op;
  gotap_u8 a;
  gotap_u8 b;
  gotap_u8 c;
  gotap_s32 off;
  gotap_u64 imm;
};

enum gotap_cond_flags {
  GOTAP_COND_ON = 1,        /* the function has a condition */
  GOTAP_COND_NEVER = 2,     /* it names what the function lacks: no call matches */
  GOTAP_COND_AT_RET = 4,    /* decided at the return (results, duration) */
  GOTAP_COND_NEEDS_GOID = 8 /* the entry program reads goid */
};

/* One function's condition, the value of the `conds` map (index: func_id). */
struct gotap_cond {
  gotap_u8 flags;
  gotap_u8 n_entry; /* insns[0..n_entry) run at the entry */
  gotap_u8 n_ret;   /* insns[n_entry..n_entry + n_ret) at the return */
  gotap_u8 pad[5];
  struct gotap_cond_insn insns[GOTAP_COND_MAX_INSNS];
  gotap_u8 pool[GOTAP_COND_POOL];
};

/* The one comparison switch of both interpreters (bpf/cond_vm.h, core/cond/eval.cpp): the
 * verdict of `x <op> y` from how x and y order. For floats the C++ side orders them itself:
 * with a NaN none of lt, eq, gt holds, so only != is true, as in Go. */
static inline int gotap_cond_decide(gotap_u8 op, int lt, int eq, int gt) {
  switch (op) {
    case GOTAP_CC_EQ:
      return eq;
    case GOTAP_CC_NE:
      return !eq;
    case GOTAP_CC_LT:
      return lt;
    case GOTAP_CC_LE:
      return lt || eq;
    case GOTAP_CC_GT:
      return gt;
    default:
      return gt || eq;
  }
}

/* x <op> y for the integer kinds (GOTAP_CN_SIGNED, GOTAP_CN_UNSIGNED) of 64-bit words. */
static inline int gotap_cond_cmp_int(gotap_u8 op, gotap_u8 num, gotap_u64 x, gotap_u64 y) {
  if (num == GOTAP_CN_SIGNED) {
    long long a = (long long)x, b = (long long)y;
    return gotap_cond_decide(op, a<b, a == b, a> b);
  }
  return gotap_cond_decide(op, x<y, x == y, x> y);
}

#endif /* GOTAP_COND_H */
