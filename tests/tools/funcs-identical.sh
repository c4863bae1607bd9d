#!/usr/bin/env bash
# Planning changes must not change a plan: `gotap funcs --json` (stdout and warnings) of two
# gotaps, byte for byte, on rclone, caddy and three fixtures. The plan cache is off, so that
# both really plan. usage: tests/tools/funcs-identical.sh GOTAP_A GOTAP_B [FIXTURES]
set -euo pipefail
a=$1
b=$2
fx=${3:-/work/main/build/fixtures}
work=$(mktemp -d /tmp/gotap-funcs-identical.XXXXXX)
trap 'rm -rf "$work"' EXIT
export GOTAP_PLAN_CACHE=off
status=0
for f in real/rclone/rclone real/caddy/caddy 1.19/default/args 1.26/default/inlined \
  1.26/pie-stripped/methods; do
  [ -x "$fx/$f" ] || { echo "missing: $fx/$f" >&2; status=1; continue; }
  "$a" funcs --json "$fx/$f" >"$work/a.out" 2>"$work/a.err" || true
  "$b" funcs --json "$fx/$f" >"$work/b.out" 2>"$work/b.err" || true
  if cmp -s "$work/a.out" "$work/b.out" && cmp -s "$work/a.err" "$work/b.err"; then
    echo "same: $f ($(wc -l <"$work/a.out") functions)"
  else
    echo "DIFFERENT: $f" >&2
    status=1
  fi
done
exit $status
