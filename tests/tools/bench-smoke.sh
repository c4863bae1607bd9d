#!/usr/bin/env bash
# Runs one of bench/'s scripts in a short mode and checks that it measured: every row it
# must print is there and every figure in it is a number. CI checks that the benchmarks
# run, not their figures (those go to docs/benchmarks.md from full runs on a quiet machine):
# a script that silently stopped measuring (a renamed timing line, a peer that fails, a
# fixture moved) would otherwise only show when someone next needs its figures.
# usage: bench-smoke.sh ebpf|ptrace|count|levers|whole|end|funcs|why|why-costs|trampoline GOTAP FIXTURES_DIR
# Exit 77 (a skip) without root; 1 with what is missing.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
what=$1 gotap=$2 fx=$3
[ "$(id -u)" = 0 ] || [ "$what" = funcs ] || { echo "bench-smoke: $what needs root (ptrace and BPF)"; exit 77; }
out=$(mktemp /tmp/gotap-bench-smoke.XXXXXX)
trap 'rm -f "$out" "$out.bin"' EXIT
fail() {
  echo "bench-smoke $what: $*" >&2
  echo "---- output:" >&2
  cat "$out" >&2
  exit 1
}
# need PATTERN: a line matching the extended regex PATTERN is printed.
need() { grep -Eq -- "$1" "$out" || fail "no line matching /$1/"; }
num='[0-9]+(\.[0-9]+)?'

case "$what" in
  ebpf)
    RUNS=1 "$here/bench/ebpf.sh" "$gotap" "$fx/1.26/default/latency" 20000 >"$out"
    for k in untraced count empty_entry empty_entry_ret latency trace trace_json; do
      need "^$k +$num\$"
    done
    if command -v bpftrace >/dev/null; then
      need "^bpftrace_count +$num\$"
      need "^count / bpftrace count: +$num "
    fi
    need "^trace / empty probes: +$num "
    need "^trace --json / empty: +$num"
    ;;
  trampoline)
    RUNS=1 FEW_CALLS=2000 N_DLV=20 "$here/bench/trampoline.sh" "$gotap" "$fx/1.26/default/latency" 200000 >"$out"
    for k in untraced empty_trampoline trampoline ebpf ptrace trampoline_latency ebpf_latency ptrace_latency trampoline_trace ebpf_trace ptrace_trace trampoline_trace_if ebpf_trace_if trampoline_trace_stack ebpf_trace_stack trampoline_count_if ebpf_count_if; do
      need "^$k +$num +$num\$"
    done
    command -v bpftrace >/dev/null && need "^bpftrace +$num +$num\$"
    command -v dlv >/dev/null && need "^dlv +$num +$num\$"
    need "^probe \(trampoline - untraced\): +-?$num ns"
    need "^trampoline / ebpf: +$num\$"
    need "^timed call \(trampoline_latency - untraced\): +-?$num ns"
    need "^traced call \(trampoline_trace - untraced\): +-?$num ns"
    need "^trace --if, no call selected \(trampoline_trace_if - untraced\): +-?$num ns"
    need "^traced call with --stack 8 \(trampoline_trace_stack - untraced\): +-?$num ns"
    need "^count --if, every call \(trampoline_count_if - untraced\): +-?$num ns"
    need "^trampoline_count_if / ebpf_count_if: +$num\$"
    # A count's failures on the errors fixture's loop (its label says "failures", not the
    # word this script takes for a failed run).
    for k in untraced_fail trampoline_failed trampoline_nofailed ebpf_failed; do
      need "^$k +$num +$num\$"
    done
    need "^count with failures \(trampoline_failed - untraced_fail\): +-?$num ns"
    need "^trampoline_failed / ebpf_failed: +$num\$"
    ;;
  why)
    RUNS=1 REQUESTS=200 "$here/bench/why.sh" "$gotap" "$(dirname "$gotap")/gotap-workload" >"$out"
    need "^untraced +$num +- +- +$num +$num\$"
    for b in ebpf ptrace; do
      need "^${b}_latency +$num +-?$num +- +$num +$num\$"
      need "^${b}_latency_why +$num +-?$num +(-|-?$num) +$num +$num\$"
    done
    ;;
  why-costs)
    RUNS=1 HANDOFFS=20000 SYSCALLS=200000 "$here/bench/why-costs.sh" "$gotap" \
      "$(dirname "$gotap")/gotap-workload" >"$out"
    for k in pingpong_untraced syscalls_untraced; do need "^$k +$num +-\$"; done
    for k in pingpong_ebpf_why pingpong_ebpf_goroutines pingpong_ptrace_why syscalls_ebpf_why \
      syscalls_ptrace_why; do
      need "^$k +$num +-?$num\$"
    done
    need "^status changes per handoff: [1-9]"
    for k in probe_status switch sys_enter sys_exit ptrace_sys_enter ptrace_sys_exit; do
      need "^$k +$num\$"
    done
    ;;
  ptrace)
    RUNS=1 N=2000 N_DLV=20 "$here/bench/ptrace.sh" "$gotap" >"$out"
    for fn in tiny framed; do
      # function, untraced, floor, bare, trace: numbers; the three ratios to them too.
      need "^\| main\.$fn \| $num \| $num \| $num \| $num \| ${num}x \| $num \| $num \| "
      if command -v dlv >/dev/null; then
        need "^\| main\.$fn \|.* \| $num \| $num \| $num \|\$"
      fi
    done
    ;;
  count)
    RUNS=1 N=2000 FIXTURES=$fx "$here/bench/ptrace-count.sh" "$gotap" >"$out"
    for rel in 1.19 1.27; do
      need "^\| $rel \| untraced \| $num / $num / $num \| \| \|\$"
      for w in count latency; do
        need "^\| $rel \| $w \(A\) \| $num / $num / $num \| ${num}x \| $num \|\$"
      done
    done
    ;;
  levers)
    "$here/bench/ptrace-program.sh" "$out.bin"
    for m in call cpu held; do
      RUNS=1 N=2000 METRIC=$m "$here/bench/ptrace-levers.sh" "$out.bin" framed "main=$gotap" \
        "noqueue=GOTAP_PTRACE_QUEUE=0 $gotap" "floor=GOTAP_PTRACE_FLOOR=1 $gotap" >"$out"
      for cfg in main noqueue floor; do need "^\| $cfg \| 1 \| $num \| $num \| $num \|\$"; done
    done
    ;;
  whole)
    for b in caddy/caddy rclone/rclone; do
      [ -x "$fx/real/$b" ] || fail "no $fx/real/$b (tests/tools/fetch-real-binaries.sh)"
    done
    RUNS=1 FIXTURES=$fx "$here/bench/whole.sh" "$gotap" >"$out"
    ms="$num / $num / $num"
    need "^\| funcs --json caddy \| A \| $ms \| $ms \| $num \|\$"
    need "^\| funcs --json rclone \| A \| $ms \| $ms \| $num \|\$"
    for be in ebpf ptrace; do
      need "^\| count 're:\.' caddy, $be: command to armed \| A \| $ms \| $ms \| $num \|\$"
      need "^\| count 're:\.' caddy, $be: detach \| A \| $ms \| $ms \| - \|\$"
    done
    ;;
  end)
    # The script itself fails a run that leaves a uprobe in caddy's code or caddy silent.
    [ -x "$fx/real/caddy/caddy" ] || fail "no $fx/real/caddy/caddy (tests/tools/fetch-real-binaries.sh)"
    RUNS=1 TRACED_S=1 FIXTURES=$fx "$here/bench/end-under-load.sh" "$gotap" >"$out" ||
      fail "end-under-load.sh failed"
    need "^\| SIGINT to exit \| A \| $num / $num / $num \| \|\$"
    need "^\| detach \| A \| $num / $num / $num \| $num / $num / $num \|\$"
    ;;
  funcs)
    RUNS=2 "$here/bench/funcs.sh" "$(dirname "$gotap")" >"$out"
    need "^Binary: .*functions matching \`net/http\.\*\`: [1-9][0-9]* \(gotap\), [1-9][0-9]* \(debug/gosym\)"
    for c in "gotap funcs --json 'net/http\.\*'" "gotap info --json" "debug/gosym \(Go 1\.[0-9]+\)"; do
      need "^\| $c \| $num \| $num \| ${num}x \|\$"
    done
    ;;
  *)
    echo "usage: bench-smoke.sh ebpf|ptrace|count|levers|whole|end|funcs|why|why-costs GOTAP FIXTURES_DIR" >&2
    exit 2
    ;;
esac
! grep -Eqw 'nan|failed' "$out" || fail "a figure is missing (nan or failed)"
echo "bench-smoke $what: every row measured"
