#!/usr/bin/env bash
# Runs every built libFuzzer target for a bounded time, seeded with small Go binaries.
# usage: run-fuzzers.sh FUZZ_BUILD_DIR FIXTURES_DIR SECONDS
# tests/fuzz/regressions/<target>/ holds inputs a target once failed on; each run reads them.
set -euo pipefail
build=$1 fixtures=$2 seconds=$3
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
seeds=$(mktemp -d)
trap 'rm -rf "$seeds"' EXIT
# Seeds: the smallest fixture of each Go version and flavour, plus a non-Go ELF.
for d in "$fixtures"/*/*/; do
  f=$(find "$d" -maxdepth 1 -type f ! -name '*.*' -printf '%s %p\n' 2>/dev/null | sort -n | head -1 | cut -d' ' -f2)
  [ -n "$f" ] && cp "$f" "$seeds/$(echo "$d" | tr '/' '_')bin"
done
cp /bin/true "$seeds/true"
# One target per core at once: the stage's time is the targets' count times SECONDS over the
# cores, not the sum.
jobs=${GOTAP_FUZZ_JOBS:-$(nproc)}
run_one() {
  local fz=$1 name corpus
  name=$(basename "$fz")
  corpus="$build/corpus-$name"
  rm -rf "$build/artifacts-$name"
  mkdir -p "$corpus" "$build/artifacts-$name"
  # Inputs that once crashed or hung a target are read first, every run: a fix stays fixed.
  local regressions=()
  [ -d "$here/../fuzz/regressions/$name" ] && regressions=("$here/../fuzz/regressions/$name")
  if "$fz" -max_total_time="$seconds" -max_len=4194304 -rss_limit_mb=4096 -timeout=30 \
    -print_final_stats=0 -artifact_prefix="$build/artifacts-$name/" \
    "$corpus" "${regressions[@]}" "$seeds" >"$build/$name.log" 2>&1; then
    echo ok >"$build/$name.result"
  else
    echo failed >"$build/$name.result"
  fi
}
names=()
for fz in "$build"/tests/fuzz_*; do
  [ -x "$fz" ] || continue
  name=$(basename "$fz")
  names+=("$name")
  rm -f "$build/$name.result"
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  echo "fuzz: $name for ${seconds}s"
  run_one "$fz" &
done
wait
status=0
for name in "${names[@]}"; do
  if [ "$(cat "$build/$name.result" 2>/dev/null)" != ok ]; then
    echo "fuzz: $name FAILED; tail of its log:" >&2
    tail -40 "$build/$name.log" >&2
    # CI keeps only this output: a small input is printed, to be added to the regressions.
    for a in "$build/artifacts-$name"/*; do
      [ -f "$a" ] || continue
      echo "fuzz: $name's input $(basename "$a"), $(stat -c %s "$a") bytes, base64:" >&2
      if [ "$(stat -c %s "$a")" -le 65536 ]; then base64 -w 100 "$a" >&2; fi
    done
    status=1
  fi
done
exit $status
