#!/usr/bin/env bash
# A/B of the ptrace backend's per-hit levers (issue 22): the same traced loop as
# bench/ptrace.sh, under each configuration in turn, interleaved over $RUNS rounds so that
# the machine's noise hits all alike; prints min / median / max ns per call of each.
# BENCH_BINARY is bench/ptrace-program.sh's program.
# Usage: bench/ptrace-levers.sh BENCH_BINARY FUNC 'NAME=ENV... GOTAP' ...
#   e.g. bench/ptrace-levers.sh /tmp/bench framed 'base=GOTAP_PTRACE_FOLLOW_CPU=0 build/gotap'
# env: N (calls per run, 20000), RUNS (9), METRIC: "call" (the program's own ns per call,
#   default) or "cpu" (gotap's CPU ns per probe hit while tracing, from GOTAP_TIMING: less
#   noisy on a busy machine, and what the system-call and decoding levers change) or "held"
#   (the ns from taking a hit's stop to resuming its thread, from GOTAP_TIMING)
set -euo pipefail
bench=$1 fn=$2
shift 2
n=${N:-20000}
runs=${RUNS:-9}
declare -A res
for _ in $(seq "$runs"); do
  for cfg in "$@"; do
    name=${cfg%%=*}
    read -r -a cmd <<<"${cfg#*=}"
    if [ "${METRIC:-call}" = held ]; then
      v=$(env GOTAP_TIMING=1 "${cmd[@]}" trace --backend=ptrace --json -o /dev/null "main.$fn" -- \
        "$bench" "$n" "$fn" 2>&1 >/dev/null | sed -n 's/.* \([0-9][0-9]*\) ns held per hit.*/\1/p' | head -1)
    elif [ "${METRIC:-call}" = cpu ]; then
      v=$(env GOTAP_TIMING=1 "${cmd[@]}" trace --backend=ptrace --json -o /dev/null "main.$fn" -- \
        "$bench" "$n" "$fn" 2>&1 >/dev/null |
        awk -v calls="$n" '/timing: ptrace: traced/ {
          hits = 2 * calls  # entry and RET; a gotap that does not say how many
          if (match($0, /\(([0-9]+) hits/)) hits = substr($0, RSTART + 1, RLENGTH - 6) + 0
          match($0, /cpu \+[0-9.]+ ms/); cpu = substr($0, RSTART + 5, RLENGTH - 8)
          printf "%.0f", cpu * 1e6 / hits }')
    else
      v=$(env "${cmd[@]}" trace --backend=ptrace --json -o /dev/null "main.$fn" -- "$bench" "$n" "$fn" \
        2>/dev/null | sed -n 's/.*ns_per_call \([0-9.]*\).*/\1/p' | head -1)
    fi
    res[$name]="${res[$name]:-} ${v:-nan}"
  done
done
u=ns/call
[ "${METRIC:-call}" = cpu ] && u="gotap CPU ns/hit"
[ "${METRIC:-call}" = held ] && u="ns held/hit"
echo "| configuration | runs | min $u | median $u | max $u |"
echo "|---|---|---|---|---|"
for cfg in "$@"; do
  name=${cfg%%=*}
  echo "${res[$name]}" | tr ' ' '\n' | grep -v '^$' | sort -g |
    awk -v name="$name" '{a[NR]=$1} END {printf "| %s | %d | %.0f | %.0f | %.0f |\n", name, NR, a[1], a[int((NR+1)/2)], a[NR]}'
done
