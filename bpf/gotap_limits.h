/* Shared between bpf/gotap.bpf.c and the loader in backends/ebpf/: what the error-result
 * check (count and latency's FAILED column) and the --rate limit add to the probe program.
 * Kept apart from gotap_shared.h so that the two features stay out of the probe records. */
#ifndef GOTAP_LIMITS_H
#define GOTAP_LIMITS_H

/* gotap_probe.flags: a RET site of a function with an `error` result; err_words[cookie] says
 * where the error's first word (the itab, non-zero when the error is not nil) is there. */
#define GOTAP_PROBE_ERRCHECK 128

/* gotap_inflight.flags: --rate dropped this call's entry, so its return is dropped too (a
 * call is reported whole or not at all). */
#define GOTAP_INFLIGHT_DROPPED 1

#endif /* GOTAP_LIMITS_H */
