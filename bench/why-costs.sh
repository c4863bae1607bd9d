#!/usr/bin/env bash
# What --why costs per goroutine status change, per system call and per context switch
# (issue 37, item 4), on a workload that makes only those: gotap-workload -pingpong N passes a
# token between two goroutines (each handoff parks one and wakes the other: about three
# status changes), -syscalls M makes raw getppid calls (no status change). The traced
# function, main.handle, is never called in either mode: what is measured is what --why adds
# to everything else a program does. Runs, interleaved, $RUNS times each:
#   pingpong_untraced            the handoffs alone
#   pingpong_ebpf_why            gotap trace --backend=ebpf --why main.handle
#   pingpong_ebpf_goroutines     the same with --goroutines --json (every change sent)
#   pingpong_ptrace_why          gotap trace --backend=ptrace --why main.handle, on N/10
#   syscalls_untraced            the system calls alone
#   syscalls_ebpf_why            gotap trace --backend=ebpf --why main.handle
#   syscalls_ptrace_why          gotap trace --backend=ptrace --why main.handle
# and prints medians of the workload's own ns per handoff or per system call, and what tracing
# adds per status change ((traced - untraced) / changes per handoff) or per system call.
# With kernel.bpf_stats_enabled set for the run, it also prints what each BPF program of
# --why costs per run in the kernel (run_time_ns / run_cnt, sampled every 50 ms while the
# eBPF runs last): gotap_probe (every uprobe, the goroutine probes here), gotap_why_switch
# (every context switch on the machine), gotap_why_sys_enter and _exit (every system call),
# and ptrace's gotap_stop_sys_enter and _exit (the same, kept per thread until its stop).
#
# usage: bench/why-costs.sh [GOTAP] [WORKLOAD]      (root)   env: RUNS (5), HANDOFFS (200000),
#        SYSCALLS (2000000)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
gotap=${1:-$here/build/gotap}
work=${2:-$here/build/gotap-workload}
runs=${RUNS:-5}
n=${HANDOFFS:-200000}
m=${SYSCALLS:-2000000}
[ -x "$gotap" ] || { echo "why-costs.sh: no gotap at $gotap" >&2; exit 2; }
[ -x "$work" ] || { echo "why-costs.sh: no gotap-workload at $work (built with the project when Go is found)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "why-costs.sh: needs root (BPF and ptrace)" >&2; exit 2; }
# shellcheck source=bench/lib.sh
. "$here/bench/lib.sh"
need bpftool:bpftool python3:python3

tmp=$(mktemp -d /tmp/gotap-bench-why-costs.XXXXXX)
stats_was=$(cat /proc/sys/kernel/bpf_stats_enabled 2>/dev/null || echo 0)
cleanup() {
  echo "$stats_was" >/proc/sys/kernel/bpf_stats_enabled 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
echo 1 >/proc/sys/kernel/bpf_stats_enabled

per() { grep -oE 'ns_per_(handoff|syscall) [0-9.]*' | awk '{print $2}' | tail -1; }
metric=per

# sampled COMMAND...: runs COMMAND (its output on stdout) while the BPF programs' run
# statistics are sampled into $tmp/progs/N.json every 50 ms. A short run may end (and its
# programs go) before a late sample: prog_cost reads the last sample in which a program ran.
sampled() {
  rm -rf "$tmp/progs"
  mkdir -p "$tmp/progs"
  ( n=0
    while :; do
      n=$((n + 1))
      bpftool prog show -j >"$tmp/progs/new" 2>/dev/null &&
        mv "$tmp/progs/new" "$tmp/progs/$(printf '%06d' "$n").json"
      sleep 0.05
    done ) &
  local sampler=$!
  "$@" || true
  kill "$sampler" 2>/dev/null || true
  wait "$sampler" 2>/dev/null || true
}
# prog_cost NAME: run_time_ns / run_cnt of the program NAME in the last sample in which it
# had run ("nan": none).
prog_cost() {
  python3 - "$tmp/progs" "$1" <<'EOF'
import glob, json, os, sys
best = "nan"
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    try:
        progs = json.load(open(path))
    except Exception:
        continue
    ns = runs = 0
    for p in progs:
        name = p.get("name", "")
        # bpftool prints the full name from BTF, or the kernel's first 15 characters.
        if name == sys.argv[2] or (len(name) == 15 and sys.argv[2].startswith(name)):
            ns += p.get("run_time_ns", 0)
            runs += p.get("run_cnt", 0)
    if runs:
        best = f"{ns / runs:.0f}"
print(best)
EOF
}
declare -A cost
keep() { cost[$1]="${cost[$1]:-} $(prog_cost "$2")"; }

for _ in $(seq "$runs"); do
  run pingpong_untraced "$work" -pingpong "$n"
  run pingpong_ebpf_why sampled "$gotap" trace --backend=ebpf --why -o /dev/null main.handle -- "$work" -pingpong "$n"
  keep probe_status gotap_probe
  keep switch gotap_why_switch
  run pingpong_ebpf_goroutines "$gotap" trace --backend=ebpf --why --goroutines --json -o /dev/null main.handle -- "$work" -pingpong "$n"
  run pingpong_ptrace_why "$gotap" trace --backend=ptrace --why -o /dev/null main.handle -- "$work" -pingpong $((n / 10))
  run syscalls_untraced "$work" -syscalls "$m"
  run syscalls_ebpf_why sampled "$gotap" trace --backend=ebpf --why -o /dev/null main.handle -- "$work" -syscalls "$m"
  keep sys_enter gotap_why_sys_enter
  keep sys_exit gotap_why_sys_exit
  run syscalls_ptrace_why sampled "$gotap" trace --backend=ptrace --why -o /dev/null main.handle -- "$work" -syscalls "$m"
  keep ptrace_sys_enter gotap_stop_sys_enter
  keep ptrace_sys_exit gotap_stop_sys_exit
done

# Status changes per handoff, from the events themselves.
"$gotap" goroutines --backend=ebpf --json -o "$tmp/g.json" -- "$work" -pingpong "$n" >/dev/null 2>&1 || true
changes=$(grep -c '"event":"gstate"' "$tmp/g.json" || true)
per_handoff=$(awk -v c="$changes" -v n="$n" 'BEGIN {printf "%.2f", c / n}')

printf '%-26s %12s %14s\n' what ns/unit added/event
u_pp=$(echo "${res[pingpong_untraced]}" | median)
u_sc=$(echo "${res[syscalls_untraced]}" | median)
for k in pingpong_untraced pingpong_ebpf_why pingpong_ebpf_goroutines pingpong_ptrace_why syscalls_untraced syscalls_ebpf_why syscalls_ptrace_why; do
  med=$(echo "${res[$k]}" | median)
  case $k in
    *_untraced) add=- ;;
    pingpong_*) add=$(awk -v a="$med" -v u="$u_pp" -v p="$per_handoff" 'BEGIN {printf "%.0f", (a - u) / p}') ;;
    syscalls_*) add=$(awk -v a="$med" -v u="$u_sc" 'BEGIN {printf "%.0f", a - u}') ;;
  esac
  printf '%-26s %12s %14s\n' "$k" "$med" "$add"
done
echo
echo "status changes per handoff: $per_handoff ($changes gstate events for $n handoffs)"
echo
echo "BPF programs, ns per run in the kernel (median of runs):"
for k in probe_status switch sys_enter sys_exit ptrace_sys_enter ptrace_sys_exit; do
  printf '%-26s %12s\n' "$k" "$(echo "${cost[$k]}" | median)"
done
