#!/usr/bin/env bash
# res (lib.sh) and the med_* figures are set indirectly (declare).
# shellcheck disable=SC2034,SC2154
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
# The runs are interleaved; each figure is min / median / max ns per call over RUNS runs, of
# wall time (the fixture's own clock) and of CPU time: gotap's and the program's user and
# system time (the uprobe traps are the program's system time), less what the same
# configuration takes for one call (planning, loading, attaching), over the calls. On a shared
# machine the wall clock measures the other programs too; the CPU time does not.
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
need /usr/bin/time:time
metric=ns
# cpu NAME CMD...: CMD's CPU time (its own and its waited children's) with CALLS calls less
# with one, per call, appended to cpu[NAME].
declare -A cpu
cpu_ms() { /usr/bin/time -f '%U %S' -o "$tmp" "$@" >/dev/null 2>&1 || true; awk '{print ($1 + $2) * 1000}' "$tmp"; }
cpu() {
  local name=$1 n=$2
  shift 2
  local full one
  full=$(cpu_ms "$@" "$n")
  one=$(cpu_ms "$@" 1)
  cpu[$name]+=" $(awk -v a="$full" -v b="$one" -v n="$n" 'BEGIN {printf "%.1f", (a - b) * 1e6 / (n - 1)}')"
}
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
t=("$gotap" trace --backend=ebpf -o /dev/null main.work -- "$bin" bench)
declare -A cmd=(
  [untraced]="$bin bench"
  [empty]="env GOTAP_EBPF_EMPTY_PROGRAM=1 ${t[*]}"
  [state]="$gotap latency --backend=ebpf -o /dev/null main.work -- $bin bench"
  [capture]="env GOTAP_EBPF_CUT=nosubmit ${t[*]}"
  [ring]="env GOTAP_EBPF_CUT=nodecode ${t[*]}"
  [decode]="env GOTAP_EBPF_CUT=noprint ${t[*]}"
  [trace]="${t[*]}"
  [trace_json]="$gotap trace --backend=ebpf --json -o /dev/null main.work -- $bin bench"
)
keys="untraced empty state capture ring decode trace trace_json"
for _ in $(seq "$runs"); do
  for k in $keys; do
    # shellcheck disable=SC2086
    run "$k" ${cmd[$k]} "$calls"
    # shellcheck disable=SC2086
    cpu "$k" "$calls" ${cmd[$k]}
  done
done

stats() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{v[NR]=$1} END {printf "%.0f %.0f %.0f\n", v[1], v[int((NR+1)/2)], v[NR]}'; }
echo "Host: $(nproc) CPUs, $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg); $runs runs of $calls calls."
for m in wall cpu; do
  echo
  printf '%-11s %26s %8s %14s\n' what "$m ns/call min/med/max" x_empty 'part (median)'
  prev=
  for k in $keys; do
    if [ $m = wall ]; then v=${res[$k]}; else v=${cpu[$k]}; fi
    read -r lo med hi < <(echo "$v" | stats)
    declare "med_$k=$med"
    x=-
    [ "$k" != untraced ] && [ "$k" != empty ] && x=$(awk -v a="$med" -v b="$med_empty" 'BEGIN {printf "%.3f", a / b}')
    part=-
    [ -n "$prev" ] && [ "$k" != trace_json ] && part=$(awk -v a="$med" -v b="$prev" 'BEGIN {printf "%+.0f ns", a - b}')
    [ "$k" = trace_json ] && part=$(awk -v a="$med" -v b="$med_decode" 'BEGIN {printf "%+.0f ns", a - b}')
    printf '%-11s %26s %8s %14s\n' "$k" "$lo / $med / $hi" "$x" "$part"
    [ "$k" != untraced ] && prev=$med
  done
  echo "trace / empty probes ($m): $(awk -v a="$med_trace" -v b="$med_empty" 'BEGIN {printf "%.3f", a / b}') (goal <= 1.1)"
done
