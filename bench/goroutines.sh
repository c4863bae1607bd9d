#!/usr/bin/env bash
# Cost of `gotap goroutines` per goroutine state change. The workload passes a token between
# two goroutines over unbuffered channels (gotap-workload -pingpong N), so every handoff parks
# one goroutine and wakes the other: about three status changes per handoff, each one a hit
# of the runtime.casgstatus probe. Runs, interleaved, $RUNS times each:
#   untraced          the workload alone
#   empty probes      an empty BPF program at the same sites (GOTAP_EBPF_EMPTY_PROGRAM)
#   ebpf table        gotap goroutines --backend=ebpf (the table, -o /dev/null)
#   ebpf json         the same with --json
#   ptrace table      gotap goroutines --backend=ptrace, on N/10 handoffs
# and prints medians of ns per handoff, the state changes per handoff (counted from a --json
# run), the cost per state change ((traced - untraced) / changes) and the ratios to the
# untraced program and to the empty probes.
#
# usage: bench/goroutines.sh [GOTAP] [WORKLOAD] [HANDOFFS]      (root)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
gotap=${1:-$here/build/gotap}
work=${2:-$here/build/gotap-workload}
n=${3:-200000}
runs=${RUNS:-5}
[ -x "$gotap" ] || { echo "goroutines.sh: no gotap at $gotap" >&2; exit 2; }
[ -x "$work" ] || { echo "goroutines.sh: no gotap-workload at $work (built with the project when Go is found)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "goroutines.sh: needs root (BPF and ptrace)" >&2; exit 2; }

per() { grep -o 'ns_per_handoff [0-9.]*' | awk '{print $2}' | tail -1; }
# shellcheck source=bench/lib.sh
. "$here/bench/lib.sh"
metric=per

for _ in $(seq "$runs"); do
  run untraced "$work" -pingpong "$n"
  run empty_probes env GOTAP_EBPF_EMPTY_PROGRAM=1 "$gotap" goroutines --backend=ebpf -o /dev/null -- "$work" -pingpong "$n"
  run ebpf_table "$gotap" goroutines --backend=ebpf -o /dev/null -- "$work" -pingpong "$n"
  run ebpf_json "$gotap" goroutines --backend=ebpf --json -o /dev/null -- "$work" -pingpong "$n"
  run ptrace_table "$gotap" goroutines --backend=ptrace -o /dev/null -- "$work" -pingpong $((n / 10))
done

# State changes per handoff, from the events themselves.
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
"$gotap" goroutines --backend=ebpf --json -o "$tmp" -- "$work" -pingpong "$n" >/dev/null 2>&1
changes=$(grep -c '"event":"gstate"' "$tmp" || true)
per_handoff=$(awk -v c="$changes" -v n="$n" 'BEGIN {printf "%.2f", c / n}')

printf '%-14s %14s %14s %12s %12s\n' what ns/handoff ns/change x_untraced x_empty
med_untraced=$(echo "${res[untraced]}" | median)
med_empty=$(echo "${res[empty_probes]}" | median)
for k in untraced empty_probes ebpf_table ebpf_json ptrace_table; do
  m=$(echo "${res[$k]}" | median)
  awk -v k="$k" -v m="$m" -v u="$med_untraced" -v e="$med_empty" -v p="$per_handoff" 'BEGIN {
    change = (k == "untraced") ? "-" : sprintf("%.0f", (m - u) / p)
    printf "%-14s %14.1f %14s %12.1f %12s\n", k, m, change, m / u, (k == "untraced" || k == "empty_probes") ? "-" : sprintf("%.2f", m / e)
  }'
done
echo
echo "state changes per handoff: $per_handoff ($changes gstate events for $n handoffs)"
