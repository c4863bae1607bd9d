#!/usr/bin/env bash
# Per-call cost of the trampoline backend on the latency fixture's `bench` loop (main.work, a
# short framed function: its stack check's compare becomes the jump), side by side:
#   untraced            the loop alone
#   empty_trampoline    the jump there and back with no count (GOTAP_TRAMPOLINE_EMPTY=1):
#                       the bare probe at the same site
#   trampoline          gotap count --backend=trampoline (lock inc of the function's counter)
#   ebpf                gotap count --backend=ebpf (a uprobe at the push rbp after the check)
#   bpftrace            bpftrace counting the same function (uprobe at its first instruction)
#   ptrace              gotap count --backend=ptrace (an int3 stop per call), on fewer calls
#   dlv                 dlv trace of the same function (Debian's delve), on fewer still
# and timed calls (an entry and a return each, issue 38's second goal):
#   trampoline_latency  gotap latency --backend=trampoline (two records into the event ring)
#   ebpf_latency        gotap latency --backend=ebpf (a RET uprobe, single-stepped), on fewer calls
#   ptrace_latency      gotap latency --backend=ptrace (two stops per call), on fewer calls
# and traced calls (each entry with its argument, each return with its result):
#   trampoline_trace    gotap trace --backend=trampoline (two trace records into the ring), on
#                       4,000 calls once gotap is ready: the ring holds all their records, so
#                       every one is written (on longer loops no reader keeps up, and a
#                       dropped record costs less)
#   ebpf_trace          gotap trace --backend=ebpf, on fewer calls
#   ptrace_trace        gotap trace --backend=ptrace, on fewer calls
#   trampoline_trace_if gotap trace --backend=trampoline --if 'x < 0' (no call selected: the
#                       records carry x, which gotap's reader tests), as trampoline_trace
#   ebpf_trace_if       gotap trace --backend=ebpf --if 'x < 0' (the kernel tests it), on fewer
#   trampoline_trace_stack  gotap trace --backend=trampoline --stack 8 (each record walks the
#                       goroutine's frame pointers too), as trampoline_trace
#   ebpf_trace_stack    gotap trace --backend=ebpf --stack 8 (the kernel walks them), on fewer
# and counted calls with a condition (every call selected):
#   trampoline_count_if gotap count --backend=trampoline --if 'x >= 0' (a 64-byte record at
#                       each entry, which gotap's reader tests: main.work returns no error, so
#                       its RETs need no jump), on 60,000 calls once gotap is ready (the ring
#                       holds all their records)
#   ebpf_count_if       gotap count --backend=ebpf --if 'x >= 0' (the kernel tests it), on fewer
# and counted calls of a function with an error result (the errors fixture's failbench loop,
# beside the latency fixture: main.mayFail, a third of whose calls fail):
#   untraced_fail       the loop alone
#   trampoline_failed   gotap count --backend=trampoline (its entry's jump counts the call,
#                       its RETs' test the error and count the failures)
#   trampoline_nofailed the same with --no-failed (the entry's jump alone)
#   ebpf_failed         gotap count --backend=ebpf (RET uprobes read the error), on fewer
# Each figure is the median of $RUNS runs, interleaved so machine noise hits all alike, in ns
# per call as the loop measures itself (time.Now around it), so that start-up and detach are
# not in it. Goal (issue 38): a probe under 100 ns.
#
# usage: bench/trampoline.sh [GOTAP] [FIXTURE_BINARY] [CALLS]   (root; bpftrace, delve optional)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
gotap=${1:-$here/build/gotap}
bin=${2:-$(ls -d "$here"/build/fixtures/1.26/default/latency 2>/dev/null || true)}
calls=${3:-2000000}
runs=${RUNS:-5}
few=${FEW_CALLS:-20000}
trace_calls=${TRACE_CALLS:-4000}
count_if_calls=${COUNT_IF_CALLS:-60000}
n_dlv=${N_DLV:-200}
errors_bin=$(dirname "$bin")/errors
[ -x "$gotap" ] || { echo "trampoline.sh: no gotap at $gotap" >&2; exit 2; }
[ -x "$bin" ] || { echo "trampoline.sh: no latency fixture binary (give it as the 2nd argument)" >&2; exit 2; }

ns() { grep -o 'ns_per_call [0-9.]*' | awk '{print $2}' | tail -1; }
# shellcheck source=bench/lib.sh
. "$here/bench/lib.sh"
metric=ns

have_bpftrace=0 have_dlv=0
command -v bpftrace >/dev/null && have_bpftrace=1
command -v dlv >/dev/null && have_dlv=1
count() { "$gotap" count -o /dev/null --backend "$1" main.work -- "$bin" bench "$2"; }
for _ in $(seq "$runs"); do
  run untraced "$bin" bench "$calls"
  run empty_trampoline env GOTAP_TRAMPOLINE_EMPTY=1 "$gotap" count -o /dev/null --backend trampoline main.work -- "$bin" bench "$calls"
  run trampoline count trampoline "$calls"
  run ebpf count ebpf "$calls"
  if [ $have_bpftrace = 1 ]; then
    run bpftrace bpftrace -e "uprobe:$bin:main.work { @c = count(); }" -c "$bin bench $calls"
  fi
  run ptrace count ptrace "$few"
  run trampoline_latency "$gotap" latency -o /dev/null --backend trampoline main.work -- "$bin" bench "$calls"
  run ebpf_latency "$gotap" latency -o /dev/null --backend ebpf main.work -- "$bin" bench "$few"
  run ptrace_latency "$gotap" latency -o /dev/null --backend ptrace main.work -- "$bin" bench "$few"
  # The loop waits for a line on stdin (-wait): 4,000 calls take under a millisecond, which
  # gotap's own start (its decoder built as the program starts) would otherwise share.
  run trampoline_trace sh -c "(sleep 0.5; echo) | '$gotap' trace -o /dev/null --backend trampoline main.work -- '$bin' bench $trace_calls -wait"
  run ebpf_trace "$gotap" trace -o /dev/null --backend ebpf main.work -- "$bin" bench "$few"
  run ptrace_trace "$gotap" trace -o /dev/null --backend ptrace main.work -- "$bin" bench "$few"
  # --if selecting no call: the records carry x, which gotap's reader tests (eBPF: the kernel).
  run trampoline_trace_if sh -c "(sleep 0.5; echo) | '$gotap' trace -o /dev/null --backend trampoline --if 'x < 0' main.work -- '$bin' bench $trace_calls -wait"
  run ebpf_trace_if "$gotap" trace -o /dev/null --backend ebpf --if 'x < 0' main.work -- "$bin" bench "$few"
  run trampoline_trace_stack sh -c "(sleep 0.5; echo) | '$gotap' trace -o /dev/null --backend trampoline --stack 8 main.work -- '$bin' bench $trace_calls -wait"
  run ebpf_trace_stack "$gotap" trace -o /dev/null --backend ebpf --stack 8 main.work -- "$bin" bench "$few"
  run trampoline_count_if sh -c "(sleep 0.5; echo) | '$gotap' count -o /dev/null --backend trampoline --if 'x >= 0' main.work -- '$bin' bench $count_if_calls -wait"
  run ebpf_count_if "$gotap" count -o /dev/null --backend ebpf --if 'x >= 0' main.work -- "$bin" bench "$few"
  if [ -x "$errors_bin" ]; then
    run untraced_fail "$errors_bin" failbench "$calls"
    run trampoline_failed "$gotap" count -o /dev/null --backend trampoline main.mayFail -- "$errors_bin" failbench "$calls"
    run trampoline_nofailed "$gotap" count -o /dev/null --backend trampoline --no-failed main.mayFail -- "$errors_bin" failbench "$calls"
    run ebpf_failed "$gotap" count -o /dev/null --backend ebpf main.mayFail -- "$errors_bin" failbench "$few"
  fi
done
if [ $have_dlv = 1 ]; then
  work=$(mktemp -d)
  cp "$bin" "$work/bench"
  # dlv prints each call; the loop's own figure is on the program's stdout.
  run dlv sh -c "cd '$work' && timeout 600 dlv trace --check-go-version=false --exec ./bench 'main\\.work\$' -- bench $n_dlv 2>/dev/null"
  rm -rf "$work"
fi

printf '%-18s %12s %14s\n' what ns/call "x untraced"
med_untraced=$(echo "${res[untraced]}" | median)
for k in untraced empty_trampoline trampoline ebpf bpftrace ptrace dlv trampoline_latency ebpf_latency ptrace_latency trampoline_trace ebpf_trace ptrace_trace trampoline_trace_if ebpf_trace_if trampoline_trace_stack ebpf_trace_stack trampoline_count_if ebpf_count_if untraced_fail trampoline_failed trampoline_nofailed ebpf_failed; do
  [ -n "${res[$k]:-}" ] || continue
  m=$(echo "${res[$k]}" | median)
  # The failures' rows against their own loop.
  base=$med_untraced
  case $k in *fail*) base=$(echo "${res[untraced_fail]}" | median) ;; esac
  printf '%-18s %12s %14s\n' "$k" "$m" "$(awk -v a="$m" -v b="$base" 'BEGIN { if (b > 0 && a != "nan") printf "%.1f", a / b; else print "nan" }')"
  declare "med_$k=$m"
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0 && a != "nan") printf "%.4f", a / b; else print "nan" }'; }
echo
echo "probe (trampoline - untraced):         $(awk -v a="$med_trampoline" -v u="$med_untraced" 'BEGIN {printf "%.1f", a-u}') ns  (goal < 100)"
echo "bare jump (empty - untraced):          $(awk -v a="$med_empty_trampoline" -v u="$med_untraced" 'BEGIN {printf "%.1f", a-u}') ns"
echo "trampoline / ebpf:                     $(ratio "$med_trampoline" "$med_ebpf")"
[ $have_bpftrace = 1 ] && echo "trampoline / bpftrace:                 $(ratio "$med_trampoline" "$med_bpftrace")"
echo "trampoline / ptrace:                   $(ratio "$med_trampoline" "$med_ptrace")"
[ -n "${res[dlv]:-}" ] && echo "trampoline / dlv trace:                $(ratio "$med_trampoline" "$med_dlv")"
echo "timed call (trampoline_latency - untraced): $(awk -v a="$med_trampoline_latency" -v u="$med_untraced" 'BEGIN {printf "%.1f", a-u}') ns  (goal < 100)"
echo "trampoline_latency / ebpf_latency:     $(ratio "$med_trampoline_latency" "$med_ebpf_latency")"
echo "trampoline_latency / ptrace_latency:   $(ratio "$med_trampoline_latency" "$med_ptrace_latency")"
echo "traced call (trampoline_trace - untraced): $(awk -v a="$med_trampoline_trace" -v u="$med_untraced" 'BEGIN {printf "%.1f", a-u}') ns"
echo "trampoline_trace / ebpf_trace:         $(ratio "$med_trampoline_trace" "$med_ebpf_trace")"
echo "trampoline_trace / ptrace_trace:       $(ratio "$med_trampoline_trace" "$med_ptrace_trace")"
echo "trace --if, no call selected (trampoline_trace_if - untraced): $(awk -v a="$med_trampoline_trace_if" -v u="$med_untraced" 'BEGIN {printf "%.1f", a-u}') ns"
echo "trampoline_trace_if / ebpf_trace_if:   $(ratio "$med_trampoline_trace_if" "$med_ebpf_trace_if")"
echo "traced call with --stack 8 (trampoline_trace_stack - untraced): $(awk -v a="$med_trampoline_trace_stack" -v u="$med_untraced" 'BEGIN {printf "%.1f", a-u}') ns"
echo "trampoline_trace_stack / ebpf_trace_stack: $(ratio "$med_trampoline_trace_stack" "$med_ebpf_trace_stack")"
echo "count --if, every call (trampoline_count_if - untraced): $(awk -v a="$med_trampoline_count_if" -v u="$med_untraced" 'BEGIN {printf "%.1f", a-u}') ns  (goal < 100)"
echo "trampoline_count_if / ebpf_count_if:   $(ratio "$med_trampoline_count_if" "$med_ebpf_count_if")"
if [ -n "${res[untraced_fail]:-}" ]; then
  echo "count with failures (trampoline_failed - untraced_fail): $(awk -v a="$med_trampoline_failed" -v u="$med_untraced_fail" 'BEGIN {printf "%.1f", a-u}') ns  (goal < 100)"
  echo "count, error unread (trampoline_nofailed - untraced_fail): $(awk -v a="$med_trampoline_nofailed" -v u="$med_untraced_fail" 'BEGIN {printf "%.1f", a-u}') ns"
  echo "trampoline_failed / ebpf_failed:       $(ratio "$med_trampoline_failed" "$med_ebpf_failed")"
fi
exit 0
