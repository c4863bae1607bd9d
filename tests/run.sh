#!/usr/bin/env bash
# Every test gotap has, in the order a failure is cheapest to find:
#   format check -> Go toolchains -> build -> Go fixtures (every toolchain x flavour) -> ASan+UBSan
#   unit tests -> libFuzzer targets (briefly) -> the full suite (unit, golden, runtime tests per backend).
# Environment: GOTAP_GO_CACHE (toolchains), GOTAP_FUZZ_SECONDS (default 20 per target),
#   GOTAP_SKIP_ASAN=1 / GOTAP_SKIP_FUZZ=1 to shorten a local run (refused when CI is set).
# On a machine that can run everything (root), a test that skips fails the run unless
# tests/allowed-skips.txt accepts its reason (tests/tools/check-skips.py).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
jobs=$(nproc)
export GOTAP_GO_CACHE=${GOTAP_GO_CACHE:-$HOME/.cache/gotap/go}

# Each stage says when it starts, in minutes and seconds of the run: CI has a time limit.
started=$SECONDS
step() { printf '\n==== [%02d:%02d] %s\n' $(((SECONDS - started) / 60)) $(((SECONDS - started) % 60)) "$*"; }

# A stage left out is said, and CI cannot leave one out.
skip_stage() {
  if [ -n "${CI:-}" ]; then
    echo "run.sh: $1 is set, but CI runs every stage" >&2
    exit 1
  fi
  printf '\n==== SKIPPED: %s (%s=1): this run proves less than CI does\n' "$2" "$1" >&2
}

# ctest with its results checked for skips; $1 is the JUnit file's name.
ctest_checked() {
  local junit=$1
  shift
  ctest --output-junit "$junit" "$@"
  python3 "$root/tests/tools/check-skips.py" "$junit" "$root/tests/allowed-skips.txt"
}

step "clang-format check"
files=$(git ls-files '*.cpp' '*.h' '*.c' 2>/dev/null | grep -v '^bpf/vmlinux' || true)
if [ -n "$files" ]; then
  # shellcheck disable=SC2086
  clang-format --dry-run --Werror $files
fi

# First, so that CMake finds a Go toolchain for the bundled bench workload.
step "Go toolchains"
tests/tools/fetch-go.sh "$GOTAP_GO_CACHE" >/dev/null

step "build (RelWithDebInfo)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build -j "$jobs"

step "Go fixtures"
tests/tools/build-fixtures.sh "$root/build/fixtures"
# Real programs (Debian packages, npm): their tests need them, so a failed fetch fails the run.
tests/tools/fetch-real-binaries.sh "$root/build/fixtures"

# One clang build serves the sanitizers and the fuzzers: ASan+UBSan everywhere, libFuzzer's
# coverage in every library (a fuzz target told only of its own file's edges mutates blind).
# Two builds, gcc's for the unit tests and clang's for the fuzzers, took 4 minutes longer.
if [ "${GOTAP_SKIP_ASAN:-0}" != 1 ] || [ "${GOTAP_SKIP_FUZZ:-0}" != 1 ]; then
  step "ASan+UBSan build (clang) of the unit tests and the libFuzzer targets"
  CC=clang CXX=clang++ cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug \
    -DGOTAP_SANITIZE=ON -DGOTAP_FUZZ=ON -DGOTAP_FIXTURES_DIR="$root/build/fixtures" >/dev/null
  ninja -C build-asan -j "$jobs"
fi

if [ "${GOTAP_SKIP_ASAN:-0}" != 1 ]; then
  step "ASan+UBSan unit tests"
  # Sweeps over every fixture read a sample there (tests/unit/fixtures.h): the regular suite
  # reads them all.
  (cd build-asan && GOTAP_TEST_FIXTURE_SAMPLE=1 ASAN_OPTIONS=detect_leaks=1 \
    UBSAN_OPTIONS=print_stacktrace=1 \
    ctest_checked "$root/build-asan/junit.xml" -LE runtime --output-on-failure -j "$jobs")
else
  skip_stage GOTAP_SKIP_ASAN "ASan+UBSan unit tests"
fi

if [ "${GOTAP_SKIP_FUZZ:-0}" != 1 ]; then
  step "libFuzzer targets (${GOTAP_FUZZ_SECONDS:-20}s each)"
  tests/tools/run-fuzzers.sh build-asan "$root/build/fixtures" "${GOTAP_FUZZ_SECONDS:-20}"
else
  skip_stage GOTAP_SKIP_FUZZ "libFuzzer targets"
fi

# The README's first command, as a new user runs it; it also builds the demo binaries the
# tutorials (and so the docs test) use.
step "README demo (./dev.sh demo)"
./dev.sh demo >/dev/null

step "Debian package"
demo=$(ls -d "$root"/build/fixtures/*/stripped/demo 2>/dev/null | tail -1)
tests/tools/check-deb.sh "$root/build" ${demo:+"$demo"}

step "test suite"
cd build
ctest_checked "$root/build/junit.xml" --output-on-failure -j "$jobs"
step "passed"
