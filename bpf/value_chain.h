/* GOTAP_CAP_CHAIN (gotap_shared.h): an interface's value read in the kernel, and the values
 * its string and interface fields lead to, for the dynamic types user space names in
 * `chain_types` (the standard library's errors and net addresses, strings, []byte). What a
 * pointer to a fmt.wrapError or an fs.PathError holds is on the heap and gone by the time user
 * space reads the event, so its bytes travel in the event as chunks: user space puts each
 * back at its address and decodes the value as ptrace would from the tracee's memory.
 * Included by gotap.bpf.c after its maps. */
#ifndef GOTAP_VALUE_CHAIN_H
#define GOTAP_VALUE_CHAIN_H

/* Link-time descriptor address -> the type's layout; filled by the loader after load. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 64);
  __type(key, __u64);
  __type(value, struct gotap_chain_type);
} chain_types SEC(".maps");

/* The walk of the event being built, kept here for its bpf_loop steps: the interfaces still to
 * follow (type or itab, data, empty or not), where the chunks end, and the fields of the value
 * being read. */
struct gotap_chain_state {
  __u64 tab[8];
  __u64 data[8];
  __u8 eface[8]; /* 0: an itab (tab), 1: a type (eface), 2: an itab of untyped words */
  __u32 n;       /* interfaces queued */
  __u32 off;     /* the event's data bytes used */
  __u32 max_str; /* bytes of a string copied at most */
  __u32 at;      /* the current value's bytes in the event's data */
  __u32 size;    /* and their length */
  __u32 nfields; /* the current value's fields (0: none, or the value was not read) */
  struct gotap_chain_field fields[GOTAP_CHAIN_FIELDS];
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct gotap_chain_state);
} chain_state SEC(".maps");

/* The traced process's PIE load bias (0 otherwise): run-time descriptor addresses minus it are
 * the map's keys. Written by the loader once the bias is known. */
__u64 chain_bias = 0;

/* Appends a chunk of `len` bytes at user address `addr`, whole or not at all: `off` past it,
 * or `off` unchanged. */
static __always_inline __u32 put_chunk(struct gotap_event* ev, __u32 off, __u64 addr, __u64 len) {
  if (off >= GOTAP_DATA_MAX || len == 0 || addr == 0) return off;
  if (len + 8 > GOTAP_DATA_MAX - off) return off;
  /* Keep clang from dropping the masks: they are what bounds the access for the verifier (the
   * check above makes them no-ops: off + 8 < GOTAP_DATA_MAX). */
  __u32 at = off + 8, hdr_at = off;
  asm volatile("" : "+r"(at), "+r"(len), "+r"(hdr_at));
  at &= GOTAP_DATA_MAX - 1;
  hdr_at &= GOTAP_DATA_MAX - 1;
  len &= GOTAP_DATA_MAX - 1;
  if (len == 0) return off;
  if (bpf_probe_read_user(&ev->data[at], len, (void*)addr)) return off;
  __u64 hdr = addr | (len << GOTAP_CHUNK_LEN_SHIFT);
  __builtin_memcpy(&ev->data[hdr_at], &hdr, 8);
  return off + 8 + (__u32)len;
}

/* Step k of the walk, as a bpf_loop callback (the verifier checks it once, however many steps
 * run): the value of interface k / (1 + GOTAP_CHAIN_FIELDS) at its first step, then one of its
 * fields per step. */
static long chain_step(__u64 k, void* unused) {
  __u32 zero = 0;
  struct gotap_chain_state* s = bpf_map_lookup_elem(&chain_state, &zero);
  struct gotap_event* ev = bpf_map_lookup_elem(&scratch, &zero);
  if (!s || !ev) return 1;
  __u32 node = (__u32)k / (1 + GOTAP_CHAIN_FIELDS), part = (__u32)k % (1 + GOTAP_CHAIN_FIELDS);
  if (node >= s->n || node >= GOTAP_CHAIN_NODES) return 1;
  __u32 off = s->off;
  if (off >= GOTAP_DATA_MAX) return 1;
  if (part == 0) {
    s->nfields = 0;
    __u64 t = s->tab[node & 7], d = s->data[node & 7];
    if (!t || !d) return 0;
    __u64 typ = t;
    __u32 kind = s->eface[node & 7];
    if (kind != 1) {
      if (bpf_probe_read_user(&typ, sizeof(typ), (void*)(t + 8))) return 0;
      /* The first interface's type word is its own cap's (GOTAP_CAP_ITAB); untyped words have
       * none, and user space tells an itab by its first word too (kind 2). */
      if (kind == 2)
        off = put_chunk(ev, off, t, 16);
      else if (node > 0)
        off = put_chunk(ev, off, t + 8, 8);
    }
    s->off = off;
    __u64 key = typ - chain_bias;
    struct gotap_chain_type* ct = bpf_map_lookup_elem(&chain_types, &key);
    if (!ct || ct->size > GOTAP_CHAIN_MAX_SIZE) return 0;
    __u32 next = put_chunk(ev, off, d, ct->size);
    if (next == off) return 1; /* no room (or unreadable): nothing after it would fit */
    s->off = next;
    s->at = off + 8;
    s->size = ct->size;
    s->nfields = ct->nfields;
    __builtin_memcpy(s->fields, ct->fields, sizeof(s->fields));
    return 0;
  }
  __u32 j = part - 1;
  if (j >= s->nfields) return 0;
  asm volatile("" : "+r"(j)); /* checked apart, so that clang keeps the bound */
  if (j >= GOTAP_CHAIN_FIELDS) return 0;
  __u32 kind = s->fields[j].kind;
  __u32 fo = s->fields[j].off;
  if (fo + 16 > s->size) return 0;
  __u32 fa = s->at;
  if (fa >= GOTAP_DATA_MAX) return 0;
  fa = (fa & (GOTAP_DATA_MAX - 1)) + (fo & 127);
  __u64 w0 = 0, w1 = 0;
  __builtin_memcpy(&w0, &ev->data[fa], 8);
  __builtin_memcpy(&w1, &ev->data[fa + 8], 8);
  if (kind == GOTAP_CHAIN_STR) {
    if (w1 > s->max_str) w1 = s->max_str;
    s->off = put_chunk(ev, off, w0, w1);
  } else if (w0) {
    __u32 n = s->n;
    if (n >= GOTAP_CHAIN_NODES) return 0;
    s->tab[n & 7] = w0;
    s->data[n & 7] = w1;
    s->eface[n & 7] = kind == GOTAP_CHAIN_EFACE;
    s->n = n + 1;
  }
  return 0;
}

/* The chain from one interface (tab: its itab, or its type with GOTAP_CHAIN_CAP_EFACE in
 * `how`, or either with GOTAP_CHAIN_CAP_GUESS; data) into the event's data from `off`,
 * strings cut at max_str; returns `off` past the chunks written. */
/* Global (not static): the verifier checks it once, alone, not at each of emit's copies in
 * each of its callers (a static one cost 0.4 s of loading per trace). */
__noinline int copy_chain(__u32 off, __u64 tab, __u64 data, __u32 how, __u32 max_str) {
  /* Most interfaces are nil or of a type not followed: a lookup or two, no walk. */
  if (!tab || !data) return off;
  __u32 eface = how & GOTAP_CHAIN_CAP_EFACE;
  __u64 typ = tab;
  if (!eface && bpf_probe_read_user(&typ, sizeof(typ), (void*)(tab + 8))) typ = 0;
  __u64 key = typ - chain_bias;
  if (!typ || !bpf_map_lookup_elem(&chain_types, &key)) {
    /* Untyped words: an itab's type word was not one; the first word may be the type. */
    if (eface || !(how & GOTAP_CHAIN_CAP_GUESS)) return off;
    eface = 1;
    key = tab - chain_bias;
    if (!bpf_map_lookup_elem(&chain_types, &key)) return off;
  } else if (how & GOTAP_CHAIN_CAP_GUESS) {
    eface = 2; /* an itab, found without a cap of its own */
  }
  __u32 zero = 0;
  struct gotap_chain_state* s = bpf_map_lookup_elem(&chain_state, &zero);
  if (!s) return off;
  s->tab[0] = tab;
  s->data[0] = data;
  s->eface[0] = eface;
  s->n = 1;
  s->off = off;
  s->max_str = max_str;
  s->nfields = 0;
  bpf_loop(GOTAP_CHAIN_NODES * (1 + GOTAP_CHAIN_FIELDS), chain_step, 0, 0);
  return s->off;
}

#endif /* GOTAP_VALUE_CHAIN_H */
