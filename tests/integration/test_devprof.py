# SPDX-License-Identifier: MIT
"""`commtrace-bpf devprof`: device profile buffers through the CLI (no root, no BPF).

Buffers come from `devprof gen` (known content, written through the real recorder),
goldens from tests/golden/devprof/, the PyTorch trace from torch 1.13 recorded here
(CPU only) and a constructed Kineto trace with device kernel events.
"""
import json
import os
import shutil
import subprocess
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
    assert len(codes) == 7 and codes[15] == ["freq-zero", "freq-absurd"]


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
    out = tmp_path / "fused.json"
    devprof("fuse", "--device", gen(tmp_path, "multi"), "--profiler", GOLDEN / "kineto_gpu.json",
            "-o", out, check=0)
    doc = json.loads(out.read_text())
    check_chrome(doc)
    d = doc["metadata"]["commtrace_devprof"]
    assert d["alignment"] == "device_kernel" and d["host_alignment"] is False
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
            check=0)
    assert json.loads(out2.read_text()) == doc


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

    devprof("fuse", "--device", buf, "--profiler", prof, "--allow-host-align", "-o", out,
            check=0)
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
                "-o", out, check=23)
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


def test_usage_errors(tmp_path):
    assert devprof("nope").returncode == 2
    assert devprof().returncode == 2
    assert devprof("decode", "--display", "fancy", "x", "-o", "y").returncode == 2
    assert devprof("decode", "--pid-base", "-1", "x", "-o", "y").returncode == 2
    assert devprof("gen", "--scenario", "basic", "--corrupt", "zzz", "-o",
                   tmp_path / "z").returncode == 2
    p = devprof("decode", tmp_path / "missing.bin", "-o", tmp_path / "o.json", check=3)
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
    if not os.access(NVCC, os.X_OK):
        pytest.skip(f"no nvcc at {NVCC}: the CUDA MegaKernel cannot be built here")
    r = subprocess.run([NVCC, "-O2", "-Iinclude", "-o", str(tmp_path / "megakernel"),
                        "tests/progs/megakernel.cu"], cwd=REPO, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "megakernel").stat().st_size > 0
