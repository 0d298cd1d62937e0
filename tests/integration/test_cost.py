# SPDX-License-Identifier: MIT
"""--cost: what tracing cost the traced processes, as the tracer accounts it.

The HCCL stand-in's event_rate makes a known number of calls; every call is one run of the
entry program and one of the return program, so the kernel's per-program counters the
tracer reports must hold exactly those calls. The CPU time of a target that exits before
the tracer (attach mode) comes from the BPF exit tracepoint, and must agree with what the
target measured of itself. Nothing here is timed.
"""
import json
import re
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import load_trace_json, read_pid, run_tracer, touch, wait_files, wait_proc

CALLS = 20_000
STATS = Path("/proc/sys/kernel/bpf_stats_enabled")


def made(path):
    return {k: int(float(v)) for k, _, v in
            (l.partition(" ") for l in Path(path).read_text().splitlines())}


def check_cost(js):
    cost = js["cost"]
    assert cost["counted"] is True, cost
    progs = cost["programs"]
    # Every call counted returned: one return-program run each, no other return probe.
    assert progs["ct_exit"]["runs"] == js["total_counts"], (progs, js["total_counts"])
    # The entry program also runs at the dynamic linker's probe, which is file-wide: any
    # process's dlopen on the machine takes it (filtered in BPF).
    assert js["total_counts"] <= progs["ct_entry"]["runs"] <= js["total_counts"] + 1000, progs
    uprobes = ("ct_entry", "ct_exit", "ct_py_enter", "ct_py_exit", "ct_py_session")
    assert cost["probe_hits"] == sum(progs[p]["runs"] for p in uprobes if p in progs)
    assert cost["bpf_ns"] == sum(progs[p]["ns"] for p in uprobes if p in progs)
    assert cost["return_hits"] == sum(progs[p]["runs"] for p in ("ct_exit", "ct_py_exit")
                                      if p in progs)
    # the measuring probe and the ring's writing ahead are not the targets' cost
    assert "ct_calib" not in progs and "ct_prefault" not in progs
    assert cost["bpf_ns"] > 0 and cost["hit_ns"] > 0 and cost["return_hit_ns"] > 0, cost
    assert cost["targets_added_ns"] == pytest.approx(
        (cost["probe_hits"] - cost["return_hits"]) * cost["hit_ns"]
        + cost["return_hits"] * cost["return_hit_ns"] + cost["bpf_ns"], rel=1e-9)
    assert cost["tracer_cpu_ns"] > 0
    return cost


def test_cost_launch_mode(bpf, progs, start_tracer, tmp_path):
    """The command's CPU from the kernel's accounting of the tracer's waited-for child."""
    was = STATS.read_text()
    go, js_path = tmp_path / "go", tmp_path / "trace.json"
    tracer = start_tracer(["-v", "--cost", "--json", js_path, "--", progs / "event_rate",
                           progs / "libhccl.so", "--calls", CALLS, "--wait-file", go])
    # The stand-in is dlopen'ed: its calls are traced once its probes are in.
    deadline = time.monotonic() + 60
    while not [l for l in tracer.stderr_lines() if "probes on" in l and "(hccl)" in l]:
        assert time.monotonic() < deadline, tracer.describe()
        assert tracer.proc.poll() is None, tracer.describe()
        time.sleep(0.05)
    touch(go)
    assert tracer.wait(timeout=120) == 0, tracer.describe()
    assert STATS.read_text() == was, "--cost left the kernel's BPF statistics changed"
    js = load_trace_json(js_path)
    assert js["total_counts"] == CALLS + 2  # + HcclCommInitRootInfo, HcclCommDestroy
    # Every page of the default 8 MiB ring was written once before the first probe, and
    # those records, discarded, are neither counted nor lost.
    assert "commtrace: ring buffer: 2048 pages written ahead of the first probe" in \
        tracer.stderr_lines(), tracer.describe()
    assert js["dropped_events"] == 0, js["drops"]
    cost = check_cost(js)
    # The command's CPU holds the probes' cost: at least what the BPF programs ran.
    assert cost["targets_cpu_ns"] >= cost["bpf_ns"], cost
    line = [l for l in tracer.stderr_lines() if l.startswith("commtrace: cost: ")]
    assert len(line) == 1, tracer.describe()
    assert f"{cost['probe_hits']} probe hits ({cost['return_hits']} at returns) x" in line[0], \
        line


def test_cost_attach_target_exits_first(bpf, progs, reaper, start_tracer, tmp_path):
    go, out = tmp_path / "go", tmp_path / "target.out"
    target = reaper.popen([progs / "event_rate", progs / "libhccl.so", "--calls", CALLS,
                           "--wait-file", go], stdout=open(out, "w"))
    wait_files([f"{go}.pid"], procs=[target])
    js_path = tmp_path / "trace.json"
    tracer = start_tracer(["-q", "--cost", "-p", read_pid(f"{go}.pid"), "--json", js_path])
    tracer.wait_attached()
    touch(go)
    assert wait_proc(target, 120, "event_rate") == 0
    assert tracer.wait(timeout=60) == 0, tracer.describe()
    js = load_trace_json(js_path)
    assert js["total_counts"] == CALLS + 2
    cost = check_cost(js)
    own = made(out)["cpu_ns"]  # the target's CPU from its start, all threads
    # Gone before the tracer: its CPU over the trace is the exit tracepoint's figure less
    # what /proc said at attach (in clock ticks: 10 ms each way). It waited for the go file
    # before its calls, which ran traced.
    assert cost["targets_cpu_ns"] is not None, cost
    assert own * 0.8 - 20e6 <= cost["targets_cpu_ns"] <= own + 20e6, (own, cost)
    assert cost["targets_cpu_ns"] >= cost["bpf_ns"], cost


def test_no_cost_without_the_option(bpf, progs, tmp_path):
    js_path = tmp_path / "trace.json"
    r = run_tracer(["--json", js_path, "--", progs / "event_rate", progs / "libhccl.so",
                    "--calls", 100], timeout=120)
    assert r.returncode == 0, r.stderr
    assert "cost" not in json.loads(js_path.read_text())
    assert "commtrace: cost:" not in r.stderr


def test_cost_metrics_live(bpf, progs, reaper, start_tracer, tmp_path):
    """--cost with --metrics: the counters while tracing, refreshed every second."""
    go, js_path = tmp_path / "go", tmp_path / "trace.json"
    target = reaper.popen([progs / "event_rate", progs / "libhccl.so", "--calls", 3000,
                           "--rate", 1000, "--wait-file", go], stdout=subprocess.DEVNULL)
    wait_files([f"{go}.pid"], procs=[target])
    tracer = start_tracer(["-q", "--cost", "--metrics", "0", "-p", read_pid(f"{go}.pid"),
                           "--json", js_path])
    tracer.wait_attached()
    m = re.match(r"^metrics: serving http://(\S+)/metrics$",
                 tracer.wait_line("metrics: serving", timeout=30))
    assert m, tracer.describe()
    touch(go)
    deadline, seen = time.monotonic() + 60, {}
    hits = lambda: sum(v for k, v in seen.items() if k.startswith("commtrace_probe_hits_total"))
    while hits() < 1000:  # one second of calls, both probes
        assert time.monotonic() < deadline and target.poll() is None, (seen, tracer.describe())
        time.sleep(0.2)
        with urllib.request.urlopen(f"http://{m.group(1)}/metrics", timeout=10) as r:
            seen = {l.split()[0]: float(l.split()[1]) for l in r.read().decode().splitlines()
                    if l.startswith("commtrace_")}
    entry, ret = (seen[f'commtrace_probe_hits_total{{probe="{k}"}}'] for k in ("entry", "return"))
    price = {k: seen[f'commtrace_probe_hit_seconds{{probe="{k}"}}'] for k in ("entry", "return")}
    assert price["entry"] > 0 and price["return"] > 0, seen
    assert seen["commtrace_bpf_seconds_total"] > 0, seen
    assert seen["commtrace_targets_added_cpu_seconds_total"] == pytest.approx(
        entry * price["entry"] + ret * price["return"] + seen["commtrace_bpf_seconds_total"],
        rel=1e-6, abs=1e-9), seen
    assert seen["commtrace_tracer_cpu_seconds_total"] > 0, seen
    assert wait_proc(target, 120, "event_rate") == 0
    assert tracer.wait(timeout=60) == 0, tracer.describe()
    cost = check_cost(load_trace_json(js_path))
    # The final counts hold everything the live ones did, and the same one-hit figure.
    assert cost["probe_hits"] >= entry + ret and cost["return_hits"] >= ret
    assert cost["hit_ns"] == pytest.approx(price["entry"] * 1e9, rel=1e-6)
    assert cost["return_hit_ns"] == pytest.approx(price["return"] * 1e9, rel=1e-6)
