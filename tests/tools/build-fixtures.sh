#!/usr/bin/env bash
# Build every Go fixture program with every available Go toolchain, in four flavours, and
# write reference dumps made by Go's own tools of the same release beside each binary.
#
# usage: build-fixtures.sh OUT_DIR [VERSION...]
#
#   OUT_DIR/<ver>/<flavour>/<program>            the binary
#   OUT_DIR/<ver>/<flavour>/<program>.gosym.json  tests/tools/gosymdump (debug/gosym, debug/elf,
#                                                 debug/buildinfo) built by the same toolchain
#   OUT_DIR/<ver>/<flavour>/<program>.nm          go tool nm -size -sort address (unstripped)
#   OUT_DIR/<ver>/<flavour>/<program>.objdump     go tool objdump (unstripped; whole binary for
#                                                 basic/default, main.* functions otherwise)
#   OUT_DIR/<ver>/<flavour>/<program>.version     go version BINARY
#
# Flavours: default (optimized, CGO_ENABLED=0), stripped (-ldflags=-s -w), pie
# (-buildmode=pie), cgo (CGO_ENABLED=1, externally linked with libc; a program that does
# not use cgo itself gets tests/fixtures/_cgo/cgo.go copied in). A program that imports "C"
# is built with CGO_ENABLED=1 in every flavour. tests/fixtures/<program>/flavours may list
# the flavours that apply (default: all four), and may add pie-stripped (-buildmode=pie with
# -s -w: the production shape of a PIE).
#
# Toolchains come from fetch-go.sh (cache: $GOTAP_GO_CACHE, default ~/.cache/gotap/go).
# Incremental: an output is rebuilt only when its inputs changed (stamp files). Parallel:
# $GOTAP_JOBS jobs at once (default 2).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/../.." && pwd)
fixtures_src="$src/tests/fixtures"
all_flavours=(default stripped pie cgo)
# Bump when the build recipe changes in a way the stamps cannot see.
recipe=3

go_env() {
  local goroot=$1 out=$2
  export GOROOT=$goroot GOTOOLCHAIN=local GOPROXY=off GOFLAGS=-mod=mod GOWORK=off
  export GOCACHE="$out/.gocache" GOPATH="$out/.gopath" GOENV=off GOTELEMETRY=off
  export GO111MODULE=on GOSUMDB=off
  unset GOARCH GOOS GOAMD64 GOEXPERIMENT CGO_CFLAGS CGO_LDFLAGS
}

# A digest of the files of a directory (names and contents), ignoring hidden files.
dir_digest() {
  (cd "$1" && find . -type f ! -name '.*' -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum) |
    sha256sum | cut -c1-64
}

uses_cgo() { grep -qs '^import "C"' "$1"/*.go; }

# Builds tests/tools/gosymdump with one toolchain into OUT/.tools/<ver>/gosymdump.
build_gosymdump() {
  local ver=$1 goroot=$2 out=$3
  local dir="$out/.tools/$ver" stamp
  stamp="$recipe $(cat "$goroot/VERSION" | head -1) $(dir_digest "$here/gosymdump")"
  mkdir -p "$dir"
  if [ -x "$dir/gosymdump" ] && [ "$(cat "$dir/gosymdump.stamp" 2>/dev/null)" = "$stamp" ]; then
    return 0
  fi
  (go_env "$goroot" "$out" && cd "$here/gosymdump" && CGO_ENABLED=0 "$goroot/bin/go" build \
    -o "$dir/gosymdump.tmp" .) && mv "$dir/gosymdump.tmp" "$dir/gosymdump" &&
    echo "$stamp" >"$dir/gosymdump.stamp"
}

# One fixture: ver goroot out flavour program. Prints "<status> <label> [detail]".
job() {
  local ver=$1 goroot=$2 out=$3 flavour=$4 program=$5
  local label="$ver/$flavour/$program"
  local dir="$out/$ver/$flavour" pdir="$fixtures_src/$program"
  local bin="$dir/$program" log="$out/.logs/$ver-$flavour-$program.log"
  local cgo=0 shim=0 flags=()
  case "$flavour" in
    default) ;;
    stripped) flags=("-ldflags=-s -w") ;;
    pie) flags=(-buildmode=pie) ;;
    pie-stripped) flags=(-buildmode=pie "-ldflags=-s -w") ;;
    cgo) cgo=1 ;;
    *) echo "failed $label unknown flavour"; return 0 ;;
  esac
  if uses_cgo "$pdir"; then
    cgo=1
  elif [ "$flavour" = cgo ]; then
    shim=1
  fi
  if [ $cgo = 1 ] && ! command -v gcc >/dev/null; then
    echo "skipped $label gcc is not installed"
    return 0
  fi
  local objdump_args=(-s '^main\.')
  [ "$program/$flavour" = basic/default ] && objdump_args=()

  local stamp
  stamp="$recipe $(head -1 "$goroot/VERSION") $(dir_digest "$pdir") cgo=$cgo shim=$shim"
  stamp+=" flags=${flags[*]:-} objdump=${objdump_args[*]:-all}"
  [ $shim = 1 ] && stamp+=" $(sha256sum <"$fixtures_src/_cgo/cgo.go" | cut -c1-16)"
  stamp+=" gosymdump=$(cat "$out/.tools/$ver/gosymdump.stamp")"
  local stampfile="$dir/.$program.stamp"
  if [ -x "$bin" ] && [ "$(cat "$stampfile" 2>/dev/null)" = "$stamp" ]; then
    echo "uptodate $label"
    return 0
  fi

  mkdir -p "$dir" "$out/.logs"
  rm -f "$stampfile"
  local build_dir=$pdir
  if [ $shim = 1 ]; then
    # A private copy per toolchain: jobs for other versions build the same program at once.
    build_dir="$out/.src/$ver/$program"
    rm -rf "$build_dir" && mkdir -p "$build_dir"
    cp -a "$pdir/." "$build_dir/"
    cp "$fixtures_src/_cgo/cgo.go" "$build_dir/zz_gotap_cgo.go"
  fi
  local stripped=0
  [[ "$flavour" == *stripped ]] && stripped=1
  if ! (
    set -e
    go_env "$goroot" "$out"
    cd "$build_dir"
    CGO_ENABLED=$cgo "$goroot/bin/go" build "${flags[@]}" -o "$bin.tmp" .
    mv "$bin.tmp" "$bin"
    "$out/.tools/$ver/gosymdump" "$bin" >"$bin.gosym.json.tmp"
    mv "$bin.gosym.json.tmp" "$bin.gosym.json"
    "$goroot/bin/go" version "$bin" >"$bin.version"
    if [ $stripped = 0 ]; then
      "$goroot/bin/go" tool nm -size -sort address "$bin" >"$bin.nm.tmp"
      mv "$bin.nm.tmp" "$bin.nm"
      "$goroot/bin/go" tool objdump "${objdump_args[@]}" "$bin" >"$bin.objdump.tmp"
      mv "$bin.objdump.tmp" "$bin.objdump"
    else
      rm -f "$bin.nm" "$bin.objdump"
    fi
  ) >"$log" 2>&1; then
    rm -f "$bin.tmp" "$bin".*.tmp
    echo "failed $label see $log"
    return 0
  fi
  echo "$stamp" >"$stampfile"
  rm -f "$log"
  echo "built $label"
}

# A split-debug build of the args program, as distributions ship Go programs: a GNU build ID
# (-B), the DWARF moved to args.debug (objcopy --only-keep-debug), the binary stripped of it
# and pointing there with a .gnu_debuglink. In OUT/split/VERSION/, apart from the flavours.
split_job() {
  local ver=$1 goroot=$2 out=$3
  local dir="$out/split/$ver" pdir="$fixtures_src/args"
  local id stamp
  id=$(printf 'gotap-split-%s' "$ver" | sha1sum | cut -c1-40)
  stamp="$recipe $(head -1 "$goroot/VERSION") $(dir_digest "$pdir") id=$id"
  if [ -x "$dir/args" ] && [ -f "$dir/args.debug" ] && [ "$(cat "$dir/.stamp" 2>/dev/null)" = "$stamp" ]; then
    echo "uptodate $ver/split/args"
    return 0
  fi
  mkdir -p "$dir" "$out/.logs"
  if ! (
    set -e
    go_env "$goroot" "$out"
    cd "$pdir"
    CGO_ENABLED=0 "$goroot/bin/go" build -ldflags="-B=0x$id" -o "$dir/args-full" .
    cd "$dir"
    objcopy --only-keep-debug args-full args.debug
    objcopy --strip-debug args-full args
    objcopy --add-gnu-debuglink=args.debug args
    rm -f args-full
    echo "$id" >args.build-id
  ) >"$out/.logs/$ver-split.log" 2>&1; then
    echo "failed $ver/split/args see $out/.logs/$ver-split.log"
    return 0
  fi
  echo "$stamp" >"$dir/.stamp"
  rm -f "$out/.logs/$ver-split.log"
  echo "built $ver/split/args"
}

if [ "${1:-}" = "--job" ]; then
  shift
  job "$@"
  exit 0
fi

# --gosymdump OUT_DIR: build gosymdump with the newest toolchain and print its path.
if [ "${1:-}" = "--gosymdump" ]; then
  mkdir -p "$2"
  out=$(cd "$2" && pwd)
  read -r ver goroot < <("$here/fetch-go.sh" "${GOTAP_GO_CACHE:-$HOME/.cache/gotap/go}" |
    sort -t. -k1,1n -k2,2n | tail -1)
  [ -n "${ver:-}" ] || { echo "build-fixtures: no Go toolchain available" >&2; exit 1; }
  build_gosymdump "$ver" "$goroot" "$out" >&2
  echo "$out/.tools/$ver/gosymdump $goroot"
  exit 0
fi

[ $# -ge 1 ] || { echo "usage: build-fixtures.sh OUT_DIR [VERSION...]" >&2; exit 2; }
mkdir -p "$1"
out=$(cd "$1" && pwd)
shift
start=$(date +%s)

toolchains=$("$here/fetch-go.sh" "${GOTAP_GO_CACHE:-$HOME/.cache/gotap/go}" "$@")
[ -n "$toolchains" ] || { echo "build-fixtures: no Go toolchain available" >&2; exit 1; }

programs=()
for d in "$fixtures_src"/*/; do
  p=$(basename "$d")
  case "$p" in _* | .*) continue ;; esac
  [ -f "$d/main.go" ] && [ -f "$d/go.mod" ] && programs+=("$p")
done

jobs_file=$(mktemp)
results=$(mktemp)
trap 'rm -f "$jobs_file" "$results"' EXIT
failed_tools=()
built_tools=()
while read -r ver goroot; do
  if ! build_gosymdump "$ver" "$goroot" "$out" >"$out/.gosymdump-$ver.log" 2>&1; then
    echo "build-fixtures: gosymdump does not build with Go $ver: see $out/.gosymdump-$ver.log" >&2
    failed_tools+=("$ver")
    continue
  fi
  rm -f "$out/.gosymdump-$ver.log"
  built_tools+=("$ver $goroot")
done <<<"$toolchains"
# Toolchains vary fastest: two jobs at once are then two toolchains, whose build caches are
# apart. Two jobs of one toolchain at once compile the same standard packages twice, as go
# build does not wait for another process's compile of a package it also needs.
for p in "${programs[@]}"; do
  flavours=("${all_flavours[@]}")
  if [ -f "$fixtures_src/$p/flavours" ]; then
    # read returns 1 at the end of its input, which has no newline here.
    read -r -a flavours < <(grep -v '^#' "$fixtures_src/$p/flavours" | tr '\n' ' ') || true
  fi
  for f in "${flavours[@]}"; do
    for t in "${built_tools[@]}"; do
      read -r ver goroot <<<"$t"
      printf '%s\0' "$ver" "$goroot" "$out" "$f" "$p"
    done
  done
done >"$jobs_file"

xargs -0 -n 5 -P "${GOTAP_JOBS:-2}" "$here/build-fixtures.sh" --job <"$jobs_file" |
  tee "$results" | awk '$1 != "uptodate" && $1 != "built"'
while read -r ver goroot; do
  split_job "$ver" "$goroot" "$out"
done <<<"$toolchains" | tee -a "$results" | awk '$1 != "uptodate" && $1 != "built"'

# Summary: one row per toolchain.
echo
printf '%-6s %-12s %6s %9s %8s %7s\n' go version built uptodate skipped failed
while read -r ver goroot; do
  awk -v v="$ver" -v full="$(head -1 "$goroot/VERSION")" '
    { split($2, a, "/"); if (a[1] != v) next; n[$1]++ }
    END { printf "%-6s %-12s %6d %9d %8d %7d\n", v, full, n["built"], n["uptodate"], n["skipped"], n["failed"] }
  ' "$results"
done <<<"$toolchains"
nfail=$(grep -c '^failed' "$results" || true)
echo "programs: ${programs[*]}; flavours: ${all_flavours[*]}; output: $out; $(($(date +%s) - start))s"
[ "$nfail" = 0 ] && [ ${#failed_tools[@]} = 0 ]
