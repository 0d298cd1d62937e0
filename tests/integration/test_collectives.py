# SPDX-License-Identifier: MIT
"""commtrace-bpf against real targets: Open MPI ranks, PyTorch Gloo ranks, the HCCL
stand-in loaded late with dlopen, NCCL resolution (dry run), and the CLI's failure paths.

Every target keeps its own ledger of what it passed to the library (calls, bytes by the
rules below, datatype), and the tracer's --json must agree number for number.

Bytes rules (buffers passed to the API, element size x count, per call): Allreduce
sent = recv = count; Reduce sent = count, recv = count at the root only; Bcast
sent = recv = count; Allgather sent = sendcount, recv = recvcount x size; Allgatherv
recv = sum(recvcounts); Gather(v) recv at the root only; Scatter(v) sent at the root only;
Alltoall(v) counts x size (sums); Reduce_scatter sent = sum(recvcounts), recv =
recvcounts[rank]; Reduce_scatter_block sent = recvcount x size, recv = recvcount;
Send/Isend sent = count; Recv/Irecv recv = count passed (capacity); Barrier/Wait 0.
HCCL likewise. Gloo: elements x elementSize as Gloo sees them.

The MPI and HCCL ledgers also name the reduce op per function ("sum", or "mixed"), which
the JSON's `op` must match, and list per call the op and the root or peer passed
("args"), which the Chrome trace's slices must carry, call by call.

Gloo's threads, measured with bpftrace 0.17 on Debian's torch 1.13 / libgloo
0.0~git20220518 (2 ranks, 5 iterations of gloo_collectives.py, probes on
gloo::allreduce/broadcast/allgather in /lib/libgloo.so.0 and on
c10d::ProcessGroupGloo::allreduce/broadcast in libtorch_cpu.so):
  - ProcessGroupGloo::* ran on the Python thread (tid == pid): 20 allreduce, 15 broadcast
    per rank, as issued.
  - gloo::* ran on Gloo's 2 worker threads per process (not the caller): e.g. rank 0
    gloo::allreduce 10 + 10, rank 1 12 + 8; broadcast 10 + 5 / 8 + 7. Per process the
    totals were exactly one gloo call per c10d call (20 / 15 / 10): Gloo does not split a
    call over its threads; c10d hands each whole call to one worker.
  - gloo::allgatherv was never called (c10d's allgather uses gloo::allgather).
  - Bytes read from the options (AllreduceOptions elements@80 x elementSize@88,
    BroadcastOptions @32 x @40, AllgatherOptions in/out UnboundBuffer size) summed per
    process to exactly the ledger: allreduce 348040, broadcast 5520, allgather 220 in /
    440 out.
"""
import json
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import (
    MPIRUN, NCCL_LIB, PROGS, PYTHON, REPO, WORKLOADS, alive, assert_matches_ledger,
    free_port, kill_pid, load_ledger, load_trace_json, process_by_pid, ranked, read_pid,
    run_tracer, touch, wait_files, wait_proc,
)

MPI_PROG = PROGS / "mpi_collectives"
GLOO_PROG = WORKLOADS / "gloo_collectives.py"
HCCL_LIB = PROGS / "libhccl.so"
HCCL_DRIVER = PROGS / "hccl_driver"

# Calls mpi_collectives makes outside its ledger window.
MPI_SETUP_ATTACH = {"MPI_Finalize": (0, 1)}  # Init/Comm_rank/Comm_size precede the attach
MPI_SETUP_LAUNCH = {"MPI_Init": (0, 1), "MPI_Comm_rank": (0, 1), "MPI_Comm_size": (0, 1),
                    "MPI_Finalize": (0, 1)}
# The stand-in's non-collective helpers: probing them is optional, counting them is exact.
HCCL_OPTIONAL = ("HcclGetRootInfo", "HcclGetRankSize", "HcclGetRankId")


def start_mpi(reaper, tmp_path, *args):
    log = open(tmp_path / "mpirun.log", "w")
    return reaper.popen(MPIRUN + [MPI_PROG, *args], cwd=tmp_path, stdin=subprocess.DEVNULL,
                        stdout=log, stderr=subprocess.STDOUT)


def mpi_log(tmp_path):
    p = tmp_path / "mpirun.log"
    return p.read_text()[-2000:] if p.exists() else ""


PER_CALL_ARGS = ("op", "root", "peer")


def check_call_args(chrome_path, pid, ledger, optional=()):
    """Every traced call of pid in the Chrome trace, in order, carries the op and the root
    or peer its program passed (the ledger's "args"), and calls without one carry none."""
    with open(chrome_path) as f:
        events = json.load(f)["traceEvents"]
    got = {}
    for e in sorted((e for e in events if e.get("ph") == "X" and e.get("cat") == "comm"
                     and e.get("pid") == pid), key=lambda e: e["ts"]):
        got.setdefault(e["name"], []).append(
            {k: e["args"][k] for k in PER_CALL_ARGS if k in e["args"]})
    problems = []
    for fn, want in ledger["functions"].items():
        if fn not in got and fn in optional:
            continue
        expect = want.get("args", [{}] * want["calls"])
        assert len(expect) == want["calls"], f"{fn}: ledger args {len(expect)} != calls"
        if got.get(fn, []) != expect:
            problems.append(f"{fn}: slices carry {got.get(fn, [])}, the program passed {expect}")
    assert not problems, f"pid {pid} (rank {ledger['rank']}):\n  " + "\n  ".join(problems)
    return got


def attach_stderr_ok(tr):
    lines = [l for l in tr.stderr_lines() if l.startswith("attached:")]
    assert len(lines) == 1, f"expected one 'attached:' line, got {lines}"


def wait_progress(paths, iterations, timeout=60, procs=()):
    """Wait until every progress ledger says `iterations` iterations are done."""
    deadline = time.monotonic() + timeout
    while True:
        done = []
        for p in paths:
            try:
                done.append(load_ledger(p)["iterations"])
            except (OSError, ValueError):
                done.append(None)
        if all(d == iterations for d in done):
            return [load_ledger(p) for p in paths]
        for pr in procs:
            if pr.poll() is not None:
                pytest.fail(f"target exited ({pr.returncode}) at iterations {done}")
        if time.monotonic() > deadline:
            pytest.fail(f"targets at iterations {done}, not {iterations}, after {timeout}s")
        time.sleep(0.05)


# ---------------------------------------------------------------------------------------
# 1, 2: Open MPI


def test_mpi_attach_after_start(bpf, progs, mpi_available, reaper, start_tracer, tmp_path):
    wait, expect, out = tmp_path / "go", tmp_path / "expect", tmp_path / "trace.json"
    chrome = tmp_path / "trace.chrome.json"
    mpi = start_mpi(reaper, tmp_path, "--iters", 2, "--wait-file", wait, "--expect", expect)
    pid_files = [f"{wait}.pid.{r}" for r in (0, 1)]
    wait_files(pid_files, procs=[mpi])
    pids = [read_pid(f) for f in pid_files]

    tr = start_tracer(["-p", f"{pids[0]},{pids[1]}", "--json", out, "--chrome", chrome])
    tr.wait_attached()
    touch(wait)
    assert wait_proc(mpi, 120, "mpirun") == 0, mpi_log(tmp_path)
    # Every traced process is gone: the tracer ends by itself.
    assert tr.wait() == 0, tr.describe()
    attach_stderr_ok(tr)

    js = load_trace_json(out)
    assert sorted(p["pid"] for p in js["processes"]) == sorted(pids)
    for r, pid in enumerate(pids):
        ledger = load_ledger(f"{expect}.{r}")
        assert ledger["pid"] == pid and ledger["iterations"] == 2
        proc = process_by_pid(js, pid)
        assert_matches_ledger(proc, ledger, extras=MPI_SETUP_ATTACH)
        assert proc["rank_source"] == "env:OMPI_COMM_WORLD_RANK"
        # The reduce ops, spelled out (the ledger says the same): SUM and MAX, SUM only.
        got = {c["function"]: c for c in proc["collectives"]}
        assert got["MPI_Allreduce"]["op"] == "mixed"
        for fn in ("MPI_Reduce", "MPI_Reduce_scatter", "MPI_Reduce_scatter_block",
                   "MPI_Iallreduce"):
            assert got[fn]["op"] == "sum", (fn, got[fn])
        assert "op" not in got["MPI_Bcast"] and "op" not in got["MPI_Allgather"]
        # Per call, in the Chrome trace: op, root, peer, exactly as passed.
        calls = check_call_args(chrome, pid, ledger)
        assert calls["MPI_Allreduce"] == [{"op": "sum"}] * 3 + [{"op": "max"}] * 2 + \
            [{"op": "sum"}] * 3 + [{"op": "max"}] * 2
        assert calls["MPI_Reduce"] == [{"op": "sum", "root": 0}, {"op": "sum", "root": 1}] * 2
        assert calls["MPI_Bcast"] == [{"root": 0}, {"root": 1}] * 2
        assert calls["MPI_Send"] == [{"peer": 1 - r}] * 2
        assert calls["MPI_Irecv"] == [{"peer": 1 - r}] * 4


def test_mpi_launch_mode(bpf, progs, mpi_available, start_tracer, tmp_path):
    expect, out = tmp_path / "expect", tmp_path / "trace.json"
    tr = start_tracer(["--json", out, "--", *MPIRUN, MPI_PROG, "--iters", 2,
                       "--expect", expect], cwd=tmp_path)
    assert tr.wait(180) == 0, tr.describe()

    js = load_trace_json(out)
    ranks = ranked(js)  # mpirun itself has no rank
    assert sorted(p["rank"] for p in ranks) == [0, 1], (
        f"ranked processes: {[(p['pid'], p['rank']) for p in ranks]}"
    )
    for r in (0, 1):
        ledger = load_ledger(f"{expect}.{r}")
        assert_matches_ledger(process_by_pid(js, ledger["pid"]), ledger, extras=MPI_SETUP_LAUNCH)


# ---------------------------------------------------------------------------------------
# 3, 4: PyTorch c10d + Gloo


def gloo_env(port, rank):
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2")
    if rank is not None:
        env["RANK"] = str(rank)
    return env


def check_gloo(js, expect, pids=None, launch=False):
    for r in (0, 1):
        ledger = load_ledger(f"{expect}.{r}")
        if pids is not None:
            assert ledger["pid"] == pids[r]
        # c10d bytes come from tensor metadata: checked only where the tracer reports them.
        # Gloo and c10d give no datatype name to compare with (elementSize only).
        # Launched, the tracer also sees init_process_group (ProcessGroupGloo creation,
        # context setup), which the ledger cannot enumerate: there, extra entries are
        # allowed if they move no bytes. Attached after init, nothing extra is allowed.
        assert_matches_ledger(process_by_pid(js, ledger["pid"]), ledger, check_dtype=False,
                              bytes_if_nonzero=("c10d",),
                              strict_libraries=() if launch else None)


def test_gloo_attach_after_start(bpf, progs, torch_available, reaper, start_tracer, tmp_path):
    wait, expect, out = tmp_path / "go", tmp_path / "expect", tmp_path / "trace.json"
    port = free_port()
    ranks = []
    for r in (0, 1):
        log = open(tmp_path / f"rank{r}.log", "w")
        ranks.append(reaper.popen(
            [PYTHON, GLOO_PROG, "--iters", 3, "--wait-file", wait, "--expect", expect],
            cwd=tmp_path, env=gloo_env(port, r), stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT))
    pid_files = [f"{wait}.pid.{r}" for r in (0, 1)]
    wait_files(pid_files, timeout=120, procs=ranks)
    pids = [read_pid(f) for f in pid_files]

    tr = start_tracer(["-p", f"{pids[0]},{pids[1]}", "--json", out])
    tr.wait_attached()
    touch(wait)
    for r, p in enumerate(ranks):
        assert wait_proc(p, 120, f"gloo rank {r}") == 0, (tmp_path / f"rank{r}.log").read_text()
    assert tr.wait() == 0, tr.describe()
    attach_stderr_ok(tr)

    js = load_trace_json(out)
    assert sorted(p["pid"] for p in js["processes"]) == sorted(pids)
    for r, pid in enumerate(pids):
        assert process_by_pid(js, pid)["rank"] == r  # from RANK in its environment
    check_gloo(js, expect, pids)


LAUNCHER = """#!/bin/sh
# Starts both Gloo ranks the way a site launcher would, and waits for them.
export MASTER_ADDR=127.0.0.1 MASTER_PORT="$1" WORLD_SIZE=2
RANK=0 {python} {prog} --iters 3 --expect "$2" & p0=$!
RANK=1 {python} {prog} --iters 3 --expect "$2" & p1=$!
wait $p0; r0=$?
wait $p1; r1=$?
exit $((r0 | r1))
"""


def test_gloo_launch_mode(bpf, progs, torch_available, start_tracer, tmp_path):
    expect, out = tmp_path / "expect", tmp_path / "trace.json"
    script = tmp_path / "launch.sh"
    script.write_text(LAUNCHER.format(python=PYTHON, prog=GLOO_PROG))
    script.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    tr = start_tracer(["--json", out, "--", script, free_port(), expect], cwd=tmp_path,
                      env=env)
    assert tr.wait(240) == 0, tr.describe()

    js = load_trace_json(out)
    ranks = ranked(js)  # the shell has no RANK; the two Python ranks do
    assert sorted(p["rank"] for p in ranks) == [0, 1], (
        f"ranked processes: {[(p['pid'], p['rank']) for p in ranks]}"
    )
    check_gloo(js, expect, launch=True)


# ---------------------------------------------------------------------------------------
# 5: a library loaded with dlopen after the tracer started (HCCL stand-in)

# The driver sleeps this long between dlopen and its first call: the test is about the
# tracer noticing a library that appears late, not about winning that race.
SETTLE_MS = 1000


def check_hccl(js, expect, pid=None, rank_source="env:RANK", chrome=None):
    ledger = load_ledger(f"{expect}.1")
    if pid is not None:
        assert ledger["pid"] == pid
    assert ledger["functions"]["HcclAllGather"]["bytes_received"] == 3 * 256 * 4 * 2
    proc = process_by_pid(js, ledger["pid"])
    assert_matches_ledger(proc, ledger, optional=HCCL_OPTIONAL)
    assert proc["rank_source"] == rank_source
    # RANK without WORLD_SIZE: no world size; from the communicator: its size
    assert proc["world_size"] == (4 if rank_source == "communicator" else None)
    # Spot checks of the decoders, spelled out (the ledger says the same).
    got = {c["function"]: c for c in proc["collectives"]}
    assert got["HcclAllReduce"]["dtype"] == "mixed"
    assert got["HcclReduceScatter"]["dtype"] == "HCCL_DATA_TYPE_FP32"
    assert got["HcclAllGather"]["dtype"] == "HCCL_DATA_TYPE_FP16"
    assert got["HcclBroadcast"]["dtype"] == "HCCL_DATA_TYPE_INT64"
    assert got["HcclAlltoAllV"]["bytes_sent"] == 3 * (1 + 2 + 3 + 4) * 8
    assert got["HcclAlltoAllV"]["bytes_received"] == 3 * 4 * 3 * 8
    assert got["HcclReduce"]["bytes_received"] == 3 * 50 * 4  # root in one call of two
    assert all(c["library"] == "hccl" for c in proc["collectives"])
    assert got["HcclAllReduce"]["op"] == "mixed"  # sum, max, sum
    assert got["HcclReduce"]["op"] == "mixed"  # sum, min
    assert got["HcclReduceScatter"]["op"] == "sum"
    assert "op" not in got["HcclBroadcast"] and "op" not in got["HcclAllGather"]
    if chrome is not None:
        calls = check_call_args(chrome, ledger["pid"], ledger, optional=HCCL_OPTIONAL)
        assert calls["HcclAllReduce"] == [{"op": "sum"}, {"op": "max"}, {"op": "sum"}] * 3
        assert calls["HcclReduce"] == [{"op": "sum", "root": 1}, {"op": "min", "root": 2}] * 3
        assert calls["HcclBroadcast"] == [{"root": 0}] * 3
        assert calls["HcclSend"] == [{"peer": 2}] * 3
        assert calls["HcclRecv"] == [{"peer": 0}] * 3
        assert calls["HcclBarrier"] == [{}] * 3


def test_hccl_dlopen_launch_mode(bpf, progs, start_tracer, tmp_path):
    expect, out = tmp_path / "expect", tmp_path / "trace.json"
    chrome = tmp_path / "trace.chrome.json"
    env = dict(os.environ, RANK="1")
    tr = start_tracer(["--json", out, "--chrome", chrome, "--", HCCL_DRIVER, HCCL_LIB,
                       "--rank", 1, "--nranks", 4, "--iters", 3, "--settle-ms", SETTLE_MS,
                       "--expect", expect], cwd=tmp_path, env=env)
    assert tr.wait(120) == 0, tr.describe()
    js = load_trace_json(out)
    check_hccl(js, expect, chrome=chrome)


RANK_VARS = ("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK",
             "PMI_SIZE", "PMIX_RANK", "PMIX_SIZE", "SLURM_PROCID", "SLURM_NTASKS",
             "SLURM_NPROCS", "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE")


def test_hccl_rank_from_communicator(bpf, progs, start_tracer, tmp_path):
    """No rank in the environment: the rank (1) and size (4) of the largest communicator."""
    expect, out = tmp_path / "expect", tmp_path / "trace.json"
    env = {k: v for k, v in os.environ.items() if k not in RANK_VARS}
    tr = start_tracer(["--json", out, "--", HCCL_DRIVER, HCCL_LIB, "--rank", 1, "--nranks", 4,
                       "--iters", 3, "--settle-ms", SETTLE_MS, "--expect", expect],
                      cwd=tmp_path, env=env)
    assert tr.wait(120) == 0, tr.describe()
    js = load_trace_json(out)
    [proc] = js["processes"]
    assert (proc["rank"], proc["world_size"], proc["rank_source"]) == (1, 4, "communicator")
    check_hccl(js, expect, rank_source="communicator")


def test_hccl_dlopen_attach_wait_libs(bpf, progs, reaper, start_tracer, tmp_path):
    """Attach to a process that has no collective library mapped yet (--wait-libs)."""
    wait, expect, out = tmp_path / "go", tmp_path / "expect", tmp_path / "trace.json"
    drv = reaper.popen([HCCL_DRIVER, HCCL_LIB, "--rank", 1, "--nranks", 4, "--iters", 3,
                        "--settle-ms", SETTLE_MS, "--wait-file", wait, "--expect", expect],
                       cwd=tmp_path, env=dict(os.environ, RANK="1"), stdin=subprocess.DEVNULL)
    wait_files([f"{wait}.pid"], procs=[drv])
    pid = read_pid(f"{wait}.pid")
    with open(f"/proc/{pid}/maps") as f:
        assert "libhccl" not in f.read(), "the driver must not map HCCL before the wait"

    # -vv: every call on stderr, with its op and root or peer where it takes one.
    tr = start_tracer(["-p", pid, "--wait-libs", "--json", out, "-vv"])
    tr.wait_attached()
    touch(wait)
    assert wait_proc(drv, 60, "hccl_driver") == 0
    assert tr.wait() == 0, tr.describe()
    js = load_trace_json(out)
    assert [p["pid"] for p in js["processes"]] == [pid]
    check_hccl(js, expect, pid)
    calls = {}
    for line in tr.stderr_lines():
        m = re.match(rf"^call pid={pid} tid=\d+ (\w+) .* rank=(\d+)(.*) depth=", line)
        if m:
            calls.setdefault(m.group(1), []).append(m.group(3).strip())
    assert calls["HcclReduce"] == ["op=sum root=1", "op=min root=2"] * 3, calls
    assert calls["HcclAllReduce"] == ["op=sum", "op=max", "op=sum"] * 3, calls
    assert calls["HcclSend"] == ["peer=2"] * 3 and calls["HcclRecv"] == ["peer=0"] * 3, calls
    assert calls["HcclAllGather"] == [""] * 3, calls


# ---------------------------------------------------------------------------------------
# 6, 7: a target dies mid-trace; Ctrl-C


PAUSE_AT = 3


def start_paused_mpi(reaper, start_tracer, tmp_path, iters, tracer_env=None):
    """Two ranks traced from their first call, both stopped (no MPI call) after PAUSE_AT
    iterations. Returns (mpirun, tracer, pids, progress ledgers at the pause)."""
    wait, progress, out = tmp_path / "go", tmp_path / "progress", tmp_path / "trace.json"
    mpi = start_mpi(reaper, tmp_path, "--iters", iters, "--wait-file", wait, "--progress",
                    progress, "--pause-after", PAUSE_AT, "--pause-file", tmp_path / "resume",
                    "--expect", tmp_path / "expect")
    pid_files = [f"{wait}.pid.{r}" for r in (0, 1)]
    wait_files(pid_files, procs=[mpi])
    pids = [read_pid(f) for f in pid_files]
    for p in pids:
        reaper.add_pid(p)
    tr = start_tracer(["-p", f"{pids[0]},{pids[1]}", "--json", out], env=tracer_env)
    tr.wait_attached()
    touch(wait)
    ledgers = wait_progress([f"{progress}.{r}" for r in (0, 1)], PAUSE_AT, procs=[mpi])
    return mpi, tr, pids, ledgers


def test_target_killed_mid_trace(bpf, progs, mpi_available, reaper, start_tracer, tmp_path):
    mpi, tr, pids, ledgers = start_paused_mpi(reaper, start_tracer, tmp_path, iters=1000)
    kill_pid(pids[1], signal.SIGKILL)
    deadline = time.monotonic() + 10
    while alive(pids[1]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pids[1])
    # mpirun notices the dead rank and takes the job down; the tracer outlives rank 1
    # and ends by itself once rank 0 is gone too.
    assert wait_proc(mpi, 60, "mpirun") != 0
    assert tr.wait() == 0, tr.describe()

    js = load_trace_json(tr.args[tr.args.index("--json") + 1])
    assert sorted(p["pid"] for p in js["processes"]) == sorted(pids)
    for r, pid in enumerate(pids):
        proc = process_by_pid(js, pid)
        assert sum(c["calls"] for c in proc["collectives"]) > 0
        # Both ranks were stopped at the same quiet point: the counts are exact.
        assert_matches_ledger(proc, ledgers[r], extras={})


def test_sigint_writes_json(bpf, progs, mpi_available, reaper, start_tracer, tmp_path):
    iters = PAUSE_AT + 2
    mpi, tr, pids, ledgers = start_paused_mpi(reaper, start_tracer, tmp_path, iters=iters)
    tr.signal(signal.SIGINT)
    assert tr.wait() == 0, tr.describe()
    js = load_trace_json(tr.args[tr.args.index("--json") + 1])
    for r, pid in enumerate(pids):
        proc = process_by_pid(js, pid)
        assert proc["comm_counts"]["MPI_Allreduce"] == 5 * PAUSE_AT
        assert_matches_ledger(proc, ledgers[r], extras={})
    # Detaching left the job as it was: it resumes and finishes normally.
    touch(tmp_path / "resume")
    assert wait_proc(mpi, 60, "mpirun") == 0, mpi_log(tmp_path)
    for r in (0, 1):
        assert load_ledger(tmp_path / f"expect.{r}")["iterations"] == iters


# ---------------------------------------------------------------------------------------
# 8: bad inputs fail with a precise message and their documented exit code (user/cli.h,
# README "Exit status"): 2 bad usage, 4 no such process, 5 no known library.

EXIT_USAGE, EXIT_NOPROC, EXIT_NOLIB = 2, 4, 5


def check_failure(args, code, *needles):
    r = run_tracer(args, timeout=30)
    assert r.returncode == code, (
        f"{args}: exit code {r.returncode}, expected {code}; stderr: {r.stderr!r}")
    for n in needles:
        assert re.search(n, r.stderr), f"{args}: stderr lacks /{n}/: {r.stderr!r}"
    assert not any(l.startswith("attached:") for l in r.stderr.splitlines())
    # Nothing was attached: the error alone, no summary, no diagnosis.
    assert not re.search(r"^commtrace: (final|diagnosis)", r.stderr, re.M), r.stderr
    return r


def test_bad_pid_missing(tracer_path):
    pid = 999999
    while os.path.exists(f"/proc/{pid}"):
        pid += 1
    r = check_failure(["-p", pid], EXIT_NOPROC, str(pid))
    assert r.stderr.strip() == f"commtrace-bpf: no such process: {pid}", r.stderr


def test_bad_pid_no_library(bpf, tracer_path, reaper, tmp_path):
    p = reaper.popen(["sleep", "60"])
    wait_files([f"/proc/{p.pid}/maps"])
    time.sleep(0.2)  # past exec: the maps are sleep's own
    out = tmp_path / "trace.json"
    r = check_failure(["-p", p.pid, "--json", out], EXIT_NOLIB, str(p.pid), "libmpi",
                      "libnccl")
    # One line: the error, naming the libraries looked for and --wait-libs.
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "--wait-libs" in lines[0], r.stderr
    assert not out.exists(), "a run that attached nothing wrote a report"


def test_bad_pid_not_a_number(tracer_path):
    check_failure(["-p", "abc"], EXIT_USAGE, "abc")
    check_failure(["-p", "12x"], EXIT_USAGE, "12x")


def test_bad_option(tracer_path):
    check_failure(["--bogus"], EXIT_USAGE, "--bogus")


def test_bad_duration(tracer_path):
    check_failure(["-d", "-1", "--", "/bin/true"], EXIT_USAGE, "-1", r"-d|duration")


# ---------------------------------------------------------------------------------------
# 9: NCCL resolution, dry run

# Every function of the NCCL catalog (user/catalog/nccl.c): the installed libnccl.so.2
# (2.2x) has all 18, each probed exactly once, at its pncclX alias's address.
NCCL_FUNCTIONS = ("ncclAllReduce", "ncclBroadcast", "ncclReduce", "ncclAllGather",
                  "ncclReduceScatter", "ncclAlltoAll", "ncclGather", "ncclScatter", "ncclSend",
                  "ncclRecv", "ncclGroupStart", "ncclGroupEnd", "ncclCommInitRank",
                  "ncclCommInitRankConfig", "ncclCommInitAll", "ncclCommSplit",
                  "ncclCommDestroy", "ncclCommAbort")
PROBE_RE = re.compile(r"^probe lib=(\S+) function=(\S+) symbol=(\S+) addr=0x([0-9a-fA-F]+) "
                      r"offset=0x([0-9a-fA-F]+) aliases=(\d+) at=(?:entry|inside) file=(.+)$")


def elf_truth(path):
    """{symbol: value} of defined FUNC symbols in .dynsym, and the PT_LOAD segments."""
    syms = {}
    r = subprocess.run(["readelf", "-W", "--dyn-syms", path], capture_output=True, text=True,
                       check=True)
    for line in r.stdout.splitlines():
        f = line.split()
        if len(f) >= 8 and f[3] == "FUNC" and f[6] != "UND":
            syms[f[7].split("@")[0]] = int(f[1], 16)
    loads = []
    r = subprocess.run(["readelf", "-W", "-l", path], capture_output=True, text=True, check=True)
    for line in r.stdout.splitlines():
        f = line.split()
        if f and f[0] == "LOAD":
            loads.append((int(f[1], 16), int(f[2], 16), int(f[4], 16)))  # off, vaddr, filesz
    return syms, loads


def check_nccl_dry_run(stdout_lines):
    syms, loads = elf_truth(NCCL_LIB)
    probes = [PROBE_RE.match(l) for l in stdout_lines if l.startswith("probe ")]
    assert probes and all(probes), f"malformed probe lines: {stdout_lines[:20]}"
    where = [(os.path.realpath(m.group(7)), int(m.group(5), 16)) for m in probes]
    assert len(where) == len(set(where)), "an address is probed twice (aliases not merged)"
    by_fn = {}
    for m in probes:
        by_fn.setdefault(m.group(2), []).append(m)
    assert sorted(by_fn) == sorted(NCCL_FUNCTIONS), (
        f"probed {sorted(by_fn)}, expected the {len(NCCL_FUNCTIONS)} of the catalog")
    assert len(probes) == len(NCCL_FUNCTIONS) == 18
    for fn in NCCL_FUNCTIONS:
        ms = by_fn.get(fn, [])
        assert len(ms) == 1, f"{fn}: {len(ms)} probe lines, expected exactly 1"
        lib, _, sym, addr, off, aliases, file = ms[0].groups()
        addr, off = int(addr, 16), int(off, 16)
        assert "nccl" in lib
        assert sym in (fn, "p" + fn), f"{fn}: symbol {sym}"
        assert addr == syms[fn] == syms["p" + fn], f"{fn}: addr {addr:#x}, ELF {syms[fn]:#x}"
        seg = [(o, v) for o, v, sz in loads if v <= addr < v + sz]
        assert seg and off == addr - seg[0][1] + seg[0][0], f"{fn}: offset {off:#x}"
        assert int(aliases) >= 1, f"{fn}: the p{fn} alias is not reported"
        assert os.path.realpath(file) == os.path.realpath(NCCL_LIB), file


@pytest.fixture
def nccl_available():
    if not os.path.exists(NCCL_LIB):
        pytest.skip(f"SKIPPED LOUDLY: {NCCL_LIB} (NCCL) is not installed: nothing to resolve")


def test_nccl_dry_run_pid(tracer_path, progs, reaper, nccl_available):
    hold = reaper.popen([PROGS / "nccl_hold"], stdout=subprocess.PIPE, text=True)
    assert hold.stdout.readline().strip() == "ready"
    r = run_tracer(["--dry-run", "-p", hold.pid], timeout=120)
    assert r.returncode == 0, r.stderr
    check_nccl_dry_run(r.stdout.splitlines())
    assert hold.poll() is None, "the dry run disturbed the target"


def test_nccl_dry_run_lib(tracer_path, nccl_available):
    r = run_tracer(["--lib", NCCL_LIB, "--dry-run"], timeout=120)
    assert r.returncode == 0, r.stderr
    check_nccl_dry_run(r.stdout.splitlines())


# ---------------------------------------------------------------------------------------
# 10: --help


def test_help(tracer_path):
    r = run_tracer(["--help"])
    assert r.returncode == 0, r.stderr
    lines = r.stdout.rstrip().splitlines()
    for opt in ("-p", "-d", "--json", "--dry-run", "--check", "--lib", "-v"):
        assert re.search(rf"(^|[\s,\[|]){re.escape(opt)}\b", r.stdout), f"--help lacks {opt}"
    idx = [i for i, l in enumerate(lines) if l.strip() == "Examples:"]
    assert idx, f"--help has no 'Examples:' line: {r.stdout[-500:]!r}"
    examples = [l for l in lines[idx[-1] + 1:] if l.strip()]
    assert len([l for l in examples if "commtrace-bpf" in l]) >= 2, examples
    assert any(re.search(r"commtrace-bpf .*-p ", l) for l in examples), examples
    assert any(" -- " in l for l in examples), "no launch-mode example"
    # The exit codes, as README "Exit status" and user/cli.h define them.
    status = " ".join(r.stdout.split("Exit status:", 1)[1].split("Examples:", 1)[0].split())
    for code, what in ((0, "done"), (1, "failed"), (2, "bad usage"), (3, "BPF unavailable"),
                       (4, "no such process"), (5, "no known library")):
        assert f"{code} {what}" in status, f"--help exit status lacks '{code} {what}': {status}"
