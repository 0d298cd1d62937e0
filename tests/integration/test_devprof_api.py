# SPDX-License-Identifier: MIT
"""The Python API of device profiling, commtrace.devprof (python/commtrace/devprof.py over
build/libcommtrace-devprof.so), through whole schedules with the real C recorder
(build/progs/libmkhost.so: a MegaKernel on the host), on torch 1.13 here and torch 2.6 in
the Debian 13 root. Which calls got a buffer is checked against torch.profiler.schedule's
decisions for the same numbers; the saved windows, their Chrome traces and their fusion
into the torch.profiler trace of the same run are checked exactly. Bad input raises."""
import ctypes
import json
import os
import shutil
import subprocess
import sys
from collections import Counter

import pytest

from conftest import PROGS, PYTHON, REPO

sys.path.insert(0, str(REPO / "python"))
from commtrace import devprof  # noqa: E402

LIB = REPO / "build" / "libcommtrace-devprof.so"
MK = PROGS / "libmkhost.so"
WORKLOAD = REPO / "tests" / "workloads" / "devprof_api.py"
KEPT = ("RECORD", "RECORD_AND_SAVE")
FUSE_TID_BASE = 0x40000000


@pytest.fixture(scope="module", autouse=True)
def built():
    missing = [str(p) for p in (LIB, MK) if not p.exists()]
    if missing:
        pytest.fail(f"not built: {', '.join(missing)}: run `make devprof-lib progs`")


def load(path):
    with open(path) as f:
        return json.load(f)


def expected_windows(m):
    """The windows torch.profiler.schedule's actions call for: the sampled calls of the
    kept steps, cut after each RECORD_AND_SAVE step; what is left at the end, cut short."""
    out, cur = [], []
    for step, action in enumerate(m["torch_actions"]):
        cur += [[c["step"], c["seq"]] for c in m["calls"] if c["step"] == step and c["sampled"]
                and action in KEPT]
        if action == "RECORD_AND_SAVE" and cur:
            out.append((cur, True))
            cur = []
    return out + ([(cur, False)] if cur else [])


def check_chrome(m, w):
    """The decoded window: one process per invocation, a track per core, 3 records a
    task named by the builder's stage names, with its owner label."""
    doc = load(w["chrome"])
    tasks = m["aic_tasks"] + m["aiv_tasks"]
    ntask, stages, owners = sum(tasks), m["stages"], m["owners"]
    xs = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    want = Counter()
    for _ in w["invocations"]:
        for t in range(ntask):
            s = stages[t % len(stages)]
            want.update([f"Wait {s}", s, f"Trigger {s}"])
    assert Counter(e["name"] for e in xs) == want
    assert all(e["args"]["owner"] == owners[e["args"]["task_id"] % len(owners)] for e in xs)
    threads = Counter(e["args"]["name"] for e in doc["traceEvents"]
                      if e["ph"] == "M" and e["name"] == "thread_name")
    cores = [f"AIC {i}" for i in range(len(m["aic_tasks"]))] + \
        [f"AIV {i}" for i in range(len(m["aiv_tasks"]))]
    assert threads == Counter({c: len(w["invocations"]) for c in cores})
    invs = doc["metadata"]["commtrace_devprof"]["invocations"]
    assert [[i["step"], i["invocation_seq"]] for i in invs] == w["invocations"]
    per_core = Counter((e["args"]["invocation"], e["args"]["core"]) for e in xs)
    assert per_core == Counter({(k, c): 3 * n for k in range(len(invs))
                                for c, n in zip(cores, tasks)})


def check_fused(m, w):
    """Fused into the torch.profiler trace of the run: each invocation on the
    record_function range of its own call (found by name, not by the fusion's count),
    every record there."""
    doc = load(w["fused"])
    md = doc["metadata"]["commtrace_devprof"]
    assert (md["alignment"], md["host_alignment"], md["align_by"]) == \
        ("host_event", True, "invocation_seq")
    assert [(i["invocation_seq"], i["aligned_to"]["name"]) for i in md["invocations"]] == \
        [(seq, f"{m['kernel']} call {seq}") for _, seq in w["invocations"]]
    recs = [e for e in doc["traceEvents"] if e.get("ph") == "X" and
            isinstance(e.get("tid"), int) and e["tid"] >= FUSE_TID_BASE]
    per = 3 * sum(m["aic_tasks"] + m["aiv_tasks"])
    assert Counter(e["args"]["invocation"] for e in recs) == \
        Counter({k: per for k in range(len(w["invocations"]))})
    assert md["out_of_range"]["count"] == 0


def check_manifest(m):
    steps, cps, mps = m["steps"], m["calls_per_step"], m["max_per_step"]
    per = 3 * sum(m["aic_tasks"] + m["aiv_tasks"])
    assert m["outside"] == {"sampled": False, "config": "00" * 24, "records": 0}
    assert len(m["torch_actions"]) == steps and len(m["calls"]) == steps * cps
    for c in m["calls"]:
        want = m["torch_actions"][c["step"]]
        if mps and c["call"] >= mps:
            want = "NONE"
        assert (c["action"], c["sampled"], c["records"], c["seq"]) == \
            (want, want != "NONE", per if want != "NONE" else 0, c["step"] * cps + c["call"]), c
    want = expected_windows(m)
    assert want, "the schedule keeps no step: nothing would be checked"
    assert [(w["invocations"], w["complete"]) for w in m["windows"]] == want
    for k, w in enumerate(m["windows"]):
        n = len(w["invocations"])
        assert w["index"] == k and w["path"].endswith(f"{m['kernel']}.rank0.window{k}.bin")
        assert os.path.getsize(w["path"]) == n * m["nbytes"]
        assert (w["records"], w["dropped"]) == (n * per, 0)
        assert w["validate"] == {"invocations": n, "records": n * per, "dropped": 0}
        check_chrome(m, w)
        check_fused(m, w)
    assert m["refused"]["class"] == "HostAlignmentRefused" and m["refused"]["code"] == 22
    assert not m["refused"]["written"]


def run_workload(cmd, out, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    return load(out / "manifest.json")


CASES = {
    # skip_first, wait, warmup, active, repeat: two full cycles and a cut-short third
    "two_cycles": ("1,1,1,2,2", 12, 2, 0, "host"),
    "forever_cut_at_exit": ("0,1,0,3,0", 7, 1, 0, "host"),
    "max_per_step_torch_memory": ("0,0,1,2,0", 6, 3, 1, "torch"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_devprof_api_through_a_schedule(tmp_path, case):
    sched, steps, cps, mps, memory = CASES[case]
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    m = run_workload([PYTHON, str(WORKLOAD), "--mk", str(MK), "--out", str(out), "--schedule",
                      sched, "--steps", str(steps), "--calls-per-step", str(cps),
                      "--max-per-step", str(mps), "--memory", memory], out, env)
    assert m["torch"].startswith("1.13")
    check_manifest(m)
    if case == "forever_cut_at_exit":
        assert [w["complete"] for w in m["windows"]] == [True, False]


def test_devprof_api_torch26(torch2_root, tmp_path):
    """The same API under torch 2.6 (CPython 3.13) in the Debian 13 root, with 2.6's
    skip_first_wait; the package and library found in the tree layout (python/, build/)."""
    inner = "/opt/commtrace/devprof_api"
    top = torch2_root.host("/opt/commtrace")
    shutil.rmtree(top / "python", ignore_errors=True)
    shutil.copytree(REPO / "python", top / "python")
    (top / "build").mkdir(exist_ok=True)
    shutil.copy2(LIB, top / "build" / LIB.name)
    shutil.copy2(MK, top / "progs" / MK.name)
    m = run_workload(["chroot", str(torch2_root.path), "env", "PYTHONPATH=/opt/commtrace/python",
                      "python3", "/opt/commtrace/workloads/devprof_api.py", "--mk",
                      "/opt/commtrace/progs/libmkhost.so", "--out", inner, "--schedule",
                      "2,3,1,2,2,1", "--steps", "16", "--calls-per-step", "2"],
                     torch2_root.host(inner))
    assert m["torch"].startswith("2.6") and m["python"].startswith("3.13")
    assert m["schedule"]["skip_first_wait"] == 1
    for w in m["windows"]:  # the manifest names paths inside the root
        for k in ("path", "chrome", "fused"):
            w[k] = str(torch2_root.host(w[k]))
    check_manifest(m)
    # skip_first_wait: the first cycle's warmup right after skip_first
    assert m["torch_actions"][:6] == ["NONE", "NONE", "WARMUP", "RECORD", "RECORD_AND_SAVE",
                                      "NONE"]


# ---------------------------------------------------------------------------------------
# Bad input, in this process (no torch)


def kernel(name="k", **kw):
    args = dict(aic_tasks=[2], aiv_tasks=[3], stage_names=["a", "b"], owner_labels=["l0"])
    args.update(kw)
    return devprof.MegaKernel(name, **args)


def mk_lib():
    lib = ctypes.CDLL(str(MK))
    lib.mkh_run.restype = ctypes.c_int64
    return lib


def run_mk(lib, launch):
    aic, aiv = (ctypes.c_uint32 * 1)(2), (ctypes.c_uint32 * 1)(3)
    return lib.mkh_run(ctypes.byref(launch.config), 1, aic, 1, aiv, 2, 1)


@pytest.mark.parametrize("args, what", [
    (dict(active=0), "active >= 1"),
    (dict(wait=-1), "wait must be an integer"),
    (dict(active=True), "active must be an integer"),
    (dict(warmup="1"), "warmup must be an integer"),
    (dict(repeat=1 << 32), "repeat must be an integer"),
])
def test_bad_schedule_raises(args, what):
    with pytest.raises(devprof.ScheduleError, match=what) as e:
        devprof.schedule(**args)
    assert e.value.code == 2


def test_schedule_matches_torch_profiler():
    from torch.profiler import schedule
    for nums in [(0, 0, 0, 1, 0), (1, 2, 1, 3, 2), (5, 0, 2, 1, 1), (0, 3, 0, 2, 0)]:
        names = dict(zip(["skip_first", "wait", "warmup", "active", "repeat"], nums))
        ours, theirs = devprof.schedule(**names), schedule(**names)
        assert [ours(s).name for s in range(40)] == [theirs(s).name for s in range(40)], nums


def test_bad_kernel_raises():
    with pytest.raises(devprof.MetadataError, match="stage_names") as e:
        kernel(stage_names=["a", 7])
    assert e.value.code == 20
    with pytest.raises(devprof.PlanError, match="no core") as e:
        kernel(aic_tasks=[], aiv_tasks=[])
    assert e.value.code == 24
    with pytest.raises(devprof.PlanError, match="records per task"):
        kernel(records_per_task=65)
    with pytest.raises(devprof.UsageError, match="clock frequency") as e:
        kernel(clock_hz=10)
    assert e.value.code == 15
    k = kernel()
    assert k.nbytes == 64 + (16 + 16 * 40) * 2 + len(k.meta) + (-len(k.meta)) % 8
    with pytest.raises(devprof.BufferTooSmallError, match=f"needs {k.nbytes} bytes") as e:
        kernel(max_bytes=k.nbytes - 1)
    assert e.value.code == 12


def test_outside_a_profile_nothing_samples():
    lib, k = mk_lib(), kernel()
    launch = devprof.profile_buffer(k)
    assert not launch.sampled and bytes(launch.config) == bytes(24)
    assert run_mk(lib, launch) == 0
    launch.done()  # harmless
    with pytest.raises(devprof.UsageError, match="takes a MegaKernel"):
        devprof.profile_buffer("k")


class CorruptingMemory(devprof.HostMemory):
    """Host buffers whose copy back has its magic flipped: a buffer damaged on the way."""

    def download(self, buf):
        data = super().download(buf)
        data[0] ^= 0xff
        return data


class ShortMemory(devprof.HostMemory):
    def download(self, buf):
        return super().download(buf)[:100]


@pytest.mark.parametrize("memory, run, error, code, what", [
    (CorruptingMemory(), True, devprof.CorruptBufferError, 10, "k step 0 call 0: .*magic"),
    (ShortMemory(), True, devprof.BufferTooSmallError, 12, "100 bytes came back"),
    (devprof.HostMemory(), False, devprof.EmptyBufferError, 19, "wrote no record"),
])
def test_bad_buffer_raises_and_keeps_what_was_saved(tmp_path, memory, run, error, code, what):
    """A call whose buffer comes back damaged (or empty: the kernel ignored its config)
    raises at step(); the window saved before it stays, and the profile saves the rest."""
    lib, good, bad = mk_lib(), kernel("good"), kernel(memory=memory)
    saved = []
    with pytest.raises(error, match=what) as e:
        with devprof.mega_kernel_profile(schedule=devprof.schedule(active=1), out_dir=tmp_path,
                                         on_trace_ready=saved.append) as prof:
            launch = devprof.profile_buffer(good)
            run_mk(lib, launch)
            launch = devprof.profile_buffer(bad)
            if run:
                run_mk(lib, launch)
            prof.step()
    assert e.value.code == code
    assert [(w.kernel, w.invocations, w.records) for w in saved] == [("good", [(0, 0)], 15)]
    assert devprof.validate(saved[0].path) == {"invocations": 1, "records": 15, "dropped": 0}
    assert devprof._current is None


def test_nested_profiles_refused(tmp_path):
    with devprof.mega_kernel_profile(out_dir=tmp_path):
        with pytest.raises(devprof.UsageError, match="already active"):
            with devprof.mega_kernel_profile(out_dir=tmp_path):
                pass


def test_schedule_argument_must_be_ours(tmp_path):
    from torch.profiler import schedule
    with pytest.raises(devprof.UsageError, match="commtrace.devprof.schedule"):
        devprof.mega_kernel_profile(schedule=schedule(wait=0, warmup=0, active=1))


def test_decode_and_fuse_errors(tmp_path):
    """decode and fuse raise the CLI's error classes and write nothing."""
    tr = REPO / "commtrace-bpf"
    gen = [str(tr), "devprof", "gen", "--scenario", "basic", "-o"]
    for corrupt, error, code in [("kind", devprof.CorruptBufferError, 17),
                                 ("truncate", devprof.BufferTooSmallError, 12)]:
        bad = tmp_path / f"{corrupt}.bin"
        subprocess.run(gen + [str(bad), "--corrupt", corrupt], check=True, timeout=30)
        out = tmp_path / f"{corrupt}.json"
        with pytest.raises(error) as e:
            devprof.decode(bad, out)
        assert e.value.code == code and not out.exists()
        with pytest.raises(error):
            devprof.validate(bad)
    good = tmp_path / "basic.bin"
    subprocess.run(gen + [str(good)], check=True, timeout=30)
    notjson = tmp_path / "trace.json"
    notjson.write_text("{not json")
    with pytest.raises(devprof.TraceError) as e:
        devprof.fuse(good, notjson, tmp_path / "f.json")
    assert e.value.code == 21 and not (tmp_path / "f.json").exists()
    with pytest.raises(devprof.DevprofIOError) as e:
        devprof.decode(tmp_path / "missing.bin", tmp_path / "m.json")
    assert e.value.code == 6
    with pytest.raises(devprof.UsageError, match="display"):
        devprof.decode(good, tmp_path / "d.json", display="all")


def test_missing_library_is_a_clear_error(tmp_path):
    code = ("from commtrace import devprof\n"
            "try:\n    devprof.schedule(active=1)\n"
            "except devprof.LibraryError as e:\n    print('LibraryError:', e)\n")
    r = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PYTHONPATH=str(REPO / "python"),
                                COMMTRACE_DEVPROF_LIB=str(tmp_path / "nope.so")))
    assert r.returncode == 0, r.stderr
    assert "LibraryError: libcommtrace-devprof.so not found" in r.stdout, r.stdout
    assert str(tmp_path / "nope.so") in r.stdout and "make devprof-lib" in r.stdout, r.stdout
