/* Shared between bpf/gotap.bpf.c and the loader in backends/ebpf/: what the error-result
 * check (count and latency's FAILED column), the --rate limit and --stack add to the probe
 * program. Kept apart from gotap_shared.h so that they stay out of the probe records. */
#ifndef GOTAP_LIMITS_H
#define GOTAP_LIMITS_H

/* gotap_probe.flags: a RET site of a function with an `error` result; site_extra[cookie].err
 * says where the error's first word (the itab, non-zero when the error is not nil) is there. */
#define GOTAP_PROBE_ERRCHECK 128

/* --stack N: return addresses walked per event at most (after the probed pc, which user
 * space knows), sent after the copied bytes as gotap_event.nstack words. */
#define GOTAP_MAX_STACK 63

/* Per probe site, in the site_extra map (indexed by the attach cookie). */
struct gotap_site_extra {
  struct gotap_word err; /* GOTAP_PROBE_ERRCHECK sites; src GOTAP_SRC_NONE elsewhere */
  gotap_s32 ret_off;     /* the hit function's return address is at RSP + ret_off */
  gotap_u32 err_slot;    /* GOTAP_PROBE_ERRCHECK sites: the function's entry in `errors` */
  gotap_u64 link_addr;   /* GOTAP_GCCGO_G_DTV_SELF: the site's link-time address (else 0) */
};

/* gotap_inflight.flags: --rate dropped this call's entry, so its return is dropped too (a
 * call is reported whole or not at all). */
#define GOTAP_INFLIGHT_DROPPED 1

#endif /* GOTAP_LIMITS_H */
