#!/usr/bin/env bash
# Fails (exit 1) when Debian offers a Go toolchain (golang-1.NN-go) newer than the newest
# release in the fixture matrix (the default versions of tests/tools/fetch-go.sh), so that a
# new Go release cannot go unnoticed: it needs its moduledata layout, runtime offsets and
# wait reasons checked (docs/design.md, "Go releases") and its fixtures built.
#
# usage: check-newest-go.sh
# Uses a throw-away apt configuration derived from the system's Debian source entry, as
# fetch-go.sh does (sid: where new toolchains appear first); nothing naming the mirror is
# left behind. Exit 77 (skipped) when apt cannot reach the archive.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/tools/private-apt.sh
. "$here/private-apt.sh"
newest=$(sed -n 's/^\[ ${#versions\[@\]} -gt 0 \] || versions=(\(.*\))$/\1/p' "$here/fetch-go.sh" |
  tr ' ' '\n' | sort -t. -k2,2n | tail -1)
[ -n "$newest" ] || { echo "check-newest-go: no default versions in fetch-go.sh" >&2; exit 1; }

uri=$(system_uri) || { echo "check-newest-go: skipped: no Debian source entry in /etc/apt"; exit 77; }
apt_root=$(mktemp -d)
trap 'rm -rf "$apt_root"' EXIT
private_apt "$apt_root" "$uri" sid
if ! apt-get "${apt_opts[@]}" -qq update >/dev/null 2>"$apt_root/update.err" ||
  grep -q '^[EW]:' "$apt_root/update.err"; then
  echo "check-newest-go: skipped: apt cannot reach the Debian archive"
  exit 77
fi
offered=$(apt-cache "${apt_opts[@]}" search --names-only '^golang-1\.[0-9]+-go$' |
  sed -n 's/^golang-\(1\.[0-9]*\)-go .*/\1/p' | sort -t. -k2,2n | tail -1)
[ -n "$offered" ] || { echo "check-newest-go: skipped: the archive lists no golang-1.NN-go"; exit 77; }
if [ "${offered#1.}" -gt "${newest#1.}" ]; then
  echo "check-newest-go: Debian offers Go $offered, newer than the matrix's newest ($newest):" \
    "add it to fetch-go.sh and check its layouts (docs/design.md, Go releases)" >&2
  exit 1
fi
echo "check-newest-go: the matrix's newest Go ($newest) is Debian's newest ($offered)"
