#!/usr/bin/env bash
# Benchmark: how long `gotap funcs --json BIN 'net/http.*'` takes on the largest stripped
# real-world Go binary (tests/tools/fetch-real-binaries.sh), against two peers:
#   - `gotap info --json BIN` (loading the binary without planning probes), and
#   - bench/gosymload: Go's own debug/elf + debug/gosym loading the same table and listing
#     the same functions (`go tool nm` cannot be the peer: the binary is stripped).
# Prints a markdown table on stdout. Uses hyperfine when installed, else a timing loop.
#
# usage: bench/funcs.sh [BUILD_DIR] [BINARY]   (defaults: build, the largest real binary)
# env:   RUNS (default 10), PATTERN (default 'net/http.*'), NO_HYPERFINE=1 forces the loop
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
gotap="$build/gotap"
[ -x "$gotap" ] || { echo "bench: $gotap is not built" >&2; exit 1; }
bin=${2:-}
if [ -z "$bin" ]; then
  size=0
  for f in "$build"/fixtures/real/*/*; do
    [ -f "$f" ] || continue
    case "${f##*/}" in *.*) continue ;; esac
    s=$(stat -c %s "$f")
    if [ "$s" -gt "$size" ]; then size=$s bin=$f; fi
  done
  [ -n "$bin" ] || {
    echo "bench: no real binaries; run tests/tools/fetch-real-binaries.sh $build/fixtures" >&2
    exit 1
  }
fi
runs=${RUNS:-10}
pattern=${PATTERN:-net/http.*}
prefix=${pattern%\*}

# The peer, built with the newest Go toolchain available.
read -r ver goroot < <("$src/tests/tools/fetch-go.sh" | sort -t. -k1,1n -k2,2n | tail -1)
peer="$build/bench/gosymload"
mkdir -p "$build/bench"
if [ ! -x "$peer" ] || [ "$src/bench/gosymload/main.go" -nt "$peer" ]; then
  (cd "$src/bench/gosymload" && GOROOT=$goroot GOTOOLCHAIN=local GOPROXY=off GOFLAGS=-mod=mod \
    GOCACHE="$build/bench/.gocache" CGO_ENABLED=0 "$goroot/bin/go" build -o "$peer" .)
fi

names=("gotap funcs --json '$pattern'" "gotap info --json" "debug/gosym (Go $ver)")
cmds=("$gotap funcs --json $bin $pattern" "$gotap info --json $bin" "$peer $bin $prefix")
matched=$("$gotap" funcs --json "$bin" "$pattern" | grep -c '"event":"func"' || true)
# Signature recovery is on (a stripped binary's methods get their types from the method
# tables): how many of the matched functions got each kind of signature.
sources=$("$gotap" funcs --json "$bin" "$pattern" | grep -o '"signature":"[a-z-]*"' | cut -d'"' -f4 |
  sort | uniq -c | awk '{printf "%s%s %s", (NR > 1 ? ", " : ""), $1, $2}')

echo "Binary: \`$(basename "$bin")\`, $(($(stat -c %s "$bin") / 1048576)) MB, stripped:" \
  "$(readelf -S "$bin" 2>/dev/null | grep -q '\.symtab' && echo no || echo yes);" \
  "functions matching \`$pattern\`: $matched (gotap), $("$peer" "$bin" "$prefix") (debug/gosym); $runs runs each." \
  "Signatures of the matched functions: $sources."
echo

declare -a means sds
if [ -z "${NO_HYPERFINE:-}" ] && command -v hyperfine >/dev/null; then
  tmp=$(mktemp)
  trap 'rm -f "$tmp"' EXIT
  hyperfine -N --style none --warmup 2 --runs "$runs" --export-json "$tmp" "${cmds[@]}" >/dev/null 2>&1
  # Mean and stddev in seconds, in command order.
  mapfile -t means < <(grep -o '"mean": *[0-9.e-]*' "$tmp" | awk '{print $2}')
  mapfile -t sds < <(grep -o '"stddev": *[0-9.e-]*' "$tmp" | awk '{print $2}')
  tool=hyperfine
else
  for c in "${cmds[@]}"; do
    read -r -a argv <<<"$c"
    "${argv[@]}" >/dev/null
    ts=()
    for ((i = 0; i < runs; i++)); do
      t0=$(date +%s%N)
      "${argv[@]}" >/dev/null
      t1=$(date +%s%N)
      ts+=($((t1 - t0)))
    done
    read -r m s < <(printf '%s\n' "${ts[@]}" |
      awk '{x += $1; xx += $1 * $1; n++} END {m = x / n; v = xx / n - m * m; if (v < 0) v = 0; printf "%.6f %.6f\n", m / 1e9, sqrt(v) / 1e9}')
    means+=("$m")
    sds+=("$s")
  done
  tool="date +%s%N loop"
fi

echo "| command | mean (ms) | stddev (ms) | relative to gotap funcs |"
echo "|---|---:|---:|---:|"
for i in "${!names[@]}"; do
  awk -v n="${names[$i]}" -v m="${means[$i]}" -v s="${sds[$i]}" -v b="${means[0]}" \
    'BEGIN {printf "| %s | %.1f | %.1f | %.2fx |\n", n, m * 1000, s * 1000, m / b}'
done
echo
echo "Measured with $tool on $(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg)."
