# SPDX-License-Identifier: MIT
"""Running what `make bench` measures (scripts/bench.py, benchjobs.py): the programs and
the tracer, their figures from their output, their CPU time."""
import os
import re
import shutil
import statistics
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# COMMTRACE_BPF=/path/to/binary: the same figures for another build (before/after a change).
TRACER = os.environ.get("COMMTRACE_BPF", str(REPO / "commtrace-bpf"))
PROGS = REPO / "build" / "progs"
WORK = REPO / "tests" / "workloads"
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2"]
REPEAT = int(os.environ.get("BENCH_REPEAT", "3"))
# Rounds of alternated configurations for the CPU-time figures (benchstats.py).
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "10"))
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


def median(f):
    return statistics.median(f() for _ in range(REPEAT))


def cleanup(procs, tmp=None):
    """Kill what is still running of procs (None entries allowed), remove tmp."""
    for p in procs:
        if p and p.poll() is None:
            p.kill()
            p.wait()
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)


def wait_cpu(p):
    """Wait for p: its CPU seconds (user + system, its waited-for children included)."""
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return ru.ru_utime + ru.ru_stime


def task_cpu_ns(pid):
    """The CPU time of every thread of pid so far, in ns (/proc schedstat: exact, where
    getrusage is in ticks)."""
    total = 0
    for t in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((t / "schedstat").read_text().split()[0])
        except (OSError, IndexError, ValueError):
            pass  # a thread gone meanwhile
    return total


def settled_cpu_ns(pid, quiet=0.1, limit=3.0):
    """task_cpu_ns(pid) once it has not moved for `quiet` seconds (the reader caught up),
    or after `limit` seconds."""
    last, end = task_cpu_ns(pid), time.monotonic() + limit
    while time.monotonic() < end:
        time.sleep(quiet)
        now = task_cpu_ns(pid)
        if now == last:
            break
        last = now
    return last


def wait_pidfile(path, proc, what):
    """The pid a --wait-file target wrote to path, once it has."""
    while not (path.exists() and path.read_text().endswith("\n")):
        if proc.poll() is not None:
            raise SystemExit(f"bench: {what} failed to start")
        time.sleep(0.02)
    return path.read_text().strip()
