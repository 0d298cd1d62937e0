# SPDX-License-Identifier: MIT
"""--ops: the entry and exit of every profiled module, op and redistribute call, seen at
the interpreter's frame evaluation entry and filtered in BPF. Real ranks, real
interpreters, exact trees."""
import json
import os
from collections import Counter

import pytest

from conftest import read_pid, run_tracer, touch, wait_files, wait_proc
from test_chrome import check_perfetto_rules, load_chrome
from test_pystacks import (INTERPRETERS, WORKLOADS, debug_of, flatten, label, trace_ranks)

PROFILE = WORKLOADS.parent / "integration" / "ops_toy.profile"


def tree_of(r):
    """(label, [children...]) of one record, collectives by their collective_type."""
    return (label(r), [tree_of(c) for c in r["children"]])


def check_ops_stats(js, kept):
    ops = js["ops"]
    assert ops["kept"] == kept, ops
    # Functions outside the profiles reach user space only as first sightings, sent
    # before BPF had the verdict: no entry of a code object BPF knew as unprofiled.
    assert ops["unwanted"] == 0, ops
    # (unresolved: the process had exited before user space read the code object.)
    assert ops["kept"] <= ops["entries"] <= ops["kept"] + ops["unclassified"] + \
        ops["unresolved"], ops
    assert ops["unpaired_exits"] == 0 and ops["lost"] == 0, ops
    assert js["drops"]["op_records_lost"] == 0 and js["drops"]["ops_nesting_too_deep"] == 0


def values_of(r):
    """An op record's inputs and outputs as text, seed 000's way: DTensor[4, 16]."""
    def one(v):
        shape = "" if v["shape"] is None else "[" + ", ".join(map(str, v["shape"])) + "]"
        extra = " ".join(x for x in (v["dtype"], v.get("placements"), v.get("mesh"),
                                     "freed" if v.get("freed") else None) if x)
        return v["kind"] + shape + (" " + extra if extra else "")
    return tuple(None if r[k] is None else [one(v) for v in r[k]] + (
        [f"+{r[k + '_more']} more"] if k + "_more" in r else [])
        for k in ("inputs", "outputs"))


def same_values(got, want):
    """Equal; but a short-lived DTensor's placements and mesh are read from user space
    when the event is handled, after the object may have been freed: then it has neither,
    and says so (freed)."""
    if got is None or want is None or len(got) != len(want):
        return got == want
    return all(g == w or (w.startswith("DTensor") and g == w.split(" (", 1)[0] + " freed")
               for g, w in zip(got, want))


def check_op_values(records, want, first_described):
    """Each forward's ops (in call order) with what they got and returned: exact from the
    forward first_described on; before it, an op is either not described yet (its code
    object was unclassified when BPF saw it) or exact."""
    per_forward = [[r for _, r in flatten([f]) if r["type"] == "op"] for f in records
                   if label(f) == "Module((root))" and f.get("phase") != "backward"]
    assert per_forward and len(per_forward) > first_described, per_forward
    for i, ops in enumerate(per_forward):
        got = [(label(r),) + values_of(r) for r in ops]
        assert [g[0] for g in got] == [w[0] for w in want], (i, got)
        for g, w in zip(got, want):
            ok = same_values(g[1], w[1]) and same_values(g[2], w[2])
            assert ok or (i < first_described and g[1:] == (None, None)), \
                f"forward {i}: got {g}, want {w}"


@pytest.mark.parametrize("ops", [True, False], ids=["ops", "default"])
def test_redistribute_one_node(bpf, torch_available, reaper, start_tracer, tmp_path, ops):
    """hyper-parallel's redistribution shape: fc2's partial sum reduced through internal
    methods of a TensorRedistribution, one of which C enters (a sorted() key). It is one
    Redistribute node, the collective in it, with --ops as without: the lambda is not a
    node of its own, and the collective is not beside it."""
    forwards = 2
    js, pids, tr = trace_ranks(reaper, start_tracer, tmp_path, "seed000_mlp.py",
                               "--forwards", forwards, "--backward", "--linger", 1,
                               "--pause", 0.3, "--redistribute",
                               extra=("--ops",) if ops else ())
    fc2 = [("Redistribute(reduce_partial)", [("Collective(differentiable_all_reduce)", [])])]
    if ops:
        forward = ("Module((root))", [("Module(fc1)", [("Op(linear)", [])]), ("Op(gelu)", []),
                                      ("Module(fc2)", [("Op(linear)", [])] + fc2)])
    else:
        forward = ("Module((root))", [("Module(fc2)", fc2)])
    backward = ("Module((root))", [("Module(fc2)", [("Collective(all_reduce)", [])])])
    for pid in pids:
        records = debug_of(js, pid)["records"]
        assert [tree_of(r) for r in records] == [forward, backward] * forwards, \
            json.dumps([tree_of(r) for r in records], indent=1)


def test_ops_seed000(bpf, torch_available, reaper, start_tracer, tmp_path):
    forwards = 4
    chrome, table = tmp_path / "trace.chrome.json", tmp_path / "table.txt"
    js, pids, tr = trace_ranks(reaper, start_tracer, tmp_path, "seed000_mlp.py",
                               "--forwards", forwards, "--backward", "--linger", 1,
                               "--pause", 0.3,
                               extra=("--ops", "--chrome", chrome, "--table", table,
                                      "--noise-level", 1))
    forward = ("Module((root))", [
        ("Module(fc1)", [("Op(linear)", [])]),
        ("Op(gelu)", []),
        ("Module(fc2)", [("Op(linear)", []),
                         ("Collective(differentiable_all_reduce)", [])]),
    ])
    # under fc2, whose forward hook made its autograd context
    backward = ("Module((root))", [("Module(fc2)", [("Collective(all_reduce)", [])])])
    for pid in pids:
        records = debug_of(js, pid)["records"]
        assert [tree_of(r) for r in records] == [forward, backward] * forwards, \
            json.dumps([tree_of(r) for r in records], indent=1)
        for _, r in flatten(records):
            # the backward's modules come from the stacks, not from entries and exits
            if r["type"] != "collective" and r.get("phase") != "backward":
                assert r["duration_ns"] > 0 and r["tid"] == pid, r
                kids = [c for c in r["children"] if c["type"] != "collective"]
                # children in call order, inside their parent's time
                for a, b in zip(kids, kids[1:]):
                    assert a["ts_ns"] + a["duration_ns"] <= b["ts_ns"], (a, b)
                for c in kids:
                    assert r["ts_ns"] <= c["ts_ns"]
                    assert c["ts_ns"] + c["duration_ns"] <= r["ts_ns"] + r["duration_ns"]
    # What each op got and returned, read in BPF (2 ranks: fc1 is Linear(16, 16), fc2
    # Linear(16, 16, bias=False)); x and every op's result are DTensors, replicated.
    mesh = "DeviceMesh(cpu, shape=[2], dims=(tp))"
    dt = f"DTensor[4, 16] torch.float32 (Replicate(),) {mesh}"
    w = "Parameter[16, 16] torch.float32"
    want = [("Op(linear)", [dt, f"{w} (Shard(dim=0),) {mesh}",
                            f"Parameter[16] torch.float32 (Shard(dim=0),) {mesh}"], [dt]),
            ("Op(gelu)", [dt], [dt]),
            ("Op(linear)", [dt, f"{w} (Shard(dim=1),) {mesh}", "None"], [dt])]
    for pid in pids:
        check_op_values(debug_of(js, pid)["records"], want, first_described=1)
    # The table shows them as seed 000 does; the last forward's ops are described.
    ops_lines = [line.split(None, 1)[1] for line in table.read_text().splitlines()
                 if line.lstrip().startswith("Op ")]
    assert len(ops_lines) == len(pids) * forwards * 3, ops_lines
    assert ops_lines[-3:] == [
        "Op(linear) inputs=[DTensor[4, 16], Parameter[16, 16], Parameter[16]] "
        "outputs=[DTensor[4, 16]]",
        "Op(gelu) inputs=[DTensor[4, 16]] outputs=[DTensor[4, 16]]",
        "Op(linear) inputs=[DTensor[4, 16], Parameter[16, 16], None] "
        "outputs=[DTensor[4, 16]]"], ops_lines[-3:]
    # per rank and forward: 3 modules, 3 ops
    check_ops_stats(js, kept=len(pids) * forwards * 6)
    # The timeline has them all too, entry to exit, on the rank's main thread.
    doc = load_chrome(chrome)
    check_perfetto_rules(doc)
    for pid in pids:
        names = Counter(e["name"] for e in doc["traceEvents"]
                        if e.get("ph") == "X" and e.get("cat") in ("module", "op")
                        and e["pid"] == pid)
        # and the backward's (root) and fc2, around its all-reduce
        assert names == {"Module((root))": 2 * forwards, "Module(fc1)": forwards,
                         "Module(fc2)": 2 * forwards, "Op(linear)": 2 * forwards,
                         "Op(gelu)": forwards}, names
        gelus = [e["args"] for e in doc["traceEvents"] if e.get("ph") == "X"
                 and e["pid"] == pid and e["name"] == "Op(gelu)"]
        assert gelus[-1]["inputs"] == gelus[-1]["outputs"] == "[DTensor[4, 16]]", gelus


def run_toy(reaper, start_tracer, tmp_path, python, forwards, *extra, nested=False, deep=0,
            env=None):
    wait, out = tmp_path / "go", tmp_path / "trace.json"
    log = open(tmp_path / "py.log", "w")
    p = reaper.popen([str(python), str(WORKLOADS / "ops_toy.py"), "--forwards", str(forwards),
                      "--wait-file", str(wait), *(("--nested",) if nested else ()),
                      "--deep", str(deep)], stdout=log, stderr=log)
    wait_files([f"{wait}.pid"], timeout=60, procs=[p])
    pid = read_pid(f"{wait}.pid")
    tr = start_tracer(["-p", str(pid), "--json", out, "--profile", PROFILE, *extra], env=env)
    tr.wait_attached()
    touch(wait)
    assert wait_proc(p, 60, "python") == 0, (tmp_path / "py.log").read_text()
    assert tr.wait() == 0, tr.describe()
    return json.loads(out.read_text()), pid, tr


def check_toy_forwards(js, pid, forwards):
    """ops_toy's MLP: every forward the same exact tree; its records."""
    forward = ("Module((root))", [
        ("Module(fc1)", [("Op(linear)", [])]),
        ("Op(gelu)", []),
        ("Module(fc2)", [("Op(linear)", []), ("Collective(MPI_Barrier)", [])]),
    ])
    records = debug_of(js, pid)["records"]
    assert [tree_of(r) for r in records] == [forward] * forwards, \
        json.dumps([tree_of(r) for r in records], indent=1)
    return records


# 3.10's code objects have no qualname: class-qualified rules (Module.__call__) cannot
# match there (docs/profiles.md).
@pytest.mark.parametrize("version", [v for v in INTERPRETERS if v != "3.10"])
def test_ops_every_python(bpf, mpi_available, reaper, start_tracer, tmp_path, version):
    python = INTERPRETERS[version]
    if not python.exists():
        pytest.skip(f"SKIPPED LOUDLY: {python} is not installed")
    forwards = 8
    js, pid, tr = run_toy(reaper, start_tracer, tmp_path, python, forwards, "--ops")
    records = check_toy_forwards(js, pid, forwards)
    # Without torch: the kinds of what the ops got (dispatch(op, x, w): args=2, the *args
    # tuple) and returned.
    check_op_values(records, [("Op(linear)", ["Tensorish", "float"], ["Tensorish"]),
                              ("Op(gelu)", ["Tensorish"], ["Tensorish"]),
                              ("Op(linear)", ["Tensorish", "float"], ["Tensorish"])],
                    first_described=1)
    check_ops_stats(js, kept=forwards * 6)
    # A forward enters 15 frames from C: 6 profiled; 3 Tensorish.__init__ (a type call),
    # 3 forward() and 3 op functions (called with *args) are not. The forwards are 0.25 s
    # apart, so user space has classified every code object by the second one: at most
    # two forwards' worth reach it unclassified; the other 9 x 6 unprofiled calls are
    # dropped in BPF.
    assert js["ops"]["unclassified"] <= 2 * 15, js["ops"]
    assert js["ops"]["entries"] <= forwards * 6 + 2 * 9, js["ops"]


def uprobe_sessions():
    """Whether this kernel has uprobe sessions (Linux 6.13+)."""
    major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    return (major, minor) >= (6, 13)


@pytest.mark.parametrize("probe", ["session", "entry+return"])
def test_ops_past_the_return_probe_limit(bpf, mpi_available, reaper, start_tracer, tmp_path,
                                         probe):
    """The kernel sets no uretprobe past 64 nested probed frames of a thread (an import
    chain run from C goes that deep). Each Linear nests 80 frames from C before its op:
    the exits of the calls around them still pair (by stack pointer), every forward is
    exact, and nothing is lost. (Paired by counting activations instead, fc1's exit was
    never matched and later calls piled up until they were dropped as nested too deep.)
    Both ways of probing the interpreter: one uprobe session (the default where the kernel
    has them), whose return runs for kept calls only, and an entry and a return probe on
    every frame (COMMTRACE_UPROBE_SESSION=0, and kernels before 6.13)."""
    if probe == "session" and not uprobe_sessions():
        pytest.skip(f"SKIPPED LOUDLY: kernel {os.uname().release} has no uprobe sessions")
    env = dict(os.environ, COMMTRACE_UPROBE_SESSION="1" if probe == "session" else "0")
    forwards = 4
    js, pid, tr = run_toy(reaper, start_tracer, tmp_path, INTERPRETERS["3.11-debian"],
                          forwards, "--ops", deep=80, env=env)
    check_toy_forwards(js, pid, forwards)
    check_ops_stats(js, kept=forwards * 6)
    assert js["ops"]["late_exits"] == 0, js["ops"]
    assert js["ops"]["probe"] == probe, js["ops"]


def test_ops_off_by_default(bpf, mpi_available, reaper, start_tracer, tmp_path):
    """Without --ops: no op records, no ops stats; stacks still name fc2 for the barrier."""
    js, pid, tr = run_toy(reaper, start_tracer, tmp_path, INTERPRETERS["3.11-debian"], 2)
    assert "ops" not in js
    labels = [label(r) for _, r in flatten(debug_of(js, pid)["records"])]
    assert labels == ["Module((root))", "Module(fc2)", "Collective(MPI_Barrier)"] * 2, labels


@pytest.mark.parametrize("ops", [False, True])
def test_module_fqn_through_module_list(bpf, mpi_available, reaper, start_tracer, tmp_path,
                                        ops):
    """A ModuleList's item is called by its owner's owner: named by its path from the root
    (layers.1.mlp.down_proj), with stacks alone and with --ops."""
    js, pid, tr = run_toy(reaper, start_tracer, tmp_path, INTERPRETERS["3.11-debian"], 2,
                          *(("--ops",) if ops else ()), nested=True)
    records = debug_of(js, pid)["records"]
    if ops:
        def block(i):
            return (f"Module(layers.{i})", [(f"Module(layers.{i}.mlp)", [
                (f"Module(layers.{i}.mlp.up_proj)", [("Op(linear)", [])]),
                ("Op(gelu)", []),
                (f"Module(layers.{i}.mlp.down_proj)", [("Op(linear)", []),
                                                       ("Collective(MPI_Barrier)", [])])])])
    else:
        def block(i):
            return (f"Module(layers.{i})", [(f"Module(layers.{i}.mlp)", [
                (f"Module(layers.{i}.mlp.down_proj)", [("Collective(MPI_Barrier)", [])])])])
    # From stacks alone too, the loop's second call of the same site is the next layer, a
    # sibling (tree.h), and the next forward a tree of its own.
    want = [("Module((root))", [block(0), block(1)])] * 2
    assert [tree_of(r) for r in records] == want, \
        json.dumps([tree_of(r) for r in records], indent=1)


def test_ops_needs_stacks(tracer_path):
    r = run_tracer(["--ops", "--no-stacks", "-p", "1"])
    assert r.returncode == 2, r
    assert "--ops reads Python frames" in r.stderr
