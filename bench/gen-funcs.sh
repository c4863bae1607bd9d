#!/usr/bin/env bash
# Writes and builds a Go program with N small functions (default 125,000: about 250,000
# probe sites, an entry and a RET each), for arming at a scale no real binary here reaches
# (bench/scale.sh). `PROGRAM` alone calls each once and exits; `PROGRAM sleep` then sleeps.
# usage: bench/gen-funcs.sh OUT_BINARY [N]     env: GO (a go binary; else the newest in
# ~/.cache/gotap/go, as tests/tools/fetch-go.sh caches them)
set -euo pipefail
out=$1
n=${2:-125000}
go=${GO:-$(ls -d "$HOME"/.cache/gotap/go/1.*/bin/go 2>/dev/null | sort -V | tail -1)}
[ -x "$go" ] || { echo "gen-funcs.sh: no Go toolchain (set GO)" >&2; exit 2; }
src=$(mktemp -d /tmp/gotap-gen-funcs.XXXXXX)
trap 'rm -rf "$src"' EXIT
python3 - "$src/main.go" "$n" <<'PY'
import sys
path, n = sys.argv[1], int(sys.argv[2])
with open(path, "w") as f:
    f.write('package main\n\nimport (\n\t"fmt"\n\t"os"\n\t"time"\n)\n\n')
    for i in range(n):
        f.write(f"//go:noinline\nfunc f{i}(x int) int {{ return x + {i} }}\n")
    f.write("\nvar fns = []func(int) int{" + ",".join(f"f{i}" for i in range(n)) + "}\n")
    f.write('\nfunc main() {\n\ts := 0\n\tfor _, f := range fns {\n\t\ts += f(1)\n\t}\n'
            '\tfmt.Println("sum", s)\n\tif len(os.Args) > 1 && os.Args[1] == "sleep" {\n'
            '\t\ttime.Sleep(time.Hour)\n\t}\n}\n')
PY
printf 'module genfuncs\n\ngo 1.21\n' >"$src/go.mod"
root=$(dirname "$(dirname "$go")")
(cd "$src" && env GOROOT="$root" GOTOOLCHAIN=local GOFLAGS=-mod=mod GOPROXY=off CGO_ENABLED=0 \
  GOCACHE="$src/cache" GOPATH="$src/gopath" "$go" build -o "$(realpath -m "$out")" .)
