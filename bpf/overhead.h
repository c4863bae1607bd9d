/* --max-overhead: what the probe program costs, per probe site, measured in the kernel
 * (included by gotap.bpf.c). bpf_ktime_get_ns around the program's work is exact per site
 * and costs two helper calls per hit, paid only when --max-overhead is given (the rodata
 * switch below lets the verifier drop it otherwise). BPF_ENABLE_STATS would give the run
 * time of the one program that serves every function, not per function. User space sums
 * the sites of each function and adds the uprobe trap per hit (backends/ebpf/overhead.cpp). */
#ifndef GOTAP_OVERHEAD_H
#define GOTAP_OVERHEAD_H

const volatile __u32 measure_cost = 0;

struct gotap_site_cost {
  __u64 ns;   /* BPF run time at this site */
  __u64 hits; /* times the site fired in the traced process */
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1); /* resized to the number of probe sites */
  __type(key, __u32);
  __type(value, struct gotap_site_cost);
} site_cost SEC(".maps");

/* Sites of detached functions, set before their uprobes are removed: a uprobe goes one site
 * at a time, and a hit in between (a return whose entry probe is already gone) must not be
 * reported as an unmatched return. */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1); /* resized to the number of probe sites */
  __type(key, __u32);
  __type(value, __u32);
} site_off SEC(".maps");

static __always_inline int site_is_off(struct pt_regs* ctx) {
  __u32 idx = gotap_cookie_site(bpf_get_attach_cookie(ctx));
  __u32* off = bpf_map_lookup_elem(&site_off, &idx);
  return off && *off;
}

static __always_inline void add_site_cost(struct pt_regs* ctx, __u64 t0) {
  __u32 idx = gotap_cookie_site(bpf_get_attach_cookie(ctx));
  struct gotap_site_cost* c = bpf_map_lookup_elem(&site_cost, &idx);
  if (!c) return;
  c->ns += bpf_ktime_get_ns() - t0;
  c->hits += 1;
}

#endif
