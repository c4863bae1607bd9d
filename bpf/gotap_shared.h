/* Shared between bpf/gotap.bpf.c and the loader in backends/ebpf/: the per-probe
 * configuration the loader writes into the `probes` map, the event records of the ring buffer,
 * and the latency bucket scheme. Plain C, fixed-width types only. */
#ifndef GOTAP_SHARED_H
#define GOTAP_SHARED_H

#ifdef __bpf__
typedef __u8 gotap_u8;
typedef __u16 gotap_u16;
typedef __u32 gotap_u32;
typedef __s32 gotap_s32;
typedef __u64 gotap_u64;
#else
#include <stdint.h>
typedef uint8_t gotap_u8;
typedef uint16_t gotap_u16;
typedef uint32_t gotap_u32;
typedef int32_t gotap_s32;
typedef uint64_t gotap_u64;
#endif

/* Words (registers or stack slots) captured per probe hit, and deref copies (string bytes,
 * interface payloads, itab type words) per hit. */
#define GOTAP_MAX_WORDS 24
#define GOTAP_MAX_CAPS 6
/* Byte budget of copied memory per event; a power of two (the BPF side masks with it). */
#define GOTAP_DATA_MAX 512

enum gotap_mode { GOTAP_MODE_TRACE = 0, GOTAP_MODE_COUNT = 1, GOTAP_MODE_LATENCY = 2 };

/* Where a gccgo program's g is (gotap.bpf.c's gccgo_g): none, at a fixed offset from FS base,
 * through the thread's DTV, or through it with the module id and offset read per hit from the
 * probed libgo's own GOT (every process that maps it: --all). */
enum gotap_gccgo_g {
  GOTAP_GCCGO_G_NONE = 0,
  GOTAP_GCCGO_G_EXEC = 1,
  GOTAP_GCCGO_G_DTV = 2,
  GOTAP_GCCGO_G_DTV_SELF = 3
};

/* Registers in Go's ABIInternal integer order first (the numbering of core/plan/abi.h Reg), then
 * the rest. */
enum gotap_reg {
  GOTAP_RAX = 0,
  GOTAP_RBX,
  GOTAP_RCX,
  GOTAP_RDI,
  GOTAP_RSI,
  GOTAP_R8,
  GOTAP_R9,
  GOTAP_R10,
  GOTAP_R11,
  GOTAP_RDX,
  GOTAP_R12,
  GOTAP_R13,
  GOTAP_R14,
  GOTAP_R15,
  GOTAP_RBP,
  GOTAP_RSP,
};

/* GOTAP_SRC_REGMEM: the word at `off` from the address register `reg` holds (a gccgo result
 * returned in memory, from rax at the RET). */
enum gotap_src { GOTAP_SRC_NONE = 0, GOTAP_SRC_REG = 1, GOTAP_SRC_STACK = 2, GOTAP_SRC_REGMEM = 3 };

struct gotap_word {
  gotap_u8 src; /* gotap_src */
  gotap_u8 reg; /* gotap_reg, for GOTAP_SRC_REG and GOTAP_SRC_REGMEM */
  gotap_u16 pad;
  /* GOTAP_SRC_STACK: offset from RSP at the probe; GOTAP_SRC_REGMEM: from the reg's value */
  gotap_s32 off;
};

enum gotap_cap_kind {
  GOTAP_CAP_NONE = 0,
  GOTAP_CAP_STRING = 1, /* bytes at words[word], length words[aux] */
  GOTAP_CAP_DEREF = 2,  /* max bytes at words[word] + off (interface payload, pointee) */
  GOTAP_CAP_ITAB = 3,   /* the type word of the itab at words[word]: 8 bytes at itab+8 */
  /* The value of the interface words[word] (itab, or type: GOTAP_CHAIN_CAP_* in off),
   * words[aux] (data), followed through the types of the `chain_types` map: chunks (below) of
   * the memory read, strings cut at max bytes. */
  GOTAP_CAP_CHAIN = 4,
};

/* GOTAP_CAP_CHAIN: interfaces followed per event (the first and those found in its value's
 * fields), fields read per followed value, and the largest value read (a struct's bytes). */
#define GOTAP_CHAIN_NODES 6
#define GOTAP_CHAIN_FIELDS 5
#define GOTAP_CHAIN_MAX_SIZE 96
/* gotap_cap.off of a GOTAP_CAP_CHAIN: the words are an `any` (type, data); or two untyped
 * words (a stripped binary's ArgInfo) that may be either kind of interface, or neither. */
#define GOTAP_CHAIN_CAP_EFACE 1
#define GOTAP_CHAIN_CAP_GUESS 2
/* A chunk of copied memory: an 8-byte header, the address | (length << 48), then the bytes. */
#define GOTAP_CHUNK_LEN_SHIFT 48

enum gotap_chain_field_kind {
  GOTAP_CHAIN_STR = 1,   /* a string or []byte at off: its bytes, cut at the cap's max */
  GOTAP_CHAIN_IFACE = 2, /* an interface with methods at off: followed */
  GOTAP_CHAIN_EFACE = 3, /* an empty interface at off: followed */
};

struct gotap_chain_field {
  gotap_u8 kind; /* gotap_chain_field_kind */
  gotap_u8 off;  /* within the value, < GOTAP_CHAIN_MAX_SIZE */
};

/* A dynamic type the chain follows, in `chain_types` by its link-time descriptor address: the
 * bytes of its value (what the data word points to: a pointer type's element) and its fields
 * to copy or follow. */
struct gotap_chain_type {
  gotap_u8 size;
  gotap_u8 nfields;
  struct gotap_chain_field fields[GOTAP_CHAIN_FIELDS];
};

struct gotap_cap {
  gotap_u8 kind;
  gotap_u8 word;
  gotap_u8 aux;
  gotap_u8 pad;
  gotap_u16 max; /* bytes; at most GOTAP_DATA_MAX */
  gotap_u16 off; /* GOTAP_CAP_DEREF: copy from words[word] + off (a field of a struct) */
};

enum gotap_probe_flags {
  GOTAP_PROBE_RET = 1,      /* a RET site (or a tail jump leaving the function) */
  GOTAP_PROBE_TLS_G = 2,    /* find g in the TLS slot, not R14 (ABI0) */
  GOTAP_PROBE_DEDUPE = 4,   /* entry refires after morestack: ignore a repeat of (goid, frame) */
  GOTAP_PROBE_TRACK = 8,    /* count mode: keep in-flight state (needed for DEDUPE) */
  GOTAP_PROBE_INLINE = 16,  /* an inlined call site: entry only, no in-flight state */
  GOTAP_PROBE_UNCOUNT = 32, /* count mode: the morestack call; the entry probe refires */
  /* A RET at the function's entry probe (a body of one RET): the kernel runs the probes of
   * one address in no order the program can rely on, so this site's uprobe is the only one
   * there and each hit is the entry (site - 1, gotap_folded_entry) and then this return. */
  GOTAP_PROBE_ALSO_ENTRY = 64,
};

/* A probe site's attach cookie: its index in the `probes` and `site_extra` maps (low 24
 * bits), its gotap_probe_flags (bits 24-31) and its func_id (high 32 bits). Count and latency
 * need only the last two, so their hits read no map to know what was hit, and their
 * `probes` map is neither sized nor written (a whole binary: 100,000s of 248-byte records). */
#define GOTAP_COOKIE_SITE_BITS 24
#define GOTAP_COOKIE_MAX_SITES (1u << GOTAP_COOKIE_SITE_BITS)

static inline gotap_u64 gotap_cookie(gotap_u32 site, gotap_u8 flags, gotap_u32 func_id) {
  return ((gotap_u64)func_id << 32) | ((gotap_u64)flags << GOTAP_COOKIE_SITE_BITS) |
         (site & (GOTAP_COOKIE_MAX_SITES - 1));
}
static inline gotap_u32 gotap_cookie_site(gotap_u64 cookie) {
  return (gotap_u32)cookie & (GOTAP_COOKIE_MAX_SITES - 1);
}
static inline gotap_u8 gotap_cookie_flags(gotap_u64 cookie) {
  return (gotap_u8)(cookie >> GOTAP_COOKIE_SITE_BITS);
}
static inline gotap_u32 gotap_cookie_func(gotap_u64 cookie) {
  return (gotap_u32)(cookie >> 32);
}

/* The entry site a GOTAP_PROBE_ALSO_ENTRY RET stands for: the site before it, with the flags
 * such an entry has (a first instruction that is a RET has no stack check: no refire, no
 * morestack call). backends/ebpf/probe_config.cpp folds only entries that match. */
static inline gotap_u64 gotap_folded_entry(gotap_u64 ret_cookie) {
  gotap_u8 flags = gotap_cookie_flags(ret_cookie) & (GOTAP_PROBE_TLS_G | GOTAP_PROBE_TRACK);
  return gotap_cookie(gotap_cookie_site(ret_cookie) - 1, flags, gotap_cookie_func(ret_cookie));
}

/* One probe site's record in the `probes` array map (trace mode), at its cookie's index. */
struct gotap_probe {
  gotap_u32 func_id;
  gotap_u8 flags;
  gotap_u8 nwords;
  gotap_u8 ncaps;
  gotap_u8 pad;
  struct gotap_word words[GOTAP_MAX_WORDS];
  struct gotap_cap caps[GOTAP_MAX_CAPS];
};

/* The goroutine probes' func_ids, past every planned function's: runtime.casgstatus
 * (words gp, old, new, return address; cap 0 gp's goid, cap 1 when present gp's waitreason byte),
 * runtime.newproc1's entry (words fn, callergp,
 * callerpc, from RBX and RCX, or RDI and RSI in Go 1.17; cap 0 fn's code pointer, cap 1
 * callergp's goid) and its RETs (word newg; cap 0
 * newg's goid). */
#define GOTAP_FUNC_GSTATUS 0xfffffff0u
#define GOTAP_FUNC_GCREATE 0xfffffff1u
#define GOTAP_FUNC_GCREATED 0xfffffff2u
/* --why, Go 1.26+: runtime.entersyscall and runtime.exitsyscall (word R14, the g; cap 0 its
 * goid). */
#define GOTAP_FUNC_GSYSENTER 0xfffffff3u
#define GOTAP_FUNC_GSYSEXIT 0xfffffff4u
/* --why, kernel intervals of a thread running a goroutine inside a traced call
 * (bpf/why_kernel.h): header only, tid and goid, words[0] the start and ts_ns the end; off
 * the CPU outside a system call, or in system call words[1]. */
#define GOTAP_FUNC_KPREEMPT 0xfffffff5u
#define GOTAP_FUNC_KSYSCALL 0xfffffff6u

/* Key of an in-flight call: survives the goroutine moving between threads and its stack
 * being copied (stack.hi - rsp is invariant under a stack copy). */
struct gotap_call_key {
  gotap_u64 goid;
  gotap_u64 frame;
  gotap_u32 func_id;
  gotap_u32 pad;
};

/* count --all: a function's calls in one process (proc_counts). 16,384 processes x functions
 * is ~0.8 MB of kernel memory; past it, calls are counted without their process. */
#define GOTAP_PROC_COUNTS_MAX 16384
struct gotap_proc_key {
  gotap_u32 func;
  gotap_u32 tgid;
};
struct gotap_proc_count {
  gotap_u64 count;
  char comm[16];
};

/* A call in flight: when it was entered, and where (for `unfinished`, docs/json.md). */
struct gotap_inflight {
  gotap_u64 ts; /* 0: a call its --if condition rejected at the entry (its return is silent) */
  gotap_u32 pid;
  gotap_u32 tid;
  gotap_u32 flags; /* GOTAP_INFLIGHT_* (gotap_limits.h) */
  gotap_u32 pad;
  gotap_u64 cond_bits;    /* the entry's parts of a condition decided at the return */
  gotap_u64 cond_vals[2]; /* its arguments compared with results (GOTAP_COND_VALS) */
};

enum gotap_event_kind { GOTAP_EV_ENTRY = 0, GOTAP_EV_RETURN = 1 };

enum gotap_event_flags {
  GOTAP_EVF_UNMATCHED = 1, /* a return whose entry was not seen: no duration */
  GOTAP_EVF_WAKER = 2,     /* --why, a casgstatus wake-up: goid is the waking thread's m.curg */
};

/* A trace-mode event. Only the header, the words and data[0..data_len) are sent. */
struct gotap_event {
  gotap_u64 ts_ns;
  gotap_u64 goid;
  gotap_u64 duration_ns;
  gotap_u32 pid;
  gotap_u32 tid;
  gotap_u32 probe;
  gotap_u32 func_id;
  gotap_u8 kind;
  gotap_u8 flags;
  gotap_u8 nwords;
  gotap_u8 ncaps;
  gotap_u16 data_len;
  gotap_u16 pad;
  gotap_u16 cap_len[GOTAP_MAX_CAPS]; /* bytes copied per cap (0 on failure) */
  gotap_u16 cap_ok;                  /* bit i: cap i was read */
  gotap_u16 nstack; /* --stack: return addresses after the copied bytes (gotap_limits.h) */
  gotap_u64 words[GOTAP_MAX_WORDS];
  gotap_u8 data[2 * GOTAP_DATA_MAX]; /* 2x so the verifier can bound off + len */
};

/* Per-function latency statistics (per CPU; summed by user space). */
struct gotap_lat_stats {
  gotap_u64 count;
  gotap_u64 sum_ns;
  gotap_u64 min_ns;
  gotap_u64 max_ns;
};

/* latency --why on eBPF (bpf/why_agg.h): each call's split is added up in the kernel, per
 * function and latency bucket (gotap_bucket), so that the split of the slowest calls is read
 * from the top buckets. */
struct gotap_why_key {
  gotap_u32 func_id;
  gotap_u32 bucket;
};
struct gotap_why_parts {
  gotap_u64 calls;
  gotap_u64 running_ns;
  gotap_u64 preempted_ns;
  gotap_u64 runnable_ns;
  gotap_u64 syscall_ns;
  gotap_u64 waiting_ns;
};
/* Who ended a wait: a goroutine (waker_pc its innermost frame outside the runtime, sync and
 * internal/, 0 when none), the scheduler (a thread running no goroutine: the network poller
 * or a timer), or not known. */
enum gotap_why_waker {
  GOTAP_WAKER_UNKNOWN = 0,
  GOTAP_WAKER_GOROUTINE = 1,
  GOTAP_WAKER_SCHEDULER = 2,
};
#define GOTAP_WHY_NO_REASON 0xffffffffu /* g.waitreason not read, or stale */
struct gotap_why_wait_key {
  gotap_u32 func_id;
  gotap_u32 bucket;
  gotap_u32 reason;    /* g.waitreason's value */
  gotap_u32 waker;     /* gotap_why_waker */
  gotap_u64 parked_pc; /* a return address (or saved pc + 1): look up pc - 1; 0: none */
  gotap_u64 waker_pc;
};
struct gotap_why_sys_key {
  gotap_u32 func_id;
  gotap_u32 bucket;
  gotap_u64 nr;
};
struct gotap_why_sum {
  gotap_u64 ns;
  gotap_u64 count;
};
/* The text of functions outside the runtime, sync and internal/ (merged runs, sorted): the
 * frames a wait is told by. */
struct gotap_why_range {
  gotap_u64 lo;
  gotap_u64 hi;
};
#define GOTAP_WHY_RANGES 16384 /* at most; a binary with more runs keeps --why in user space */

/* Kernel-side counters (per CPU). */
enum gotap_counter {
  GOTAP_CNT_LOST = 0,           /* ring buffer full: event dropped */
  GOTAP_CNT_UNMATCHED_RET = 1,  /* a return with no recorded entry */
  GOTAP_CNT_REFIRE = 2,         /* a deduplicated entry refire */
  GOTAP_CNT_INFLIGHT_FULL = 3,  /* could not record an in-flight call */
  GOTAP_CNT_READ_ERR = 4,       /* g / goid unreadable */
  GOTAP_CNT_HITS = 5,           /* every probe hit that passed the pid filter */
  GOTAP_CNT_HELD_FULL = 6,      /* an entry waiting for its return's condition found no room */
  GOTAP_CNT_WHY_FULL = 7,       /* --why: a thread running a traced call found no room */
  GOTAP_CNT_WHY_LOST = 8,       /* latency --why in the kernel: a wait or system call not named */
  GOTAP_CNT_WHY_CALLS_LOST = 9, /* latency --why in the kernel: a call whose split found no room */
  GOTAP_CNT_NUM = 10,
};

/* Latency buckets: log2 with 8 linear sub-buckets. Values 0..7 have a bucket each; a value
 * with top bit e >= 3 goes to (e - 2) * 8 + the next three bits. Width <= 12.5% of value. */
#define GOTAP_SUB_BITS 3
#define GOTAP_NBUCKETS 496

static inline gotap_u32 gotap_log2(gotap_u64 v) {
  gotap_u32 r = 0;
  if (v >> 32) {
    v >>= 32;
    r += 32;
  }
  if (v >> 16) {
    v >>= 16;
    r += 16;
  }
  if (v >> 8) {
    v >>= 8;
    r += 8;
  }
  if (v >> 4) {
    v >>= 4;
    r += 4;
  }
  if (v >> 2) {
    v >>= 2;
    r += 2;
  }
  if (v >> 1) {
    r += 1;
  }
  return r;
}

static inline gotap_u32 gotap_bucket(gotap_u64 v) {
  if (v < 8) return (gotap_u32)v;
  gotap_u32 e = gotap_log2(v);
  return (e - 2) * 8 + (gotap_u32)((v >> (e - 3)) & 7);
}

#endif /* GOTAP_SHARED_H */
