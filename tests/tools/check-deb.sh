#!/usr/bin/env bash
# The Debian package, end to end: build it with CPack from BUILD_DIR, check what it holds,
# install it for real, run the installed gotap from PATH, and remove it again so the
# machine is left as it was (dependencies apt had to pull in are removed too).
#
#   tests/tools/check-deb.sh BUILD_DIR [GO_BINARY]
#
# GO_BINARY is any Go executable for `gotap info` (default: the stripped Go 1.27 demo
# fixture in BUILD_DIR). Installing needs root; without it the check is skipped (exit 0).
# Exit status: 0 passed or skipped, 1 failed, 2 bad usage.
set -euo pipefail
# One collation for sort and comm, and messages in English for the logs.
export LC_ALL=C

say() { printf 'check-deb: %s\n' "$*"; }
fail() {
  say "FAIL: $*" >&2
  exit 1
}

if [ $# -lt 1 ] || [ $# -gt 2 ] || [ ! -d "$1" ]; then
  echo "usage: $0 BUILD_DIR [GO_BINARY]" >&2
  exit 2
fi
if [ "$(id -u)" != 0 ]; then
  say "SKIP: installing a package needs root"
  exit 0
fi
if ! command -v dpkg-deb >/dev/null || ! command -v apt-get >/dev/null; then
  say "SKIP: not a Debian system (no dpkg-deb or apt-get)"
  exit 0
fi
command -v cpack >/dev/null || fail "cpack not found (it comes with cmake)"

build_dir=$(cd "$1" && pwd)
[ -f "$build_dir/CPackConfig.cmake" ] || fail "$build_dir has no CPackConfig.cmake; configure it with cmake first"
go_bin=${2:-$build_dir/fixtures/1.27/stripped/demo}
[ -f "$go_bin" ] || fail "no Go binary at $go_bin (build the fixtures, or pass one as GO_BINARY)"
go_bin=$(realpath "$go_bin")

# A gotap that is already installed belongs to someone; this check must not replace and
# then remove it.
pkg_state() { dpkg-query -W -f='${db:Status-Status}' gotap 2>/dev/null || true; }
case $(pkg_state) in
  "" | not-installed | config-files) ;;
  *) fail "a gotap package is already installed ($(pkg_state)); remove it first (dpkg -r gotap)" ;;
esac

installed_packages() {
  dpkg-query -W -f='${db:Status-Status} ${binary:Package}\n' | awk '$1 == "installed" {print $2}' | sort
}

work=$(mktemp -d)
before=$work/before.txt
installed_packages >"$before"
touched=0

# Packages apt installed for ours, so they leave with it.
remove_pulled_in() {
  local extra
  extra=$(installed_packages | comm -13 "$before" - | tr '\n' ' ')
  [ -n "$extra" ] || return 0
  say "removing what apt installed for the package: $extra"
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq $extra >"$work/purge.log" 2>&1 || {
    say "warning: could not remove $extra: $(tail -1 "$work/purge.log")" >&2
    return 1
  }
}

# Runs on every exit, so a failed check still takes the package (and whatever apt pulled
# in for it) back off the machine.
cleanup() {
  local rc=$?
  if [ "$touched" = 1 ]; then
    case $(pkg_state) in
      "" | not-installed) ;;
      *) dpkg --purge gotap >"$work/remove.log" 2>&1 || say "warning: could not remove gotap: $(tail -1 "$work/remove.log")" >&2 ;;
    esac
    remove_pulled_in || true
  fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT

# cpack installs what the build tree holds and builds nothing itself, so a stale tree
# would package stale files (or miss some). Up to date, this is a no-op.
say "building $build_dir"
if ! cmake --build "$build_dir" >"$work/build.log" 2>&1; then
  tail -20 "$work/build.log" >&2
  fail "cmake --build $build_dir failed"
fi
say "building the package with cpack in $build_dir"
if ! (cd "$build_dir" && cpack -G DEB -B "$work/out") >"$work/cpack.log" 2>&1; then
  tail -20 "$work/cpack.log" >&2
  fail "cpack -G DEB failed"
fi
mapfile -t debs < <(find "$work/out" -maxdepth 1 -name 'gotap_*.deb')
[ ${#debs[@]} = 1 ] || fail "expected one gotap_*.deb from cpack, got ${#debs[@]}"
deb=${debs[0]}
say "built $(basename "$deb") ($(du -h "$deb" | cut -f1))"

# What the package holds and declares.
contents=$(dpkg-deb -c "$deb") || fail "dpkg-deb -c cannot read $deb"
for path in ./usr/bin/gotap ./usr/share/man/man1/gotap.1.gz \
  ./usr/share/bash-completion/completions/gotap; do
  line=$(awk -v p="$path" '$6 == p' <<<"$contents")
  [ -n "$line" ] || fail "$path is missing from the package"
done
awk '$6 == "./usr/bin/gotap" {exit !($1 ~ /^-rwxr-xr-x/)}' <<<"$contents" ||
  fail "./usr/bin/gotap is not mode 0755 in the package"
dpkg-deb -I "$deb" >"$work/info.txt" || fail "dpkg-deb -I cannot read $deb"
field() { dpkg-deb -f "$deb" "$1"; }
[ "$(field Package)" = gotap ] || fail "Package is '$(field Package)', not gotap"
[ "$(field Section)" = devel ] || fail "Section is '$(field Section)', not devel"
[ "$(field Architecture)" = "$(dpkg --print-architecture)" ] ||
  fail "Architecture is '$(field Architecture)'"
[ -n "$(field Maintainer)" ] || fail "no Maintainer"
version=$(field Version)
depends=$(field Depends)
[ -n "$depends" ] || fail "Depends is empty (dpkg-shlibdeps did not run?)"
# The libraries gotap links must show up; a Depends without them would install a gotap
# that cannot start.
for lib in libc6 libelf1 libbpf1; do
  grep -qE "(^|, )$lib( |,|$)" <<<"$depends" || fail "Depends lacks $lib: $depends"
done
say "package gotap $version, Depends: $depends"

# Install for real. dpkg does not fetch dependencies; apt-get does, from a local file too.
# dpkg -i leaves the package unpacked but unconfigured when a dependency is missing, and
# apt-get then refuses any install until told to fix that (-f).
touched=1
if ! dpkg -i "$deb" >"$work/install.log" 2>&1; then
  say "dpkg -i left dependencies unmet; installing them with apt-get"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -f --no-install-recommends "$deb" \
    >>"$work/install.log" 2>&1 || {
    tail -20 "$work/install.log" >&2
    fail "the package does not install"
  }
fi
[ "$(pkg_state)" = installed ] || fail "gotap is '$(pkg_state)' after installing, not installed"
say "installed"

# Run it as a user would, from a clean environment: /usr/local/bin (cmake --install) must
# not shadow the packaged binary, and nothing from the build tree may leak in.
sys_path=/usr/sbin:/usr/bin:/sbin:/bin
run() { (cd / && env -i PATH="$sys_path" HOME=/root LANG=C.UTF-8 "$@"); }
where=$(run sh -c 'command -v gotap') || fail "gotap is not on PATH after installing"
[ "$where" = /usr/bin/gotap ] || fail "gotap resolves to $where, not /usr/bin/gotap"
[ "$(dpkg -S /usr/bin/gotap 2>/dev/null | cut -d: -f1)" = gotap ] ||
  fail "/usr/bin/gotap does not belong to the gotap package"

out=$(run gotap --help) || fail "gotap --help exited $?"
grep -q '^usage: gotap' <<<"$out" || fail "gotap --help printed no usage line"
out=$(run gotap --version) || fail "gotap --version exited $?"
[ "$out" = "gotap $version" ] || fail "gotap --version says '$out', the package is $version"
out=$(run gotap info "$go_bin" 2>&1) || fail "gotap info $go_bin exited $?: $out"
grep -qE '^go_version: +go1\.' <<<"$out" || fail "gotap info printed no Go version: $out"
out=$(run gotap info --json "$go_bin") || fail "gotap info --json exited $?"
grep -q '"event":"info"' <<<"$out" || fail "gotap info --json printed no info event"
say "gotap --help, --version and info $go_bin work from PATH"

rc=0
run gotap info /nonexistent >/dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "gotap info /nonexistent exited $rc, not 2"

run bash -c 'source /usr/share/bash-completion/completions/gotap && complete -p gotap' \
  >/dev/null 2>&1 || fail "the bash completion does not load"

if command -v man >/dev/null; then
  if [ -f /usr/share/man/man1/gotap.1.gz ]; then
    page=$(run man -w gotap) || fail "man -w gotap finds no page"
    [ "$page" = /usr/share/man/man1/gotap.1.gz ] || fail "man -w gotap finds $page"
    out=$(run env MANWIDTH=80 man gotap 2>&1) || fail "man gotap exited $?"
    grep -q 'trace Go programs' <<<"$out" || fail "man gotap does not render the page"
    say "man gotap finds and renders $page"
  else
    # Minimal images tell dpkg to skip /usr/share/man (path-exclude): the page is not
    # installed, so the one in the package is rendered instead.
    grep -rqs 'path-exclude.*/usr/share/man' /etc/dpkg/dpkg.cfg /etc/dpkg/dpkg.cfg.d ||
      fail "the man page was not installed"
    dpkg-deb -x "$deb" "$work/x" || fail "dpkg-deb -x cannot unpack $deb"
    out=$(MANWIDTH=80 man -l "$work/x/usr/share/man/man1/gotap.1.gz" 2>&1) ||
      fail "man -l of the packaged page exited $?"
    grep -q 'trace Go programs' <<<"$out" || fail "man -l does not render the packaged page"
    say "man renders the packaged page (dpkg excludes /usr/share/man here, so it is not installed)"
  fi
elif [ -n "${CI:-}" ]; then
  fail "man-db is not installed (./dev.sh test installs it): the man page was not checked"
else
  say "man page check skipped: man-db is not installed"
fi

# Remove it here rather than only in cleanup, so a package that cannot be removed fails.
dpkg -r gotap >"$work/remove.log" 2>&1 || {
  cat "$work/remove.log" >&2
  fail "dpkg -r gotap failed"
}
case $(pkg_state) in
  "" | not-installed) ;;
  config-files) dpkg --purge gotap >/dev/null ;;
  *) fail "gotap is '$(pkg_state)' after dpkg -r" ;;
esac
[ ! -e /usr/bin/gotap ] || fail "/usr/bin/gotap is still there after dpkg -r"
remove_pulled_in || fail "could not remove the packages apt installed for gotap"
touched=0
say "removed"
say "PASS: $(basename "$deb") builds, installs, runs from PATH and removes cleanly"
