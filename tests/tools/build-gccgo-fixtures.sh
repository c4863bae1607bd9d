#!/usr/bin/env bash
# Builds the gccgo fixtures (tests/fixtures-gccgo/*) with Debian's gccgo into
# OUT/<flavour>/<program>:
#   default  -O2 -g, linked against libgo.so (what `gccgo` does by default)
#   stripped the default build, `strip`ped: .dynsym only, no DWARF
#   static   -O2 -g -static-libgo: libgo inside the executable
#   bundled  the same objects linked against libgo.so with RUNPATH $ORIGIN/lib, and a copy of
#            the system's libgo.so in bundled/lib: another file, the one ld.so loads for them
# Every package but main is compiled on its own with -fgo-pkgpath=gotap.test/<dir>, so its
# symbols carry an encoded package path. Skips (exit 0, a line on stderr) without gccgo.
set -euo pipefail
out=${1:?usage: build-gccgo-fixtures.sh OUT}
gccgo=${GCCGO:-$(command -v gccgo-12 || command -v gccgo || true)}
if [ -z "$gccgo" ]; then
  echo "build-gccgo-fixtures: no gccgo; gccgo fixtures not built" >&2
  exit 0
fi
src=$(cd "$(dirname "$0")/../fixtures-gccgo" && pwd)
for dir in "$src"/*/; do
  prog=$(basename "$dir")
  for flavour in default static; do
    extra=()
    [ "$flavour" = static ] && extra=(-static-libgo)
    obj="$out/obj/$flavour/$prog"
    rm -rf "$obj" && mkdir -p "$obj/gotap.test" "$out/$flavour"
    objs=()
    for pkg in "$dir"*/; do
      [ -d "$pkg" ] || continue
      name=$(basename "$pkg")
      "$gccgo" -O2 -g -c -fgo-pkgpath="gotap.test/$name" -o "$obj/gotap.test/$name.o" "$pkg"*.go
      objs+=("$obj/gotap.test/$name.o")
    done
    "$gccgo" -O2 -g -I "$obj" -c -o "$obj/main.o" "$dir"*.go
    "$gccgo" -O2 -g "${extra[@]}" -o "$out/$flavour/$prog" "$obj/main.o" "${objs[@]}"
  done
  mkdir -p "$out/stripped"
  strip -o "$out/stripped/$prog" "$out/default/$prog"
  # The last flavour's objects: -static-libgo is a link option, they are the default's.
  mkdir -p "$out/bundled/lib"
  "$gccgo" -O2 -g -Wl,--enable-new-dtags,-rpath,'$ORIGIN/lib' -o "$out/bundled/$prog" \
    "$obj/main.o" "${objs[@]}"
done
libgo=$(ldd "$out/default/$prog" | awk '$1 ~ /^libgo\.so/ { print $3 }')
# Renamed into place: a program still running from an earlier build keeps the old file.
cp "$libgo" "$out/bundled/lib/.new" && mv -f "$out/bundled/lib/.new" "$out/bundled/lib/${libgo##*/}"

