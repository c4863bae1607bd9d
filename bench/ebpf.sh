#!/usr/bin/env bash
# Per-call cost of the eBPF backend on the latency fixture's `bench` loop (main.work, a framed
# function: entry probe on its kernel-emulated `push rbp`, one RET):
#   untraced                the loop alone
#   count                   gotap count (entry probe only, counted in the kernel)
#   bpftrace count          bpftrace counting the same function (probe on its first
#                           instruction, which the kernel single-steps)
#   empty entry / +ret      an empty BPF program at the same sites (GOTAP_EBPF_EMPTY_PROGRAM)
#   latency / trace         gotap latency, gotap trace (-o /dev/null, text and --json)
# Each figure is the median of $RUNS runs, interleaved so machine noise hits all alike.
# Goals: count <= 0.15 x bpftrace; trace <= 1.1 x empty probes (issue 22) at the same sites.
#
# usage: bench/ebpf.sh [GOTAP] [FIXTURE_BINARY] [CALLS]      (root; bpftrace optional)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
gotap=${1:-$here/build/gotap}
bin=${2:-$(ls -d "$here"/build/fixtures/1.26/default/latency 2>/dev/null || true)}
calls=${3:-100000}
runs=${RUNS:-5}
[ -x "$gotap" ] || { echo "ebpf.sh: no gotap at $gotap" >&2; exit 2; }
[ -x "$bin" ] || { echo "ebpf.sh: no latency fixture binary (give it as the 2nd argument)" >&2; exit 2; }

ns() { grep -o 'ns_per_call [0-9.]*' | awk '{print $2}' | tail -1; }
# shellcheck source=bench/lib.sh
. "$here/bench/lib.sh"
metric=ns

have_bpftrace=0
command -v bpftrace >/dev/null && have_bpftrace=1
for _ in $(seq "$runs"); do
  run untraced "$bin" bench "$calls"
  run count "$gotap" count --backend=ebpf -o /dev/null main.work -- "$bin" bench "$calls"
  if [ $have_bpftrace = 1 ]; then
    run bpftrace_count bpftrace -e "uprobe:$bin:main.work { @c = count(); }" -c "$bin bench $calls"
  fi
  run empty_entry env GOTAP_EBPF_EMPTY_PROGRAM=1 "$gotap" count --backend=ebpf -o /dev/null main.work -- "$bin" bench "$calls"
  run empty_entry_ret env GOTAP_EBPF_EMPTY_PROGRAM=1 "$gotap" trace --backend=ebpf -o /dev/null main.work -- "$bin" bench "$calls"
  run latency "$gotap" latency --backend=ebpf -o /dev/null main.work -- "$bin" bench "$calls"
  run trace "$gotap" trace --backend=ebpf -o /dev/null main.work -- "$bin" bench "$calls"
  run trace_json "$gotap" trace --backend=ebpf --json -o /dev/null main.work -- "$bin" bench "$calls"
done

printf '%-18s %12s\n' what ns/call
for k in untraced count bpftrace_count empty_entry empty_entry_ret latency trace trace_json; do
  [ -n "${res[$k]:-}" ] || continue
  m=$(echo "${res[$k]}" | median)
  printf '%-18s %12s\n' "$k" "$m"
  declare "med_$k=$m"
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "nan" }'; }
echo
echo "entry probe (push rbp, emulated), empty program: $(awk -v a="$med_empty_entry" -v u="$med_untraced" 'BEGIN {printf "%.0f", a-u}') ns"
echo "RET probe (single-stepped), empty program:       $(awk -v a="$med_empty_entry_ret" -v b="$med_empty_entry" 'BEGIN {printf "%.0f", a-b}') ns"
if [ $have_bpftrace = 1 ]; then
  echo "count / bpftrace count:  $(ratio "$med_count" "$med_bpftrace_count")  (goal <= 0.15)"
fi
echo "trace / empty probes:    $(ratio "$med_trace" "$med_empty_entry_ret")  (goal <= 1.1)"
echo "trace --json / empty:    $(ratio "$med_trace_json" "$med_empty_entry_ret")"
echo "latency / empty probes:  $(ratio "$med_latency" "$med_empty_entry_ret")"
