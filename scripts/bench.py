# SPDX-License-Identifier: MIT
"""`make bench`: what tracing costs, measured side by side in one run, printed as ratios.

1. MPI_Allreduce microbenchmark, 2 ranks, 8 B and 1 MiB: untraced, commtrace (launch
   mode), commtrace --no-stacks, and bpftrace with the same entry+return probes (the
   raw tracing floor). Per-call added cost = traced - untraced.
2. Python stack capture: MPI_Barrier from a Python call chain of depth 0 and 40 (about 10
   and 50 frames), CPython 3.11: untraced, traced without stacks, traced with stacks.
3. A real training job: 2-rank DDP on Gloo, ns per step, untraced and traced.

Run as root. Each configuration runs REPEAT times and the median is kept; the machine is
noisy, so ratios of medians are what to read, not single numbers.
"""
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TRACER = str(REPO / "commtrace-bpf")
PROGS = REPO / "build" / "progs"
WORK = REPO / "tests" / "workloads"
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2"]
REPEAT = int(os.environ.get("BENCH_REPEAT", "3"))
LIBMPI = "/usr/lib/x86_64-linux-gnu/libmpi.so.40"


def number(out, key):
    m = re.search(rf"^{key} ([0-9.]+)$", out, re.M)
    if not m:
        raise SystemExit(f"bench: no '{key}' in output:\n{out}")
    return float(m.group(1))


def run(cmd, key, env=None, timeout=600):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if r.returncode != 0:
        raise SystemExit(f"bench: {' '.join(map(str, cmd))} failed ({r.returncode}):\n"
                         f"{r.stdout}\n{r.stderr}")
    return number(r.stdout, key)


def traced(cmd):
    return [TRACER, "-q", *cmd]


def with_bpftrace(program, cmd, key, env=None):
    bt = subprocess.Popen(["bpftrace", "-e", program], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    # bpftrace prints "Attaching N probes..." once attached; give it time to be done.
    deadline = time.time() + 60
    line = ""
    while time.time() < deadline and "Attaching" not in line:
        line = bt.stdout.readline()
        if not line and bt.poll() is not None:
            raise SystemExit("bench: bpftrace failed to start")
    time.sleep(1.0)
    try:
        return run(cmd, key, env=env)
    finally:
        bt.send_signal(signal.SIGINT)
        try:
            bt.wait(30)
        except subprocess.TimeoutExpired:
            bt.kill()


def median(f):
    return statistics.median(f() for _ in range(REPEAT))


def table(title, rows, base_key="untraced"):
    base = dict(rows)[base_key]
    print(f"\n{title}")
    print(f"  {'configuration':<34} {'value':>14} {'ratio':>8} {'added':>12}")
    for name, v in rows:
        print(f"  {name:<34} {v:>14.1f} {v / base:>8.3f} {v - base:>+12.1f}")


def bench_mpi():
    probe = (f"uprobe:{LIBMPI}:MPI_Allreduce {{ @s[tid] = nsecs; }} "
             f"uretprobe:{LIBMPI}:MPI_Allreduce /@s[tid]/ "
             f"{{ @lat = hist(nsecs - @s[tid]); delete(@s[tid]); }}")
    for size, calls in ((8, 200000), (1 << 20, 4000)):
        cmd = MPIRUN + [str(PROGS / "mpi_bench"), str(calls), str(size)]
        rows = [
            ("untraced", median(lambda: run(cmd, "ns_per_call"))),
            ("commtrace", median(lambda: run(traced(cmd), "ns_per_call"))),
            ("commtrace --no-stacks",
             median(lambda: run(traced(["--no-stacks", *cmd]), "ns_per_call"))),
        ]
        if shutil.which("bpftrace"):
            rows.append(("bpftrace (same probes)",
                         median(lambda: with_bpftrace(probe, cmd, "ns_per_call"))))
        table(f"MPI_Allreduce {size} B, 2 ranks: ns per call", rows)


def bench_pystack():
    py = "/usr/bin/python3.11"
    for depth in (0, 40):
        cmd = [py, str(WORK / "pystack_mpi.py"), "--time", "--calls", "20000", "--depth",
               str(depth)]
        rows = [
            ("untraced", median(lambda: run(cmd, "ns_per_call"))),
            ("traced, no stacks",
             median(lambda: run(traced(["--no-stacks", "--", *cmd]), "ns_per_call"))),
            ("traced, Python stacks", median(lambda: run(traced(["--", *cmd]), "ns_per_call"))),
        ]
        table(f"MPI_Barrier from Python 3.11 at recursion depth {depth}: ns per call", rows)
        nostack, stack = rows[1][1], rows[2][1]
        print(f"  stack capture alone: {stack - nostack:+.1f} ns per call "
              f"(the bare probe pair: {nostack - rows[0][1]:+.1f} ns)")


def bench_training():
    port = 29700
    def job(prefix):
        nonlocal port
        port += 1
        script = (f"export MASTER_ADDR=127.0.0.1 MASTER_PORT={port} WORLD_SIZE=2; "
                  f"RANK=1 /usr/bin/python3 {WORK / 'train_ddp.py'} --steps 60 --step-sleep 0 & "
                  f"RANK=0 /usr/bin/python3 {WORK / 'train_ddp.py'} --steps 60 --step-sleep 0 "
                  f"--time; wait")
        return run(prefix + ["sh", "-c", script], "ns_per_step")
    rows = [
        ("untraced", median(lambda: job([]))),
        ("commtrace (stacks)", median(lambda: job([TRACER, "-q", "--"]))),
        ("commtrace --no-stacks", median(lambda: job([TRACER, "-q", "--no-stacks", "--"]))),
    ]
    table("DDP training, 2 Gloo ranks (PyTorch 1.13, CPU): ns per step", rows)


def main():
    if os.geteuid() != 0:
        sys.exit("bench: needs root (BPF)")
    print(f"commtrace bench: {os.uname().nodelen if hasattr(os.uname(), 'nodelen') else ''}"
          f"{os.cpu_count()} CPUs, kernel {os.uname().release}, median of {REPEAT} runs")
    which = sys.argv[1:] or ["mpi", "pystack", "training"]
    if "mpi" in which:
        bench_mpi()
    if "pystack" in which:
        bench_pystack()
    if "training" in which:
        bench_training()


if __name__ == "__main__":
    main()
