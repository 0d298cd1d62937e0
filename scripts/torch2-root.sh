#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds the PyTorch 2.x test root: Debian 13 (trixie) made with debootstrap, with Debian's
# python3-torch (2.6, CPython 3.13), what torch.compile needs (libtorch-dev, g++) and what
# the devprof Python package's shared library links (libcjson1).
# Usage: scripts/torch2-root.sh [DIR]   (default build/torch2-root)
# Idempotent: a complete root (its stamp file present) is kept as it is, in well under a
# second. A half-built one is removed and built again. Run as root.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$top/build/torch2-root}
stamp=$dir/.commtrace-root
pkgs=(python3-torch python3-numpy python3-setuptools libtorch-dev g++ procps libcjson1)
want="trixie ${pkgs[*]}"

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
	echo "torch2-root: $dir is ready"
	exit 0
fi
[ "$(id -u)" = 0 ] || { echo "torch2-root: must run as root (debootstrap, chroot)" >&2; exit 1; }
command -v debootstrap >/dev/null || {
	echo "torch2-root: installing debootstrap"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
}

tmp=$dir.tmp
cleanup() { umount "$tmp/proc" 2>/dev/null || true; }
trap cleanup EXIT
cleanup
rm -rf "$tmp"
mkdir -p "$(dirname "$dir")"
echo "torch2-root: debootstrap trixie into $tmp (about 30 s)"
t0=$(date +%s)
debootstrap --variant=minbase trixie "$tmp" >"$tmp.log" 2>&1 || {
	echo "torch2-root: debootstrap failed; its log: $tmp.log" >&2; tail -5 "$tmp.log" >&2; exit 1; }
mount -t proc proc "$tmp/proc"
echo "torch2-root: installing ${pkgs[*]} (about 1-2 min, 2 GB)"
chroot "$tmp" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	"${pkgs[@]}" >>"$tmp.log" 2>&1 || {
	echo "torch2-root: apt-get in the root failed; its log: $tmp.log" >&2; tail -5 "$tmp.log" >&2; exit 1; }
chroot "$tmp" apt-get clean
# With /proc mounted: torch's cpuinfo and UCX complain on stdout without it.
ver=$(chroot "$tmp" python3 -c 'import torch,sys; print("torch", torch.__version__, "python", sys.version.split()[0])' 2>/dev/null | tail -n 1)
cleanup
rm -rf "$dir"
mv "$tmp" "$dir"
echo "$want" > "$stamp"
rm -f "$tmp.log"
echo "torch2-root: $dir ready in $(($(date +%s) - t0)) s ($ver)"
