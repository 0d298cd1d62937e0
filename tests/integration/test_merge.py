# SPDX-License-Identifier: MIT
"""commtrace-bpf merge: the reports and timelines of several tracers of one job.

Three tracers watch one 3-rank Open MPI job at the same time: tracer A is given ranks 0
and 2, tracer B rank 1 (as two nodes would be), tracer C every rank. `merge` of A and B
must give C's report: the same processes, keyed by rank, with the same calls, bytes and
counts (only the measured durations differ between tracers: each times the calls with
its own probes), and C's timeline: the same slices, at the same times once the clocks are
aligned, with the same number of rank→rank arrows, now drawn across the node boundary.

Clock alignment is proved with a node whose monotonic clock is off: B's files are
rewritten as a host whose CLOCK_MONOTONIC is 3.5 s behind (every timestamp - 3.5 s,
mono_to_wall_ns + 3.5 s); the merge must come out the same.

Malformed and conflicting inputs are refused with a message naming the file and the
reason, and an exit code per reason (docs/merge.md).
"""
import copy
import json
import re
import subprocess

import pytest

from conftest import (
    PROGS, assert_matches_ledger, load_ledger, load_trace_json, read_pid, run_tracer, touch,
    wait_files, wait_proc,
)

MPI_PROG = PROGS / "mpi_collectives"
SKEW_NS = 3_500_000_000
RANK_FLOW = "rank→rank"


def merge(*args):
    return run_tracer(["merge", *args], timeout=120)


def load(path):
    with open(path) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def traced(bpf, progs, mpi_available, tmp_path_factory):
    """One 3-rank MPI run traced by A (ranks 0, 2), B (rank 1) and C (all)."""
    from conftest import Reaper, Tracer

    tmp = tmp_path_factory.mktemp("merge")
    reaper = Reaper()
    try:
        wait, expect = tmp / "go", tmp / "expect"
        log = open(tmp / "mpirun.log", "w")
        mpi = reaper.popen(
            ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "3", MPI_PROG,
             "--iters", 3, "--wait-file", wait, "--expect", expect],
            cwd=tmp, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        pid_files = [f"{wait}.pid.{r}" for r in range(3)]
        wait_files(pid_files, procs=[mpi])
        pids = [read_pid(f) for f in pid_files]
        sets = {"a": [pids[0], pids[2]], "b": [pids[1]], "c": pids}
        tracers = {}
        for name, ps in sets.items():
            tracers[name] = Tracer(reaper, ["-p", ",".join(map(str, ps)), "-q",
                                            "--json", tmp / f"{name}.json",
                                            "--chrome", tmp / f"{name}.trace.json"])
        for t in tracers.values():
            t.wait_attached()
        touch(wait)
        assert wait_proc(mpi, 120, "mpirun") == 0, (tmp / "mpirun.log").read_text()
        for name, t in tracers.items():
            # detaching waits for RCU grace periods per probe: slow on a loaded machine
            assert t.wait(240) == 0, t.describe()
        yield {"dir": tmp, "pids": pids, "ledgers": [load_ledger(f"{expect}.{r}")
                                                    for r in range(3)]}
    finally:
        reaper.cleanup()


def comparable_report(js):
    """Everything a report says that does not depend on which tracer measured it."""
    procs = []
    for p in js["processes"]:
        q = {k: v for k, v in p.items() if k not in ("merge_input", "diag_log")}
        # the diagnosis' log: the same calls, times measured by each tracer's own probes
        q["diag_log"] = [{k: v for k, v in r.items() if k not in ("ts_ns", "dur_ns")}
                         for r in p["diag_log"]["records"]] if "diag_log" in p else None
        # durations, and the bandwidths made of them, are each tracer's own measurement
        q["collectives"] = sorted(
            ({k: v for k, v in c.items() if k not in ("time_ns", "algbw_gbs", "busbw_gbs")}
             for c in p["collectives"]), key=lambda c: c["function"])
        q["threads"] = sorted(p.get("threads", []), key=lambda t: t["tid"])
        procs.append(q)
    procs.sort(key=lambda p: (p["rank"] is None, p["rank"], p["pid"]))
    return {"comm_counts": js["comm_counts"], "total_counts": js["total_counts"],
            "dropped_events": js["dropped_events"], "drops": js["drops"],
            "processes": procs}


def slices(trace):
    """{(pid, function, seq): event} of the traced calls."""
    out = {}
    for e in trace["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "comm":
            k = (e["pid"], e["args"]["function"], e["args"]["seq"])
            assert k not in out, f"two slices for {k}"
            out[k] = e
    return out


def rank_flows(trace):
    return [e for e in trace["traceEvents"] if e.get("name") == RANK_FLOW]


def skew_report(js, d):
    js = copy.deepcopy(js)
    c = js["clock"]
    c["start_ns"] -= d
    c["end_ns"] -= d
    c["mono_to_wall_ns"] += d
    c["mono_to_wall_ns_str"] = str(int(c["mono_to_wall_ns_str"]) + d)
    return js


def skew_trace(tr, d):
    tr = copy.deepcopy(tr)
    for e in tr["traceEvents"]:
        if e.get("ph") != "M" and "ts" in e:
            e["ts"] = round(e["ts"] - d / 1000, 3)
    m = tr["metadata"]
    m["start_ns"] -= d
    m["end_ns"] -= d
    m["mono_to_wall_ns"] += d
    m["mono_to_wall_ns_str"] = str(int(m["mono_to_wall_ns_str"]) + d)
    return tr


def test_merge_equals_one_tracer(traced):
    d = traced["dir"]
    r = merge("--json", d / "ab.json", "--chrome", d / "ab.trace.json",
              d / "a.json", d / "b.json", d / "a.trace.json", d / "b.trace.json")
    assert r.returncode == 0, r.stderr

    merged, whole = load_trace_json(d / "ab.json"), load_trace_json(d / "c.json")
    part_a, part_b = load(d / "a.json"), load(d / "b.json")
    assert sorted(p["rank"] for p in part_a["processes"]) == [0, 2]
    assert [p["rank"] for p in part_b["processes"]] == [1]
    # keyed by rank
    assert [p["rank"] for p in merged["processes"]] == [0, 1, 2]
    assert comparable_report(merged) == comparable_report(whole)
    for r, ledger in enumerate(traced["ledgers"]):
        assert_matches_ledger(merged["processes"][r], ledger,
                              extras={"MPI_Finalize": (0, 1)})
    # the clock of the first input, its window widened to every input's
    assert merged["clock"]["mono_to_wall_ns_str"] == part_a["clock"]["mono_to_wall_ns_str"]
    shift = [i["shift_ns"] for i in merged["merge"]["inputs"]]
    assert shift[0] == 0
    assert shift[1] == int(part_b["clock"]["mono_to_wall_ns_str"]) - int(
        part_a["clock"]["mono_to_wall_ns_str"])
    assert merged["clock"]["start_ns"] == min(part_a["clock"]["start_ns"],
                                              part_b["clock"]["start_ns"] + shift[1])
    assert merged["clock"]["end_ns"] == max(part_a["clock"]["end_ns"],
                                            part_b["clock"]["end_ns"] + shift[1])
    assert [i["file"] for i in merged["merge"]["inputs"]] == [str(d / "a.json"),
                                                              str(d / "b.json")]
    # the diagnosis, recomputed over both inputs' logs, is the one C made of every rank
    assert merged["merge"]["diagnosis"] == "recomputed over every input's diag_log"
    assert merged["findings"] == whole["findings"] == []
    for k in ("collectives_matched", "communicators"):
        assert merged["diagnosis"][k] == whole["diagnosis"][k], k
    assert whole["diagnosis"]["collectives_matched"] > 0
    assert part_a["diagnosis"]["collectives_matched"] == 0  # one node alone matches nothing
    # progress per communicator: lined up by identity across the nodes, as C saw it
    def progress(js):
        return sorted(({k: g[k] for k in ("pid", "rank", "communicator", "comm_rank",
                                          "entered", "completed", "in_flight")}
                       for g in js["progress"]), key=lambda g: (g["rank"], g["communicator"]))
    assert progress(merged) == progress(whole), (merged["progress"], whole["progress"])
    assert sorted({g["rank"] for g in whole["progress"]}) == [0, 1, 2], whole["progress"]
    assert all(g["entered"] == g["completed"] > 0 and g["in_flight"] is None
               for g in whole["progress"]), whole["progress"]

    # The timeline: the same slices as C's, at the same times (the tracers' probes on one
    # call fire microseconds apart), and as many rank→rank arrows.
    mt, ct = load(d / "ab.trace.json"), load(d / "c.trace.json")
    ms, cs = slices(mt), slices(ct)
    assert ms.keys() == cs.keys()
    assert len(ms) >= 3 * 3 * 20
    for k, e in ms.items():
        c = cs[k]
        for a in ("bytes_sent", "bytes_received", "count", "kind", "group_size"):
            assert e["args"][a] == c["args"][a], (k, a, e["args"][a], c["args"][a])
        assert abs(e["ts"] - c["ts"]) < 2000, (k, e["ts"], c["ts"])  # µs
    mf, cf = rank_flows(mt), rank_flows(ct)
    assert len(cf) > 0 and len(mf) == len(cf), (len(mf), len(cf))
    assert mt["metadata"]["merge"]["rank_flows"] * 2 == len(mf)
    # arrows across the node boundary: between B's rank 1 and A's ranks
    pid_rank = {p["pid"]: p["rank"] for p in mt["metadata"]["processes"]}
    by_id = {}
    for f in mf:
        by_id.setdefault(f["id"], []).append(pid_rank[f["pid"]])
    assert any(1 in rs and len(set(rs)) == 2 for rs in by_id.values()), "no cross-node arrow"
    assert sorted(p["rank"] for p in mt["metadata"]["processes"]) == [0, 1, 2]
    # still one valid timeline: every flow has its two ends
    assert all(len(v) == 2 for v in by_id.values())


def test_merge_aligns_clocks(traced):
    """B on a host whose monotonic clock is 3.5 s behind: the merge puts it back."""
    d = traced["dir"]
    (d / "b_skew.json").write_text(json.dumps(skew_report(load(d / "b.json"), SKEW_NS)))
    (d / "b_skew.trace.json").write_text(
        json.dumps(skew_trace(load(d / "b.trace.json"), SKEW_NS)))
    r = merge("--json", d / "ab2.json", "--chrome", d / "ab2.trace.json",
              d / "a.json", d / "b_skew.json", d / "a.trace.json", d / "b_skew.trace.json")
    assert r.returncode == 0, r.stderr
    if not (d / "ab.json").exists():
        merge("--json", d / "ab.json", "--chrome", d / "ab.trace.json",
              d / "a.json", d / "b.json", d / "a.trace.json", d / "b.trace.json")
    j1, j2 = load(d / "ab.json"), load(d / "ab2.json")
    assert j2["clock"] == j1["clock"]
    assert comparable_report(j2) == comparable_report(j1)
    shift = {i["file"]: i["shift_ns"] for i in j2["merge"]["inputs"]}
    assert shift[str(d / "b_skew.json")] - shift[str(d / "a.json")] == pytest.approx(
        SKEW_NS + {i["file"]: i["shift_ns"] for i in j1["merge"]["inputs"]}[str(d / "b.json")],
        abs=1)
    s1, s2 = slices(load(d / "ab.trace.json")), slices(load(d / "ab2.trace.json"))
    assert s1.keys() == s2.keys()
    worst = max(abs(s1[k]["ts"] - s2[k]["ts"]) for k in s1)
    assert worst <= 0.002, f"aligned timestamps differ by {worst} µs"
    # without alignment B's slices would sit 3.5 s earlier than A's
    b_pid = traced["pids"][1]
    b_ts = [e["ts"] for k, e in s2.items() if k[0] == b_pid]
    a_ts = [e["ts"] for k, e in s2.items() if k[0] != b_pid]
    assert abs(min(b_ts) - min(a_ts)) < 1_000_000


# ---------------------------------------------------------------------------------------
# Refusals: precise messages, non-zero exits, no output written.


def refuse(tmp_path, inputs, code, *needles, out_kind="--json"):
    out = tmp_path / "out.json"
    r = merge(out_kind, out, *inputs)
    assert r.returncode == code, (r.returncode, r.stderr)
    for n in needles:
        assert n in r.stderr, (n, r.stderr)
    assert not out.exists(), "a refused merge must write nothing"
    return r


def test_merge_conflicting_inputs(traced, tmp_path):
    d = traced["dir"]
    # the same rank from two tracers
    refuse(tmp_path, [d / "a.json", d / "c.json"], 12, "rank 0 is in", str(d / "a.json"),
           str(d / "c.json"), "each rank must come from one tracer")
    r = refuse(tmp_path, [d / "a.trace.json", d / "c.trace.json"], 12,
               "each rank must come from one tracer", out_kind="--chrome")
    assert re.search(r"rank [02] is in \S+a\.trace\.json \(pid \d+\) and in \S+c\.trace\.json",
                     r.stderr), r.stderr
    # another job: a different world size
    other = load(d / "b.json")
    for p in other["processes"]:
        p["world_size"] = 4
    (tmp_path / "other.json").write_text(json.dumps(other))
    refuse(tmp_path, [d / "a.json", tmp_path / "other.json"], 12, "says world size 4",
           "says 3", "not the same job")
    # another run: windows a day apart
    late = skew_report(load(d / "b.json"), 0)
    late["clock"]["mono_to_wall_ns_str"] = str(int(late["clock"]["mono_to_wall_ns_str"])
                                               + 86400 * 10**9)
    (tmp_path / "late.json").write_text(json.dumps(late))
    refuse(tmp_path, [d / "a.json", tmp_path / "late.json"], 12, "disjoint wall-clock windows",
           "not the same run")
    refuse(tmp_path, [d / "a.json", d / "a.json"], 12, "is given twice")


def test_merge_diag_log_inputs(traced, tmp_path):
    """An input from a tracer without diag_log: no merged diagnosis, and why; a malformed
    diag_log: refused with the process and record."""
    d = traced["dir"]
    old = load(d / "b.json")
    del old["diagnosis"]["options"]
    for p in old["processes"]:
        p.pop("diag_log", None)
    (tmp_path / "old.json").write_text(json.dumps(old))
    r = merge("--json", tmp_path / "m.json", d / "a.json", tmp_path / "old.json")
    assert r.returncode == 0, r.stderr
    m = load(tmp_path / "m.json")
    assert "findings" not in m and "diagnosis" not in m, list(m)
    assert m["merge"]["diagnosis"] == (
        f"not recomputed: {tmp_path / 'old.json'} has no diagnosis.options (a tracer "
        "without diag_log): each input's findings are under merge.inputs[].unmerged")
    bad = load(d / "b.json")
    bad["processes"][0]["diag_log"]["records"][0]["function"] = "MPI_Nope"
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    refuse(tmp_path, [d / "a.json", tmp_path / "bad.json"], 10,
           "diag_log: process 1: diag_log record 0: unknown function 'MPI_Nope'")


def test_merge_malformed_inputs(traced, tmp_path):
    d = traced["dir"]
    bad = tmp_path / "bad.json"
    bad.write_text('{"tool": "commtrace-bpf", "processes": [')
    r = refuse(tmp_path, [d / "a.json", bad], 10, f"{bad}: not JSON (error at byte")
    other = tmp_path / "other.json"
    other.write_text('{"hello": 1}')
    refuse(tmp_path, [d / "a.json", other], 10, f"{other}: not a commtrace-bpf --json report")
    noclock = load(d / "b.json")
    del noclock["clock"]
    (tmp_path / "noclock.json").write_text(json.dumps(noclock))
    refuse(tmp_path, [d / "a.json", tmp_path / "noclock.json"], 11,
           "no valid clock.mono_to_wall_ns")
    foreign = tmp_path / "foreign.trace.json"
    foreign.write_text('{"traceEvents": [{"ph": "X", "ts": 1, "dur": 1, "pid": 1, "tid": 1}]}')
    refuse(tmp_path, [d / "a.trace.json", foreign], 10, "not commtrace-bpf's --chrome output",
           out_kind="--chrome")
    broken = load(d / "b.trace.json")
    broken["traceEvents"].append(7)
    (tmp_path / "broken.trace.json").write_text(json.dumps(broken))
    refuse(tmp_path, [d / "a.trace.json", tmp_path / "broken.trace.json"], 10,
           "is not an event", out_kind="--chrome")
    refuse(tmp_path, [d / "a.json", tmp_path / "missing.json"], 6,
           f"cannot read {tmp_path / 'missing.json'}: No such file or directory")
    # usage
    r = merge(d / "a.json")
    assert r.returncode == 2 and "nothing to write" in r.stderr, r.stderr
    r = merge("--chrome", tmp_path / "x.json", d / "a.json")
    assert r.returncode == 2 and "is a --json report: give --json OUT" in r.stderr, r.stderr
    r = merge("--json", tmp_path / "x.json")
    assert r.returncode == 2 and "no inputs" in r.stderr, r.stderr


# ---------------------------------------------------------------------------------------
# The cross-rank diagnosis across nodes: diag_faults.py's Gloo job (2 ranks) traced by A
# (rank 0), B (rank 1) and C (both). A and B alone cannot match anything; merged, they
# must find what C found.

def traced_faults(reaper, tmp_path, args):
    from conftest import Tracer
    from test_diag import FAULTS, rank_log, start_ranks

    ranks, pids, wait = start_ranks(reaper, tmp_path, FAULTS, args)
    sets = {"a": [pids[0]], "b": [pids[1]], "c": pids}
    tracers = {name: Tracer(reaper, ["-p", ",".join(map(str, ps)), "-q", "--hang-after", 2,
                                     "--json", tmp_path / f"{name}.json"])
               for name, ps in sets.items()}
    for t in tracers.values():
        t.wait_attached()
    touch(wait)
    for r, p in enumerate(ranks):
        assert wait_proc(p, 180, f"rank {r}") == 0, rank_log(tmp_path, r)
    for t in tracers.values():
        assert t.wait(240) == 0, t.describe()
    r = merge("--json", tmp_path / "ab.json", tmp_path / "a.json", tmp_path / "b.json")
    assert r.returncode == 0, r.stderr
    js = {n: load_trace_json(tmp_path / f"{n}.json") for n in ("a", "b", "c", "ab")}
    assert js["ab"]["merge"]["diagnosis"] == "recomputed over every input's diag_log"
    return js, pids


def test_merge_diagnoses_late_rank_across_nodes(bpf, torch_available, reaper, tmp_path):
    from test_diag import site_line

    delay, k, steps = 1.0, 3, 6
    js, pids = traced_faults(reaper, tmp_path, ["--steps", steps, "--sleep-rank", 1,
                                                "--sleep-step", k, "--sleep", delay])
    # each node alone: one rank of c10d#0/2, nothing matched, nothing found
    for n in ("a", "b"):
        assert js[n]["findings"] == [] and js[n]["diagnosis"]["collectives_matched"] == 0
    whole, merged = js["c"], js["ab"]
    assert [f["kind"] for f in whole["findings"]] == ["late_rank"], whole["findings"]
    assert [f["kind"] for f in merged["findings"]] == ["late_rank"], merged["findings"]
    f, g = merged["findings"][0], whole["findings"][0]
    assert f["ranks"] == g["ranks"] == [1] and f["pids"] == g["pids"] == [pids[1]], (f, g)
    ev, ew = f["evidence"], g["evidence"]
    for key in ("communicator", "collectives_late", "collectives_matched", "max_skew_seq",
                "function", "call_site"):
        assert ev[key] == ew[key], (key, ev, ew)
    assert ev["max_skew_seq"] == 2 * k + 2 and ev["communicator"] == "c10d#0/2", ev
    assert ev["call_site"].endswith(f"diag_faults.py:{site_line('GRAD_SITE')})"), ev
    # one call, timed by two tracers' probes: the same skew within 50 ms, about the delay
    assert abs(ev["max_skew_ns"] - ew["max_skew_ns"]) <= 50_000_000, (ev, ew)
    assert abs(ev["max_skew_ns"] / 1e9 - delay) <= 0.4, ev
    assert merged["diagnosis"]["collectives_matched"] == \
        whole["diagnosis"]["collectives_matched"] == 1 + 2 * steps + 1
    top_m, top_w = merged["diagnosis"]["top_skew"][0], whole["diagnosis"]["top_skew"][0]
    assert (top_m["seq"], top_m["last_rank"]) == (top_w["seq"], top_w["last_rank"]) == \
        (2 * k + 2, 1)
    for pid in pids:
        pm = [p for p in merged["diagnosis"]["processes"] if p["pid"] == pid][0]
        pw = [p for p in whole["diagnosis"]["processes"] if p["pid"] == pid][0]
        for key in ("rank", "collectives_matched", "collectives", "steps",
                    "collectives_per_step"):
            assert pm[key] == pw[key], (key, pm, pw)
    # the per-node findings stay visible per input
    assert merged["merge"]["inputs"][0]["unmerged"]["findings"] == []


def test_merge_finds_mismatch_only_across_nodes(bpf, torch_available, reaper, tmp_path):
    from test_diag import site_line

    k = 2
    js, pids = traced_faults(reaper, tmp_path, ["--steps", 5, "--mismatch-rank", 1,
                                                "--mismatch-step", k])
    for n in ("a", "b"):
        assert js[n]["findings"] == [], js[n]["findings"]
    whole, merged = js["c"], js["ab"]
    assert [f["kind"] for f in merged["findings"]] == ["mismatch"], merged["findings"]
    f, g = merged["findings"][0], whole["findings"][0]
    assert f["ranks"] == g["ranks"] == [0, 1] and f["pids"] == g["pids"] == pids, (f, g)
    for key in ("communicator", "seq", "differs", "function", "function_other", "bytes",
                "bytes_other", "mismatched_collectives", "collectives_matched", "call_site",
                "call_site_other", "stack", "stack_other"):
        assert f["evidence"][key] == g["evidence"][key], (key, f["evidence"], g["evidence"])
    assert f["evidence"]["seq"] == 2 * k + 3
    assert f["evidence"]["differs"] == "dtype torch.float32 vs torch.int32"
    assert f["evidence"]["call_site"].endswith(f"diag_faults.py:{site_line('LOSS_SITE')})")
    assert f["summary"] == g["summary"]
