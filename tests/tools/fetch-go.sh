#!/usr/bin/env bash
# Fetch Go toolchains from Debian packages (golang-V-go + golang-V-src) into a private cache,
# without touching the system's apt setup: a throw-away apt configuration whose sources are
# derived at run time from the system's own Debian source entry with the suite changed.
# Nothing that names the mirror is left behind: the apt state lives in a temporary
# directory that is removed on exit.
#
# usage: fetch-go.sh [CACHE_DIR] [VERSION...]   (default versions: 1.19 1.21 1.22 1.23 1.24 1.26 1.27)
# Prints one "VERSION GOROOT" line per toolchain it has on stdout, nothing else. Missing
# toolchains are reported on stderr. Running it again is cheap and changes nothing.
set -euo pipefail

# shellcheck source=tests/tools/private-apt.sh
. "$(dirname "${BASH_SOURCE[0]}")/private-apt.sh"

cache=${1:-${GOTAP_GO_CACHE:-$HOME/.cache/gotap/go}}
shift || true
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(1.19 1.21 1.22 1.23 1.24 1.26 1.27)
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
# An older version of this script kept its apt state (which names the mirror) here.
rm -rf "$cache/apt"

suite_for() {
  case "$1" in
    1.19) echo bookworm ;;
    1.21 | 1.22 | 1.23) echo bookworm-backports ;;
    1.24) echo trixie ;;
    *) echo sid ;;
  esac
}

# Debian's GOROOT (/usr/lib/go-V) links src, pkg/include, lib, ... into /usr/share/go-V,
# either relatively (../../share/go-V/lib) or absolutely. The -src package is unpacked to
# $root/share, so every link that points into share/go-V is redirected there. Idempotent.
relink() {
  local v=$1 root=$2 link target rest dest
  while IFS= read -r -d '' link; do
    target=$(readlink "$link")
    case "$target" in
      */share/go-"$v"/*) rest=${target#*/share/go-"$v"/} ;;
      */share/go-"$v") rest=. ;;
      *) continue ;;
    esac
    dest="$root/share/$rest"
    [ -e "$dest" ] || { echo "fetch-go: $link: $dest does not exist" >&2; continue; }
    ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$dest")" "$link"
  done < <(find "$root" -path "$root/share" -prune -o -type l -print0)
}

usable() { [ -x "$1/bin/go" ] && GOROOT=$1 GOTOOLCHAIN=local "$1/bin/go" version >/dev/null 2>&1; }

missing=()
for v in "${versions[@]}"; do usable "$cache/$v" || missing+=("$v"); done

if [ ${#missing[@]} -gt 0 ]; then
  uri=$(system_uri) || { echo "fetch-go: no Debian source entry found in /etc/apt" >&2; exit 1; }
  apt_root=$(mktemp -d "$cache/.apt.XXXXXX")
  trap 'rm -rf "$apt_root"' EXIT
  mapfile -t suites < <(for v in "${missing[@]}"; do suite_for "$v"; done | sort -u)
  private_apt "$apt_root" "$uri" "${suites[@]}"
  mkdir -p "$apt_root/debs"
  apt-get "${apt_opts[@]}" -qq update >/dev/null 2>"$apt_root/update.err" ||
    { echo "fetch-go: apt-get update had errors:" >&2; cat "$apt_root/update.err" >&2; }

  for v in "${missing[@]}"; do
    root="$cache/$v"
    work="$cache/.unpack-$v"
    rm -rf "$work" && mkdir -p "$work"
    if ! (cd "$apt_root/debs" && apt-get "${apt_opts[@]}" -qq download "golang-$v-go" \
      "golang-$v-src") >/dev/null 2>&1; then
      echo "fetch-go: Go $v is not available from $(suite_for "$v")" >&2
      rm -rf "$work"
      continue
    fi
    for deb in "$apt_root/debs/golang-$v"-{go,src}_*.deb; do dpkg -x "$deb" "$work"; done
    rm -rf "$root"
    mv "$work/usr/lib/go-$v" "$root"
    rm -rf "$root/share"
    mv "$work/usr/share/go-$v" "$root/share"
    rm -rf "$work" "$apt_root/debs/golang-$v"-*.deb
  done
fi

for v in "${versions[@]}"; do
  root="$cache/$v"
  [ -d "$root" ] || continue
  relink "$v" "$root"
  if usable "$root"; then
    echo "$v $root"
  else
    echo "fetch-go: Go $v: $root/bin/go does not run" >&2
  fi
done
