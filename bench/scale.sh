#!/usr/bin/env bash
# gotap at scale (issue 22, goal 5), three measurements:
#   attach   arming and detaching probes, per probe, on real binaries and growing subsets of
#            their functions (up to every function: 're:.'), both backends. gotap launches
#            the program (a server that runs until gotap ends it after -d 1). Arming is from
#            the end of planning to armed, detaching its own phase (GOTAP_TIMING marks).
#   events   eBPF: events a second before the first lost one, per ring buffer size
#            (GOTAP_EBPF_RINGBUF_KB). The errors fixture calls main.hot at a requested rate
#            (two events a call); the rate is raised until events are lost or the program
#            no longer reaches it. Every run checks that the summary's `lost` equals
#            2 x calls made - events seen: a lost event is counted, never silent.
#   ptrace   ptrace: hits a second before the program slows by 2x. The same paced program
#            under `trace --backend=ptrace`: the slowdown is the rate asked for over the
#            rate it made; the figure is the hit rate where it reaches 2.
# SHORT=1 (CI): one small subset and one rate per part, to check the script runs.
#
# usage: bench/scale.sh [GOTAP] [PARTS...]   env: FIXTURES, SHORT, SECONDS_RUN, RINGS (KiB),
#   ONLY (a regexp of the attach targets: caddy, rclone, hugo, generated), GEN_FUNCS
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
gotap=${1:-$here/build/gotap}
shift || true
parts=${*:-attach events ptrace}
fx=${FIXTURES:-$here/build/fixtures}
short=${SHORT:-0}
secs=${SECONDS_RUN:-2}
errors=$fx/1.26/default/errors
[ -x "$gotap" ] || { echo "scale.sh: no gotap at $gotap" >&2; exit 2; }
[ -x "$errors" ] || { echo "scale.sh: no errors fixture at $errors (set FIXTURES)" >&2; exit 2; }
# shellcheck source=bench/lib.sh
. "$here/bench/lib.sh"
need /usr/bin/time:time python3:python3
work=$(mktemp -d /tmp/gotap-bench-scale.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/www"
echo ok >"$work/www/index.html"

echo "Host: $(nproc) CPUs, $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg)."

# summary FILE KEY: a field of the last summary line of a --json output ("" when absent).
summary() {
  grep '"event":"summary"' "$1" | tail -1 | python3 -c 'import json, sys
s = sys.stdin.read().strip()
v = json.loads(s).get(sys.argv[1], "") if s else ""
print(v)' "$2"
}
# mark FILE PHASE total|delta: a GOTAP_TIMING mark's wall and CPU ms, "W C"
# ("gotap: timing: PHASE +W ms, cpu +C ms (TW ms, cpu TC ms)").
mark() {
  if [ "$3" = total ]; then
    sed -nE "s/.*timing: $2 \+[0-9.]+ ms, cpu \+[0-9.]+ ms \(([0-9.]+) ms, cpu ([0-9.]+) ms\).*/\1 \2/p" "$1" | tail -1
  else
    sed -nE "s/.*timing: $2 \+([0-9.]+) ms, cpu \+([0-9.]+) ms.*/\1 \2/p" "$1" | tail -1
  fi
}

if [[ " $parts " == *" attach "* ]]; then
  echo
  echo "## attach: arming and detaching, per probe"
  echo
  echo "| binary | backend | pattern | functions | probes | arm ms (CPU) | arm us/probe (CPU) | detach ms (CPU) | detach us/probe (CPU) | peak RSS MB | ended |"
  echo "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|"
  if [ "$short" = 1 ]; then
    targets=("errors|$errors|hot 30 10|re:^main\.")
  else
    targets=()
    for p in 're:^net/http\.' 're:^[a-f]' 're:^[a-m]' 're:.'; do
      [ -x "$fx/real/caddy/caddy" ] &&
        targets+=("caddy|$fx/real/caddy/caddy|file-server --listen 127.0.0.1:0 --root $work/www|$p")
    done
    for p in 're:^net/http\.' 're:^[a-f]' 're:^[a-m]' 're:^[a-s]' 're:.'; do
      [ -x "$fx/real/rclone/rclone" ] &&
        targets+=("rclone|$fx/real/rclone/rclone|serve http --addr 127.0.0.1:0 $work/www|$p")
    done
    # Debian's hugo (53 MB), serving an empty site: every function only.
    if [ -x /usr/bin/hugo ] && /usr/bin/hugo new site "$work/site" >/dev/null 2>&1; then
      targets+=("hugo|/usr/bin/hugo|server -s $work/site --bind 127.0.0.1 --port 0|re:.")
    fi
    # A generated program of GEN_FUNCS functions (bench/gen-funcs.sh), for ~250,000 probes;
    # eBPF's count probes entries only, so eBPF runs latency (entries and RETs) there too.
    if [[ generated =~ ${ONLY:-.} ]] && "$here/bench/gen-funcs.sh" "$work/many" "${GEN_FUNCS:-125000}" >/dev/null 2>&1; then
      targets+=("generated|$work/many|sleep|re:.|count latency")
    fi
  fi
  for t in "${targets[@]}"; do
    IFS='|' read -r name bin args pat cmds <<<"$t"
    [[ "$name" =~ ${ONLY:-.} ]] || continue
    runs=()
    for c in ${cmds:-count}; do runs+=("$c/ebpf"); done
    runs+=(count/ptrace)
    for run in "${runs[@]}"; do
      sub=${run%/*} be=${run#*/} label=$name
      if [ "$sub" != count ]; then label="$name ($sub)"; fi
      # shellcheck disable=SC2086
      /usr/bin/time -f '%M' -o "$work/rss" env GOTAP_TIMING=1 "$gotap" "$sub" --backend="$be" --json \
        -o "$work/out" -d 1 "$pat" -- "$bin" $args >/dev/null 2>"$work/err" || true
      planned=$(mark "$work/err" plan total)
      armed=$(mark "$work/err" "$be: armed" total)
      detach=$(mark "$work/err" "$be: detached" delta)
      probes=$(summary "$work/out" probes)
      funcs=$(summary "$work/out" functions)
      ended=$(summary "$work/out" ended_by)
      if [ -z "$armed" ] || [ -z "$probes" ]; then
        echo "| $label | $be | \`$pat\` | ${funcs:--} | ${probes:--} | failed: $(grep -v timing "$work/err" | tail -1 | cut -c1-80) | | | | | |"
        continue
      fi
      read -r pw pc <<<"$planned"
      read -r aw ac <<<"$armed"
      read -r dw dc <<<"${detach:-nan nan}"
      awk -v n="$label" -v b="$be" -v p="$pat" -v f="$funcs" -v pr="$probes" -v aw="$aw" -v ac="$ac" \
        -v pw="$pw" -v pc="$pc" -v dw="$dw" -v dc="$dc" -v r="$(tail -1 "$work/rss")" -v e="$ended" \
        'BEGIN { w = aw - pw; c = ac - pc
                 d = dw == "nan" ? "- | -" : sprintf("%.0f (%.0f) | %.1f (%.1f)", dw, dc, dw * 1000 / pr, dc * 1000 / pr)
                 printf "| %s | %s | `%s` | %d | %d | %.0f (%.0f) | %.1f (%.1f) | %s | %.0f | %s |\n",
                 n, b, p, f, pr, w, c, w * 1000 / pr, c * 1000 / pr, d, r / 1024, e }'
    done
  done
fi

# paced BACKEND RATE [ENV...]: one run of the errors fixture's main.hot at RATE calls a second
# under trace --json; prints "made seen lost".
paced() {
  local be=$1 rate=$2
  shift 2
  env "$@" "$gotap" trace --backend="$be" --json -o "$work/ev" main.hot -- "$errors" hot "$secs" "$rate" \
    >"$work/stdout" 2>"$work/err" || true
  local made seen lost
  made=$(sed -nE 's/^gt calls func=main.hot made=([0-9]+)/\1/p' "$work/stdout")
  seen=$(grep -c '"func":"main.hot"' "$work/ev" || true)
  lost=$(summary "$work/ev" lost)
  echo "${made:-0} ${seen:-0} ${lost:-nan}"
}

if [[ " $parts " == *" events "* ]]; then
  echo
  echo "## events: eBPF events a second before the first loss, per ring buffer size"
  echo
  if [ "$short" = 1 ]; then
    rings=${RINGS:-64}
    rates="2000"
  else
    rings=${RINGS:-4 16 64 256 1024 16384}
    rates="1000 2000 5000 10000 20000 40000 80000"
  fi
  echo "| ring KiB | calls/s asked | calls/s made | events/s seen | lost | 2 x made - seen |"
  echo "|---:|---:|---:|---:|---:|---:|"
  for ring in $rings; do
    for rate in $rates; do
      read -r made seen lost < <(paced ebpf "$rate" GOTAP_EBPF_RINGBUF_KB="$ring")
      miss=$((2 * made - seen))
      awk -v k="$ring" -v r="$rate" -v m="$made" -v s="$seen" -v l="$lost" -v x="$miss" -v t="$secs" \
        'BEGIN { printf "| %d | %d | %.0f | %.0f | %s | %d |\n", k, r, m / t, s / t, l, x }'
      if [ "$lost" != "$miss" ]; then
        echo "scale.sh: ring $ring KiB, $rate/s: lost $lost but $miss events missing" >&2
        exit 1
      fi
      # Lost events, or a program that can no longer make the calls asked for: the next
      # rate tells nothing more.
      if [ "$lost" != 0 ]; then break; fi
      if awk -v m="$made" -v r="$rate" -v t="$secs" 'BEGIN { exit !(m / t < 0.8 * r) }'; then break; fi
    done
  done
fi

if [[ " $parts " == *" ptrace "* ]]; then
  echo
  echo "## ptrace: hits a second before the program slows by 2x"
  echo
  if [ "$short" = 1 ]; then rates="1000"; else rates="1000 2000 4000 8000 16000 32000 64000"; fi
  echo "| calls/s asked | calls/s made | hits/s | slowdown | lost |"
  echo "|---:|---:|---:|---:|---:|"
  for rate in $rates; do
    read -r made seen lost < <(paced ptrace "$rate")
    awk -v r="$rate" -v m="$made" -v s="$seen" -v l="$lost" -v t="$secs" \
      'BEGIN { printf "| %d | %.0f | %.0f | %.2f | %s |\n", r, m / t, s / t, (m > 0 ? r * t / m : 0), l }'
    if awk -v m="$made" -v r="$rate" -v t="$secs" 'BEGIN { exit !(m / t < 0.5 * r) }'; then break; fi
  done
fi
