#!/usr/bin/env bash
# Per-call cost of `gotap count --backend=ptrace` against `latency` (the same function's entry
# and RET breakpoints, two stops a call) and the untraced loop: the latency fixture's
# `bench N` times N calls of main.work itself, so start-up and attach are left out. Go 1.19's
# main.work has an entry probe that refires after morestack (count takes it back at the
# morestack call); newer releases' do not. With a second gotap (B), the same runs of it,
# interleaved, for an A/B. Each figure: min / median / max ns per call of RUNS runs.
# usage: bench/ptrace-count.sh [GOTAP_A] [GOTAP_B]   env: RUNS (5), N (20000), RELEASES, FIXTURES
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
a=${1:-$here/build/gotap}
b=${2:-}
runs=${RUNS:-5}
n=${N:-20000}
fx=${FIXTURES:-$here/build/fixtures}
releases=${RELEASES:-1.19 1.27}

per_call() { sed -n 's/.*ns_per_call \([0-9.]*\).*/\1/p' | head -1; }
# shellcheck source=bench/lib.sh
. "$here/bench/lib.sh"

echo "Host: $(nproc) CPUs, $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg); $runs runs of $n calls."
echo "A: $a${b:+; B: $b}"
echo
echo "| release | what | ns per call (min / median / max) | / untraced (median) | / latency (median) |"
echo "|---|---|---:|---:|---:|"
for rel in $releases; do
  prog=$fx/$rel/default/latency
  [ -x "$prog" ] || { echo "| $rel | no fixture at $prog | | | |"; continue; }
  declare -A got=()
  for ((i = 0; i < runs; i++)); do
    got[untraced]+=" $("$prog" bench $((n * 100)) | per_call)"
    for t in "$a" ${b:+"$b"}; do
      l=A
      [ "$t" = "$a" ] || l=B
      got[count $l]+=" $("$t" count --backend=ptrace -o /dev/null main.work -- "$prog" bench "$n" 2>/dev/null | per_call)"
      got[latency $l]+=" $("$t" latency --backend=ptrace -o /dev/null main.work -- "$prog" bench "$n" 2>/dev/null | per_call)"
    done
  done
  base=$(echo "${got[untraced]}" | median)
  # shellcheck disable=SC2086
  echo "| $rel | untraced | $(stats ${got[untraced]}) | | |"
  for l in A ${b:+B}; do
    lat=$(echo "${got[latency $l]}" | median)
    for what in count latency; do
      m=$(echo "${got[$what $l]}" | median)
      # shellcheck disable=SC2086
      echo "| $rel | $what ($l) | $(stats ${got[$what $l]}) | $(awk -v a="$m" -v b="$base" 'BEGIN{printf "%.0fx", a / b}') | $(awk -v a="$m" -v b="$lat" 'BEGIN{printf "%.2f", a / b}') |"
    done
  done
  unset got
done
