#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Prove commtrace's GPU paths on a machine with an NVIDIA GPU, PyTorch 2.x and NCCL:
#
#   scripts/gpu-check.sh pack         # here: .gpu/ = the tracer with its libraries
#   scripts/gpu-check.sh run [OUTDIR] # there, as root, in the repository root
#
# `run` checks that BPF uprobes work, traces real NCCL collectives of a PyTorch job in
# launch mode and in attach mode (-p) and compares calls, bytes and dtypes with the job's
# own ledger, runs the devprof MegaKernel (tests/progs/megakernel.cu) on the GPU, decodes
# its buffer, times sampling on vs off (megakernel --cost) and fuses a sampled session
# with the PyTorch profiler's Kineto trace of it (tests/workloads/megakernel_profiled.py:
# "devprof fusion check: PASS|FAIL"), and runs seed 000's tensor-parallel MLP under PyTorch's CommDebugMode
# and under commtrace to compare their counts and costs. Everything lands in OUTDIR
# (default $OUT or /tmp/gpu-check): the log in OUTDIR/gpu-check.log, the files in
# OUTDIR/results.tgz. GPU_STEPS="nccl devprof tp" picks the steps. docs/PERFORMANCE.md
# holds what a run printed.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1

pack() {
	make -s -j"$(nproc)" || exit 1
	rm -rf .gpu && mkdir -p .gpu/lib || exit 1
	# libbpf, libelf and zlib static; cJSON beside it, found through DT_RPATH.
	local objs libs lib
	objs=$(printf 'v:\n\t@echo $(USER_OBJS)\n' | make -s --no-print-directory -f Makefile -f - v)
	libs=$(printf 'v:\n\t@echo $(LDLIBS)\n' | make -s --no-print-directory -f Makefile -f - v)
	# libbpf, libelf and zlib static; the other libraries beside it, found through DT_RPATH.
	libs=$(echo " $libs " | sed 's/ -lbpf / /; s/ -lelf / /; s/ -lz / /')
	gcc -o .gpu/commtrace-bpf $objs -Wl,-Bstatic -lbpf -lelf -lz -Wl,-Bdynamic $libs \
		-Wl,--disable-new-dtags -Wl,-rpath,'$ORIGIN/lib' || exit 1
	for lib in $(ldd .gpu/commtrace-bpf | awk '/=> \// {print $3}'); do
		case $(basename "$lib") in
		libc.so* | libm.so* | libstdc++* | libgcc_s* | ld-linux*) ;;
		*) cp -L "$lib" .gpu/lib/ || exit 1 ;;
		esac
	done
	grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >>.git/info/exclude
	ls -l .gpu .gpu/lib
}

# Wait up to $2 s for a line starting with $3 in file $1.
wait_line() {
	for _ in $(seq $(($2 * 10))); do
		grep -q "^$3" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "no '$3' line in $1 after $2 s"
	return 1
}

# NCCL collectives of a real PyTorch job, in launch and attach mode, against its ledger.
step_nccl() {
	echo "== NCCL, launch mode"
	t=$out/launch
	timeout 240 $ct --json "$t.json" --chrome "$t.trace.json" --table "$t.table" \
		--noise-level 2 -- $py tests/workloads/nccl_collectives.py --iters 5 --expect "$t.expect"
	echo "rc=$?"
	head -40 "$t.table"

	echo "== NCCL, attach mode (-p)"
	t=$out/attach
	rm -f "$t.go"*
	$py tests/workloads/nccl_collectives.py --iters 7 --wait-file "$t.go" --expect "$t.expect" &
	local job=$!
	wait_line "$t.go.pid.0" 120 "[0-9]"
	timeout 240 $ct -p "$(cat "$t.go.pid.0")" --json "$t.json" 2>"$t.err" &
	local tr=$!
	wait_line "$t.err" 120 attached:
	touch "$t.go"
	wait $job
	echo "job rc=$?"
	wait $tr
	echo "tracer rc=$?"
	cat "$t.err"

	echo "== compare with the jobs' ledgers"
	$py - "$out" <<'EOF'
import json, sys
out = sys.argv[1]
for mode in ("launch", "attach"):
    try:
        js = json.load(open(f"{out}/{mode}.json"))
        led = json.load(open(f"{out}/{mode}.expect.0"))
    except Exception as e:
        print(f"{mode}: FAIL cannot read: {e}")
        continue
    fns = {}
    for p in js["processes"]:
        for c in p["collectives"]:
            fns.setdefault(c["function"], []).append(c)
    print(f"{mode}: comm_counts {js['comm_counts']} drops {js['dropped_events']}")
    def one(name):
        got = fns.get(name, [])
        return got[0] if len(got) == 1 else None
    ok = True
    for name in ("ncclAllReduce", "ncclAllGather"):
        c, e = one(name), led[name]
        want_s = e.get("bytes_sent", e.get("bytes"))
        want_r = e.get("bytes_received", e.get("bytes"))
        if mode == "attach" and name == "ncclAllGather":
            # communicator created before the attach: group size unknown, counted as such
            want_r = 0
            unknown = js["drops"].get("group_size_unknown")
            print(f"  group_size_unknown {unknown} (want {e['calls']})")
            ok &= unknown == e["calls"]
        good = c and (c["calls"], c["completed"], c["bytes_sent"], c["bytes_received"], c["dtype"]) == (e["calls"], e["calls"], want_s, want_r, e["dtype"])
        ok &= bool(good)
        print(f"  {name}: {'OK' if good else 'FAIL'} got {c and {k: c[k] for k in ('calls', 'completed', 'bytes_sent', 'bytes_received', 'dtype')}} want {e}")
    e = led["ncclBroadcast"]
    bc = [c for n in ("ncclBcast", "ncclBroadcast") for c in fns.get(n, [])]
    outer = bc[0] if len(bc) == 1 else None
    good = outer and outer["calls"] == e["calls"] and outer["bytes_sent"] == e["bytes"] and outer["dtype"] == e["dtype"]
    ok &= bool(good)
    print(f"  broadcast: {'OK' if good else 'FAIL'} got {[(c['function'], c['calls'], c['bytes_sent'], c['dtype']) for c in bc]} want {e}")
    for name in ("ProcessGroupNCCL::allreduce", "ProcessGroupNCCL::broadcast", "ProcessGroupNCCL::_allgather_base"):
        c = one(name)
        print(f"  c10d {name}: {c and {k: c[k] for k in ('calls', 'bytes_sent', 'bytes_received', 'dtype')}}")
    print(f"{mode}: {'PASS' if ok else 'FAIL'}")
EOF
}

# A Python with torch for the devprof workload: $py, else the GPU machine's venv.
devprof_torch_py() {
	local p
	for p in "$py" /opt/torch/.venv/bin/python3; do
		"$p" -c 'import torch' 2>/dev/null && { echo "$p"; return; }
	done
	echo "$py"
}

# The devprof MegaKernel on the GPU (tests/progs/megakernel.cu): its buffer decoded; what
# sampling costs the kernel (megakernel --cost: cudaEvent-timed calls, off and on
# alternating, medians); and the same kernel as a library (libmegakernel.so) run under
# torch.profiler by tests/workloads/megakernel_profiled.py, its buffer fused into the
# Kineto trace by `devprof fuse` and checked: each sampled invocation's AIC/AIV tracks
# inside the kernel event of its own call. Summary lines: "devprof cost: ..." and
# "devprof fusion check: PASS|FAIL ...". MK_COST_CALLS (2000) calls each way.
step_devprof() {
	echo "== devprof MegaKernel on the GPU"
	local mk=$out/megakernel lib=$out/libmegakernel.so d=$out/mkprof tpy
	if ! nvcc -O2 -arch=sm_90 -Iinclude -o "$mk" tests/progs/megakernel.cu ||
		! nvcc -O2 -arch=sm_90 -Iinclude -shared -Xcompiler -fPIC -DMK_LIBRARY \
			-o "$lib" tests/progs/megakernel.cu; then
		echo "devprof: nvcc failed"
		echo "devprof fusion check: FAIL: the MegaKernel did not build"
		return
	fi
	timeout 120 "$mk" "$out/mk.bin" 6
	echo "rc=$?"
	$ct devprof validate "$out/mk.bin" | tail -20
	$ct devprof decode "$out/mk.bin" -o "$out/mk.trace.json"
	echo "decode rc=$? $(stat -c %s "$out/mk.trace.json" 2>/dev/null) bytes"

	echo "== devprof: sampling off vs on in the CUDA kernel"
	timeout 300 "$mk" --cost "${MK_COST_CALLS:-2000}"
	echo "cost rc=$?"

	echo "== devprof: fusion with torch.profiler's trace of the real kernel"
	tpy=$(devprof_torch_py)
	mkdir -p "$d"
	# 2 launches before the session, 12 session calls sampled by schedule 2,1,1,2,2:
	# invocation_seq 4, 5, 8, 9 are saved; the trace holds all 14 launches (--skip 2).
	timeout 300 "$tpy" tests/workloads/megakernel_profiled.py run --lib "$lib" --out "$d" \
		--pre 2 --calls 12 --schedule 2,1,1,2,2
	echo "profiled rc=$?"
	$ct devprof validate "$d/mk.bin" | grep -v '^  '
	$ct devprof fuse --device "$d/mk.bin" --profiler "$d/kineto.json" --skip 2 \
		-o "$d/fused.json"
	echo "fuse rc=$?"
	"$tpy" tests/workloads/megakernel_profiled.py check --manifest "$d/manifest.json" \
		--fused "$d/fused.json"
	echo "check rc=$?"
	rm -f "$lib"
}

# Seed 000's TP MLP on DTensor: CommDebugMode's counts, commtrace's, and their costs.
step_tp() {
	echo "== TP MLP (DTensor, Gloo, 2 ranks): CommDebugMode vs commtrace"
	t=$out/tp
	# Forward only; tp_mlp.py --debug-mode enters one CommDebugMode per forward (its
	# module tracker fails on a second forward in one context: IndexError in
	# _fw_set_module_hook).
	local fw=${TP_FORWARDS:-300} p0 p1 pids
	local port=29550
	for mode in bare debug traced; do
		port=$((port + 1))
		rm -f "$t.$mode.go"*
		local flag=""
		[ $mode = debug ] && flag=--debug-mode
		for r in 0 1; do
			MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE=2 RANK=$r \
				$py tests/workloads/tp_mlp.py --forwards "$fw" $flag \
				--wait-file "$t.$mode.go" --expect "$t.$mode.expect" >"$t.$mode.rank$r.log" 2>&1 &
			eval "p$r=\$!"
		done
		wait_line "$t.$mode.go.pid.0" 120 "[0-9]" && wait_line "$t.$mode.go.pid.1" 120 "[0-9]"
		if [ $mode = traced ]; then
			pids="$(cat "$t.$mode.go.pid.0"),$(cat "$t.$mode.go.pid.1")"
			timeout 240 $ct -p "$pids" --json "$t.json" --table "$t.table" --noise-level 2 \
				2>"$t.err" &
			tr=$!
			wait_line "$t.err" 120 attached:
		fi
		touch "$t.$mode.go"
		wait $p0 $p1
		echo "$mode: ranks done"
		grep -v Warning "$t.$mode.rank0.log" | tail -8
		[ $mode = traced ] && { wait $tr; echo "tracer rc=$?"; cat "$t.err"; }
	done
	$py - "$t" <<'EOF'
import json, sys
t = sys.argv[1]
led = {}
for m in ("bare", "debug", "traced"):
    try:
        led[m] = json.load(open(f"{t}.{m}.expect.0"))
    except OSError as e:
        print(f"{m}: no ledger: {e}")
print("CommDebugMode counts (rank 0):", led.get("debug", {}).get("comm_debug_mode_counts"))
for m in led:
    print(f"loop seconds {m}: {led[m]['loop_seconds']:.3f} ratio {led[m]['loop_seconds'] / led['bare']['loop_seconds']:.3f}")
js = json.load(open(f"{t}.json"))
for p in js["processes"]:
    print("commtrace rank", p["rank"], p["comm_counts"])
    recs = p.get("comm_debug", {}).get("records", [])
    print("  first records:", json.dumps(recs[:2])[:600])
EOF
	head -30 "$t.table"
}

run() {
	local ct=${COMMTRACE_BPF:-$here/.gpu/commtrace-bpf} py=${PYTHON:-python3} t
	local steps=${GPU_STEPS:-nccl devprof tp}
	dest=${1:-${OUT:-/tmp/gpu-check}}
	out=$(mktemp -d /tmp/gpu-check.XXXXXX)
	mkdir -p "$dest"
	exec > >(tee "$dest/gpu-check.log") 2>&1
	trap 'tar czf "$dest/results.tgz" --exclude=megakernel -C "$out" .' EXIT
	echo "== machine"
	uname -r
	nvidia-smi -L
	$py -c 'import sys, torch; print(sys.version.split()[0], sys.executable, torch.__version__, "nccl", torch.cuda.nccl.version())'
	readlink -f "$(command -v $py)"
	ls -l /sys/kernel/btf/vmlinux
	local nccl
	nccl=$($py -c 'import glob, os, nvidia.nccl as n; print(sorted(glob.glob(os.path.join(list(n.__path__)[0], "lib", "libnccl.so*")))[0])' 2>/dev/null)
	echo "libnccl: $nccl"

	echo "== commtrace-bpf --check"
	$ct --check
	echo "rc=$?"
	echo "== dry run on $nccl"
	$ct --dry-run --lib "$nccl" | head -3

	for step in $steps; do
		declare -F "step_$step" >/dev/null || { echo "unknown step '$step'"; continue; }
		"step_$step"
	done
	echo "== torch object layouts (for the c10d catalog)"
	$py scripts/torch-layout.py
	echo "== done"
}

case "${1:-}" in
pack) pack ;;
run)
	shift
	run "$@"
	;;
*)
	echo "usage: $0 pack | run [OUTDIR]" >&2
	exit 2
	;;
esac
