#!/usr/bin/env bash
# gotap's one entry point for a fresh Debian 12 machine (run as root, from the repo root):
#   ./dev.sh demo    install what is missing, build, and trace the bundled demo program
#   ./dev.sh test    install what is missing, build, and run every test
#   ./dev.sh deps | test-deps | build    what demo, test (before running) and build install
set -euo pipefail
cd "$(dirname "$0")"

# Debian packages gotap needs to build and test itself, and curl, which the tutorials (read
# after `./dev.sh demo`) use to send a server its requests. tests/tools/check-commands.py
# fails when a script, test or tutorial runs a command that neither these lists nor a
# minimal Debian provide.
PACKAGES=(build-essential cmake ninja-build pkg-config git ca-certificates
  libelf-dev libdw-dev libzydis-dev libboost-program-options-dev libfmt-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbpf-dev bpftool clang llvm libclang-rt-14-dev libunwind-dev
  zlib1g-dev libzstd-dev clang-format dpkg-dev python3 file libdebuginfod1
  prometheus-cpp-dev libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 curl)

# The peers gotap's tests and benchmarks compare against (bpftrace, dlv), hyperfine, and
# chromium (a test renders the flame-graph SVG headless), debuginfod (a test serves a debug
# file from it on loopback), prometheus (a test scrapes gotap --prometheus with it on
# loopback, and traces it), etcd, hugo and restic (Debian's stripped Go programs that
# test_runtime_real_programs drives on loopback), man-db (the .deb check reads the installed
# man page), time (GNU time: the benchmarks' CPU time and peak RSS, bench/whole.sh, scale.sh,
# ebpf-parts.sh), gccgo-12 (the gccgo fixtures, tests/tools/build-gccgo-fixtures.sh),
# bpfcc-tools and linux-headers-amd64 (bcc's funccount and trace beside gotap on a gccgo
# program; bcc compiles with Debian's kernel headers, tests/tools/bcc-kernel-source.sh):
# installed for `test` only.
TEST_PACKAGES=(bpftrace delve hyperfine chromium debuginfod prometheus etcd-server etcd-client
  hugo restic man-db time gccgo-12 bpfcc-tools linux-headers-amd64)

SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo

deps() {
  local missing=()
  for p in "${PACKAGES[@]}" "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "dev.sh: installing ${missing[*]}" >&2
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

build() {
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  ninja -C build
}

demo() {
  deps
  # The demo program is compiled by a Go toolchain from Debian's packages (fetched into a
  # private cache; the system's apt setup is left alone). Fetched before the build, so that
  # CMake finds it for gotap bench's workload too.
  local goroot
  goroot=$(tests/tools/fetch-go.sh "${GOTAP_GO_CACHE:-$HOME/.cache/gotap/go}" 1.19 | awk '{print $2}' | tail -1)
  [ -n "$goroot" ] || { echo "dev.sh: no Go toolchain available" >&2; exit 1; }
  build
  local out="$PWD/build/demo"
  mkdir -p "$out"
  (cd tests/fixtures/demo && GOROOT="$goroot" GOTOOLCHAIN=local GOPROXY=off GOFLAGS=-mod=mod \
    CGO_ENABLED=0 GOCACHE="$out/.gocache" "$goroot/bin/go" build -ldflags="-s -w" -o "$out/demo" .)
  # The same program with DWARF, for the tutorials' typed arguments.
  (cd tests/fixtures/demo && GOROOT="$goroot" GOTOOLCHAIN=local GOPROXY=off GOFLAGS=-mod=mod \
    CGO_ENABLED=0 GOCACHE="$out/.gocache" "$goroot/bin/go" build -o "$out/demo-debug" .)
  # A small HTTP server whose requests fail or are slow on purpose, for the conditions tutorial.
  (cd tests/fixtures/cond && GOROOT="$goroot" GOTOOLCHAIN=local GOPROXY=off GOFLAGS=-mod=mod \
    CGO_ENABLED=0 GOCACHE="$out/.gocache" "$goroot/bin/go" build -o "$out/orders" .)
  echo "== gotap info build/demo/demo (a stripped Go binary)"
  build/gotap info build/demo/demo
  echo "== gotap funcs build/demo/demo 'main.*'"
  build/gotap funcs build/demo/demo 'main.*'
  if [ "$(id -u)" = 0 ]; then
    echo "== gotap trace 'main.processOrder' -- build/demo/demo -n 5 -sleep 10ms (stripped)"
    build/gotap trace 'main.processOrder' -- build/demo/demo -n 5 -sleep 10ms
    echo "== gotap trace 'main.processOrder' 'main.audit' -- build/demo/demo-debug -n 5 -sleep 10ms"
    build/gotap trace --backend=ptrace 'main.processOrder' 'main.audit' -- build/demo/demo-debug -n 5 -sleep 10ms
  else
    echo "dev.sh: tracing needs root; skipped the demo trace" >&2
  fi
}

case "${1:-}" in
  deps) deps ;;
  build) deps && build ;;
  demo) demo ;;
  # npm fetches real Go binaries the tests read (esbuild built by Go 1.17 to 1.26, buf by
  # 1.27); a machine may already have it with its own Node.js (whose package Debian's npm
  # would conflict with).
  test | test-deps)
    if command -v npm >/dev/null; then deps "${TEST_PACKAGES[@]}"; else deps "${TEST_PACKAGES[@]}" npm; fi
    [ "$1" = test-deps ] || exec tests/run.sh
    ;;
  *) echo "usage: $0 demo|test|deps|test-deps|build" >&2; exit 2 ;;
esac
