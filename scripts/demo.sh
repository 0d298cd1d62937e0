#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The README's first command (`sudo make demo`, after the installer and the build): start a
# real 2-rank tensor-parallel training job (seed 000's MLP: ColwiseParallel fc1,
# RowwiseParallel fc2, forward and backward, PyTorch on Gloo), attach commtrace-bpf to the
# running ranks by PID as an operator would, and show what it found and where it wrote it.
# DEMO_OUT=DIR: where the files go (default /tmp/commtrace-demo). Exit status: the tracer's
# (3: BPF unavailable, with the missing capability named).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
out=${DEMO_OUT:-/tmp/commtrace-demo}
py=/usr/bin/python3
steps=40

mkdir -p "$out"
rm -f "$out"/pid.* "$out"/ranks.log

# Say why at once, before a job is started for nothing.
rc=0
./commtrace-bpf --check 2>"$out/check.txt" >/dev/null || rc=$?
if [ $rc != 0 ]; then
	sed 's/^/demo: /' "$out/check.txt" >&2
	echo "demo: the tracer cannot run here (exit $rc); nothing was started" >&2
	exit $rc
fi
port=$((29500 + RANDOM % 1000))

echo "demo: starting a 2-rank tensor-parallel MLP (seed 000: ColwiseParallel fc1, RowwiseParallel fc2;"
echo "demo: forward and backward, $steps steps) on PyTorch $($py -c 'import torch; print(torch.__version__)') with Gloo; its output: $out/ranks.log"
pids=()
for r in 0 1; do
	MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE=2 RANK=$r \
		$py tests/workloads/seed000_mlp.py --forwards $steps --backward --pause 0.25 \
		--pid-file "$out/pid" --linger 0.5 >>"$out/ranks.log" 2>&1 &
	pids+=($!)
done
trap 'kill ${pids[*]} 2>/dev/null || true' EXIT
for _ in $(seq 1 600); do
	[ -f "$out/pid.0" ] && [ -f "$out/pid.1" ] && break
	sleep 0.1
done
if ! [ -f "$out/pid.0" ] || ! [ -f "$out/pid.1" ]; then
	echo "demo: the ranks did not start; their output:" >&2
	tail -20 "$out/ranks.log" >&2
	exit 1
fi
targets=$(cat "$out/pid.0"),$(cat "$out/pid.1")
cmd=(./commtrace-bpf -p "$targets" --ops -i 3 --table "$out/table.txt" --noise-level 2
	--json "$out/report.json" --chrome "$out/trace.json")
echo "demo: the job is running as pids $targets; attaching:"
echo "demo:   sudo ${cmd[*]}"
rc=0
"${cmd[@]}" || rc=$?
wait "${pids[@]}" || true
trap - EXIT
[ $rc = 0 ] || { echo "demo: commtrace-bpf failed (exit $rc)" >&2; exit $rc; }

# The last complete step of rank 0, from the table: its last forward and the backward after.
echo
echo "demo: which module and op caused each collective (rank 0's last step, seed 000's table at noise level 2):"
awk -v pid="$(cat "$out/pid.0")" '
	/^# pid / { mine = ($3 == pid); next }
	mine && /^Type/ { head = $0; next }
	mine && /^-+$/ { rule = $0; next }
	mine && /^Module +Module\(\(root\)\) \[enter\]/ { n = 0 }
	mine && NF { step[n++] = $0 }
	END {
		print head; if (rule) print rule
		for (i = 0; i < n; i++) print step[i]
	}' "$out/table.txt"
cat <<EOF

demo: files written:
  $out/report.json   the JSON report (docs/json.md), e.g.
                     jq '.processes[] | {rank, comm_counts}' $out/report.json
  $out/table.txt     seed 000's table of every step of both ranks (noise level 2)
  $out/trace.json    Chrome trace: open it in https://ui.perfetto.dev (a process per rank,
                     module/op/collective slices, arrows between the ranks' halves)

demo: what next: on your own job, find the ranks' pids (pgrep -f train.py) and run
  sudo ./commtrace-bpf -p PID[,PID...] --table - --noise-level 2      # who caused each collective
  sudo ./commtrace-bpf -p PID[,PID...] -d 60 --json comm.json --chrome comm.trace.json
  sudo make install; man commtrace-bpf                                 # every option
EOF
