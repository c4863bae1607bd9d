#!/usr/bin/env bash
# Fetch real-world stripped Go binaries for the golden tests and the benchmark:
#   OUT_DIR/real/<name>/<binary>              the binary as shipped
#   OUT_DIR/real/<name>/<binary>.gosym.json   tests/tools/gosymdump built by the newest toolchain
#   OUT_DIR/real/<name>/<binary>.version      go version BINARY (newest toolchain)
#   OUT_DIR/real/<name>/<binary>.origin       where it came from (package and version)
# Sources: Debian packages of the running release (apt-get download, system apt setup) and
# Go binaries prebuilt with many Go releases from the npm registry (npm pack): esbuild's, at
# versions pinned to the Go release that built them, and buf's. A Debian package or the
# newest esbuild that cannot be fetched is reported and skipped; a pinned npm version that
# cannot be fetched is reported and makes the script fail (exit 1) once the others are done.
# Existing binaries are kept; dumps are refreshed when gosymdump changed.
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

# name  npm-package@version  path-in-package: esbuild's prebuilt binary, newest (the current
# Go release) and pinned builds by Go releases Debian ships no toolchain for (1.17.5, 1.18.1,
# 1.20.4, 1.25.4), and buf, a go1.27.3 binary. The pinned ones are exact: a failed fetch
# fails the script, so that the tests of those releases never run without their binary.
npm_bins=(
  "esbuild @esbuild/linux-x64 bin/esbuild"
  "esbuild-go1.17 esbuild-linux-64@0.14.8 bin/esbuild"
  "esbuild-go1.18 esbuild-linux-64@0.14.39 bin/esbuild"
  "esbuild-go1.20 @esbuild/linux-x64@0.17.19 bin/esbuild"
  "esbuild-go1.25 @esbuild/linux-x64@0.27.0 bin/esbuild"
  "buf @bufbuild/buf-linux-x64@1.75.0 bin/buf"
)

failed=0
for entry in "${npm_bins[@]}"; do
  read -r name spec path <<<"$entry"
  dest="$out/real/$name/$(basename "$path")"
  if [ ! -f "$dest" ]; then
    mkdir -p "$tmp/$name"
    if command -v npm >/dev/null &&
      (cd "$tmp/$name" && npm pack --silent "$spec" >"$tmp/$name/npm.out" 2>/dev/null); then
      tgz="$tmp/$name/$(tail -1 "$tmp/$name/npm.out")"
      mkdir -p "$tmp/$name/x" "$(dirname "$dest")"
      tar -xzf "$tgz" -C "$tmp/$name/x"
      cp "$tmp/$name/x/package/$path" "$dest"
      echo "npm $(basename "$tgz" .tgz)" >"$dest.origin"
    else
      echo "fetch-real-binaries: cannot fetch $spec with npm" >&2
      # A pinned version (an @ after the name's first character: a scoped name starts with
      # one) is what a test of that Go release needs; the newest esbuild is a convenience.
      if [[ ${spec:1} == *@* ]]; then failed=1; fi
      continue
    fi
  fi
  fetched+=("$dest")
done

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
  printf '%-30s %4s MB  %-24s %s\n' "${bin#"$out"/}" "$(($(stat -c %s "$bin") / 1048576))" \
    "$ver" "$(cat "$bin.origin")"
done
exit "$failed"
