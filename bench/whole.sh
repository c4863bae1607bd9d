#!/usr/bin/env bash
# Whole-binary cost (issue 22, goals 3 and 4): `gotap funcs --json` of every function, and
# `gotap count 're:.'` attached to a caddy serving on loopback, command to armed and detach,
# per backend. Each figure is the minimum, median and maximum of RUNS interleaved runs, of
# wall time and of CPU time (user + system, every thread: on a shared machine the wall clock
# measures the other programs as much as gotap). With a second gotap (B), the same runs of
# each, interleaved, for an A/B. Arming and detaching are read from GOTAP_TIMING's marks, so
# B must have them too (A/B of `funcs` needs none). The peak RSS is the whole command's.
# CACHE=cold (default) plans every run (GOTAP_PLAN_CACHE=off); CACHE=warm gives the runs a
# plan cache of their own, filled by one unmeasured run of each command first.
# usage: bench/whole.sh [GOTAP_A] [GOTAP_B]   env: RUNS (default 5), FIXTURES, BACKENDS, CACHE
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
a=${1:-$here/build/gotap}
b=${2:-}
fx=${FIXTURES:-$here/build/fixtures}
runs=${RUNS:-5}
backends=${BACKENDS:-ebpf ptrace}
cache=${CACHE:-cold}
work=$(mktemp -d /tmp/gotap-bench-whole.XXXXXX)
if [ "$cache" = warm ]; then
  export GOTAP_PLAN_CACHE=$work/plans
else
  export GOTAP_PLAN_CACHE=off
fi
caddy_pid=
cleanup() {
  # A caddy that ends by the signal must not turn the exit status into 143.
  [ -n "$caddy_pid" ] && kill "$caddy_pid" 2>/dev/null && { wait "$caddy_pid" 2>/dev/null || true; }
  rm -rf "$work"
}
trap cleanup EXIT

# shellcheck source=bench/lib.sh
. "$here/bench/lib.sh"
need /usr/bin/time:time curl:curl
# timed FILE CMD...: runs CMD with GOTAP_TIMING=1, stderr to FILE; prints "wall_ms cpu_ms",
# and keeps its peak RSS (MB) in $f.rss.
timed() {
  local f=$1
  shift
  /usr/bin/time -f '%e %U %S %M' -o "$f.time" env GOTAP_TIMING=1 "$@" >/dev/null 2>"$f" || true
  awk '{printf "%.0f\n", $4 / 1024}' "$f.time" >"$f.rss"
  awk '{printf "%.0f %.0f\n", $1 * 1000, ($2 + $3) * 1000}' "$f.time"
}

declare -A wall cpu rss
tools=("$a")
[ -n "$b" ] && tools+=("$b")
label() { [ "$1" = "$a" ] && echo A || echo B; }

echo "Host: $(nproc) CPUs, $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg); $runs runs; plan cache $cache."
echo "A: $a${b:+; B: $b}"
echo
echo "| what | tool | wall ms (min / median / max) | CPU ms (min / median / max) | peak RSS MB (median) |"
echo "|---|---|---:|---:|---:|"
for bin in rclone/rclone caddy/caddy; do
  f=$fx/real/$bin
  [ -x "$f" ] || continue
  if [ "$cache" = warm ]; then
    for t in "${tools[@]}"; do "$t" funcs --json "$f" >/dev/null 2>&1 || true; done
  fi
  for ((i = 0; i < runs; i++)); do
    for t in "${tools[@]}"; do
      read -r w c < <(timed "$work/err" "$t" funcs --json "$f")
      k="funcs --json ${bin%%/*}|$(label "$t")"
      wall[$k]+=" $w"
      cpu[$k]+=" $c"
      rss[$k]+=" $(cat "$work/err.rss")"
    done
  done
done

caddy=$fx/real/caddy/caddy
if [ -x "$caddy" ]; then
  port=$((20000 + RANDOM % 20000))
  mkdir -p "$work/www"
  echo ok >"$work/www/index.html"
  "$caddy" file-server --listen "127.0.0.1:$port" --root "$work/www" >"$work/caddy.log" 2>&1 &
  caddy_pid=$!
  for ((try = 1; ; try++)); do
    curl -fs "127.0.0.1:$port/" >/dev/null && break
    if [ "$try" -ge 50 ]; then
      echo "whole.sh: caddy did not answer on 127.0.0.1:$port within 10 s: $(tail -1 "$work/caddy.log")" >&2
      exit 1
    fi
    sleep 0.2
  done
  if [ "$cache" = warm ]; then
    for t in "${tools[@]}"; do
      "$t" count -d 1 -p "$caddy_pid" 're:.' >/dev/null 2>&1 || true
    done
  fi
  for ((i = 0; i < runs; i++)); do
    for be in $backends; do
      for t in "${tools[@]}"; do
        timed "$work/err" "$t" count --backend="$be" -d 1 -p "$caddy_pid" 're:.' >/dev/null
        # GOTAP_TIMING lines: "gotap: timing: PHASE +W ms, cpu +C ms (TW ms, cpu TC ms)".
        armed=$(sed -nE "s/.*timing: $be: armed .*\(([0-9.]+) ms, cpu ([0-9.]+) ms\)/\1 \2/p" "$work/err")
        det=$(sed -nE "s/.*timing: $be: detached \+([0-9.]+) ms, cpu \+([0-9.]+) ms .*/\1 \2/p" "$work/err")
        # A gotap without the marks (or that failed to arm) gives no figure.
        if [ -n "$armed" ]; then
          k="count 're:.' caddy, $be: command to armed|$(label "$t")"
          wall[$k]+=" ${armed% *}"
          cpu[$k]+=" ${armed#* }"
          rss[$k]+=" $(cat "$work/err.rss")"
        fi
        if [ -n "$det" ]; then
          k="count 're:.' caddy, $be: detach|$(label "$t")"
          wall[$k]+=" ${det% *}"
          cpu[$k]+=" ${det#* }"
        fi
        curl -fs "127.0.0.1:$port/" >/dev/null || { echo "bench: caddy stopped answering" >&2; exit 1; }
      done
    done
  done
fi

for k in $(printf '%s\n' "${!wall[@]}" | sort | tr ' ' '\a'); do
  k=${k//$'\a'/ }
  [ -n "${wall[$k]// /}" ] || continue
  # shellcheck disable=SC2086
  r=-
  # shellcheck disable=SC2086
  [ -n "${rss[$k]:-}" ] && r=$(stats ${rss[$k]} | awk -F' / ' '{print $2}')
  # shellcheck disable=SC2086
  echo "| ${k%|*} | ${k##*|} | $(stats ${wall[$k]}) | $(stats ${cpu[$k]}) | $r |"
done
