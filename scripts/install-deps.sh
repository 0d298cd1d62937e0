#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs every Debian package that building, testing and the demo need. `make demo` and
# `make test` run it first. Idempotent: with everything present it asks dpkg once and
# returns in well under a second; otherwise it says what it installs, then installs it.
# Run as root. COMMTRACE_SKIP_APT=1 skips it (a machine set up by other means).
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
	# C++ names (libiberty: the demangler with a bound on its output)
	libiberty-dev
	# lint
	clang-format clang-tidy cppcheck
	# test targets: real Open MPI, real PyTorch with Gloo, mpi4py
	openmpi-bin libopenmpi-dev python3 python3-torch python3-mpi4py python3-pytest
	# the PyTorch 2.x test root (scripts/torch2-root.sh), the man page's check, the demo's
	# pointers (jq)
	debootstrap man-db jq
	# cross-checks and benchmarks
	bpftrace
)

# Node.js and npm run the independent Chrome-trace parser of tests/integration/test_chrome.py
# (Chrome DevTools' trace engine, from the npm registry). A machine that already has them
# (these images ship Node.js 20 outside Debian's packages, which Debian's npm conflicts
# with) keeps its own.
command -v node >/dev/null && command -v npm >/dev/null || pkgs+=(nodejs npm)

# One dpkg-query for all: "name status" for each package dpkg knows of.
declare -A have=()
while read -r name status; do
	[ "$status" = installed ] && have[${name%%:*}]=1
done < <(dpkg-query -W -f='${Package} ${db:Status-Status}\n' "${pkgs[@]}" 2>/dev/null || true)
missing=()
for p in "${pkgs[@]}"; do
	[ -n "${have[$p]:-}" ] || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "install-deps: all ${#pkgs[@]} packages present"
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "install-deps: missing ${missing[*]}; run as root (sudo) to install them" >&2
	exit 1
fi
echo "install-deps: installing ${#missing[@]} missing package(s): ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${missing[@]}"
echo "install-deps: installed ${missing[*]}"
