#!/usr/bin/env bash
# What --max-overhead gives back to the program (issue 21, item 6), on the errors fixture's
# "breaker" mode (tests/fixtures/errors): main.hot in a tight loop on one goroutine for
# SECONDS, main.cold called 20 times. The fixture prints main.hot's calls per second every
# half second on stderr. For each backend, `count --max-overhead 5 main.hot main.cold`:
#   untraced     main.hot's calls/s with no probe (the median of the half-second figures)
#   probed       its calls/s while its probes are live (before the detach)
#   detached     its calls/s after gotap detached it (from 0.5 s after the detach on)
#   at_s         when it was detached, in seconds from the start (the window is 1 s)
#   pct          the cost gotap measured, in % of the program's CPU over that window
#   cold         main.cold's count (must be 20: the fixture's own account)
#
# usage: bench/overhead.sh [GOTAP] [ERRORS_FIXTURE] [SECONDS]      (root)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
gotap=${1:-$here/build/gotap}
bin=${2:-$(ls -d "$here"/build/fixtures/1.26/default/errors 2>/dev/null || true)}
seconds=${3:-4}
[ -x "$gotap" ] || { echo "overhead.sh: no gotap at $gotap" >&2; exit 2; }
[ -x "$bin" ] || { echo "overhead.sh: no errors fixture binary (give it as the 2nd argument)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$bin" breaker "$seconds" 20 >"$tmp/untraced.out" 2>"$tmp/untraced.err"
printf '%-8s %12s %12s %12s %6s %7s %5s\n' backend untraced probed detached at_s pct cold
for backend in ebpf ptrace; do
  "$gotap" count --backend="$backend" --json --max-overhead 5 main.hot main.cold -- \
    "$bin" breaker "$seconds" 20 >"$tmp/$backend.out" 2>"$tmp/$backend.err" || true
  python3 - "$tmp/untraced.err" "$tmp/$backend.out" "$tmp/$backend.err" "$backend" <<'PY'
import json, re, statistics, sys
untraced_err, out, err, backend = sys.argv[1:]
rates = lambda path: [(float(t), int(n)) for t, n in
                      re.findall(r"breaker t=([\d.]+) hot_per_s=(\d+)", open(path).read())]
base = [n for t, n in rates(untraced_err)[:-1]]  # the last half second is cut by the stop
events = [json.loads(l) for l in open(out) if l.startswith('{"event"')]
det = [e for e in events if e["event"] == "detached"]
cold = [e["count"] for e in events if e["event"] == "count" and e["func"] == "main.cold"]
traced = rates(err)[:-1]
# The detach time on the fixture's clock: the first half second whose rate is back above
# half the untraced one, and the event's figures.
at = next((t for t, n in traced if n > statistics.median(base) / 2), float("nan"))
before = [n for t, n in traced if t < at]
after = [n for t, n in traced if t >= at + 0.5]
med = lambda v: statistics.median(v) if v else float("nan")
print(f"{backend:<8} {med(base):12.0f} {med(before):12.0f} {med(after):12.0f} {at:6.1f} "
      f"{det[0]['overhead_pct'] if det else float('nan'):7.1f} {cold[0] if cold else '-':>5}")
PY
done
