#!/usr/bin/env bash
# Where an eBPF `trace` spends what it costs over empty probes at the same sites (issue 22,
# goal 2), on the latency fixture's `bench` loop (main.work: entry probe, one RET). Each
# configuration adds one part of gotap's work to the one before it:
#   empty        an empty BPF program at the entry and the RET (GOTAP_EBPF_EMPTY_PROGRAM)
#   state        gotap latency: goid, timestamps, the in-flight map, the latency histogram
#   capture      trace, each event captured into the per-CPU scratch but never sent
#                (GOTAP_EBPF_CUT=nosubmit)
#   ring         trace, events sent through the ring buffer and read, not decoded (nodecode)
#   decode       trace, events decoded, not printed (noprint)
#   trace        gotap trace -o /dev/null (text), and trace_json (--json)
# The runs are interleaved; each figure is min / median / max ns per call over RUNS runs.
# latency's in-kernel histogram is not part of trace, so "state" is an upper bound of
# trace's own in-flight work.
#
# usage: bench/ebpf-parts.sh [GOTAP] [LATENCY_FIXTURE] [CALLS]      (root; RUNS, default 7)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
gotap=${1:-$here/build/gotap}
bin=${2:-$(ls -d "$here"/build/fixtures/1.26/default/latency 2>/dev/null || true)}
calls=${3:-100000}
runs=${RUNS:-7}
[ -x "$gotap" ] || { echo "ebpf-parts.sh: no gotap at $gotap" >&2; exit 2; }
[ -x "$bin" ] || { echo "ebpf-parts.sh: no latency fixture binary (give it as the 2nd argument)" >&2; exit 2; }

ns() { grep -o 'ns_per_call [0-9.]*' | awk '{print $2}' | tail -1; }
# shellcheck source=bench/lib.sh
. "$here/bench/lib.sh"
metric=ns
t=("$gotap" trace --backend=ebpf -o /dev/null main.work -- "$bin" bench "$calls")
for _ in $(seq "$runs"); do
  run untraced "$bin" bench "$calls"
  run empty env GOTAP_EBPF_EMPTY_PROGRAM=1 "${t[@]}"
  run state "$gotap" latency --backend=ebpf -o /dev/null main.work -- "$bin" bench "$calls"
  run capture env GOTAP_EBPF_CUT=nosubmit "${t[@]}"
  run ring env GOTAP_EBPF_CUT=nodecode "${t[@]}"
  run decode env GOTAP_EBPF_CUT=noprint "${t[@]}"
  run trace "${t[@]}"
  run trace_json "$gotap" trace --backend=ebpf --json -o /dev/null main.work -- "$bin" bench "$calls"
done

stats() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{v[NR]=$1} END {printf "%.0f %.0f %.0f\n", v[1], v[int((NR+1)/2)], v[NR]}'; }
echo "Host: $(nproc) CPUs, $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg); $runs runs of $calls calls."
printf '%-11s %24s %10s %14s\n' what 'ns/call min/med/max' x_empty 'part (median)'
prev=
for k in untraced empty state capture ring decode trace trace_json; do
  read -r lo med hi < <(echo "${res[$k]}" | stats)
  declare "med_$k=$med"
  x=-
  [ "$k" != untraced ] && [ "$k" != empty ] && x=$(awk -v a="$med" -v b="$med_empty" 'BEGIN {printf "%.3f", a / b}')
  part=-
  [ -n "$prev" ] && [ "$k" != trace_json ] && part=$(awk -v a="$med" -v b="$prev" 'BEGIN {printf "%+.0f ns", a - b}')
  [ "$k" = trace_json ] && part=$(awk -v a="$med" -v b="$med_decode" 'BEGIN {printf "%+.0f ns", a - b}')
  printf '%-11s %24s %10s %14s\n' "$k" "$lo / $med / $hi" "$x" "$part"
  [ "$k" != untraced ] && prev=$med
done
echo "trace / empty probes: $(awk -v a="$med_trace" -v b="$med_empty" 'BEGIN {printf "%.3f", a / b}') (goal <= 1.1)"
