#!/usr/bin/env bash
# Per-call cost of the ptrace backend: a Go program (bench/ptrace-program.sh) times N calls
# of a tiny function itself (so start-up and attach are excluded) untraced, under `gotap trace
# --backend=ptrace`, and under `dlv trace` (Debian package delve) when installed.
# Prints a markdown table of ns per call and the ratios.
# Usage: bench/ptrace.sh [GOTAP] [GO_VERSION]   env: N, N_DLV, RUNS
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
gotap=${1:-$here/build/gotap}
gover=${2:-1.19}  # delve 1.20 (Debian 12) reads Go <= 1.20 binaries
n=${N:-20000}
n_dlv=${N_DLV:-200}
work=$(mktemp -d /tmp/gotap-bench-ptrace.XXXXXX)
trap 'rm -rf "$work"' EXIT
"$here/bench/ptrace-program.sh" "$work/bench" "$gover"

per_call() { sed -n 's/.*ns_per_call \([0-9.]*\).*/\1/p' | head -1; }
# shellcheck source=bench/lib.sh
. "$here/bench/lib.sh"
ratio() { awk -v a="$1" -v b="$2" -v f="$3" 'BEGIN{ if (b > 0 && a == a + 0) printf f, a / b; else print "n/a" }'; }

# Each figure is the median of $RUNS runs, interleaved so machine noise hits all alike.
#   untraced           the loop alone (100x the calls, for resolution)
#   bare (latency)     the same breakpoints, entry and every ret: one stop per hit, goroutine
#                      id read and pairing, but no value decoding and no per-call output
#   trace              gotap trace --json to /dev/null: full decoding of args and results
#   floor              the same breakpoints, each stop resumed at once with nothing read or
#                      written (GOTAP_PTRACE_FLOOR=1): what any ptrace tracer pays here
runs=${RUNS:-3}
echo "| function | untraced ns/call | floor (stops alone) ns/call | bare probes (latency) ns/call | trace ns/call | trace / untraced | trace / floor | trace / bare | dlv trace ns/call | gotap / dlv | floor / dlv |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for fn in tiny framed; do
  base="" bare="" traced="" floor=""
  for _ in $(seq "$runs"); do
    base="$base $("$work/bench" $((n * 100)) $fn | per_call)"
    floor="$floor $(GOTAP_PTRACE_FLOOR=1 "$gotap" trace --backend=ptrace --json -o /dev/null "main.$fn" -- "$work/bench" "$n" $fn 2>/dev/null | per_call)"
    bare="$bare $("$gotap" latency --backend=ptrace -o /dev/null "main.$fn" -- "$work/bench" "$n" $fn 2>/dev/null | per_call)"
    traced="$traced $("$gotap" trace --backend=ptrace --json -o /dev/null "main.$fn" -- "$work/bench" "$n" $fn 2>/dev/null | per_call)"
  done
  base=$(echo "$base" | median) bare=$(echo "$bare" | median) traced=$(echo "$traced" | median)
  floor=$(echo "$floor" | median)
  dlvt="not installed (apt-get install delve)" dratio="n/a" fratio="n/a"
  if command -v dlv >/dev/null; then
    dlvt=$(cd "$work" && timeout 600 dlv trace --check-go-version=false --exec ./bench "main\\.$fn\$" -- "$n_dlv" $fn 2>/dev/null | per_call || true)
    if [ -n "$dlvt" ]; then
      dratio=$(ratio "$traced" "$dlvt" "%.4f") fratio=$(ratio "$floor" "$dlvt" "%.4f")
    else dlvt="failed"; fi
  fi
  echo "| main.$fn | $base | $floor | $bare | $traced | $(ratio "$traced" "$base" "%.0fx") | $(ratio "$traced" "$floor" "%.2f") | $(ratio "$traced" "$bare" "%.2f") | $dlvt | $dratio | $fratio |"
done
