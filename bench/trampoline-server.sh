#!/usr/bin/env bash
# A served request's time with every function of a Go 1.21+ server timed (issue 38's goal:
# `latency 're:.'` at most 2x a request's untraced time), side by side: untraced, gotap
# latency --backend trampoline (with and without its kernel uprobes for what no jump takes)
# and --backend ebpf, each attached by pid to the same server:
# esbuild (npm's, Go 1.26) serving a directory on loopback (tests/tools/fetch-real-binaries.sh
# puts it in build/fixtures/real/esbuild). Each figure is the median of REQUESTS sequential
# requests' time_total as curl measures it, in microseconds; RUNS rounds, interleaved.
#
# SERVER=caddy: Debian's caddy (Go 1.19, stripped; build/fixtures/real/caddy/caddy) serving
# the same file with `caddy file-server`, the server the issue names, instead of esbuild.
#
# WHY=1: `latency --why` instead (each call's time split, docs/cli.md): the trampoline backend's
# calls on jumps with the goroutine probes on uprobes, against eBPF's; no trampoline_jumps row
# (--why needs those uprobes).
#
# usage: bench/trampoline-server.sh [GOTAP] [SERVER-BINARY]   (root)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
gotap=${1:-$here/build/gotap}
server=${SERVER:-esbuild}
case "$server" in
  esbuild) server_bin=${2:-$here/build/fixtures/real/esbuild/esbuild} ;;
  caddy) server_bin=${2:-$here/build/fixtures/real/caddy/caddy} ;;
  *) echo "trampoline-server.sh: SERVER is esbuild or caddy, not $server" >&2; exit 2 ;;
esac
runs=${RUNS:-3}
requests=${REQUESTS:-300}
pattern=${PATTERN:-re:.}
why=()
[ "${WHY:-0}" = 1 ] && why=(--why)
[ -x "$gotap" ] || { echo "trampoline-server.sh: no gotap at $gotap" >&2; exit 2; }
[ -x "$server_bin" ] || { echo "trampoline-server.sh: no $server at $server_bin" >&2; exit 2; }
# shellcheck source=bench/lib.sh
. "$here/bench/lib.sh"
need curl:curl

dir=$(mktemp -d)
trap 'kill "$srv" 2>/dev/null; rm -rf "$dir"' EXIT
head -c 20000 /dev/urandom | base64 > "$dir/page.txt"
port=$((20000 + RANDOM % 20000))
if [ "$server" = caddy ]; then
  "$server_bin" file-server --listen "127.0.0.1:$port" --root "$dir" > "$dir/log" 2>&1 &
  srv=$!
else
  # esbuild serves while its stdin is open: a fifo this script holds open until it ends.
  mkfifo "$dir/in"
  "$server_bin" --serve=127.0.0.1:$port --servedir="$dir" < "$dir/in" > "$dir/log" 2>&1 &
  srv=$!
  exec 3> "$dir/in"
fi
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$port/page.txt" && break; sleep 0.1; done

# The median request time in us over $requests requests.
requests_us() {
  for _ in $(seq "$requests"); do
    curl -s -o /dev/null -w '%{time_total}\n' "http://127.0.0.1:$port/page.txt"
  done | awk '{print $1 * 1e6}' | sort -g | awk '{a[NR]=$1} END {printf "%.0f", a[int((NR+1)/2)]}'
}

# Run in a subshell ($(...)): what it probed goes to a file. trampoline_jumps is the
# trampoline backend without its kernel uprobes for what no jump takes
# (--jumps-only): those functions left out. trampoline_timer is
# trampoline_jumps with --no-failed: no function's failures counted, so its records are the
# timer's 32 bytes, not the tally's (docs/design.md, "Counted and timed calls decided on
# records").
traced_us() {
  local row=$1 backend=$1 log="$dir/$1.err" flags=()
  case "$row" in
    trampoline_jumps) backend=trampoline; flags=(--jumps-only) ;;
    trampoline_timer) backend=trampoline; flags=(--jumps-only --no-failed) ;;
  esac
  "$gotap" latency "${why[@]}" "${flags[@]}" --backend "$backend" -o "$dir/$row.out" -p "$srv" "$pattern" 2> "$log" &
  local g=$!
  for _ in $(seq 600); do grep -q '^Tracing ' "$log" && break; sleep 0.1; done
  grep -o '^Tracing [a-z ]*[0-9]* functions\? ([0-9]* probes\?)' "$log" > "$dir/$row.probes" || true
  requests_us
  kill -INT "$g"
  wait "$g" || true
}

for _ in $(seq "$runs"); do
  res["untraced"]="${res["untraced"]:-} $(requests_us)"
  res["trampoline"]="${res["trampoline"]:-} $(traced_us trampoline)"
  [ ${#why[@]} = 0 ] && res["trampoline_jumps"]="${res["trampoline_jumps"]:-} $(traced_us trampoline_jumps)"
  [ ${#why[@]} = 0 ] && res["trampoline_timer"]="${res["trampoline_timer"]:-} $(traced_us trampoline_timer)"
  res["ebpf"]="${res["ebpf"]:-} $(traced_us ebpf)"
done
kill -0 "$srv" || { echo "trampoline-server.sh: the server died" >&2; exit 1; }

printf '%-16s %14s %12s  %s\n' what us/request "x untraced" probes
u=$(echo "${res[untraced]}" | median)
for k in untraced trampoline trampoline_jumps trampoline_timer ebpf; do
  [ -n "${res[$k]:-}" ] || continue
  m=$(echo "${res[$k]}" | median)
  printf '%-16s %14s %12s  %s\n' "$k" "$m" "$(awk -v a="$m" -v b="$u" 'BEGIN {printf "%.2f", a / b}')" "$(cat "$dir/$k.probes" 2>/dev/null || true)"
done
