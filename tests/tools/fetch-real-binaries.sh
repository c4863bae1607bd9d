#!/usr/bin/env bash
# Fetch real-world stripped Go binaries for the golden tests and the benchmark:
#   OUT_DIR/real/<name>/<binary>              the binary as shipped
#   OUT_DIR/real/<name>/<binary>.gosym.json   tests/tools/gosymdump built by the newest toolchain
#   OUT_DIR/real/<name>/<binary>.version      go version BINARY (newest toolchain)
#   OUT_DIR/real/<name>/<binary>.origin       where it came from (package and version)
# Sources: Debian packages of the running release (apt-get download, system apt setup) and
# esbuild's prebuilt binary from the npm registry (npm pack). A source that is unreachable
# is reported and skipped. Existing binaries are kept; dumps are refreshed when gosymdump
# changed.
#
# usage: fetch-real-binaries.sh OUT_DIR
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ $# -eq 1 ] || { echo "usage: fetch-real-binaries.sh OUT_DIR" >&2; exit 2; }
mkdir -p "$1/real"
out=$(cd "$1" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# name  debian-package  path-in-package: small (fzf, ~3 MB) and large (caddy, ~40 MB; rclone,
# ~54 MB): stripped Go servers as Debian ships them.
debian=(
  "fzf fzf usr/bin/fzf"
  "rclone rclone usr/bin/rclone"
  "caddy caddy usr/bin/caddy"
)

fetched=()
for entry in "${debian[@]}"; do
  read -r name pkg path <<<"$entry"
  dest="$out/real/$name/$(basename "$path")"
  if [ ! -f "$dest" ]; then
    mkdir -p "$tmp/$name"
    if ! (cd "$tmp/$name" && apt-get download -qq "$pkg" >/dev/null 2>&1); then
      echo "fetch-real-binaries: cannot download Debian package $pkg" >&2
      continue
    fi
    deb=$(ls "$tmp/$name"/*.deb)
    dpkg -x "$deb" "$tmp/$name/x"
    mkdir -p "$(dirname "$dest")"
    cp "$tmp/$name/x/$path" "$dest"
    dpkg-deb -f "$deb" Package Version | tr '\n' ' ' >"$dest.origin"
    echo "(Debian $(. /etc/os-release && echo "$VERSION_CODENAME"))" >>"$dest.origin"
  fi
  fetched+=("$dest")
done

dest="$out/real/esbuild/esbuild"
if [ ! -f "$dest" ]; then
  if command -v npm >/dev/null &&
    (cd "$tmp" && npm pack --silent @esbuild/linux-x64 >"$tmp/npm.out" 2>/dev/null); then
    tgz="$tmp/$(tail -1 "$tmp/npm.out")"
    mkdir -p "$tmp/esbuild" "$(dirname "$dest")"
    tar -xzf "$tgz" -C "$tmp/esbuild"
    cp "$tmp/esbuild/package/bin/esbuild" "$dest"
    echo "npm $(basename "$tgz" .tgz)" >"$dest.origin"
  else
    echo "fetch-real-binaries: cannot fetch @esbuild/linux-x64 with npm" >&2
  fi
fi
[ -f "$dest" ] && fetched+=("$dest")

read -r gosymdump goroot < <("$here/build-fixtures.sh" --gosymdump "$out")
for bin in "${fetched[@]}"; do
  if [ ! -f "$bin.gosym.json" ] || [ "$gosymdump" -nt "$bin.gosym.json" ]; then
    "$gosymdump" "$bin" >"$bin.gosym.json.tmp" && mv "$bin.gosym.json.tmp" "$bin.gosym.json"
    # Empty when the binary has no build info (esbuild): gosym.json then has the
    # runtime's version string.
    GOROOT=$goroot "$goroot/bin/go" version "$bin" >"$bin.version" 2>/dev/null || true
  fi
  ver=$(grep -o '"go_version":"[^"]*","go_version_source":"[^"]*"' "$bin.gosym.json" |
    sed 's/"go_version":"\([^"]*\)","go_version_source":"\([^"]*\)"/\1 (\2)/')
  printf '%-24s %4s MB  %-24s %s\n' "${bin#"$out"/}" "$(($(stat -c %s "$bin") / 1048576))" \
    "$ver" "$(cat "$bin.origin")"
done
