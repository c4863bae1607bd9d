#!/usr/bin/env bash
# CTest's Svg.RendersInChromium: traces the graph fixture once, writing the flame graph live
# (trace --format svg) and a record, renders the record too (report --format svg), and has
# headless Chromium draw both (check-svg-render.py). Exit 77 (skip) without root, Chromium
# or a built fixture.
#
# usage: svg-render-test.sh GOTAP FIXTURES_DIR [PYTHON]
set -euo pipefail
gotap=$1 fixtures=$2 python=${3:-python3}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

skip() { echo "svg-render-test: SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "tracing needs root"
command -v chromium >/dev/null || command -v chromium-browser >/dev/null ||
  skip "chromium is not installed (apt-get install chromium)"
# The newest toolchain's build: graph has a few levels of calls, so the graph has rows.
fixture=$(ls -d "$fixtures"/*/default/graph 2>/dev/null | sort -V | tail -1 || true)
[ -n "$fixture" ] || skip "no graph fixture under $fixtures (tests/tools/build-fixtures.sh)"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$gotap" trace --backend=ptrace --format svg -o "$tmp/live.svg" --record "$tmp/rec" \
  'main.*' -- "$fixture" >/dev/null
"$gotap" report --format svg -o "$tmp/report.svg" "$tmp/rec"
"$python" "$here/check-svg-render.py" "$tmp/live.svg" "$tmp/report.svg"
