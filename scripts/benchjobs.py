# SPDX-License-Identifier: MIT
"""`make bench`'s training jobs (scripts/bench.py training, ops, torch2): two Gloo ranks,
the configurations alternated, the tracer attached by pid with --cost while the ranks
wait; rank 0's wall and CPU time with 95 % intervals, and what the tracer accounts."""
import json
import os
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

import benchstats as bs
from benchproc import REPO, ROUNDS, TRACER, WORK, cleanup, number, wait_pidfile

PORT = [29700]


def two_ranks(cmd, go, tracer_args, per, unit, inner_go=None, env=None):
    """One run of a 2-rank Gloo job: cmd (RANK set for each, rank 0 with --time), which
    waits at --wait-file until the tracer, unless tracer_args is None, has attached by pid
    with --cost. go: the wait file; inner_go: its path as the ranks see it (a chroot).
    Rank 0's wall and CPU ns per unit ("step": ns_per_step, cpu_ns_per_step); traced, what
    the tracer accounts per unit and rank over the per units the ranks ran: {wall, cpu,
    added, hits, bpf, tracer (s per run)}."""
    PORT[0] += 1
    js = go.with_suffix(".json")
    env = dict(env or os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(PORT[0]),
               WORLD_SIZE="2")
    cmd = [*map(str, cmd), "--wait-file", str(inner_go or go)]
    ranks = [subprocess.Popen(cmd + ["--time"], env=dict(env, RANK="0"),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True),
             subprocess.Popen(cmd, env=dict(env, RANK="1"), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)]
    tracer = None
    try:
        pids = [wait_pidfile(Path(f"{go}.pid.{r}"), ranks[r], cmd[1]) for r in (0, 1)]
        if tracer_args is not None:
            tracer = subprocess.Popen([*tracer_args, "-q", "--cost", "--json", js,
                                       "-p", ",".join(pids)], stderr=subprocess.PIPE, text=True)
            for line in tracer.stderr:
                if line.startswith("attached:"):
                    break
        go.touch()
        out, err = ranks[0].communicate(timeout=600)
        ranks[1].wait(timeout=60)
        if ranks[0].returncode or ranks[1].returncode:
            raise SystemExit(f"bench: {' '.join(cmd)} failed:\n{err[-3000:]}")
        r = {"wall": number(out, f"ns_per_{unit}"), "cpu": number(out, f"cpu_ns_per_{unit}")}
        if tracer:
            _, terr = tracer.communicate(timeout=120)  # its stderr drained, not left to fill
            if tracer.returncode:
                raise SystemExit(f"bench: the tracer failed ({tracer.returncode}):\n{terr}")
            cost = json.loads(js.read_text())["cost"]
            r.update(added=cost["targets_added_ns"] / (2 * per),
                     hits=cost["probe_hits"] / (2 * per), bpf=cost["bpf_ns"] / (2 * per),
                     tracer=cost["tracer_cpu_ns"] / 1e9)
        return r
    finally:
        cleanup((*ranks, tracer))
        for f in (go, js, Path(f"{go}.pid.0"), Path(f"{go}.pid.1")):
            f.unlink(missing_ok=True)


def ranks_table(title, runs, unit, base="untraced"):
    """Per configuration: rank 0's wall and CPU ns per unit, and traced, what the tracer
    accounts per unit and rank; then each one's CPU ratio to base, measured and accounted."""
    print(f"\n{title}, {ROUNDS} rounds alternated: rank 0's ns per {unit}, mean [95% CI]; "
          f"accounted: what --cost counts per {unit} and rank (each probe hit at its price + BPF "
          f"time); the tracer's own CPU per run (s, attach included)")
    print(f"  {'configuration':<28} {'wall':>30} {'CPU (threads, kernel included)':>30} "
          f"{'accounted added CPU':>30} {'hits':>7} {'BPF ns':>10} {'tracer s':>9}")
    for name, rs in runs.items():
        acc = tr = ""
        if "added" in rs[0]:
            acc = bs.fmt(bs.bootstrap(bs.mean, [r["added"] for r in rs]), digits=0)
            tr = (f"{statistics.mean(r['hits'] for r in rs):>7,.0f} "
                  f"{statistics.mean(r['bpf'] for r in rs):>10,.0f} "
                  f"{statistics.mean(r['tracer'] for r in rs):>9.2f}")
        print(f"  {name:<28} "
              + " ".join(f"{bs.fmt(bs.bootstrap(bs.mean, [r[k] for r in rs]), digits=0):>30}"
                         for k in ("wall", "cpu")) + f" {acc:>30} {tr}")
    ref = [r["cpu"] for r in runs[base]]
    for name, rs in runs.items():
        if name == base:
            continue
        line = (f"  {name}: CPU x {base} "
                f"{bs.fmt(bs.bootstrap(bs.ratio_of_means, [r['cpu'] for r in rs], ref))}")
        if "added" in rs[0]:
            acc = bs.bootstrap(bs.accounted_ratio, [r["added"] for r in rs], ref)
            line += f"; accounted {bs.fmt(acc)}"
        print(line)


def bench_training():
    """2-rank DDP on Gloo (PyTorch 1.13): the tracer's modes, against torch's profiler."""
    steps = 60
    tmp = Path(tempfile.mkdtemp(prefix="commtrace-bench."))
    every = ["--ops", "--sharding", "--table", tmp / "t.txt", "--noise-level", "2",
             "--chrome", tmp / "t.chrome.json", "--metrics", "0"]
    configs = {"untraced": (None, ()), "commtrace (stacks)": ([TRACER], ()),
               "commtrace --no-stacks": ([TRACER, "--no-stacks"], ()),
               "commtrace, every option": ([TRACER, *every], ()),
               "torch.profiler (shapes)": (None, ("--torch-profiler",))}
    cmd = ["/usr/bin/python3", WORK / "train_ddp.py", "--steps", steps, "--step-sleep", "0"]
    try:
        runs = bs.alternate(list(configs), ROUNDS, lambda c: two_ranks(
            [*cmd, *configs[c][1]], tmp / "go", configs[c][0], steps, "step"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ranks_table("DDP training, 2 Gloo ranks (PyTorch 1.13, CPU)", runs, "step")


def bench_ops():
    """Seed 000's MLP (ops through __torch_function__): what --ops costs, against torch's
    profiler on the same loop."""
    forwards = 300
    tmp = Path(tempfile.mkdtemp(prefix="commtrace-bench."))
    configs = {"untraced": (None, ()), "commtrace (stacks)": ([TRACER], ()),
               "commtrace --ops": ([TRACER, "--ops"], ()),
               "torch.profiler (shapes)": (None, ("--torch-profiler",))}
    cmd = ["/usr/bin/python3", WORK / "seed000_mlp.py", "--forwards", forwards, "--backward"]
    try:
        runs = bs.alternate(list(configs), ROUNDS, lambda c: two_ranks(
            [*cmd, *configs[c][1]], tmp / "go", configs[c][0], forwards, "forward"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ranks_table("Seed 000's MLP, 2 Gloo ranks, forward + backward (PyTorch 1.13)", runs,
                "forward")


TORCH2_ROOT = REPO / "build" / "torch2-root"  # scripts/torch2-root.sh (make test builds it)


def bench_torch2():
    """PyTorch 2.6 (the Debian 13 root, ranks under chroot): its own test Transformer with
    tensor parallelism, against CommDebugMode on the same loop."""
    if not (TORCH2_ROOT / ".commtrace-root").exists():
        print(f"\nPyTorch 2.6: SKIPPED, no root at {TORCH2_ROOT} (scripts/torch2-root.sh)")
        return
    proc = TORCH2_ROOT / "proc"
    mounted = not os.path.ismount(proc)
    if mounted:
        subprocess.run(["mount", "-t", "proc", "proc", str(proc)], check=True)
    inner = "/opt/commtrace-bench"
    shutil.rmtree(TORCH2_ROOT / inner.lstrip("/"), ignore_errors=True)
    shutil.copytree(WORK, TORCH2_ROOT / inner.lstrip("/"))
    steps, warmup = 20, 2
    cmd = ["chroot", TORCH2_ROOT, "python3", f"{inner}/tp_models.py", "--model", "transformer",
           "--warmup", warmup, "--steps", steps]
    # One OpenMP thread a rank, as torchrun sets it for several processes on a node: 2 ranks
    # of 2 threads each on 2 vCPUs spin-wait for each other, and that spinning (3.5 times
    # the step's CPU here) multiplies whatever slows the main thread, in-process or not.
    omp = os.environ.get("BENCH_OMP_THREADS", "1")
    env = dict(os.environ, USE_LIBUV="0", OMP_NUM_THREADS=omp)
    print(f"\nPyTorch 2.6 job: OMP_NUM_THREADS={omp} in each rank (BENCH_OMP_THREADS)")
    configs = {"untraced": (None, ()), "CommDebugMode (in-process)": (None, ("--debug-mode",)),
               "commtrace (stacks)": ([TRACER], ()),
               "commtrace --ops": ([TRACER, "--ops"], ()),
               "--ops, entry+return probes": (["env", "COMMTRACE_UPROBE_SESSION=0", TRACER,
                                               "--ops"], ())}
    try:
        runs = bs.alternate(list(configs), ROUNDS, lambda c: two_ranks(
            [*cmd, *configs[c][1]], TORCH2_ROOT / inner.lstrip("/") / "go", configs[c][0],
            steps + warmup, "step", inner_go=f"{inner}/go", env=env))
    finally:
        shutil.rmtree(TORCH2_ROOT / inner.lstrip("/"), ignore_errors=True)
        if mounted:
            subprocess.run(["umount", str(proc)])
    ranks_table("PyTorch 2.6 test Transformer, TP over 2 Gloo ranks (CPU)", runs, "step")
    base = [r["cpu"] for r in runs["untraced"]]
    cdm = [r["cpu"] for r in runs["CommDebugMode (in-process)"]]
    d = bs.bootstrap(bs.ratio_of_means, [r["cpu"] for r in runs["commtrace (stacks)"]], base)
    acc = bs.bootstrap(bs.accounted_ratio,
                       [r["added"] for r in runs["commtrace (stacks)"]], base)
    print(f"  goal, default mode <= 1.01 x untraced: measured {bs.within(d, 1.01)}, "
          f"accounted {bs.within(acc, 1.01)}")
    # what no change to the BPF programs can lower: the breakpoints at their --cost price
    traps = bs.bootstrap(bs.accounted_ratio, [r["added"] - r["bpf"]
                                              for r in runs["commtrace (stacks)"]], base)
    print(f"  of which the {statistics.mean(r['hits'] for r in runs['commtrace (stacks)']):.0f} "
          f"hits' breakpoints alone, accounted: {bs.fmt(traps)}")
    for name in ("commtrace --ops", "--ops, entry+return probes"):
        rs = runs[name]
        share = bs.bootstrap(lambda o, c, b: bs.diff_of_means(o, b) / bs.diff_of_means(c, b),
                             [r["cpu"] for r in rs], cdm, base)
        acc = bs.bootstrap(lambda a, c, b: bs.mean(a) / bs.diff_of_means(c, b),
                           [r["added"] for r in rs], cdm, base)
        # accounted: ours as the kernel counts it, over CommDebugMode's as measured
        print(f"  {name} adds {bs.fmt(share, digits=2)} of what CommDebugMode adds, "
              f"accounted {bs.fmt(acc, digits=2)} (goal <= 0.33: measured "
              f"{bs.within(share, 0.33)}, accounted {bs.within(acc, 0.33)})")
