#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Regenerates vmlinux/<arch>/vmlinux.h from the running kernel's BTF.
# The committed header lets the project build where bpftool or BTF is missing;
# CO-RE relocations make the BPF object portable across kernels anyway.
set -euo pipefail
arch=$(uname -m)
case "$arch" in x86_64) dir=x86 ;; aarch64) dir=arm64 ;; *) dir=$arch ;; esac
top=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$top/vmlinux/$dir"
bpftool btf dump file /sys/kernel/btf/vmlinux format c >"$top/vmlinux/$dir/vmlinux.h"
echo "wrote vmlinux/$dir/vmlinux.h"
