# SPDX-License-Identifier: MIT
"""--chrome and `commtrace-bpf fuse` (docs/chrome.md) against real 2-rank Gloo runs: the file
parses (with Python's json and with Chrome DevTools' own trace engine from npm), follows the
rules Perfetto enforces, holds exactly the calls of the --json report of the same run, nests
module slices as the call tree does; a real torch 1.13 profiler trace recorded during a traced
run is fused onto the same time axis; bad inputs are refused with precise errors."""
import json
import os
import shutil
import subprocess
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from conftest import (REPO, TRACER, load_trace_json, read_pid, run_tracer, touch, wait_files,
                      wait_proc)
from test_pystacks import start_ranks

WORKLOADS = REPO / "tests" / "workloads"
NPM_DIR = REPO / "build" / "npm"  # git-ignored (build/)
TRACE_ENGINE = "@paulirish/trace_engine@0.0.65"


# ---------------------------------------------------------------------------------------
# Perfetto's rules, checked independently of the exporter


def check_perfetto_rules(doc):
    """The rules of FACTS.md "Trace formats"; returns the X slices per (pid, tid)."""
    assert isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list)
    assert isinstance(doc.get("metadata"), dict), "top-level metadata object"
    tracks = defaultdict(list)
    named_threads, named_procs = set(), set()
    main_pids = set()
    for e in doc["traceEvents"]:
        ph = e["ph"]
        assert isinstance(e.get("pid"), int), e
        tid = e.get("tid")
        assert isinstance(tid, int) and tid != 0, f"tid 0 or missing: {e}"
        assert 0 < tid < 2**32 and 0 < e["pid"] < 2**32, e
        if ph == "M":
            assert e["name"] in ("process_name", "thread_name", "process_sort_index",
                                 "thread_sort_index"), e
            if e["name"].endswith("sort_index"):
                assert isinstance(e["args"]["sort_index"], int), f"sort index not a number: {e}"
            if e["name"] == "thread_name":
                named_threads.add((e["pid"], tid))
            if e["name"] == "process_name":
                named_procs.add(e["pid"])
            continue
        assert isinstance(e.get("ts"), (int, float)) and e["ts"] >= 0, e
        if ph == "X":
            assert isinstance(e.get("dur"), (int, float)), f"X without dur: {e}"
            assert e["dur"] >= 0, f"negative dur: {e}"
            tracks[(e["pid"], tid)].append(e)
            if tid == e["pid"]:
                main_pids.add(e["pid"])
    for (pid, tid) in tracks:
        assert (pid, tid) in named_threads, f"track {pid}/{tid} has no thread_name"
        assert pid in named_procs, f"process {pid} has no process_name"
    for key, slices in tracks.items():
        assert_no_partial_overlap(key, slices)
    return tracks


def assert_no_partial_overlap(key, slices):
    # ns integers: the µs values carry three decimals
    spans = sorted(((round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000), e)
                    for e in slices), key=lambda s: (s[0], -s[1]))
    stack = []
    for s, end, e in spans:
        while stack and stack[-1][1] <= s and not (stack[-1][1] == s == end):
            stack.pop()
        if stack:
            assert end <= stack[-1][1], (
                f"track {key}: {e['name']} [{s}, {end}] partially overlaps "
                f"{stack[-1][2]['name']} [{stack[-1][0]}, {stack[-1][1]}]")
        stack.append((s, end, e))


def encloses(outer, inner):
    o0, o1 = round(outer["ts"] * 1000), round((outer["ts"] + outer["dur"]) * 1000)
    i0, i1 = round(inner["ts"] * 1000), round((inner["ts"] + inner["dur"]) * 1000)
    return o0 <= i0 and i1 <= o1


def load_chrome(path):
    assert os.path.exists(path), f"no Chrome trace at {path}"
    with open(path) as f:
        return json.load(f)


# ---------------------------------------------------------------------------------------
# Runs


def traced_run(reaper, start_tracer, tmp_path, script, *args, extra=()):
    wait = tmp_path / "go"
    js_path, chrome = tmp_path / "trace.json", tmp_path / "trace.chrome.json"
    procs = start_ranks(reaper, tmp_path, script, *args, "--wait-file", wait)
    pid_files = [f"{wait}.pid.{r}" for r in range(len(procs))]
    wait_files(pid_files, timeout=120, procs=procs)
    pids = [read_pid(f) for f in pid_files]
    tr = start_tracer(["-p", ",".join(map(str, pids)), "--json", js_path, "--chrome", chrome,
                       "-q", *extra])
    tr.wait_attached()
    touch(wait)
    for r, p in enumerate(procs):
        assert wait_proc(p, 120, f"rank {r}") == 0, (tmp_path / f"rank{r}.log").read_text()
    assert tr.wait(timeout=180) == 0, tr.describe()
    return load_trace_json(js_path), load_chrome(chrome), pids, chrome


def comm_slices(doc, pid):
    return [e for e in doc["traceEvents"]
            if e["ph"] == "X" and e.get("cat") == "comm" and e["pid"] == pid]


def assert_matches_report(js, doc, pids):
    for pid in pids:
        proc = next(p for p in js["processes"] if p["pid"] == pid)
        want = {c["function"]: c["calls"] for c in proc["collectives"]}
        got = Counter(e["name"] for e in comm_slices(doc, pid))
        assert dict(got) == want, f"pid {pid}: Chrome slices {dict(got)} != --json {want}"
        for e in comm_slices(doc, pid):
            a = e["args"]
            for k in ("function", "library", "kind", "count", "dtype", "bytes_sent",
                      "bytes_received", "communicator", "group_size", "rank", "seq"):
                assert k in a, f"collective args lack {k}: {a}"
            assert a["returned"] is True, e


# ---------------------------------------------------------------------------------------
# Tests


def test_chrome_seed000_tree_nesting(bpf, torch_available, reaper, start_tracer, tmp_path):
    forwards = 2
    js, doc, pids, path = traced_run(reaper, start_tracer, tmp_path, "seed000_mlp.py",
                                     "--forwards", forwards, "--backward")
    tracks = check_perfetto_rules(doc)
    assert_matches_report(js, doc, pids)
    meta = doc["metadata"]
    assert meta["tool"] == "commtrace-bpf" and meta["clock"] == "CLOCK_MONOTONIC"
    assert str(meta["mono_to_wall_ns"]) == meta["mono_to_wall_ns_str"]
    assert meta["dropped_events"] == 0 and meta["capped"] is None
    assert meta["export"]["tree_slices_dropped"] == 0
    for rank, pid in enumerate(pids):
        names = {e["args"]["name"] for e in doc["traceEvents"]
                 if e["ph"] == "M" and e["name"] == "process_name" and e["pid"] == pid}
        assert names == {f"rank {rank} ({os.uname().nodename}, pid {pid})"}, names
        proc = next(p for p in js["processes"] if p["pid"] == pid)
        # Nesting matches the tree: each forward collective lies in Module(fc2) inside
        # Module((root)); backward ones in no module.
        main = tracks[(pid, pid)]
        mods = [e for e in main if e.get("cat") == "module"]
        assert sorted(e["name"] for e in mods) == ["Module((root))"] * forwards + \
            ["Module(fc2)"] * forwards
        colls = [e for e in main if e.get("cat") == "comm" and e["args"]["depth"] == 0]
        tree_colls = [r for r in flat(proc["comm_debug"]["records"]) if r["type"] == "collective"]
        assert len(colls) == len(tree_colls) == 2 * forwards
        for c in colls:
            around = sorted((m for m in mods if encloses(m, c)), key=lambda m: m["args"]["depth"])
            if c["args"]["phase"] == "forward":
                assert [m["name"] for m in around] == ["Module((root))", "Module(fc2)"], c
                assert c["args"]["collective"] == "differentiable_all_reduce"
                assert any("differentiable_all_reduce" in s for s in c["args"]["stack"])
            else:
                assert around == [], c
        # Flows: each c10d all-reduce hands off to a Gloo worker thread of its process.
        flows = [e for e in doc["traceEvents"] if e["ph"] in "sf" and e["name"] == "c10d→gloo"
                 and e["pid"] == pid]
        assert len(flows) == 2 * 2 * forwards, flows
        for f in flows:
            assert (f["tid"] == pid) == (f["ph"] == "s"), f
    rank_flows = [e for e in doc["traceEvents"] if e["ph"] == "s" and e["name"] == "rank→rank"]
    # one per collective per layer (c10d and gloo): 2 per all-reduce
    assert len(rank_flows) == 2 * 2 * forwards
    independent_parse(path, doc)


def flat(records):
    for r in records:
        yield r
        yield from flat(r["children"])


def npm_ready():
    if not shutil.which("npm") or not shutil.which("node"):
        pytest.skip("SKIPPED LOUDLY: npm/node missing (scripts/install-deps.sh installs them): "
                    "the independent trace parser cannot run")
    mod = NPM_DIR / "node_modules" / "@paulirish" / "trace_engine"
    if not mod.exists():
        NPM_DIR.mkdir(parents=True, exist_ok=True)
        r = subprocess.run(["npm", "install", "--prefix", str(NPM_DIR), "--no-audit", "--no-fund",
                            TRACE_ENGINE], capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            pytest.skip(f"SKIPPED LOUDLY: npm install {TRACE_ENGINE} failed: "
                        f"{r.stderr.strip()[-400:]}")
    return mod


NODE_CHECK = r"""
import fs from 'node:fs';
globalThis.DOMRect ??= class { constructor(x=0,y=0,w=0,h=0){Object.assign(this,{x,y,width:w,height:h});} };
const Trace = await import(process.argv[2] + '/models/trace/trace.js');
const doc = JSON.parse(fs.readFileSync(process.argv[3], 'utf8'));
const model = Trace.TraceModel.Model.createWithAllHandlers();
await model.parse(doc.traceEvents);
const data = model.parsedTrace().data;
const out = {threads: []};
for (const [pid, pr] of data.Renderer.processes) for (const [tid, th] of pr.threads) {
  let depth = 0;
  const walk = (n, d) => { depth = Math.max(depth, d); for (const c of n.children) walk(c, d + 1); };
  for (const r of th.tree.roots) walk(r, 1);
  out.threads.push({pid, tid, name: th.name ?? null, entries: th.entries.length, depth});
}
console.log(JSON.stringify(out));
"""


def independent_parse(path, doc):
    """Chrome DevTools' trace engine (npm) parses the file and builds per-thread slice trees."""
    mod = npm_ready()
    script = Path(path).with_suffix(".mjs")
    script.write_text(NODE_CHECK)
    r = subprocess.run(["node", str(script), str(mod), str(path)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, f"trace_engine failed: {r.stderr[-2000:]}"
    got = json.loads(r.stdout.strip().splitlines()[-1])
    want = Counter((e["pid"], e["tid"]) for e in doc["traceEvents"] if e["ph"] == "X")
    seen = {(t["pid"], t["tid"]): t for t in got["threads"]}
    for key, n in want.items():
        assert key in seen, f"trace_engine has no thread {key}: {got}"
        assert seen[key]["entries"] == n, f"{key}: trace_engine saw {seen[key]}, we wrote {n}"
        assert seen[key]["name"], f"{key}: no thread name in trace_engine"
    # the main threads hold (root) > fc2 > collective: depth 3
    assert max(t["depth"] for t in got["threads"]) >= 3, got


def test_chrome_fuse_torch_profiler(bpf, torch_available, reaper, start_tracer, tmp_path):
    iters = 4
    js, doc, pids, path = traced_run(reaper, start_tracer, tmp_path, "profiled_allreduce.py",
                                     "--iters", iters, "--out", tmp_path)
    check_perfetto_rules(doc)
    assert_matches_report(js, doc, pids)
    out = tmp_path / "fused.json"
    args = ["fuse", "-o", out, path]
    profs = []
    for rank in range(2):
        prof = tmp_path / f"prof.{rank}.json"
        anchor = (tmp_path / f"anchor.{rank}").read_text().strip()
        args += ["--profiler", prof, "--rank", rank, "--anchor", f"commtrace_anchor@{anchor}"]
        profs.append(json.loads(prof.read_text()))
    r = run_tracer(args)
    assert r.returncode == 0, r.stderr
    fused = load_chrome(out)
    check_perfetto_rules(fused)
    # every event of both inputs, once
    assert len(fused["traceEvents"]) == len(doc["traceEvents"]) + sum(map(len, profs)) + sum(
        len({e["tid"] for e in p}) for p in profs)  # + one thread_name per profiler thread
    ours = [e for e in fused["traceEvents"] if e.get("cat") == "comm"]
    assert Counter(json.dumps(e, sort_keys=True) for e in ours) == Counter(
        json.dumps(e, sort_keys=True) for e in doc["traceEvents"] if e.get("cat") == "comm")
    inputs = fused["metadata"]["fuse"]["inputs"]
    assert [i["kind"] for i in inputs] == ["commtrace", "legacy-autograd", "legacy-autograd"]
    assert [i["alignment"] for i in inputs[1:]] == ["--anchor", "--anchor"]
    for rank, pid in enumerate(pids):
        assert inputs[1 + rank]["joined_pid"] == pid
        prof_evs = [e for e in fused["traceEvents"] if e["pid"] == pid and e["ph"] == "X"
                    and e.get("cat") != "comm" and e.get("cat") != "module"]
        assert Counter(e["name"] for e in prof_evs) == Counter(e["name"] for e in profs[rank])
        # our collectives overlap the profiler's matching events in time
        for ours_name, theirs_name in (("gloo::allreduce", "gloo:all_reduce"),
                                       ("ProcessGroupGloo::allreduce", "c10d::allreduce_")):
            a = sorted((e for e in ours if e["pid"] == pid and e["name"] == ours_name),
                       key=lambda e: e["ts"])
            b = sorted((e for e in prof_evs if e["name"] == theirs_name), key=lambda e: e["ts"])
            assert len(a) == len(b) == iters, (ours_name, len(a), len(b))
            overlaps = sum(1 for x, y in zip(a, b)
                           if x["ts"] < y["ts"] + y["dur"] and y["ts"] < x["ts"] + x["dur"])
            # Gloo executions last milliseconds: every one overlaps; a c10d enqueue is a few
            # µs inside a profiler range that can be as short, so the anchor's µs error counts.
            need = iters if ours_name.startswith("gloo") else iters // 2
            assert overlaps >= need, (ours_name, [(x["ts"], x["dur"]) for x in a],
                                      [(y["ts"], y["dur"]) for y in b])


def write(p, text):
    p.write_text(text)
    return p


def test_fuse_refuses_bad_inputs(tracer_path, tmp_path):
    ours = tmp_path / "ours.json"
    ours.write_text(json.dumps({
        "traceEvents": [
            {"ph": "M", "name": "process_name", "pid": 10, "tid": 10, "args": {"name": "r0"}},
            {"ph": "M", "name": "thread_name", "pid": 10, "tid": 11, "args": {"name": "w"}},
            {"ph": "X", "cat": "comm", "name": "gloo::allreduce", "pid": 10, "tid": 11,
             "ts": 1000.0, "dur": 5.0, "args": {}}],
        "metadata": {"tool": "commtrace-bpf", "mono_to_wall_ns_str": "1700000000000000000",
                     "mono_to_wall_ns": 1700000000000000000, "start_ns": 0, "end_ns": 2000000,
                     "processes": [{"pid": 10, "pid_in_namespace": 3, "rank": 0}]}}))
    legacy = write(tmp_path / "legacy.json", json.dumps(
        [{"name": "a", "ph": "X", "ts": 5, "dur": 1, "tid": 1, "pid": "CPU functions",
          "args": {}}]))
    kineto = write(tmp_path / "kineto.json", json.dumps({
        "schemaVersion": 1, "distributedInfo": {"rank": 0}, "baseTimeNanoseconds":
            1700000000000000000, "traceEvents": [
                {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 3, "tid": 3,
                 "ts": 1001.0, "dur": 2.0}]}))
    out = tmp_path / "out.json"
    cases = [
        (["fuse", "-o", out, write(tmp_path / "trunc.json", ours.read_text()[:50])], 10,
         "not a trace: not valid JSON (error at byte"),
        (["fuse", "-o", out, ours, "--profiler", write(tmp_path / "obj.json", '{"a": 1}')], 10,
         "neither an object with a traceEvents array nor an array of events"),
        (["fuse", "-o", out, ours, "--profiler", write(tmp_path / "empty.json", "[]")], 10,
         "the trace has no events"),
        (["fuse", "-o", out, legacy], 10, "not a commtrace-bpf --chrome trace"),
        (["fuse", "-o", out, ours, "--profiler", legacy, "--rank", 0], 11,
         "cannot be aligned: its timestamps are relative to the profiler's start"),
        (["fuse", "-o", out, ours, "--profiler", legacy, "--wall0", "1700000000000000000"], 12,
         "names no process"),
        (["fuse", "-o", out, ours, "--profiler", legacy, "--rank", 7, "--wall0", "1"], 12,
         "--rank 7 is not a rank"),
        (["fuse", "-o", out, ours, "--profiler", legacy, "--rank", 0, "--anchor", "zz@5"], 11,
         'no event named "zz"'),
        (["fuse", "-o", out, ours, "--profiler", legacy, "--rank", 0, "--wall0",
          "1600000000000000000"], 11, "more than an hour away"),
        (["fuse", "-o", out, "--profiler", kineto], 2, "no commtrace-bpf trace given"),
        (["fuse", "-o", out, ours, "--pid", "3"], 2, "applies to the --profiler FILE"),
    ]
    for args, code, msg in cases:
        r = run_tracer(args)
        assert r.returncode == code, (args, r.returncode, r.stderr)
        assert msg in r.stderr, (args, r.stderr)
        assert not out.exists(), f"{args}: an output was written despite the refusal"
    # Kineto: clock and rank from the file; the container pid (3) joins host pid 10.
    r = run_tracer(["fuse", "-o", out, ours, "--profiler", kineto])
    assert r.returncode == 0, r.stderr
    fused = load_chrome(out)
    mm = next(e for e in fused["traceEvents"] if e["name"] == "aten::mm")
    assert mm["pid"] == 10 and mm["tid"] not in (0, 10, 11)
    assert abs(mm["ts"] - 1001.0) < 1e-6
    assert fused["metadata"]["fuse"]["inputs"][1]["alignment"] == "baseTimeNanoseconds"
    assert fused["metadata"]["fuse"]["inputs"][1]["top_level"]["schemaVersion"] == 1
    check_perfetto_rules(fused)


def test_chrome_options_refused(tracer_path, tmp_path):
    for args, msg in ((["-p", "1", "--device-buffer", "x"], "go with --chrome"),
                      (["-p", "1", "--chrome", "x", "--chrome-max-mb", "-1"], "--chrome-max-mb"),
                      (["-p", "1", "--chrome", "x", "--chrome-window", "0"], "--chrome-window")):
        r = run_tracer(args)
        assert r.returncode == 2 and msg in r.stderr, (args, r.stderr)


def test_chrome_with_device_buffer(bpf, progs, tmp_path):
    """The combined export: host collectives and a decoded device buffer in one file."""
    buf, out = tmp_path / "dev.bin", tmp_path / "trace.json"
    subprocess.run([str(TRACER), "devprof", "gen", "--scenario", "basic", "-o", str(buf)],
                   check=True, capture_output=True, timeout=60)
    golden = json.loads((REPO / "tests/golden/devprof/basic.json").read_text())
    device_slices = [e for e in golden["traceEvents"] if e.get("ph") == "X"]
    r = subprocess.run([str(TRACER), "-q", "--json", str(tmp_path / "r.json"), "--chrome",
                        str(out), "--device-buffer", str(buf), "--",
                        str(REPO / "build/progs/hccl_driver"),
                        str(REPO / "build/progs/libhccl.so"), "--rank", "0", "--nranks", "2",
                        "--settle-ms", "300"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    trace = json.loads(out.read_text())
    report = json.loads((tmp_path / "r.json").read_text())
    names = {e["args"]["name"] for e in trace["traceEvents"]
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    assert {"AIC 0", "AIC 1", "AIV 0", "AIV 1", "AIV 2"} <= names, names
    device = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("tid", 0) >= 0x10000
              and e.get("tid", 0) < 0x10800]
    assert len(device) == len(device_slices), "every device record once"
    host = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "comm"]
    assert len(host) == report["total_counts"], "every host call once"
    assert "commtrace_devprof" in trace["metadata"]


def test_chrome_time_window_cap(bpf, progs, tmp_path):
    """A long session capped by a time window: a clear message, a valid file, the count."""
    out, rep = tmp_path / "trace.json", tmp_path / "r.json"
    r = subprocess.run([str(TRACER), "-q", "--json", str(rep), "--chrome", str(out),
                        "--chrome-window", "0.5", "--",
                        str(REPO / "build/progs/hccl_driver"),
                        str(REPO / "build/progs/libhccl.so"), "--rank", "0", "--nranks", "2",
                        "--settle-ms", "2000", "--iters", "2"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "past the time window" in r.stderr, r.stderr
    trace, report = json.loads(out.read_text()), json.loads(rep.read_text())
    assert trace["metadata"]["window"]["calls_left_out"] is True
    export = trace["metadata"]["export"]
    # The driver calls only after 2 s: every call is outside the window, none written.
    assert export["calls_written"] == 0
    assert export["calls_outside_window"] == report["total_counts"] > 0
    assert not [e for e in trace["traceEvents"] if e.get("cat") == "comm"]
