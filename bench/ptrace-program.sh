#!/usr/bin/env bash
# Builds the program bench/ptrace.sh and bench/ptrace-levers.sh time: it calls one tiny
# function N times and prints its own "ns_per_call X sum S", so that start-up and attaching
# are not in the figure.
#   main.tiny    one argument, one result, no frame
#   main.framed  an int and a string in, an int and a string out, with a frame
# usage: bench/ptrace-program.sh OUT_BINARY [GO_VERSION]    then: OUT_BINARY N tiny|framed
# GO_VERSION defaults to 1.19: delve 1.20 (Debian 12) reads Go <= 1.20 binaries. The
# toolchain comes from tests/tools/fetch-go.sh's cache (GOTAP_GO_CACHE), or GOROOT_BENCH.
set -euo pipefail
out=$1
gover=${2:-1.19}
goroot=${GOROOT_BENCH:-${GOTAP_GO_CACHE:-$HOME/.cache/gotap/go}/$gover}
[ -x "$goroot/bin/go" ] || { echo "ptrace-program.sh: no Go $gover at $goroot (tests/tools/fetch-go.sh)" >&2; exit 2; }
work=$(mktemp -d /tmp/gotap-bench-program.XXXXXX)
trap 'rm -rf "$work"' EXIT

cat > "$work/go.mod" <<'GO'
module benchptrace
go 1.19
GO
cat > "$work/main.go" <<'GO'
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

//go:noinline
func tiny(x int) int { return x + 1 }

//go:noinline
func framed(x int, s string) (int, string) {
	if x < 0 {
		fmt.Println(s)
	}
	return x + len(s), s
}

func main() {
	n, _ := strconv.Atoi(os.Args[1])
	fn := os.Args[2]
	sum := 0
	start := time.Now()
	for i := 0; i < n; i++ {
		if fn == "tiny" {
			sum += tiny(i)
		} else {
			v, _ := framed(i, "abc")
			sum += v
		}
	}
	el := time.Since(start)
	fmt.Printf("ns_per_call %.1f sum %d\n", float64(el.Nanoseconds())/float64(n), sum)
}
GO
(cd "$work" && GOTOOLCHAIN=local GOFLAGS=-mod=mod GOPROXY=off GOCACHE="$work/cache" \
  GOROOT="$goroot" "$goroot/bin/go" build -o bench .)
mv "$work/bench" "$out"
