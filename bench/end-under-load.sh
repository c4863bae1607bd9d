#!/usr/bin/env bash
# Ending a whole-binary trace under load (issue 36): `gotap count --backend=ebpf 're:.'`
# attached to a caddy serving on loopback while curl keeps 8 requests in flight, then
# SIGINT (Ctrl-C): the wall time from the signal to gotap's exit, and the detach alone (wall
# and CPU, from GOTAP_TIMING's marks), as min / median / max of RUNS interleaved runs. With a
# second gotap (B), the same runs of each, interleaved, for an A/B.
# Every run must leave caddy as it found it: gotap exits 0, caddy's code in memory equals its
# file (every uprobe removed) and caddy still answers; otherwise the script fails (exit 1).
# usage: bench/end-under-load.sh [GOTAP_A] [GOTAP_B]   env: RUNS (default 5), FIXTURES,
#        TRACED_S (seconds traced before the signal, default 2), BACKEND (ebpf, or
#        trampoline: its jumps taken back with the threads stopped)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
a=${1:-$here/build/gotap}
b=${2:-}
fx=${FIXTURES:-$here/build/fixtures}
runs=${RUNS:-5}
traced_s=${TRACED_S:-2}
backend=${BACKEND:-ebpf}
work=$(mktemp -d /tmp/gotap-bench-end.XXXXXX)
caddy_pid=
load_pid=
cleanup() {
  [ -n "$load_pid" ] && kill "$load_pid" 2>/dev/null && { wait "$load_pid" 2>/dev/null || true; }
  [ -n "$caddy_pid" ] && kill "$caddy_pid" 2>/dev/null && { wait "$caddy_pid" 2>/dev/null || true; }
  rm -rf "$work"
}
trap cleanup EXIT

# shellcheck source=bench/lib.sh
. "$here/bench/lib.sh"
need curl:curl python3:python3
caddy=$fx/real/caddy/caddy
[ -x "$caddy" ] || {
  echo "end-under-load.sh: no $caddy (tests/tools/fetch-real-binaries.sh)" >&2
  exit 2
}

# Whether PID's executable mappings of FILE hold FILE's own bytes.
text_is_file() {
  python3 - "$1" "$2" <<'EOF'
import os, sys
pid, path = sys.argv[1], os.path.realpath(sys.argv[2])
with open(path, "rb") as f:
    file = f.read()
checked = 0
with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb") as mem:
    for line in maps:
        parts = line.split()
        if len(parts) < 6 or "x" not in parts[1] or os.path.realpath(parts[5]) != path:
            continue
        lo, hi = (int(x, 16) for x in parts[0].split("-"))
        off = int(parts[2], 16)
        mem.seek(lo)
        live = mem.read(hi - lo)
        want = file[off:off + len(live)]
        if live[:len(want)] != want:
            diff = next(i for i in range(len(want)) if live[i] != want[i])
            print(f"byte {lo + diff:#x} differs from the file", file=sys.stderr)
            sys.exit(1)
        checked += 1
sys.exit(0 if checked else 1)
EOF
}

# Wall and CPU ms between two GOTAP_TIMING marks of FILE ("gotap: timing: PHASE +W ms, cpu +C
# ms (TOTAL ms, cpu TOTAL ms)"), from their totals; "- -" when one is missing.
between() {
  python3 - "$@" <<'EOF'
import re, sys
marks = {}
for line in open(sys.argv[1]):
    m = re.search(r"timing: (.+?) \+[0-9.]+ ms, cpu \+[0-9.]+ ms \(([0-9.]+) ms, cpu ([0-9.]+) ms\)", line)
    if m:
        marks[m.group(1)] = (float(m.group(2)), float(m.group(3)))
a, b = marks.get(sys.argv[2]), marks.get(sys.argv[3])
print(f"{b[0] - a[0]:.1f} {b[1] - a[1]:.1f}" if a and b else "- -")
EOF
}

port=$((20000 + RANDOM % 20000))
mkdir -p "$work/www"
echo ok >"$work/www/index.html"
"$caddy" file-server --listen "127.0.0.1:$port" --root "$work/www" >"$work/caddy.log" 2>&1 &
caddy_pid=$!
for ((try = 1; ; try++)); do
  curl -fs "127.0.0.1:$port/" >/dev/null && break
  if [ "$try" -ge 50 ]; then
    echo "end-under-load.sh: caddy did not answer on 127.0.0.1:$port within 10 s" >&2
    exit 1
  fi
  sleep 0.2
done
# The load: URL globbing makes curl send 10 million requests, 8 at a time.
curl -s --no-progress-meter --parallel --parallel-max 8 -o /dev/null \
  "http://127.0.0.1:$port/?[1-10000000]" 2>/dev/null &
load_pid=$!

declare -A end wall cpu hold
tools=("$a")
[ -n "$b" ] && tools+=("$b")
label() { [ "$1" = "$a" ] && echo A || echo B; }

echo "Host: $(nproc) CPUs, $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg); $runs runs."
echo "A: $a${b:+; B: $b}"
echo
echo "| caddy under load, count --backend=$backend 're:.' | tool | wall ms (min / median / max) | CPU ms (min / median / max) |"
echo "|---|---|---:|---:|"
for ((i = 0; i < runs; i++)); do
  for t in "${tools[@]}"; do
    # Emptied here, not by the redirection of the job below, which may come after the first
    # look for the banner (the previous run's).
    : >"$work/err"
    GOTAP_TIMING=1 "$t" count --backend="$backend" -p "$caddy_pid" 're:.' >"$work/out" 2>>"$work/err" &
    gp=$!
    for ((try = 0; try < 1200; try++)); do
      grep -q '^Tracing' "$work/err" && break
      kill -0 "$gp" 2>/dev/null || break
      sleep 0.1
    done
    grep -q '^Tracing' "$work/err" || {
      rc=0
      kill -0 "$gp" 2>/dev/null || wait "$gp" || rc=$?
      echo "end-under-load.sh: gotap did not start tracing (exit status $rc):" >&2
      cat "$work/err" >&2
      exit 1
    }
    sleep "$traced_s"
    t0=$(date +%s%N)
    kill -INT "$gp"
    rc=0
    wait "$gp" || rc=$?
    t1=$(date +%s%N)
    [ "$rc" = 0 ] || {
      echo "end-under-load.sh: gotap exited $rc: $(tail -1 "$work/err")" >&2
      exit 1
    }
    text_is_file "$caddy_pid" "$caddy" || {
      echo "end-under-load.sh: caddy's code is not its file's after gotap ended" >&2
      exit 1
    }
    curl -fs "127.0.0.1:$port/" >/dev/null || {
      echo "end-under-load.sh: caddy stopped answering" >&2
      exit 1
    }
    k=$(label "$t")
    end[$k]+=" $(((t1 - t0) / 1000000))"
    # The detach from the trace's end to "detached", whatever marks lie between, and the
    # threads' hold (eBPF) from "threads held" to "threads let go": GOTAP_TIMING's totals.
    det=$(between "$work/err" "$backend: traced" "$backend: detached")
    wall[$k]+=" ${det% *}"
    cpu[$k]+=" ${det#* }"
    held=$(between "$work/err" "ebpf: threads held" "ebpf: threads let go")
    [ "$held" = "- -" ] || hold[$k]+=" ${held% *}"
  done
done
for t in "${tools[@]}"; do
  k=$(label "$t")
  # shellcheck disable=SC2086
  echo "| SIGINT to exit | $k | $(stats ${end[$k]}) | |"
  # shellcheck disable=SC2086
  echo "| detach | $k | $(stats ${wall[$k]}) | $(stats ${cpu[$k]}) |"
  # shellcheck disable=SC2086
  if [ -n "${hold[$k]:-}" ]; then echo "| threads held | $k | $(stats ${hold[$k]}) | |"; fi
done
