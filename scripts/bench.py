# SPDX-License-Identifier: MIT
"""`make bench`: what tracing costs, measured side by side in one run, printed as ratios.

1. MPI_Allreduce microbenchmark, 2 ranks, 8 B and 1 MiB: untraced, commtrace (launch
   mode), commtrace --no-stacks, commtrace with one perf-event link per probe instead of
   uprobe_multi links, and bpftrace with the same entry+return probes (the raw tracing
   floor). Per-call added cost = traced - untraced.
2. Python stack capture, by CPU time (scripts/benchstats.py): MPI_Barrier from a Python
   call chain of depth 0, 40 (6 and 46 frames recursing, 57 for 40 distinct functions) and
   490 (recursing from the top at each call, or calling from the deepest frame), CPython
   3.11 and 3.13, the tracer attached by pid: untraced, without stacks, with stacks, alternated over
   BENCH_ROUNDS rounds; the target's CPU ns per call with 95 % intervals, the tracer's CPU,
   and the BPF programs' own ns per run (bpf_stats). node: one process calling the HCCL
   stand-in flat out while 1, 4 or 8 processes of the same library are traced.
3. Training jobs, 2 Gloo ranks, configurations alternated over BENCH_ROUNDS rounds, the
   tracer attached by pid with --cost while the ranks wait: 2-rank DDP (training), seed
   000's MLP with --ops (ops), against torch's profiler; PyTorch 2.6's test Transformer
   with tensor parallelism in the Debian 13 root, against its own CommDebugMode (torch2).
   Rank 0's wall and CPU time per step with 95 % intervals, and next to the measured CPU
   ratios the accounted ones (each probe hit at its price + BPF time, as the kernel counts
   them), whose intervals are narrow.
4. events: the event path. A synthetic target (tests/progs/event_rate.c, the HCCL
   stand-in) issues calls at swept rates and flat out; received/dropped/generated, the
   highest rate with zero drops, and that calls made = counted + dropped_calls exactly.
   pyevents: the same with Python stacks: pystack_mpi.py flat out from one thread at
   depths 0, 10 and 50, and from 2 and 4 threads; calls/s, dropped, frames unresolved.
5. memory: the tracer's VmRSS/VmHWM over 20 million records (BENCH_RSS_CALLS calls),
   and over a run with Python stacks (BENCH_RSS_PY_CALLS).
6. offline: `replay` of a --record file through the event path and each exporter
   (records/s), without and with Python stacks (the seed-000 tree rebuilt), and
   device-buffer decoding (`devprof decode`, MB/s).
7. devprof: the device-profile recorder compiled for the host (tests/progs/devprof_cost.c):
   ns per record with sampling off and on, against the same loop without the recorder.
   The CUDA kernel's own on/off cost needs a GPU: `megakernel --cost`, scripts/gpu-check.sh.

8. detach: attaching to and detaching from a running 2-rank DDP job, with uprobe_multi
   links and with one perf-event link per probe: seconds each way.
9. traps: what one uprobe hit costs by the instruction it sits on (tests/progs/trap_sites.c,
   under bpftrace): an entry probe on a push, as commtrace's probes mostly sit, its return
   probe, and an entry probe on a 5-byte nop, which Linux 6.18+ reaches without a trap.
   reads: what a BPF program's reads of the target's memory cost by count, size, pages and
   regions, warm and cold (tests/progs/read_cost.c), the price list of the stack walk.

`scripts/bench.py [traps|reads|mpi|pystack|training|ops|torch2|events|pyevents|node|memory|offline|
devprof|detach|fleet]...`: only those. `BENCH_BUILDS=A:B scripts/bench.py builds` (named
only): two builds of the tracer, old and new, on the stack shapes, in pairs of runs; the
BPF programs' ns per run, B less A, with 95 % intervals.

Run as root. Where a figure has no interval, each configuration runs REPEAT times and the
median is kept; the machine is noisy, so read those as ratios of medians, not single
numbers.
"""
import contextlib
import json
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

import benchstats as bs
from benchjobs import bench_ops, bench_torch2, bench_training
from benchproc import (LIBMPI, MPIRUN, PROGS, REPEAT, REPO, ROUNDS, TRACER, WORK, cleanup,
                       median, number, run, settled_cpu_ns, task_cpu_ns, traced, wait_cpu,
                       wait_pidfile)

@contextlib.contextmanager
def bpftrace_attached(program):
    """bpftrace running program, its probes attached, for the time of the with block."""
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
        yield
    finally:
        bt.send_signal(signal.SIGINT)
        try:
            bt.wait(30)
        except subprocess.TimeoutExpired:
            bt.kill()


def with_bpftrace(program, cmd, key, env=None):
    with bpftrace_attached(program):
        return run(cmd, key, env=env)


def bench_traps():
    """What one uprobe hit costs by the instruction under it (tests/progs/trap_sites.c):
    an entry probe on a push (a breakpoint trap: where the libraries' code puts commtrace's
    probes), its return probe, and an entry probe on a 5-byte nop (Linux 6.18+ turns it
    into a call to its uprobe trampoline, no trap). Empty bpftrace programs; each round
    times every site once, and a price is a site's ns per call less the unprobed site's."""
    if not shutil.which("bpftrace"):
        print("\nTrap prices: SKIPPED, no bpftrace (scripts/install-deps.sh installs it)")
        return
    prog = PROGS / "trap_sites"
    probe = " ".join(f"{kind}:{prog}:site_{site} {{}}" for kind, site in (
        ("uprobe", "push"), ("uprobe", "pair"), ("uretprobe", "pair"), ("uprobe", "nop5")))
    rounds = 3 * ROUNDS
    with bpftrace_attached(probe):
        out = subprocess.run([str(prog), "20000", str(rounds)], capture_output=True,
                             text=True, check=True, timeout=600).stdout
    rows = [dict(zip(w[2::2], map(float, w[3::2])))
            for w in (line.split() for line in out.splitlines()) if w and w[0] == "round"]
    if len(rows) != rounds:
        raise SystemExit(f"bench: trap_sites printed {len(rows)} rounds of {rounds}:\n{out}")
    price = {k: [r[k] - r["bare"] for r in rows] for k in ("push", "pair", "nop5")}
    print(f"\nTrap prices: ns per hit, mean [95 % CI] over {rounds} rounds of 20 000 calls "
          f"a site")
    print(f"  entry probe on a push (trapped, as commtrace's): "
          f"{bs.fmt(bs.bootstrap(bs.mean, price['push']), digits=0)}")
    print(f"  its return probe:                                "
          f"{bs.fmt(bs.bootstrap(bs.diff_of_means, price['pair'], price['push']), digits=0)}")
    print(f"  entry probe on a 5-byte nop (no trap on 6.18+):  "
          f"{bs.fmt(bs.bootstrap(bs.mean, price['nop5']), digits=0)}")
    print(f"  push / nop5: "
          f"{bs.fmt(bs.bootstrap(bs.ratio_of_means, price['push'], price['nop5']), digits=2)}")


def bench_reads():
    """What a BPF program's reads of the target's memory cost (tests/progs/read_cost.c): an
    entry probe making 0 to 8 reads of 8 B or 2 KiB, on one line, on other pages, in another
    region (the stack besides a mapping), warm and with 16 MiB touched between calls (cold).
    The program's ns a run by bpf_stats; each configuration less the one without reads of
    the same round, paired: mean [95 % CI] and median over the rounds."""
    rounds = 3 * ROUNDS
    out = subprocess.run([str(PROGS / "read_cost"), "20000", str(rounds)], capture_output=True,
                         text=True, timeout=1800)
    if out.returncode:
        raise SystemExit(f"bench: read_cost failed: {out.stderr.strip()}")
    runs = {}
    for w in (line.split() for line in out.stdout.splitlines()):
        if len(w) == 4 and w[0] == "round":
            runs.setdefault(w[2], []).append(float(w[3]))
    if any(len(v) != rounds for v in runs.values()) or "none" not in runs:
        raise SystemExit(f"bench: read_cost printed incomplete rounds:\n{out.stdout}")
    print(f"\nReads of the target's memory from a uprobe's BPF program: ns a run over "
          f"{rounds} rounds (20 000 calls a run, 5 000 cold), less the same round's program "
          f"without reads: mean [95 % CI]; median")
    for name, ns in runs.items():
        base = runs["cold-none" if name.startswith("cold-") else "none"]
        if name in ("none", "cold-none"):
            print(f"  {name:<24} {statistics.median(ns):7.0f} ns a run (median)")
            continue
        d = [a - b for a, b in zip(ns, base)]
        print(f"  {name:<24} {bs.fmt(bs.bootstrap(bs.mean, d), digits=0):>22}; "
              f"{statistics.median(d):.0f}")


def bench_mpi():
    """MPI_Allreduce on 2 ranks, ns per call as the program times it, every configuration
    alternated over the rounds: the mean [95 % CI] and what tracing adds to it."""
    probe = (f"uprobe:{LIBMPI}:MPI_Allreduce {{ @s[tid] = nsecs; }} "
             f"uretprobe:{LIBMPI}:MPI_Allreduce /@s[tid]/ "
             f"{{ @lat = hist(nsecs - @s[tid]); delete(@s[tid]); }}")
    multi0 = dict(os.environ, COMMTRACE_UPROBE_MULTI="0")
    js = Path(tempfile.mkdtemp(prefix="ct-bench-")) / "cost.json"

    def costed(args, calls, env=None):
        """ns per call as the program times it, and what --cost accounts per call and rank
        (the 100 warm-up calls and MPI's set-up included)."""
        ns = run(traced(["--cost", "--json", str(js), *args]), "ns_per_call", env=env)
        return ns, json.loads(js.read_text())["cost"]["targets_added_ns"] / (2 * calls)

    for size, calls in ((8, 200000), (1 << 20, 4000)):
        cmd = MPIRUN + [str(PROGS / "mpi_bench"), str(calls), str(size)]
        configs = {
            "untraced": lambda: (run(cmd, "ns_per_call"), None),
            "commtrace": lambda: costed(cmd, calls),
            "commtrace --no-stacks": lambda: costed(["--no-stacks", *cmd], calls),
            "commtrace, perf-event links": lambda: costed(cmd, calls, env=multi0),
        }
        if shutil.which("bpftrace"):
            configs["bpftrace (same probes)"] = lambda: (
                with_bpftrace(probe, cmd, "ns_per_call"), None)
        res = bs.alternate(list(configs), ROUNDS, lambda k: configs[k]())
        print(f"\nMPI_Allreduce {size} B, 2 ranks: ns per call (timed in the program), "
              f"{ROUNDS} rounds alternated [95% CI]; accounted: what --cost counts per call "
              f"and rank (each probe hit at its price + BPF time)")
        base = [r[0] for r in res["untraced"]]
        for k in configs:
            ns = [r[0] for r in res[k]]
            line = f"  {k:<30} {bs.fmt(bs.bootstrap(bs.mean, ns), digits=0):>28}"
            if k != "untraced":
                added = bs.bootstrap(bs.diff_of_means, ns, base)
                ratio = bs.bootstrap(bs.ratio_of_means, ns, base)
                line += f"   added {bs.fmt(added, ' ns', 0)}, {bs.fmt(ratio, 'x', 3)}"
            if res[k][0][1] is not None:
                acc = bs.bootstrap(bs.mean, [r[1] for r in res[k]])
                line += f"; accounted {bs.fmt(acc, ' ns', 0)}"
            print(line)
    shutil.rmtree(js.parent, ignore_errors=True)


def bpf_prog_stats():
    """{program name: (runs, ns)} of commtrace's entry and return programs (bpf_stats)."""
    out = subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True)
    progs = json.loads(out.stdout or "[]")
    return {p["name"]: (p.get("run_cnt", 0), p.get("run_time_ns", 0))
            for p in progs if p.get("name") in ("ct_entry", "ct_exit")}


def attached_run(cmd, tracer_args=None, tracer_bin=None):
    """One run of a target that takes --wait-file and --hold-file (pystack_mpi.py), with the
    tracer (tracer_bin, else this build's) attached by pid first unless tracer_args is None.
    Returns the target's ns_per_call, cpu_s and frames a stack, the tracer's CPU time (whole
    run, attach included; and over the calls alone, until its reader caught up) and, from
    bpf_stats, ns per run of each BPF program over the calls."""
    tmp = Path(tempfile.mkdtemp(prefix="ct-bench-"))
    go, hold = tmp / "go", tmp / "hold"
    target = subprocess.Popen([*map(str, cmd), "--wait-file", str(go), "--hold-file", str(hold)],
                              stdout=subprocess.PIPE, text=True)
    tracer, out = None, {}
    try:
        pid = wait_pidfile(tmp / "go.pid", target, cmd[1])
        if tracer_args is not None:
            tracer = subprocess.Popen([tracer_bin or TRACER, "-q", *tracer_args, "-p", pid],
                                      stderr=subprocess.PIPE, text=True)
            for line in tracer.stderr:
                if line.startswith("attached:"):
                    break
            before = bpf_prog_stats()
            tracer_ns = task_cpu_ns(tracer.pid)
        go.touch()
        text = ""
        for line in target.stdout:
            text += line
            if line.startswith("cpu_s "):
                break
        out = {"ns_per_call": number(text, "ns_per_call"), "cpu_s": number(text, "cpu_s"),
               "frames": number(text, "frames")}
        if tracer:
            out["tracer_calls_cpu_s"] = (settled_cpu_ns(tracer.pid) - tracer_ns) / 1e9
            after = bpf_prog_stats()
            for name, (runs, ns) in after.items():
                r0, n0 = before.get(name, (0, 0))
                out[f"bpf_{name}"] = (ns - n0) / max(1, runs - r0)
        hold.touch()
        target.wait(timeout=300)
        if tracer:
            out["tracer_cpu_s"] = wait_cpu(tracer)
            if tracer.returncode:
                raise SystemExit(f"bench: the tracer failed ({tracer.returncode})")
        return out
    finally:
        cleanup((target, tracer), tmp)


def cpu_table(title, calls, res, base="untraced"):
    """Per configuration: wall ns per call (median), the target's CPU ns per call and the
    tracer's CPU per run (means, 95 % intervals), the tracer's CPU over the calls alone per
    call (mean), the BPF programs' ns per run."""
    print(f"\n{title}")
    print(f"  {'configuration':<24} {'wall ns/call':>12} {'target CPU ns/call [95% CI]':>32} "
          f"{'tracer CPU s/run':>17} {'ns/call':>8} {'BPF entry/return ns':>20}")
    for name, runs in res.items():
        cpu = [r["cpu_s"] * 1e9 / calls for r in runs]
        ci = bs.bootstrap(bs.mean, cpu)
        tr = [r["tracer_cpu_s"] for r in runs if "tracer_cpu_s" in r]
        trc = [r["tracer_calls_cpu_s"] * 1e9 / calls for r in runs if "tracer_calls_cpu_s" in r]
        bpf = [(r.get("bpf_ct_entry"), r.get("bpf_ct_exit")) for r in runs if "bpf_ct_entry" in r]
        bpf_s = (f"{statistics.median(b[0] for b in bpf):,.0f} / "
                 f"{statistics.median(b[1] for b in bpf):,.0f}") if bpf else "-"
        print(f"  {name:<24} {statistics.median(r['ns_per_call'] for r in runs):>12,.0f} "
              f"{bs.fmt(ci, digits=0):>32} {statistics.mean(tr) if tr else 0:>17.2f} "
              f"{statistics.mean(trc) if trc else 0:>8,.0f} {bpf_s:>20}")
    ref = [r["cpu_s"] * 1e9 / calls for r in res[base]]
    for name, runs in res.items():
        if name == base:
            continue
        cpu = [r["cpu_s"] * 1e9 / calls for r in runs]
        print(f"  {name}: target CPU {bs.fmt(bs.bootstrap(bs.ratio_of_means, cpu, ref))} x "
              f"{base}, {bs.fmt(bs.bootstrap(bs.diff_of_means, cpu, ref), ' ns', 0)} "
              f"per collective")


def cpu_ns(res, name, calls):
    return [r["cpu_s"] * 1e9 / calls for r in res[name]]


def pythons(bench):
    """(label, interpreter) of the CPythons the Python benches run, those installed."""
    for label, py in (("3.11 (Debian)", "/usr/bin/python3.11"),
                      ("3.13", str(Path.home() / ".pyenv/versions/3.13.0/bin/python3.13"))):
        if Path(py).exists():
            yield label, py
        else:
            print(f"\nbench {bench}: {py} not installed, CPython {label} skipped")


def pystack_cmd(py, depth, shape, calls):
    return [py, WORK / "pystack_mpi.py", "--time", "--calls", calls, "--depth", depth,
            *{"distinct functions": ["--distinct"],
              "calls from the deepest frame": ["--stay"]}.get(shape, [])]


def bench_builds():
    """Two builds of the tracer (BENCH_BUILDS=A:B, two commtrace-bpf binaries) on the stack
    shapes of a framework's depth, in pairs of runs, A then B and B then A: each pair's
    difference in the BPF programs' ns per run; their median and mean, each with its 95 %
    interval (a run in twelve may take 1 us more, which moves the mean). A pair's runs are
    seconds apart, so the drift of a shared VM, which moves separate runs' medians by
    150-250 ns, cancels out of it."""
    builds = os.environ.get("BENCH_BUILDS", "").split(":")
    if len(builds) != 2 or not all(os.access(b, os.X_OK) for b in builds):
        raise SystemExit("bench builds: set BENCH_BUILDS=A:B, two commtrace-bpf binaries")
    pairs, calls = 2 * ROUNDS, 10000
    for label, py in pythons("builds"):
        for depth, shape in ((0, "recursion"), (40, "recursion"), (40, "distinct functions")):
            cmd = pystack_cmd(py, depth, shape, calls)
            runs = {b: [] for b in builds}
            for p in range(pairs):
                for b in (builds if p % 2 == 0 else builds[::-1]):
                    runs[b].append(attached_run(cmd, [], tracer_bin=b))
            print(f"\nMPI_Barrier from CPython {label} at depth {depth} ({shape}), with stacks: "
                  f"{pairs} pairs of runs, {calls} calls each; B = {builds[1]} less A = "
                  f"{builds[0]}")
            for prog in ("ct_entry", "ct_exit"):
                a, b = ([r[f"bpf_{prog}"] for r in runs[x]] for x in builds)
                diff = [y - x for x, y in zip(a, b)]
                print(f"  BPF {prog}: A {statistics.median(a):,.0f} ns a run; B - A: median "
                      f"{bs.fmt(bs.bootstrap(statistics.median, diff), ' ns', 0)}, mean "
                      f"{bs.fmt(bs.bootstrap(bs.mean, diff), ' ns', 0)}")


def bpf_stack_cost(res, goal=None):
    """What a stack costs by the BPF programs' own time (entry and return, bpf_stats): with
    stacks less without, paired within each round (its runs are seconds apart, so a shared
    VM's drift cancels), the mean with its 95 % interval, and that over the Python frames
    of each call's stack."""
    with_, without = res["traced, Python stacks"], res["traced, no stacks"]
    ci = bs.bootstrap(bs.mean, [w["bpf_ct_entry"] + w["bpf_ct_exit"] - o["bpf_ct_entry"] -
                                o["bpf_ct_exit"] for w, o in zip(with_, without)])
    frames = with_[0]["frames"]
    print(f"  {frames:.0f} Python frames a stack; by BPF time, stack capture "
          f"{bs.fmt(ci, ' ns', 0)}, {ci[0] / frames:.0f} ns a frame" +
          (f" (goal <= {goal} ns: {bs.within(ci, goal)})" if goal else ""))


def bench_pystack():
    """Stack capture, by CPU time: MPI_Barrier from a Python call chain (0 and 40 levels:
    one function recursing, or 40 distinct ones, every third entered from C; and 490,
    recursing from the top at each call or calling from the deepest frame; the frames a
    stack holds are printed), the tracer attached by pid, the three configurations
    alternated."""
    for label, py in pythons("pystack"):
        for depth, shape in ((0, "recursion"), (40, "recursion"), (40, "distinct functions"),
                             (490, "recursion"), (490, "calls from the deepest frame")):
            calls = 20000 if depth < 100 else 5000
            cmd = pystack_cmd(py, depth, shape, calls)
            configs = {"untraced": None, "traced, no stacks": ["--no-stacks"],
                       "traced, Python stacks": []}
            res = bs.alternate(list(configs), ROUNDS, lambda c: attached_run(cmd, configs[c]))
            cpu_table(f"MPI_Barrier from CPython {label} at depth {depth} ({shape}): "
                      f"{calls} calls a run, {ROUNDS} rounds alternated", calls, res)
            stack = bs.bootstrap(bs.diff_of_means, cpu_ns(res, "traced, Python stacks", calls),
                                 cpu_ns(res, "traced, no stacks", calls))
            bpf_stack_cost(res, 1500 if depth < 100 else None)
            if depth >= 100:  # the goals are for a framework's depths
                print(f"  stack capture alone: {bs.fmt(stack, ' ns', 0)} per collective, "
                      f"{stack[0] / depth:.0f} ns a level")
                continue
            total = bs.bootstrap(bs.diff_of_means, cpu_ns(res, "traced, Python stacks", calls),
                                 cpu_ns(res, "untraced", calls))
            print(f"  stack capture alone: {bs.fmt(stack, ' ns', 0)} per collective "
                  f"(goal <= 1500 ns: {bs.within(stack, 1500)}); a collective with its stack: "
                  f"{bs.fmt(total, ' ns', 0)} (goal <= 4000 ns: {bs.within(total, 4000)})")


# ---------------------------------------------------------------------------------------
# The event path: a synthetic target (tests/progs/event_rate.c, the HCCL stand-in's
# HcclBarrier, which does nothing) issues calls at a set rate or flat out; the tracer
# attaches by pid. Each call is two records (entry, return).

EVENTS_SECONDS = float(os.environ.get("BENCH_EVENTS_SECONDS", "2"))
RSS_CALLS = int(float(os.environ.get("BENCH_RSS_CALLS", "10e6")))


def traced_rate(calls, threads=1, rate=0, ringbuf=8, args=(), sample=None):
    """Run event_rate under the tracer: (the target's counts, the tracer's JSON, samples).

    sample(tracer_pid, live_line) is called for each live summary line (-i 0.2) when
    given, and its results are returned as the samples.
    """
    tmp = Path(tempfile.mkdtemp(prefix="ct-bench-"))
    go, js = tmp / "go", tmp / "trace.json"
    target = subprocess.Popen([str(PROGS / "event_rate"), str(PROGS / "libhccl.so"),
                               "--calls", str(calls), "--threads", str(threads),
                               "--rate", str(rate), "--wait-file", str(go)],
                              stdout=subprocess.PIPE, text=True)
    tracer = None
    try:
        pid = wait_pidfile(tmp / "go.pid", target, "event_rate")
        cmd = [TRACER, "-q", "--ringbuf", str(ringbuf), "-p", pid, "--json", str(js), *args]
        if sample:
            cmd += ["-i", "0.2"]
        tracer = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        samples = []
        for line in tracer.stderr:
            if line.startswith("attached:"):
                go.touch()
                if not sample:
                    break
            elif sample and line.startswith("commtrace: live:"):
                samples.append(sample(tracer.pid, line))
        out = target.communicate(timeout=600)[0]
        if tracer.wait(timeout=120) != 0 or target.returncode != 0:
            raise SystemExit(f"bench: event_rate or the tracer failed: {out}")
        made = {k: float(v) for k, v in (l.split() for l in out.splitlines())}
        return made, json.loads(js.read_text()), samples
    finally:
        cleanup((target, tracer), tmp)


def bench_events():
    """Sweep call rates; print received/dropped/generated; the highest zero-drop rate."""
    untraced = median(lambda: run([str(PROGS / "event_rate"), str(PROGS / "libhccl.so"),
                                   "--calls", "2000000"], "rate_per_s"))
    print(f"\nEvent path: HcclBarrier (stand-in) flat out, untraced: {untraced:,.0f} calls/s")
    print("  each call is 2 records (entry 240 B, return 56 B in the ring); "
          f"{EVENTS_SECONDS:g} s per run, worst of {REPEAT} runs")
    print(f"  {'ring':>5} {'threads':>7} {'asked/s':>10} {'achieved/s':>11} {'generated':>10} "
          f"{'received':>10} {'dropped':>8} {'ret.lost':>8} {'exact':>5}")
    sweep = [(8, 1, r) for r in (100e3, 200e3, 400e3, 0)] + [(8, 2, 0), (8, 4, 0), (1, 4, 0)]
    best = {}
    for ringbuf, threads, rate in sweep:
        runs = []
        for _ in range(REPEAT):
            calls = int((rate or 1.5e6) * EVENTS_SECONDS)
            made, js, _ = traced_rate(calls, threads, rate, ringbuf)
            counted = js["total_counts"]
            exact = counted + js["dropped_calls"] == made["traced_calls"]
            runs.append((made["rate_per_s"], made["traced_calls"], counted, js["dropped_calls"],
                         js["drops"]["returns_lost"], exact))
        achieved = statistics.median(r[0] for r in runs)
        worst = max(runs, key=lambda r: (r[3], r[4]))
        print(f"  {ringbuf:>4}M {threads:>7} {rate or 'max':>10} {achieved:>11,.0f} "
              f"{worst[1]:>10,.0f} {worst[2]:>10,} {worst[3]:>8,} {worst[4]:>8,} "
              f"{'yes' if all(r[5] for r in runs) else 'NO':>5}")
        if not any(r[3] or r[4] for r in runs):
            best[ringbuf] = max(best.get(ringbuf, 0), min(r[0] for r in runs))
        if not all(r[5] for r in runs):
            print("  bench: calls made != counted + dropped_calls: drop accounting is wrong")
    for ringbuf, r in sorted(best.items()):
        print(f"  highest rate with zero drops in every run, --ringbuf {ringbuf}: "
              f"{r:,.0f} calls/s ({2 * r:,.0f} records/s)")


def bench_pyevents():
    """With Python stacks the reader resolves every stack from the live process: how fast
    can Python threads call before records are lost (pystack_mpi.py, MPI_Barrier through
    ctypes, flat out, from 1 thread at three depths and from 2 and 4 threads at once)?"""
    calls = int(float(os.environ.get("BENCH_PY_CALLS", "150e3")))
    print(f"\nEvent path with Python stacks: pystack_mpi.py flat out, {calls:,} calls in all, "
          f"CPython 3.11, worst of {REPEAT} runs")
    print(f"  {'threads':>7} {'depth':>5} {'calls/s':>9} {'made':>9} {'counted':>9} "
          f"{'dropped':>8} {'unresolved frames':>17}")
    for threads, depth in ((1, 0), (1, 10), (1, 50), (2, 0), (2, 10), (4, 10)):
        runs = []
        for _ in range(REPEAT):
            with tempfile.TemporaryDirectory() as tmp:
                js = Path(tmp) / "trace.json"
                r = subprocess.run(
                    [TRACER, "-q", "--json", str(js), "--", "/usr/bin/python3.11",
                     str(WORK / "pystack_mpi.py"), "--time", "--calls", str(calls // threads),
                     "--threads", str(threads), "--depth", str(depth)],
                    capture_output=True, text=True, timeout=900)
                if r.returncode:
                    raise SystemExit(f"bench: pystack_mpi under the tracer failed: {r.stderr}")
                j = json.loads(js.read_text())
                rate = 1e9 / number(r.stdout, "ns_per_call")
                made = calls // threads * threads
                if j["total_counts"] + j["dropped_calls"] != made:
                    raise SystemExit(f"bench: {made} calls made, {j['total_counts']} counted "
                                     f"+ {j['dropped_calls']} dropped")
                runs.append((rate, made, j["total_counts"], j["dropped_calls"],
                             j["drops"]["python_frames_unresolved"]))
        worst = max(runs, key=lambda x: (x[3], x[4]))
        print(f"  {threads:>7} {depth:>5} {statistics.median(x[0] for x in runs):>9,.0f} "
              f"{worst[1]:>9,} {worst[2]:>9,} {worst[3]:>8,} {worst[4]:>17,}")


def bench_memory():
    """The tracer's RSS (VmRSS, VmHWM) while a synthetic target drives millions of events."""
    def rss(pid, line):
        m = re.search(r"(\d+) calls", line)
        st = Path(f"/proc/{pid}/status").read_text()
        kb = {k: int(re.search(rf"^{k}:\s+(\d+)", st, re.M).group(1)) for k in ("VmRSS", "VmHWM")}
        return int(m.group(1)) if m else 0, kb["VmRSS"], kb["VmHWM"]

    for label, args in (("--no-stacks", ["--no-stacks"]),
                        ("--chrome (capped at 64 MiB)", ["--chrome", "/dev/null",
                                                         "--chrome-max-mb", "64"])):
        made, js, samples = traced_rate(RSS_CALLS, 2, 0, 8, args, sample=rss)
        print(f"\nTracer memory, {label}: {made['traced_calls']:,.0f} calls "
              f"({js['events']:,} records) at {made['rate_per_s']:,.0f} calls/s, "
              f"dropped_calls {js['dropped_calls']:,}")
        print(f"  {'records':>12} {'VmRSS KiB':>10} {'VmHWM KiB':>10}")
        for mark in (1e6, 2e6, 5e6, 10e6, 20e6, 50e6):
            at = [s for s in samples if 2 * s[0] >= mark]
            if at:
                print(f"  {mark:>12,.0f} {at[0][1]:>10,} {at[0][2]:>10,}")
        if samples:
            print(f"  {'end':>12} {samples[-1][1]:>10,} {samples[-1][2]:>10,}")

    # With Python stacks (tree records, symbol caches): MPI_Barrier through ctypes.
    calls = int(float(os.environ.get("BENCH_RSS_PY_CALLS", "300e3")))
    with tempfile.TemporaryDirectory() as tmp:
        js = Path(tmp) / "trace.json"
        tracer = subprocess.Popen(
            [TRACER, "-q", "-i", "1", "--json", str(js), "--", "/usr/bin/python3.11",
             str(WORK / "pystack_mpi.py"), "--time", "--calls", str(calls), "--depth", "10"],
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        samples = [rss(tracer.pid, l) for l in tracer.stderr if l.startswith("commtrace: live:")]
        tracer.wait()
        j = json.loads(js.read_text())
    print(f"\nTracer memory, Python stacks (pystack_mpi.py, depth 10): {j['total_counts']:,} "
          f"calls, {j['events']:,} records, dropped_calls {j['dropped_calls']:,}")
    print(f"  {'calls':>12} {'VmRSS KiB':>10} {'VmHWM KiB':>10}")
    for s in samples[:: max(1, len(samples) // 8)] + samples[-1:]:
        print(f"  {s[0]:>12,} {s[1]:>10,} {s[2]:>10,}")


def replay_rates(rec, records, tmp):
    """`replay` of rec with each exporter: records/s and MB/s, median of REPEAT."""
    print(f"  {'exporters':<28} {'records/s':>12} {'MB/s':>8}")
    for name, args in (("none (event path only)", []), ("--json", ["--json"]),
                       ("--table --noise-level 2", ["--noise-level", "2", "--table"]),
                       ("--chrome", ["--chrome"])):
        def once():
            out = [str(Path(tmp) / "out")] if args else []
            r = subprocess.run([TRACER, "replay", "-q", str(rec), *args, *out],
                               capture_output=True, text=True, timeout=600)
            m = re.search(r"replay: (\d+) records \(([0-9.]+) MB\) in ([0-9.]+) s.*"
                          r"exporters: ([0-9.]+) s", r.stderr)
            if r.returncode or not m:
                raise SystemExit(f"bench: replay failed: {r.stderr}")
            return float(m.group(3)) + float(m.group(4)), float(m.group(2)), r.stderr
        runs = [once() for _ in range(REPEAT)]
        t = statistics.median(r[0] for r in runs)
        print(f"  {name:<28} {records / t:>12,.0f} {runs[0][1] / t:>8.1f}")
    return runs[0][2]


def bench_offline():
    """Replay a recorded event stream through the event path and each exporter, without
    and with Python stacks (then the seed-000 tree is rebuilt too); decode device
    buffers. All offline: records (or MB) per second of one CPU."""
    calls = int(float(os.environ.get("BENCH_OFFLINE_CALLS", "1e6")))
    py_calls = int(float(os.environ.get("BENCH_OFFLINE_PY_CALLS", "1e5")))
    with tempfile.TemporaryDirectory() as tmp:
        rec = Path(tmp) / "rec.ctr"
        made, js, _ = traced_rate(calls, 1, 0, 8, ["--record", str(rec)])
        print(f"\nOffline: replay of {js['events']:,} records ({rec.stat().st_size / 1e6:.0f} MB, "
              f"event_rate flat out, recorded with --record), median of {REPEAT}")
        replay_rates(rec, js["events"], tmp)

        pyrec, pyjs = Path(tmp) / "py.ctr", Path(tmp) / "py.json"
        subprocess.run([TRACER, "-q", "--record", str(pyrec), "--json", str(pyjs), "--",
                        "/usr/bin/python3.11", str(WORK / "pystack_mpi.py"), "--calls",
                        str(py_calls), "--depth", "10"], check=True, capture_output=True,
                       timeout=900)
        events = json.loads(pyjs.read_text())["events"]
        print(f"\nOffline: replay of {events:,} records ({pyrec.stat().st_size / 1e6:.0f} MB, "
              f"pystack_mpi.py --depth 10: a Python stack of about 20 frames per call, "
              f"the tree rebuilt from them), median of {REPEAT}")
        err = replay_rates(pyrec, events, tmp)
        m = re.search(r"python stacks replayed: (\d+), not replayed: (\d+)", err)
        print(f"  python stacks replayed: {m.group(1) if m else '?'}, "
              f"not replayed: {m.group(2) if m else '?'}")

        # Device buffers: the generator's "basic" buffer (2 AIC + 3 AIV cores), repeated
        # as invocations one after another up to BENCH_DEVPROF_MB.
        one, big = Path(tmp) / "one.bin", Path(tmp) / "big.bin"
        subprocess.run([TRACER, "devprof", "gen", "--scenario", "basic", "-o", str(one)],
                       check=True, capture_output=True)
        mb = float(os.environ.get("BENCH_DEVPROF_MB", "12"))
        data = one.read_bytes()
        # at most 4096 invocations in one file (DEVPROF_MAX_INVOCATIONS)
        big.write_bytes(data * min(4096, max(1, int(mb * 1e6 / len(data)))))
        size = big.stat().st_size / 1e6
        for cmd in (["decode", str(big), "-o", str(Path(tmp) / "dev.json")],
                    ["validate", str(big)]):
            def once():
                t0 = time.perf_counter()
                subprocess.run([TRACER, "devprof", *cmd], check=True, capture_output=True)
                return time.perf_counter() - t0
            t = median(once)
            print(f"  devprof {cmd[0]:<8} {size:.1f} MB ({len(data)} B per invocation): "
                  f"{size / t:.1f} MB/s")


def bench_fleet():
    """merge at fleet scale (issue: 512 nodes x 8 ranks x 4 communicators in 60 s and
    4 GiB): node reports of gen-fleet.py's DP x TP x PP job with one late rank, one
    mismatch and one hang, merged; wall time and peak RSS of merge (wait4's rusage of
    the child) at 64, 512 and 4096 ranks, and whether the findings were exactly the injected
    ones."""
    print("\nFleet: commtrace-bpf merge of gen-fleet.py node reports (TP 4 x PP 2 x DP, "
          "20 steps, 4 communicators a rank), median of 3")
    print(f"  {'ranks':>6} {'nodes':>6} {'pairs':>7} {'input MB':>9} {'merge s':>8} "
          f"{'peak MiB':>9} {'MiB/krank':>10}  findings")
    goal = None
    for nodes in (8, 64, 512):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp)
            ranks = nodes * 8
            subprocess.run([sys.executable, str(REPO / "scripts" / "gen-fleet.py"), "--nodes",
                            str(nodes), "--out", tmp, "--inject", "late:5:dp:7", "--inject",
                            "mismatch:6:tp:30", "--inject", f"hang:{ranks - 3}:pp:18"],
                           check=True, capture_output=True, timeout=900)
            inputs = [str(out / f"node{n}.json") for n in range(nodes)]
            size = sum(Path(f).stat().st_size for f in inputs) / 1e6
            runs = []
            for _ in range(3):
                t0 = time.perf_counter()
                pid = subprocess.Popen([TRACER, "merge", "--json", str(out / "job.json"),
                                        *inputs], stderr=subprocess.DEVNULL).pid
                _, status, ru = os.wait4(pid, 0)
                runs.append((time.perf_counter() - t0, ru.ru_maxrss / 1024))
                if status:
                    sys.exit(f"bench fleet: merge failed ({status})")
            secs = sorted(r[0] for r in runs)[1]
            rss = max(r[1] for r in runs)
            js = json.loads((out / "job.json").read_text())
            exp = json.loads((out / "expected.json").read_text())
            got = sorted((f["kind"], tuple(f["ranks"]), f["evidence"]["communicator"])
                         for f in js["findings"])
            want = sorted((f["kind"], tuple(f["ranks"]), f["communicator"])
                          for f in exp["findings"])
            print(f"  {ranks:>6} {nodes:>6} {4 * ranks:>7} {size:>9.1f} {secs:>8.2f} "
                  f"{rss:>9.0f} {rss / ranks * 1000:>10.0f}  "
                  f"{'exact' if got == want else f'DIFFER: {got} vs {want}'}")
            if nodes == 512:
                goal = (secs, rss)
    print(f"  goal at 512 nodes (16,384 pairs): <= 60 s and <= 4096 MiB: "
          f"{'met' if goal[0] <= 60 and goal[1] <= 4096 else 'NOT met'} "
          f"({goal[0]:.1f} s, {goal[1]:.0f} MiB)")


def bench_devprof():
    """The devprof recorder's cost per record in its host build: one worker's task loop
    (3 records per task) bare, with the recorder and sampling off, and sampling on."""
    prog = PROGS / "devprof_cost"
    r = subprocess.run(["make", "-s", str(prog.relative_to(REPO))], cwd=REPO,
                       capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"bench: cannot build {prog}: {r.stderr}")
    tasks = os.environ.get("BENCH_DEVPROF_TASKS", "2000000")
    keys = ("bare_ns_per_task", "off_ns_per_record", "on_ns_per_record",
            "off_added_ns_per_record", "on_added_ns_per_record", "clock_ns_per_read")
    runs = []
    for _ in range(REPEAT):
        r = subprocess.run([str(prog), tasks], capture_output=True, text=True, timeout=600)
        if r.returncode:
            raise SystemExit(f"bench: devprof_cost failed ({r.returncode}):\n"
                             f"{r.stdout}{r.stderr}")
        runs.append({k: number(r.stdout, k) for k in keys})
    m = {k: statistics.median(x[k] for x in runs) for k in keys}
    records = int(number(r.stdout, "records"))
    print(f"\ndevprof recorder, host build (-O2, CLOCK_MONOTONIC clock, no-op barrier): "
          f"{records:,} records per loop, median of {REPEAT} runs of 7 rounds")
    print(f"  {'configuration':<34} {'ns/record':>10} {'added':>8}")
    print(f"  {'no recorder (bare loop)':<34} {m['bare_ns_per_task'] / 3:>10.2f} {'-':>8}")
    print(f"  {'recorder, sampling off':<34} {m['off_ns_per_record']:>10.2f} "
          f"{m['off_added_ns_per_record']:>+8.2f}")
    print(f"  {'recorder, sampling on':<34} {m['on_ns_per_record']:>10.2f} "
          f"{m['on_added_ns_per_record']:>+8.2f}")
    print(f"  clock read alone: {m['clock_ns_per_read']:.2f} ns (two per record when on)")
    print("  the CUDA kernel's cost (ns per invocation, on/off) needs a GPU: "
          "build/progs/megakernel --cost, run by scripts/gpu-check.sh")


def node_run(traced_procs, calls, wide=False):
    """One process calling HcclBarrier (the stand-in) flat out while traced_procs - 1 more
    processes of the same library sit idle, all of them traced by one tracer (0: none
    traced), with links per process or (wide) one set on the file. The caller's CPU ns per
    call."""
    tmp = Path(tempfile.mkdtemp(prefix="ct-bench-"))
    n = max(traced_procs, 1)
    procs, tracer = [], None
    try:
        for i in range(n):
            procs.append(subprocess.Popen(
                [str(PROGS / "event_rate"), str(PROGS / "libhccl.so"),
                 "--calls", str(calls if i == 0 else 1), "--wait-file", str(tmp / f"go{i}")],
                stdout=subprocess.PIPE, text=True))
        pids = [wait_pidfile(tmp / f"go{i}.pid", p, "event_rate") for i, p in enumerate(procs)]
        if traced_procs:
            env = dict(os.environ, COMMTRACE_FILE_WIDE="2" if wide else "0")
            tracer = subprocess.Popen([TRACER, "-q", "-p", ",".join(pids)],
                                      stderr=subprocess.PIPE, text=True, env=env)
            for line in tracer.stderr:
                if line.startswith("attached:"):
                    break
        (tmp / "go0").touch()
        out = procs[0].stdout.read()
        cpu = wait_cpu(procs[0])
        for i in range(1, n):
            (tmp / f"go{i}").touch()
        for p in procs[1:]:
            p.wait(timeout=60)
        if tracer and tracer.wait(timeout=60):
            raise SystemExit("bench: the tracer failed")
        return cpu * 1e9 / number(out, "issued_calls")
    finally:
        cleanup((*procs, tracer), tmp)


def bench_node():
    """Does a traced call cost more when more processes of the same library are traced? One
    caller, 0/1/4/8 traced processes of the HCCL stand-in, alternated, in both attach shapes:
    pid-filtered uprobe_multi links per process (COMMTRACE_FILE_WIDE=0), and one set of links
    on the file with the traced processes kept in BPF (the default from 4 processes); the
    caller's CPU per call."""
    calls = 300000
    configs = [(0, False), (1, False), (4, False), (8, False), (4, True), (8, True)]
    res = bs.alternate(configs, ROUNDS, lambda k: node_run(k[0], calls, k[1]))
    print(f"\nOne node, one calling process: HcclBarrier (stand-in) flat out, {calls:,} calls a "
          f"run, {ROUNDS} rounds alternated; the caller's CPU ns per call [95% CI]")
    for k, wide in configs:
        label = ("untraced" if not k else f"{k} process{'es' if k > 1 else ''} traced" +
                 (", file-wide" if wide else ", per process" if k > 1 else ""))
        line = f"  {label:<32} {bs.fmt(bs.bootstrap(bs.mean, res[(k, wide)]), digits=0):>26}"
        if k > 1:
            d = bs.bootstrap(bs.diff_of_means, res[(k, wide)], res[(1, False)])
            line += f"   vs 1 traced: {bs.fmt(d, ' ns', 0)} per call"
        print(line)


def bench_detach():
    """Attaching to and detaching from a running 2-rank DDP job (Gloo, PyTorch 1.13, Python
    stacks): seconds from start to "attached:", and from SIGINT to the tracer's exit, with
    uprobe_multi links (the default where the kernel has them) and with one perf-event link
    per probe (COMMTRACE_UPROBE_MULTI=0), which waits for the kernel once per probe."""
    out = Path(tempfile.mkdtemp(prefix="commtrace-bench."))
    ddp = (f"/usr/bin/python3 {WORK / 'train_ddp.py'} --steps 1000000 --step-sleep 0.01 "
           f"--ready-file {out / 'ready'}")
    job = subprocess.Popen(["sh", "-c", "export MASTER_ADDR=127.0.0.1 MASTER_PORT=29790 "
                            f"WORLD_SIZE=2; RANK=1 {ddp} & RANK=0 {ddp}; wait"],
                           start_new_session=True)
    try:
        deadline = time.time() + 120
        ready = [out / f"ready.{r}" for r in (0, 1)]
        while not all(f.exists() and f.read_text().endswith("\n") for f in ready):
            if time.time() > deadline or job.poll() is not None:
                raise SystemExit("bench: the DDP job did not start")
            time.sleep(0.1)
        pids = ",".join(f.read_text().strip() for f in ready)
        rows = []
        for mode, env in (("uprobe_multi links", None),
                          ("perf-event links", dict(os.environ, COMMTRACE_UPROBE_MULTI="0"))):
            att, det, probes = [], [], 0
            for _ in range(REPEAT):
                t0 = time.monotonic()
                tr = subprocess.Popen([TRACER, "-p", pids, "--json", out / "t.json"], env=env,
                                      stderr=subprocess.PIPE, text=True)
                for line in tr.stderr:
                    if line.startswith("attached:"):
                        probes = int(line.split()[1])
                        break
                else:
                    raise SystemExit(f"bench: the tracer exited ({tr.wait()}) unattached")
                att.append(time.monotonic() - t0)
                time.sleep(1)
                t1 = time.monotonic()
                tr.send_signal(signal.SIGINT)
                tr.stderr.read()
                if tr.wait(120) != 0:
                    raise SystemExit(f"bench: the tracer failed ({tr.returncode})")
                det.append(time.monotonic() - t1)
            rows.append((mode, probes, statistics.median(att), statistics.median(det)))
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
        shutil.rmtree(out, ignore_errors=True)
    print("\nAttach and detach, 2 running DDP ranks (Gloo, stacks): seconds")
    print(f"  {'links':<22} {'probes':>7} {'attach':>8} {'detach':>8} {'detach ratio':>13}")
    for mode, probes, a, d in rows:
        print(f"  {mode:<22} {probes:>7} {a:>8.2f} {d:>8.2f} {d / rows[0][3]:>13.1f}")


def main():
    if os.geteuid() != 0:
        sys.exit("bench: needs root (BPF)")
    print(f"commtrace bench: {os.uname().nodelen if hasattr(os.uname(), 'nodelen') else ''}"
          f"{os.cpu_count()} CPUs, kernel {os.uname().release}, median of {REPEAT} runs")
    stats = Path("/proc/sys/kernel/bpf_stats_enabled")
    stats_was = stats.read_text().strip() if stats.exists() else None
    if stats_was is not None:
        stats.write_text("1\n")  # BPF programs' run time, per program (bpftool prog show)
    try:
        run_benches(sys.argv[1:])
    finally:
        if stats_was is not None:
            stats.write_text(stats_was + "\n")


BENCHES = ["traps", "reads", "mpi", "pystack", "training", "ops", "torch2", "events", "pyevents", "node",
           "memory", "offline", "devprof", "detach", "fleet"]


def run_benches(which):
    unknown = [w for w in which if w not in BENCHES and w != "builds"]
    if unknown:
        raise SystemExit(f"bench: no such bench {', '.join(unknown)} (one of: "
                         f"{' '.join(BENCHES)}; or builds, with BENCH_BUILDS=A:B)")
    if "builds" in which:  # named only: it needs BENCH_BUILDS
        bench_builds()
        which = [w for w in which if w != "builds"]
        if not which:
            return
    which = which or BENCHES
    if "traps" in which:
        bench_traps()
    if "reads" in which:
        bench_reads()
    if "mpi" in which:
        bench_mpi()
    if "pystack" in which:
        bench_pystack()
    if "training" in which:
        bench_training()
    if "ops" in which:
        bench_ops()
    if "torch2" in which:
        bench_torch2()
    if "events" in which:
        bench_events()
    if "pyevents" in which:
        bench_pyevents()
    if "memory" in which:
        bench_memory()
    if "offline" in which:
        bench_offline()
    if "devprof" in which:
        bench_devprof()
    if "detach" in which:
        bench_detach()
    if "fleet" in which:
        bench_fleet()
    if "node" in which:
        bench_node()


if __name__ == "__main__":
    main()
