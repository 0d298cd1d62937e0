# SPDX-License-Identifier: MIT
"""merge at fleet scale: node reports of a DP x TP x PP job written by scripts/gen-fleet.py in
the tracer's own format (read back by merge's own reader), merged, and the diagnosis over
every rank checked: each injected late rank, mismatch and hang found exactly, with its
ranks, communicator and sequence number, and nothing else; every collective of every group
matched; no drop. And a report among them that cannot be read or aligned: refused by name,
or with --keep-going left out, saying which ranks and communicators it takes with it."""
import json
import subprocess
import sys

import pytest

from conftest import REPO, TRACER

GEN = REPO / "scripts" / "gen-fleet.py"


def gen(out, nodes, *inject, tp=4, pp=2, steps=20):
    cmd = [sys.executable, str(GEN), "--nodes", str(nodes), "--tp", str(tp), "--pp", str(pp),
           "--steps", str(steps), "--out", str(out)]
    for x in inject:
        cmd += ["--inject", x]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return json.loads((out / "expected.json").read_text())


def merge(out, nodes, *extra):
    inputs = [str(out / f"node{n}.json") for n in range(nodes)]
    return subprocess.run([str(TRACER), "merge", *extra, "--json", str(out / "job.json"),
                           *inputs], capture_output=True, text=True, timeout=600)


def findings(js):
    return sorted((f["kind"], tuple(f["ranks"]), f["evidence"]["communicator"],
                   f["evidence"].get("max_skew_seq", f["evidence"].get("seq")))
                  for f in js["findings"])


def expected_findings(exp):
    return sorted((f["kind"], tuple(f["ranks"]), f["communicator"], f["seq"])
                  for f in exp["findings"])


def group_collectives(exp):
    """Collectives of the job's group instances when nothing stops it: each TP group's
    barrier and 4 all-reduces a step, each PP group's barrier and broadcast a step, each DP
    group's barrier and all-reduce a step, and the world's barrier."""
    w, tp, pp, dp, s = exp["ranks"], exp["tp"], exp["pp"], exp["dp"], exp["steps"]
    return (w // tp) * (1 + 4 * s) + (w // pp) * (1 + s) + (w // dp) * (1 + s) + 1


def check_clean(js, exp, nodes):
    d = js["diagnosis"]
    assert findings(js) == expected_findings(exp)
    assert d["collectives_matched"] == group_collectives(exp)
    assert {k: v for k, v in d["drops"].items() if v} == {}
    w, tp, pp, dp = exp["ranks"], exp["tp"], exp["pp"], exp["dp"]
    ids = [c for c in d["communicators"]]
    assert len(ids) == w // tp + w // pp + w // dp + 1
    assert not any(c["ambiguous"] for c in ids)
    assert len(js["progress"]) == 4 * w  # (rank, communicator) pairs
    assert len(js["processes"]) == w and js["merge"]["incomplete_communicators"] == []
    assert len(js["merge"]["inputs"]) == nodes


def test_fleet_64_nodes_late_and_mismatch(tmp_path):
    exp = gen(tmp_path, 64, "late:77:dp:5", "mismatch:6:tp:30", "late:300:tp:41")
    assert [f["kind"] for f in exp["findings"]] == ["late_rank", "mismatch", "late_rank"]
    r = merge(tmp_path, 64)
    assert r.returncode == 0, r.stderr
    check_clean(json.loads((tmp_path / "job.json").read_text()), exp, 64)


def test_fleet_hang_across_nodes(tmp_path):
    """A rank that never comes to a PP broadcast: its peer on another node (PP stages are
    TP x ranks apart, so two nodes here) is blocked in it; the job stops; nothing else."""
    exp = gen(tmp_path, 8, "hang:9:pp:12", tp=8, pp=2)
    assert [f["ranks"] for f in exp["findings"]] == [[1, 9]]
    r = merge(tmp_path, 8)
    assert r.returncode == 0, r.stderr
    js = json.loads((tmp_path / "job.json").read_text())
    assert findings(js) == expected_findings(exp)
    assert "blocked" in js["findings"][0]["summary"]


def test_fleet_512_nodes_4096_ranks(tmp_path):
    """512 nodes x 8 ranks x 4 communicators: 16,384 (process, communicator) pairs, one of
    each fault, each found exactly (make bench times it and measures its memory)."""
    exp = gen(tmp_path, 512, "late:1234:dp:7", "mismatch:77:tp:30", "hang:4001:pp:18")
    r = merge(tmp_path, 512)
    assert r.returncode == 0, r.stderr
    js = json.loads((tmp_path / "job.json").read_text())
    assert findings(js) == expected_findings(exp)
    assert len(js["progress"]) == 16384
    assert {k: v for k, v in js["diagnosis"]["drops"].items() if v} == {}
    assert not any(c["ambiguous"] for c in js["diagnosis"]["communicators"])


def test_fleet_bad_report_refused_or_left_out(tmp_path):
    nodes = 16
    # late on a TP group inside a merged node: found; on a DP group (it spans the left out
    # nodes): not matched, so not found
    exp = gen(tmp_path, nodes, "late:77:tp:5", "late:78:dp:6")
    good = (tmp_path / "node3.json").read_text()
    doc = json.loads(good)
    del doc["clock"]
    (tmp_path / "node3.json").write_text(json.dumps(doc))  # parses, cannot be aligned
    (tmp_path / "node11.json").write_text('{"tool": "commtrace-bpf", "proc')  # cut short
    r = merge(tmp_path, nodes)
    assert r.returncode == 11 and "node3.json: no valid clock" in r.stderr, r.stderr
    assert not (tmp_path / "job.json").exists()

    r = merge(tmp_path, nodes, "--keep-going")
    assert r.returncode == 11, r.stderr  # the first refusal's, after the output
    js = json.loads((tmp_path / "job.json").read_text())
    ref = js["merge"]["refused"]
    assert [(x["file"].rsplit("/", 1)[1], x["exit_code"]) for x in ref] == \
        [("node3.json", 11), ("node11.json", 10)]
    assert ref[0]["ranks"] == list(range(24, 32)) and ref[1]["ranks"] is None
    # node 3's ranks: two TP groups of 4, four PP pairs, eight DP groups, the world
    comms = ref[0]["communicators"]
    assert sorted(c for c in comms if c.startswith("mpi#0/4@")) == ["mpi#0/4@24", "mpi#0/4@28"]
    assert len(comms) == 2 + 4 + 8 + 1 and not ref[0]["communicators_more"]
    assert "node3.json refused (exit 11): 8 ranks missing from 15 communicators" in r.stderr
    assert "node11.json refused (exit 10): its ranks are unknown" in r.stderr
    assert len(js["processes"]) == (nodes - 2) * 8
    # the DP groups and the world lack the 16 ranks of the two nodes
    inc = {c["communicator"]: (c["traced_ranks"], c["size"])
           for c in js["merge"]["incomplete_communicators"]}
    assert inc["mpi#0/128@0"] == (112, 128) and len(inc) == 8 + 1
    assert all(v == (14, 16) for k, v in inc.items() if k != "mpi#0/128@0")
    assert findings(js) == [f for f in expected_findings(exp) if f[2].startswith("mpi#0/4@")]
    assert len(findings(js)) == 1


@pytest.mark.parametrize("inject, why", [
    ("mismatch:4:tp:3", "its group's rank 0"),
    ("hang:5:dp:3", "more than the 32 kept"),
    ("late:9999:tp:3", "not in the"),
    ("late:1:tp:999", "no #999"),
])
def test_gen_fleet_refuses_bad_faults(tmp_path, inject, why):
    r = subprocess.run([sys.executable, str(GEN), "--nodes", "40", "--out", str(tmp_path),
                        "--inject", inject], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and why in r.stderr, r.stderr
