#!/usr/bin/env bash
# What `latency --why` costs a server next to `latency` (issue 37, item 4). gotap-workload
# -serve N (bench/workload/server.go) serves N HTTP requests on loopback at a fixed RATE a
# second; its handler, main.serve, parks twice per request (a channel to a worker that
# answers after a 200 us timer). Runs, interleaved, $RUNS times each:
#   untraced               the server alone
#   BACKEND latency        gotap latency --backend BACKEND main.serve
#   BACKEND latency_why    gotap latency --backend BACKEND --why main.serve
# for each backend in $BACKENDS, and prints the medians of the server's own CPU time per
# request (user + system, all threads, over the requests only: start-up, attach and detach
# stay out), what tracing adds to it, the ratio of latency --why's addition to latency's,
# and the requests' median and 99th percentile as the client saw them.
#
# usage: bench/why.sh [GOTAP] [WORKLOAD]      (root)   env: RUNS (5), REQUESTS (2000),
#        RATE (500), BACKENDS ("ebpf ptrace")
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
gotap=${1:-$here/build/gotap}
work=${2:-$here/build/gotap-workload}
runs=${RUNS:-5}
n=${REQUESTS:-2000}
rate=${RATE:-500}
backends=${BACKENDS:-ebpf ptrace}
[ -x "$gotap" ] || { echo "why.sh: no gotap at $gotap" >&2; exit 2; }
[ -x "$work" ] || { echo "why.sh: no gotap-workload at $work (built with the project when Go is found)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "why.sh: needs root (BPF and ptrace)" >&2; exit 2; }

# shellcheck source=bench/lib.sh
. "$here/bench/lib.sh"
declare -A p50 p99
# The workload's line, kept whole: CPU per request is the figure, the latencies ride along.
line() { grep -o 'cpu_ns_per_request .*' | tail -1; }
run_one() {
  local name=$1
  shift
  local l
  l=$("$@" 2>/dev/null | line || true)
  res[$name]="${res[$name]:-} $(echo "$l" | awk '{print ($2 == "" ? "nan" : $2)}')"
  p50[$name]="${p50[$name]:-} $(echo "$l" | awk '{print ($4 == "" ? "nan" : $4 / 1000)}')"
  p99[$name]="${p99[$name]:-} $(echo "$l" | awk '{print ($6 == "" ? "nan" : $6 / 1000)}')"
}

names=(untraced)
for b in $backends; do names+=("${b}_latency" "${b}_latency_why"); done
for _ in $(seq "$runs"); do
  run_one untraced "$work" -serve "$n" -rate "$rate"
  for b in $backends; do
    run_one "${b}_latency" "$gotap" latency --backend="$b" -o /dev/null main.serve -- "$work" -serve "$n" -rate "$rate"
    run_one "${b}_latency_why" "$gotap" latency --backend="$b" --why -o /dev/null main.serve -- "$work" -serve "$n" -rate "$rate"
  done
done

echo "Host: $(nproc) CPUs, $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg); $runs runs of $n requests at $rate/s."
printf '%-20s %16s %14s %10s %10s %14s\n' what cpu_ns/request added_ns x_latency p50_us p99_us
u=$(echo "${res[untraced]}" | median)
for k in "${names[@]}"; do
  m=$(echo "${res[$k]}" | median)
  b=${k%%_*}
  l=$(echo "${res[${b}_latency]:-}" | median || true)
  awk -v k="$k" -v m="$m" -v u="$u" -v l="$l" -v p="$(echo "${p50[$k]}" | median)" \
    -v q="$(echo "${p99[$k]}" | median)" 'BEGIN {
    added = (k == "untraced") ? "-" : sprintf("%.0f", m - u)
    ratio = (k ~ /_latency_why$/ && l - u > 0) ? sprintf("%.2f", (m - u) / (l - u)) : "-"
    printf "%-20s %16.0f %14s %10s %10.0f %14.0f\n", k, m, added, ratio, p, q
  }'
done
echo
echo "x_latency: what latency --why adds to the server's CPU per request over what latency adds."
