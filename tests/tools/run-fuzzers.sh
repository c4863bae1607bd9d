#!/usr/bin/env bash
# Runs every built libFuzzer target for a bounded time, seeded with small Go binaries.
# usage: run-fuzzers.sh FUZZ_BUILD_DIR FIXTURES_DIR SECONDS
set -euo pipefail
build=$1 fixtures=$2 seconds=$3
seeds=$(mktemp -d)
trap 'rm -rf "$seeds"' EXIT
# Seeds: the smallest fixture of each Go version and flavour, plus a non-Go ELF.
for d in "$fixtures"/*/*/; do
  f=$(find "$d" -maxdepth 1 -type f ! -name '*.*' -printf '%s %p\n' 2>/dev/null | sort -n | head -1 | cut -d' ' -f2)
  [ -n "$f" ] && cp "$f" "$seeds/$(echo "$d" | tr '/' '_')bin"
done
cp /bin/true "$seeds/true"
status=0
for fz in "$build"/tests/fuzz_*; do
  [ -x "$fz" ] || continue
  name=$(basename "$fz")
  corpus="$build/corpus-$name"
  mkdir -p "$corpus"
  echo "fuzz: $name for ${seconds}s"
  if ! "$fz" -max_total_time="$seconds" -max_len=4194304 -rss_limit_mb=4096 -timeout=30 \
    -print_final_stats=0 "$corpus" "$seeds" >"$build/$name.log" 2>&1; then
    echo "fuzz: $name FAILED; tail of its log:" >&2
    tail -40 "$build/$name.log" >&2
    status=1
  fi
done
exit $status
