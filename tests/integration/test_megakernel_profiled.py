# SPDX-License-Identifier: MIT
"""tests/workloads/megakernel_profiled.py without a GPU: its `check` (what
scripts/gpu-check.sh runs on the fused trace of the real CUDA kernel) against constructed
Kineto traces shaped like torch.profiler's (user_annotation ranges, cuda_runtime launches
and kernel events sharing a correlation id, other kernels between), fused by the real
`devprof fuse`; and the session's schedule against torch.profiler.schedule's. The run on
the GPU itself is step_devprof of scripts/gpu-check.sh (docs/devprof.md).
"""
import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TRACER = Path(os.environ.get("COMMTRACE_BPF", REPO / "commtrace-bpf")).resolve()
SCRIPT = REPO / "tests" / "workloads" / "megakernel_profiled.py"
PYTHON = "/usr/bin/python3"
KERNEL = "megakernel(mk_config)"  # as Kineto names the CUDA kernel


def devprof(*args, check=0):
    p = subprocess.run([str(TRACER), "devprof", *map(str, args)], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == check, (args, p.stdout, p.stderr)
    return p


def kineto(path, pre, calls, dur=10.0, runtime=True):
    """What torch.profiler records of megakernel_profiled.py run: per call a CPU range
    holding the launch, the kernel on stream 7, then an elementwise torch kernel."""
    ev = [{"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}}]
    keys = [f"pre {i}" for i in range(pre)] + [f"session {s}" for s in range(calls)]
    for n, key in enumerate(keys):
        t = 1000.0 + 200 * n
        corr = 10 * n + 1
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"mk_call {key}", "pid": 42,
                   "tid": 42, "ts": t, "dur": 150.0, "args": {}})
        if runtime:
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 42,
                       "tid": 42, "ts": t + 20, "dur": 4.0, "args": {"correlation": corr}})
        ev.append({"ph": "X", "cat": "kernel", "name": KERNEL, "pid": 0, "tid": 7,
                   "ts": t + 30, "dur": dur, "args": {"correlation": corr, "stream": 7}})
        ev.append({"ph": "X", "cat": "kernel", "name": "vectorized_elementwise_kernel",
                   "pid": 0, "tid": 7, "ts": t + 170, "dur": 2.0,
                   "args": {"correlation": corr + 1}})
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": ev}))


def make_inputs(tmp_path, pre=2, calls=25, **kw):
    """The generator's "multi" buffer: invocation_seq 20, 21, 22 of a session, 1 AIC +
    2 AIV cores, 15 records each over 4.44 us."""
    buf, trace, man = tmp_path / "mk.bin", tmp_path / "kineto.json", tmp_path / "manifest.json"
    devprof("gen", "--scenario", "multi", "-o", buf)
    kineto(trace, pre, calls, **kw)
    man.write_text(json.dumps({
        "trace": str(trace), "buffer": str(buf), "kernel": "megakernel", "pre": pre,
        "calls": calls, "actions": [], "torch_schedule_actions": [], "saved_seqs": [20, 21, 22],
        "aic": 1, "aiv": 2, "records_per_call": 15}))
    return buf, trace, man


def check(man, fused):
    p = subprocess.run([PYTHON, str(SCRIPT), "check", "--manifest", str(man), "--fused",
                        str(fused)], capture_output=True, text=True, timeout=120)
    last = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
    return p.returncode, last, p.stdout + p.stderr


@pytest.mark.parametrize("runtime", [True, False], ids=["by-correlation", "by-time"])
def test_check_passes(tmp_path, runtime):
    buf, trace, man = make_inputs(tmp_path, runtime=runtime)
    fused = tmp_path / "fused.json"
    devprof("fuse", "--device", buf, "--profiler", trace, "--skip", 2, "-o", fused)
    rc, last, out = check(man, fused)
    assert rc == 0, out
    assert last.startswith("devprof fusion check: PASS: 3 sampled invocations "
                           "(invocation_seq 20,21,22) of 25 session calls after 2 "
                           "pre-session calls (--skip 2)"), out
    assert ("'correlation': 27" if runtime else "'time': 27") in last, last
    assert "3 of 3 invocations aligned to their own call's kernel event" in last, last
    assert "45 records (15 per invocation) on 3 AIC/AIV tracks each" in last, last
    assert "outside their own kernel event: 0 " in last, last


def test_check_fails_on_the_wrong_kernels(tmp_path):
    """--skip 0 puts invocation_seq 20 on the trace's 21st MegaKernel event, which is
    session call 18: well inside a kernel event, but the wrong one."""
    buf, trace, man = make_inputs(tmp_path)
    fused = tmp_path / "fused.json"
    devprof("fuse", "--device", buf, "--profiler", trace, "-o", fused)
    rc, last, out = check(man, fused)
    assert rc == 1 and last.startswith("devprof fusion check: FAIL"), out
    assert "0 of 3 invocations aligned to their own call's kernel event" in last, last
    assert "skip 0 but 2 pre-session calls" in out
    assert "invocation 0 (invocation_seq 20) aligned to trace event" in out


def test_check_fails_outside_the_kernel(tmp_path):
    """Kernel events of 3 us for 4.44 us of records: records past the kernel's end."""
    buf, trace, man = make_inputs(tmp_path, dur=3.0)
    fused = tmp_path / "fused.json"
    devprof("fuse", "--device", buf, "--profiler", trace, "--skip", 2, "-o", fused)
    rc, last, out = check(man, fused)
    assert rc == 1 and "by more than 1.0 us" in out, out
    assert "fuse's out_of_range 6" in last, last


def test_check_fails_without_fused_trace(tmp_path):
    _, _, man = make_inputs(tmp_path)
    rc, last, out = check(man, tmp_path / "missing.json")
    assert rc == 1 and last == "devprof fusion check: FAIL (1 problems): nothing to check", out


@pytest.mark.parametrize("sched", [(2, 1, 1, 2, 2), (1, 1, 1, 2, 1), (0, 0, 0, 3, 0),
                                   (3, 2, 0, 1, 3)])
def test_session_schedule_is_torch_profiler_schedule(sched):
    """The C session (`devprof schedule`, the same header code the library runs) decides
    what torch.profiler.schedule decides, step by step."""
    steps = 20
    p = devprof("schedule", "--skip-first", sched[0], "--wait", sched[1], "--warmup", sched[2],
                "--active", sched[3], "--repeat", sched[4], "--steps", steps, "--json")
    ours = [r["action"] for r in json.loads(p.stdout)]
    code = ("import json, sys, warnings\nwarnings.simplefilter('ignore')\n"
            "from torch.profiler import schedule\n"
            f"fn = schedule(skip_first={sched[0]}, wait={sched[1]}, warmup={sched[2]}, "
            f"active={sched[3]}, repeat={sched[4]})\n"
            f"print(json.dumps([fn(s).name.lower() for s in range({steps})]))")
    r = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=300)
    if r.returncode:
        pytest.fail(f"torch.profiler.schedule failed: {r.stderr[-2000:]}")
    assert ours == json.loads(r.stdout)
