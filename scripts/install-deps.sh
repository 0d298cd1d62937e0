#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs every Debian package that building and testing commtrace needs.
# Idempotent; run as root (CI does). Set COMMTRACE_SKIP_APT=1 to skip.
set -euo pipefail

[ "${COMMTRACE_SKIP_APT:-0}" = 1 ] && exit 0

pkgs=(
	# build
	make gcc g++ clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev libcjson-dev pkg-config
	# --metrics: the HTTP server library; the tests scrape it with a real Prometheus
	libmicrohttpd-dev prometheus
	# fuzzing (libFuzzer runtime) and the Gloo headers the offsets are generated from
	libclang-rt-14-dev libgloo-dev
	libstdc++-12-dev
	# lint
	clang-format clang-tidy cppcheck
	# test targets: real Open MPI, real PyTorch with Gloo, mpi4py
	openmpi-bin libopenmpi-dev python3 python3-torch python3-mpi4py python3-pytest
	# cross-checks and benchmarks
	bpftrace
)

# Node.js and npm run the independent Chrome-trace parser of tests/integration/test_chrome.py
# (Chrome DevTools' trace engine, from the npm registry). A machine that already has them
# (these images ship Node.js 20 outside Debian's packages, which Debian's npm conflicts
# with) keeps its own.
command -v node >/dev/null && command -v npm >/dev/null || pkgs+=(nodejs npm)

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "install-deps: all ${#pkgs[@]} packages present"
	exit 0
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${missing[@]}"
