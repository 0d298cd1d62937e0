# SPDX-License-Identifier: MIT
"""`commtrace-bpf devprof`: device profile buffers through the CLI (no root, no BPF),
and the tracer's combined export `--chrome F --device-buffer B` (root and BPF; those
tests skip loudly without them, through the `bpf` fixture of conftest.py).

Buffers come from `devprof gen` (known content, written through the real recorder),
goldens from tests/golden/devprof/, the PyTorch trace from torch 1.13 recorded here
(CPU only) and constructed Kineto traces with device kernel events.
"""
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TRACER = Path(os.environ.get("COMMTRACE_BPF", REPO / "commtrace-bpf")).resolve()
GOLDEN = REPO / "tests" / "golden" / "devprof"
PYTHON = "/usr/bin/python3"
NVCC = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"

SCENARIOS = ["basic", "overflow", "nometa", "multi"]
DEVPROF_TID_BASE = 0x10000  # standalone tracks: base + slot
FUSE_TID_BASE = 0x40000000  # fused tracks: base + lane * 0x1000 + slot


def devprof(*args, check=None):
    p = subprocess.run([str(TRACER), "devprof", *map(str, args)], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    if check is not None and p.returncode != check:
        pytest.fail(f"devprof {' '.join(map(str, args))}: exit {p.returncode}, want {check}\n"
                    f"stdout: {p.stdout}\nstderr: {p.stderr}")
    return p


def gen(tmp_path, scenario, corrupt=None):
    out = tmp_path / f"{scenario}-{corrupt or 'ok'}.bin"
    args = ["gen", "--scenario", scenario, "-o", out]
    if corrupt:
        args += ["--corrupt", corrupt]
    devprof(*args, check=0)
    return out


def check_chrome(doc):
    """The rules Perfetto enforces (docs FACTS: Trace formats); returns the X events."""
    assert isinstance(doc, dict) and isinstance(doc.get("metadata"), dict)
    xs = []
    for e in doc["traceEvents"]:
        ph = e.get("ph")
        if ph == "M":
            if e["name"].endswith("sort_index"):
                assert isinstance(e["args"]["sort_index"], (int, float)), e
            continue
        tid = e["tid"]
        if not isinstance(tid, int) or tid < DEVPROF_TID_BASE:
            continue  # the profiler's own events; ours are the device tracks
        assert e["ts"] >= 0, e
        assert 0 < tid < 2**31, e
        assert tid != e["pid"], e
        if ph == "X":
            assert "dur" in e and e["dur"] >= 0, e
            xs.append(e)
    return xs


def test_help_has_examples():
    for cmd in ["decode", "validate", "fuse", "plan", "schedule", "gen"]:
        p = devprof(cmd, "--help", check=0)
        lines = p.stdout.rstrip("\n").split("\n")
        assert "Examples:" in lines, cmd
        examples = lines[lines.index("Examples:") + 1:]
        assert examples and examples[0].startswith("  commtrace-bpf devprof " + cmd), cmd
        assert all(x.startswith(("  commtrace-bpf devprof " + cmd, "      ")) for x in examples)
    assert devprof("--help", check=0).stdout.startswith("Usage: commtrace-bpf devprof")


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_decode_matches_golden(tmp_path, scenario):
    buf = gen(tmp_path, scenario)
    assert buf.read_bytes() == (GOLDEN / f"{scenario}.bin").read_bytes()
    out = tmp_path / "out.json"
    devprof("decode", buf, "-o", out, check=0)
    assert out.read_text() == (GOLDEN / f"{scenario}.json").read_text()
    doc = json.loads(out.read_text())
    assert doc["schema_version"] == 1
    xs = check_chrome(doc)
    md = doc["metadata"]["commtrace_devprof"]
    assert len(xs) == sum(i["records"] for i in md["invocations"])


def test_decode_full_display_golden(tmp_path):
    out = tmp_path / "full.json"
    devprof("decode", gen(tmp_path, "basic"), "--display", "full", "-o", out, check=0)
    assert out.read_text() == (GOLDEN / "basic_full.json").read_text()
    names = [e["name"] for e in json.loads(out.read_text())["traceEvents"] if e["ph"] == "X"]
    assert names[:3] == ["Wait layer0/attn_qkv[0]", "layer0/attn_qkv[0]",
                         "Trigger layer0/attn_qkv[0]"]
    # desc 3 has no stage name and owner 2 no label in the basic metadata.
    assert "Wait owner_2/stage_3[1]" in names


def test_decode_exact_with_overflow(tmp_path):
    out = tmp_path / "o.json"
    devprof("decode", gen(tmp_path, "overflow"), "-o", out, check=0)
    doc = json.loads(out.read_text())
    xs = check_chrome(doc)
    per_core = {}
    keys = set()
    for e in xs:
        a = e["args"]
        per_core[a["core"]] = per_core.get(a["core"], 0) + 1
        keys.add((a["core"], a["task_id"], a["kind"]))
    assert per_core == {"AIC 0": 16, "AIV 0": 6}
    assert len(keys) == 22  # every record exactly once
    drops = [e for e in doc["traceEvents"] if e["ph"] == "i"]
    assert [(d["args"]["core"], d["args"]["dropped_count"]) for d in drops] == [("AIC 0", 5)]
    cores = doc["metadata"]["commtrace_devprof"]["invocations"][0]["cores"]
    assert [(c["name"], c["records"], c["dropped"], c["capacity"]) for c in cores] == [
        ("AIC 0", 16, 5, 16), ("AIV 0", 6, 0, 16)]
    v = devprof("validate", gen(tmp_path, "overflow"), check=0).stdout
    assert "  AIC 0: 16 records, 5 dropped\n" in v and "22 records, 5 dropped" in v


ERRORS = [
    ("magic", 10, "magic 0x46445025 is not 0x50445443"),
    ("version", 11, "format version 2 is not supported"),
    ("truncate", 12, "truncated, needs 3472 bytes but the file has 3448 left"),
    ("count", 14, "record count 17 exceeds the slot capacity 16"),
    ("end-before-start", 16, "end cycle 5000000000099 is before start cycle 5000000000100"),
    ("freq-zero", 15, "clock frequency is 0 Hz"),
    ("freq-absurd", 15, "clock frequency 1000000000000000 Hz is outside"),
    ("kind", 17, "unknown record kind 9"),
    ("dropped-not-full", 26, "AIC 0: dropped count 3 but the slot holds only 6 of its 16 "
                             "records; a recorder drops only when its slot is full"),
]


@pytest.mark.parametrize("corrupt,code,message", ERRORS, ids=[e[0] for e in ERRORS])
def test_decode_errors(tmp_path, corrupt, code, message):
    buf = gen(tmp_path, "basic", corrupt)
    out = tmp_path / "bad.json"
    p = devprof("decode", buf, "-o", out, check=code)
    assert message in p.stderr, p.stderr
    assert not out.exists(), "no output file on error"
    assert sorted(x.name for x in tmp_path.iterdir()) == [buf.name], "no temp file left"
    assert devprof("validate", buf).returncode == code
    p = devprof("fuse", "--device", buf, "--profiler", GOLDEN / "kineto_gpu.json", "-o", out)
    assert p.returncode == code and not out.exists()


def test_decode_errors_distinct_codes():
    codes = {}
    for corrupt, code, _ in ERRORS:
        codes.setdefault(code, []).append(corrupt)
    # Two frequency errors share the class; every other class has its own code.
    assert len(codes) == 8 and codes[15] == ["freq-zero", "freq-absurd"]


def test_existing_output_kept_on_error(tmp_path):
    out = tmp_path / "keep.json"
    out.write_text("previous")
    devprof("decode", gen(tmp_path, "basic", "kind"), "-o", out, check=17)
    assert out.read_text() == "previous"


def test_metadata_file(tmp_path):
    meta = tmp_path / "meta.json"
    meta.write_text(json.dumps({"kernel": "qwen_mk", "stage_names": ["a", "b", "c", "d"],
                                "owner_labels": {"0": "L0", "1": "L1", "2": "L2"}}))
    out = tmp_path / "m.json"
    devprof("decode", gen(tmp_path, "nometa"), "--meta", meta, "--display", "full", "-o", out,
            check=0)
    doc = json.loads(out.read_text())
    inv = doc["metadata"]["commtrace_devprof"]["invocations"][0]
    assert inv["kernel"] == "qwen_mk"
    assert inv["name_fallbacks"]["metadata"] == "file"
    assert inv["name_fallbacks"]["stage_desc_ids"]["records"] == 0
    assert [e["name"] for e in doc["traceEvents"] if e["ph"] == "X"][1] == "L0/a[0]"
    meta.write_text('{"stage_names": {"one": "x"}}')
    p = devprof("decode", gen(tmp_path, "nometa"), "--meta", meta, "-o", tmp_path / "n.json",
                check=20)
    assert 'key "one" is not a decimal ID' in p.stderr
    assert not (tmp_path / "n.json").exists()


def fused_tracks(doc):
    return [e for e in doc["traceEvents"]
            if isinstance(e.get("tid"), int) and e["tid"] >= FUSE_TID_BASE]


def test_fuse_device_kernels(tmp_path):
    """kineto_gpu.json holds 3 launches; the multi buffer holds calls 20-22: only an
    explicit --align-in-order lays them onto those 3 kernels."""
    out = tmp_path / "fused.json"
    p = devprof("fuse", "--device", gen(tmp_path, "multi"), "--profiler",
                GOLDEN / "kineto_gpu.json", "-o", out, check=27)
    assert ("invocation 0 (invocation_seq 20) belongs to matching device kernel event 20 "
            "(skip 0 + invocation_seq), but the profiler trace has only 3 outer device kernel "
            "event(s) matching \"megakernel\"; 3 of 3 invocation(s) lie past them") in p.stderr
    assert "--align-in-order" in p.stderr and not out.exists()
    devprof("fuse", "--device", gen(tmp_path, "multi"), "--profiler", GOLDEN / "kineto_gpu.json",
            "--align-in-order", "-o", out, check=0)
    doc = json.loads(out.read_text())
    check_chrome(doc)
    d = doc["metadata"]["commtrace_devprof"]
    assert d["alignment"] == "device_kernel" and d["host_alignment"] is False
    assert d["align_by"] == "in_order" and "--align-in-order" in d["align_by_reason"]
    assert [(i["invocation_seq"], i["event_number"]) for i in d["invocations"]] == [
        (20, 0), (21, 1), (22, 2)]
    assert [i["aligned_to"]["ts"] for i in d["invocations"]] == [1030.5, 1130.5, 1230.5]
    assert all(i["aligned_to"]["name"] == "void megakernel_persistent<128>(RuntimeConfig)"
               for i in d["invocations"])
    assert d["out_of_range"]["count"] == 2  # invocation 2's kernel is 3 us for 4.44 us
    new = fused_tracks(doc)
    names = {(e["pid"], e["args"]["name"]) for e in new if e["name"] == "thread_name"}
    assert names == {(0, "AIC 0"), (0, "AIV 0"), (0, "AIV 1")}
    xs = [e for e in new if e["ph"] == "X"]
    assert len(xs) == 45 and all(e["pid"] == 0 for e in xs)
    assert min(e["ts"] for e in xs) == 1030.5
    # Kineto's own top-level fields are kept.
    assert doc["deviceProperties"][0]["name"] == "NVIDIA H200"
    assert doc["distributedInfo"]["world_size"] == 1

    # The decoded JSON fuses to the same output as the buffer.
    dev = tmp_path / "dev.json"
    devprof("decode", gen(tmp_path, "multi"), "-o", dev, check=0)
    out2 = tmp_path / "fused2.json"
    devprof("fuse", "--device", dev, "--profiler", GOLDEN / "kineto_gpu.json", "-o", out2,
            "--align-in-order", check=0)
    assert json.loads(out2.read_text()) == doc


KERNEL = "void megakernel_persistent<128>(RuntimeConfig)"


def kineto_trace(path, n, dur=10.0):
    """A Kineto GPU trace with n launches of the MegaKernel (calls 0..n-1 of its session),
    each after an unrelated sgemm on the same stream: launch i at 1000 + 100 i us."""
    events = [{"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}}]
    for i in range(n):
        t = 1000.0 + 100 * i
        events.append({"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_tn", "pid": 0,
                       "tid": 7, "ts": t - 20, "dur": 8.0, "args": {"correlation": 2 * i}})
        events.append({"ph": "X", "cat": "kernel", "name": KERNEL, "pid": 0, "tid": 7,
                       "ts": t, "dur": dur, "args": {"correlation": 2 * i + 1}})
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return [(1000.0 + 100 * i, 1000.0 + 100 * i + dur) for i in range(n)]


def records_by_invocation(doc):
    out = {}
    for e in fused_tracks(doc):
        if e["ph"] == "X":
            out.setdefault(e["args"]["invocation"], []).append(e)
    return out


def assert_inside(doc, kernels, want):
    """Every record of invocation k lies inside kernels[want[k]] and in no other kernel."""
    recs = records_by_invocation(doc)
    assert sorted(recs) == list(range(len(want)))
    for k, events in recs.items():
        lo, hi = kernels[want[k]]
        for e in events:
            assert lo <= e["ts"] and e["ts"] + e["dur"] <= hi, (k, want[k], e)
    assert sum(map(len, recs.values())) == 45


def test_fuse_aligns_by_invocation_seq(tmp_path):
    """The multi buffer holds calls 20, 21 and 22 of the kernel's session: in a trace that
    saw 25 launches from the start they belong to launches 20-22, not 0-2."""
    prof, out = tmp_path / "kineto25.json", tmp_path / "fused.json"
    kernels = kineto_trace(prof, 25)
    buf = gen(tmp_path, "multi")
    devprof("fuse", "--device", buf, "--profiler", prof, "-o", out, check=0)
    doc = json.loads(out.read_text())
    check_chrome(doc)
    d = doc["metadata"]["commtrace_devprof"]
    assert d["align_by"] == "invocation_seq" and "skip + s" in d["align_by_reason"]
    assert [(i["invocation_seq"], i["event_number"], i["aligned_to"]["ts"])
            for i in d["invocations"]] == [(20, 20, 3000.0), (21, 21, 3100.0), (22, 22, 3200.0)]
    assert d["unaligned_events"] == 22 and d["out_of_range"]["count"] == 0
    assert_inside(doc, kernels, [20, 21, 22])

    # --skip N: N launches before the session's call 0.
    devprof("fuse", "--device", buf, "--profiler", prof, "--skip", 2, "-o", out, check=0)
    assert_inside(json.loads(out.read_text()), kernels, [22, 23, 24])

    # A window with gaps (calls 3, 5 and 9 sampled) lands on those launches.
    dev = tmp_path / "dev.json"
    devprof("decode", buf, "-o", dev, check=0)
    djs = json.loads(dev.read_text())
    for inv, seq in zip(djs["metadata"]["commtrace_devprof"]["invocations"], [3, 5, 9]):
        inv["invocation_seq"] = seq
    dev.write_text(json.dumps(djs))
    prof10 = tmp_path / "kineto10.json"
    kernels10 = kineto_trace(prof10, 10)
    devprof("fuse", "--device", dev, "--profiler", prof10, "-o", out, check=0)
    assert_inside(json.loads(out.read_text()), kernels10, [3, 5, 9])


def test_fuse_too_few_kernels_for_invocation_seq(tmp_path):
    """Calls 20-22 against a trace of 21 launches: refused with the precise reason, or,
    when asked for, aligned in order and said so in the metadata."""
    prof, out = tmp_path / "kineto21.json", tmp_path / "fused.json"
    kernels = kineto_trace(prof, 21)
    buf = gen(tmp_path, "multi")
    p = devprof("fuse", "--device", buf, "--profiler", prof, "-o", out, check=27)
    assert ("devprof: invocation 1 (invocation_seq 21) belongs to matching device kernel "
            "event 21 (skip 0 + invocation_seq), but the profiler trace has only 21 outer "
            "device kernel event(s) matching \"megakernel\"; 2 of 3 invocation(s) lie past "
            "them") in p.stderr, p.stderr
    assert not out.exists()
    devprof("fuse", "--device", buf, "--profiler", prof, "--align-in-order", "--skip", 18,
            "-o", out, check=0)
    doc = json.loads(out.read_text())
    d = doc["metadata"]["commtrace_devprof"]
    assert d["align_by"] == "in_order" and "invocation_seq is not used" in d["align_by_reason"]
    assert [i["event_number"] for i in d["invocations"]] == [18, 19, 20]
    assert d["warnings"] == []  # 20, 21, 22 are consecutive
    assert_inside(doc, kernels, [18, 19, 20])


def record_cpu_trace(path):
    code = f"""
import torch
from torch.profiler import profile, record_function, ProfilerActivity
x = torch.randn(64, 64)
with profile(activities=[ProfilerActivity.CPU]) as p:
    for i in range(3):
        with record_function("megakernel"):
            y = torch.relu(x @ x)
p.export_chrome_trace({str(path)!r})
"""
    r = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        pytest.fail(f"torch profiler failed: {r.stderr[-2000:]}")


@pytest.mark.parametrize("source", ["recorded-now", "committed"])
def test_fuse_real_torch_cpu_trace(tmp_path, source):
    prof = tmp_path / "torch.json"
    if source == "recorded-now":
        record_cpu_trace(prof)
    else:
        shutil.copy(GOLDEN / "torch113_cpu.json", prof)
    events = json.loads(prof.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    mk = sorted(e["ts"] for e in events if e.get("name") == "megakernel" and e.get("ph") == "X")
    assert len(mk) == 3
    assert not any(e.get("cat") == "kernel" for e in events), "CPU only: no device kernel"

    buf = gen(tmp_path, "multi")
    out = tmp_path / "fused.json"
    p = devprof("fuse", "--device", buf, "--profiler", prof, "-o", out, check=22)
    assert "host-only (CPU) trace; refusing" in p.stderr
    assert not out.exists()

    p = devprof("fuse", "--device", buf, "--profiler", prof, "--allow-host-align", "-o", out,
                check=27)
    assert "belongs to matching host event 20" in p.stderr and not out.exists()
    devprof("fuse", "--device", buf, "--profiler", prof, "--allow-host-align",
            "--align-in-order", "-o", out, check=0)
    doc = json.loads(out.read_text())
    check_chrome(doc)
    d = doc["metadata"]["commtrace_devprof"]
    assert d["host_alignment"] is True and d["alignment"] == "host_event"
    assert any("host events" in w for w in d["warnings"])
    assert [i["aligned_to"]["ts"] for i in d["invocations"]] == mk
    assert all(i["aligned_to"]["host"] is True for i in d["invocations"])
    xs = [e for e in fused_tracks(doc) if e["ph"] == "X"]
    assert len(xs) == 45
    assert {e["pid"] for e in xs} == {"CPU functions"}
    assert min(e["ts"] for e in xs) == mk[0]


def test_fuse_errors(tmp_path):
    buf = gen(tmp_path, "multi")
    out = tmp_path / "f.json"
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [')
    p = devprof("fuse", "--device", buf, "--profiler", bad, "-o", out, check=21)
    assert "is not valid JSON" in p.stderr
    bad.write_text('{"schemaVersion": 1}')
    assert "no \"traceEvents\" array" in devprof("fuse", "--device", buf, "--profiler", bad,
                                                 "-o", out, check=21).stderr
    p = devprof("fuse", "--device", buf, "--profiler", GOLDEN / "kineto_gpu.json", "--skip", 1,
                "--align-in-order", "-o", out, check=23)
    assert "has 3 invocation(s) but the profiler trace has 3 outer device kernel" in p.stderr
    bad.write_text('{"schema_version": 1, "traceEvents": []}')
    devprof("fuse", "--device", bad, "--profiler", GOLDEN / "kineto_gpu.json", "-o", out,
            check=25)
    assert not out.exists()


def test_plan():
    p = devprof("plan", "--aic-tasks", "5,3,0", "--aiv-tasks", "11,2", "--json", check=0)
    assert json.loads(p.stdout) == {
        "aic_cores": 3, "aiv_cores": 2, "aic_max_tasks": 5, "aiv_max_tasks": 11,
        "aic_capacity": 16, "aiv_capacity": 48, "aic_expected_drops": 0,
        "aiv_expected_drops": 0, "bytes": 64 + 3 * (16 + 16 * 40) + 2 * (16 + 48 * 40)}
    p = devprof("plan", "--aic-tasks", "100", "--aiv-tasks", "", check=0)
    assert "capacity 256 records" in p.stdout and "expect 44 AIC and 0 AIV" in p.stdout
    assert devprof("plan", "--aic-tasks", "1,x", "--aiv-tasks", "1").returncode == 2
    assert devprof("plan", "--aic-tasks", "", "--aiv-tasks", "", check=24).stderr


def test_schedule():
    p = devprof("schedule", "--skip-first", 1, "--wait", 1, "--warmup", 1, "--active", 2,
                "--repeat", 1, "--steps", 7, "--calls-per-step", 2, "--max-per-step", 1,
                "--json", check=0)
    rows = json.loads(p.stdout)
    assert [(r["step"], r["call"], r["action"]) for r in rows if r["profile_enable"]] == [
        (2, 0, "warmup"), (3, 0, "record"), (4, 0, "record_and_save")]
    assert len(rows) == 14
    assert devprof("schedule", "--active", 0, "--steps", 3).returncode == 2
    # torch 2.6's skip_first_wait: the first warmup right after skip_first
    p = devprof("schedule", "--skip-first", 1, "--wait", 2, "--warmup", 1, "--active", 1,
                "--skip-first-wait", 1, "--steps", 6, "--json", check=0)
    assert [r["action"] for r in json.loads(p.stdout)] == [
        "none", "warmup", "record_and_save", "none", "none", "warmup"]
    # options match whole names: --skip (fuse's) is not --skip-first
    p = devprof("schedule", "--skip", 1, "--active", 1, "--steps", 1)
    assert p.returncode == 2 and "--skip does not apply" in p.stderr


def test_usage_errors(tmp_path):
    assert devprof("nope").returncode == 2
    assert devprof().returncode == 2
    assert devprof("decode", "--display", "fancy", "x", "-o", "y").returncode == 2
    assert devprof("decode", "--pid-base", "-1", "x", "-o", "y").returncode == 2
    assert devprof("gen", "--scenario", "basic", "--corrupt", "zzz", "-o",
                   tmp_path / "z").returncode == 2
    p = devprof("decode", tmp_path / "missing.bin", "-o", tmp_path / "o.json", check=6)  # I/O (3 is "BPF unavailable")
    assert "cannot open" in p.stderr


def test_recorder_sampling_off_guard_page():
    """FR-03 on the host: no clock, no barrier, no buffer or owner load when off."""
    prog = REPO / "build" / "progs" / "devprof_guard"
    r = subprocess.run(["make", "-s", str(prog.relative_to(REPO))], cwd=REPO,
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        pytest.fail(f"building devprof_guard failed: {r.stderr[-2000:]}")
    p = subprocess.run([str(prog)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert ("off: 0 clock reads, 0 barriers, no fault over 2400 records; "
            "on: 4800 clock reads, 800 barriers; on against the guard page: SIGSEGV") in p.stdout


def test_megakernel_builds_with_nvcc(tmp_path):
    """The program, and the shared library (-DMK_LIBRARY, for sm_90 as scripts/gpu-check.sh
    builds it) that tests/workloads/megakernel_profiled.py loads with ctypes: its C entry
    points are exported, it has no main, and without a usable GPU mk_open() fails with a
    message instead of exiting its host process."""
    if not os.access(NVCC, os.X_OK):
        pytest.skip(f"no nvcc at {NVCC}: the CUDA MegaKernel cannot be built here")
    r = subprocess.run([NVCC, "-O2", "-Iinclude", "-o", str(tmp_path / "megakernel"),
                        "tests/progs/megakernel.cu"], cwd=REPO, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "megakernel").stat().st_size > 0
    lib = tmp_path / "libmegakernel.so"
    r = subprocess.run([NVCC, "-O2", "-arch=sm_90", "-Iinclude", "-shared", "-Xcompiler",
                        "-fPIC", "-DMK_LIBRARY", "-o", str(lib), "tests/progs/megakernel.cu"],
                       cwd=REPO, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    nm = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True,
                        text=True, check=True).stdout
    syms = {line.split()[-1] for line in nm.splitlines() if line.strip()}
    assert {"mk_open", "mk_call", "mk_close", "mk_run", "mk_cost", "mk_info",
            "mk_error"} <= syms and "main" not in syms
    code = f"""
import ctypes
lib = ctypes.CDLL({str(lib)!r})
lib.mk_open.restype = ctypes.c_void_p
lib.mk_close.argtypes = [ctypes.c_void_p]
lib.mk_error.restype = ctypes.c_char_p
h = lib.mk_open(None, 0, 0, 0, 1, 0)
print("opened" if h else "error: " + lib.mk_error().decode())
if h:
    lib.mk_close(h)
"""
    p = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(("opened", "error: cuda")), p.stdout + p.stderr


# ---------------------------------------------------------------------------------------
# The tracer's combined export: --chrome FILE --device-buffer BUF [--device-sync CYCLE@NS]

GEN_BASE_CYCLE = 5000000000000  # the generator's first cycle (1 GHz clock)


def run_combined(tmp_path, buf, *extra, after_attach=None):
    """The tracer on the HCCL driver with the combined export; after_attach() runs once
    the probes are in place, while the driver still waits (1 s) before its calls."""
    out, rep = tmp_path / "trace.json", tmp_path / "r.json"
    p = subprocess.Popen([str(TRACER), "-q", "--json", str(rep), "--chrome", str(out),
                          "--device-buffer", str(buf), *map(str, extra), "--",
                          str(REPO / "build/progs/hccl_driver"),
                          str(REPO / "build/progs/libhccl.so"), "--rank", "0", "--nranks", "2",
                          "--settle-ms", "1000"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        head = []
        if after_attach:
            for line in p.stderr:
                head.append(line)
                if line.startswith("attached:"):
                    after_attach()
                    break
        stdout, stderr = p.communicate(timeout=180)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return subprocess.CompletedProcess(p.args, p.returncode, stdout, "".join(head) + stderr), \
        out, rep


def device_x(trace):
    return [e for e in trace["traceEvents"] if e.get("ph") == "X"
            and 0x10000 <= e.get("tid", 0) < 0x10800 and e.get("pid", 0) >= 0x1000000]


BAD_BUFFERS = [
    ("kind", 17, "unknown record kind 9", ()),
    # Readable when the tracer starts, gone when it writes the trace.
    ("removed", 6, "cannot open", ()),
    # A sync point after every record: the records would land before time 0.
    ("sync-after-records", 2, "maps before time 0", ("--device-sync", "6000000000000@0")),
]


@pytest.mark.parametrize("case,code,message,extra", BAD_BUFFERS, ids=[b[0] for b in BAD_BUFFERS])
def test_combined_export_bad_buffer_fails_but_keeps_host_trace(bpf, progs, tmp_path, case, code,
                                                               message, extra):
    buf = gen(tmp_path, "basic", case if case == "kind" else None)
    r, out, rep = run_combined(tmp_path, buf, *extra,
                               after_attach=buf.unlink if case == "removed" else None)
    assert r.returncode == 1, (r.returncode, r.stderr)
    line = next((x for x in r.stderr.splitlines() if "--device-buffer" in x), "")
    assert line.startswith(f"commtrace-bpf: --device-buffer {buf}: "), r.stderr
    assert message in line and f"(devprof error {code}); {out} is written without the device " \
        "tracks (metadata.device_buffer_error)" in line, line
    # Nothing already collected is lost: the host trace and the report are complete.
    trace, report = json.loads(out.read_text()), json.loads(rep.read_text())
    md = trace["metadata"]
    assert message in md["device_buffer_error"] and md["device_buffer_error_code"] == code
    assert "device_timeline" not in md and "commtrace_devprof" not in md
    host = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "comm"]
    assert report["total_counts"] > 0 and len(host) == report["total_counts"]
    assert not device_x(trace)
    assert sorted(x.name for x in tmp_path.iterdir() if ".tmp." in x.name) == []


def test_combined_export_device_sync(bpf, progs, tmp_path):
    """--device-sync CYCLE@NS: each record lands at NS + (cycle - CYCLE) / clock_hz."""
    buf = gen(tmp_path, "basic")
    sync_ns = time.monotonic_ns()
    sync_cycle = GEN_BASE_CYCLE + 1000  # the first records are 1 us before the sync point
    r, out, _ = run_combined(tmp_path, buf, "--device-sync", f"{sync_cycle}@{sync_ns}")
    assert r.returncode == 0, r.stderr
    trace = json.loads(out.read_text())
    md = trace["metadata"]
    assert md["device_timeline"] == (f"synchronized: device cycle {sync_cycle} at "
                                     f"CLOCK_MONOTONIC {sync_ns} ns (--device-sync)")
    xs = device_x(trace)
    golden = json.loads((GOLDEN / "basic.json").read_text())
    assert len(xs) == len([e for e in golden["traceEvents"] if e.get("ph") == "X"]) == 24
    for e in xs:
        start, end = int(e["args"]["start_cycle"]), int(e["args"]["end_cycle"])
        want = (sync_ns + start - sync_cycle) / 1000.0  # 1 GHz: one cycle per ns
        assert abs(e["ts"] - want) < 5e-4 and abs(e["dur"] - (end - start) / 1000.0) < 5e-4, e
    assert min(e["ts"] for e in xs) == pytest.approx((sync_ns - 1000) / 1000.0, abs=5e-4)

    # Without it: not synchronized, the earliest record at the start of tracing.
    r, out, _ = run_combined(tmp_path, buf)
    assert r.returncode == 0, r.stderr
    trace = json.loads(out.read_text())
    assert trace["metadata"]["device_timeline"].startswith("not synchronized")
    start_ns = int(trace["metadata"]["start_ns"])
    assert min(e["ts"] for e in device_x(trace)) == pytest.approx(start_ns / 1000.0, abs=5e-4)


@pytest.mark.parametrize("args,msg", [
    (["--device-sync", "5@6"], "--device-sync goes with --device-buffer"),
    (["--device-buffer", "b.bin", "--device-sync", "5"], "invalid --device-sync '5'"),
    (["--device-buffer", "b.bin", "--device-sync", "5@-6"], "invalid --device-sync"),
    (["--device-buffer", "b.bin", "--device-sync", "x@6"], "invalid --device-sync"),
    (["--device-buffer", "b.bin", "--device-sync", "5@6@7"], "invalid --device-sync"),
    (["--device-buffer", "b.bin", "--device-sync", "18446744073709551616@6"],
     "invalid --device-sync"),
])
def test_device_sync_usage_errors(tmp_path, args, msg):
    r = subprocess.run([str(TRACER), "-p", "1", "--chrome", str(tmp_path / "t.json"), *args],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and msg in r.stderr, (args, r.stderr)
    assert not (tmp_path / "t.json").exists()


def test_help_documents_device_sync():
    r = subprocess.run([str(TRACER), "--help"], capture_output=True, text=True, timeout=60)
    assert "--device-sync CYCLE@NS" in r.stdout and "CLOCK_MONOTONIC" in r.stdout
