#!/usr/bin/env bash
# A kernel header tree bcc compiles its BPF programs with, on a kernel that ships none (CI's:
# no /lib/modules/$(uname -r), no CONFIG_IKHEADERS). bcc's uprobe programs use only the
# kernel's generic headers (struct pt_regs, the helpers), so Debian's linux-headers-amd64 of
# another release serves. Debian splits them in two directories (the arch's generated headers
# and config, and the common tree); bcc takes one, BCC_KERNEL_SOURCE: this builds it in OUT_DIR
# as symbolic links, the arch's files over the common ones, and prints OUT_DIR.
# Exit 1 when no linux-headers-*-amd64 is installed (dev.sh's TEST_PACKAGES install it).
#
# usage: bcc-kernel-source.sh OUT_DIR
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: bcc-kernel-source.sh OUT_DIR" >&2; exit 2; }
arch=$(ls -d /usr/src/linux-headers-*-amd64 2>/dev/null | sort -V | tail -n 1 || true)
[ -n "$arch" ] || { echo "bcc-kernel-source.sh: no /usr/src/linux-headers-*-amd64" >&2; exit 1; }
common=${arch%-amd64}-common
[ -d "$common" ] || { echo "bcc-kernel-source.sh: no $common beside $arch" >&2; exit 1; }
rm -rf "$1"
mkdir -p "$1"
cp -rs "$common/." "$1/"
cp -rs --remove-destination "$arch/." "$1/"
cd "$1" && pwd
