#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The README's first command: start a real 2-rank PyTorch DDP training job (Gloo, CPU),
# attach commtrace-bpf to the running ranks by PID, as an operator would, and report.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
out=${DEMO_OUT:-/tmp/commtrace-demo}
mkdir -p "$out"
rm -f "$out"/ready.*
port=$((29500 + RANDOM % 1000))
echo "demo: starting 2 DDP ranks (PyTorch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)') on Gloo)..."
pids=()
for r in 0 1; do
	MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE=2 RANK=$r \
		/usr/bin/python3 tests/workloads/train_ddp.py --steps 60 --step-sleep 0.1 \
		--ready-file "$out/ready" &
	pids+=($!)
done
trap 'kill ${pids[*]} 2>/dev/null || true' EXIT
for i in $(seq 1 600); do
	[ -f "$out/ready.0" ] && [ -f "$out/ready.1" ] && break
	sleep 0.1
done
targets=$(cat "$out/ready.0"),$(cat "$out/ready.1")
echo "demo: ranks running as $targets; attaching"
./commtrace-bpf -p "$targets" --json "$out/report.json"
wait "${pids[@]}"
trap - EXIT
echo "demo: JSON report in $out/report.json"
