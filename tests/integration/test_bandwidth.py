# SPDX-License-Identifier: MIT
"""Bandwidth per collective as nccl-tests defines it (its doc/PERFORMANCE.md): algbw = S/t,
busbw = algbw x the kind's factor. Real Open MPI and Gloo ranks; every Chrome slice's
numbers are recomputed here from the slice's own bytes, group size and duration, and the
JSON's per-function p50 and max from those slices. Durations that are not the transfer's
(c10d's enqueue, MPI's I-form posts) must give null with the reason, never a number."""
import os
import statistics

from conftest import MPIRUN, PYTHON, free_port, load_trace_json
from test_chrome import load_chrome
from test_collectives import GLOO_PROG, LAUNCHER, MPI_PROG

HIST_PRECISION = 0.0625  # ct_hist: 8 sub-buckets per power of two


def factor(kind, n):
    """nccl-tests' busbw factor, written out here independently of the tracer."""
    return {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n,
            "reduce_scatter": (n - 1) / n, "all_to_all": (n - 1) / n,
            "gather": (n - 1) / n, "scatter": (n - 1) / n, "broadcast": 1, "reduce": 1,
            "send": 1, "recv": 1, "sendrecv": 1}[kind]


def op_size(a):
    """S: the whole operation's bytes (a gather's parts times n, else the larger side)."""
    if a["kind"] == "gather":
        return a["bytes_sent"] * a["group_size"]
    if a["kind"] == "scatter":
        return a["bytes_received"] * a["group_size"]
    return max(a["bytes_sent"], a["bytes_received"])


def close(a, b, rel, abs_tol=0):
    return abs(a - b) <= max(rel * max(abs(a), abs(b)), abs_tol)


def check_run(js, doc, timed_libs, enqueue_libs):
    """Slices against the formula, functions against their slices; the number of functions
    checked each way."""
    timed = untimed = 0
    for proc in js["processes"]:
        slices = {}
        for e in doc["traceEvents"]:
            if e["ph"] == "X" and e.get("cat") == "comm" and e["pid"] == proc["pid"]:
                slices.setdefault(e["name"], []).append(e)
        for c in proc["collectives"]:
            mine = slices.get(c["function"], [])
            assert len(mine) == c["calls"], (c["function"], len(mine), c["calls"])
            if c["library"] in enqueue_libs:
                assert c["busbw_gbs"] is None and c["algbw_gbs"] is None, c
                if c["kind"] in ("barrier", "wait", "comm_init", "comm_split", "comm_destroy"):
                    continue
                assert c["busbw_reason"] == "enqueue_time", c
                assert c["bandwidth_missing"] == {"enqueue_time": c["completed"]}, c
                for e in mine:
                    assert e["args"]["busbw_gbs"] is None, e
                    assert e["args"]["busbw_reason"] == "enqueue_time", e
                untimed += 1
                continue
            if c["library"] not in timed_libs:
                continue
            if c["function"].startswith("MPI_I"):  # the post, not the transfer
                assert c["busbw_gbs"] is None and c["busbw_reason"] == "nonblocking_post", c
                assert c["bandwidth_missing"] == {"nonblocking_post": c["completed"]}, c
                assert all(e["args"]["busbw_reason"] == "nonblocking_post" for e in mine)
                untimed += 1
                continue
            if c["kind"] == "barrier":
                assert c["busbw_gbs"] is None and c["busbw_reason"] == "no_bytes", c
                continue
            if c["kind"] not in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all",
                                 "gather", "scatter", "broadcast", "reduce", "send", "recv",
                                 "sendrecv"):
                continue
            busbw, algbw = [], []
            for e in mine:
                a = e["args"]
                dur_ns = round(e["dur"] * 1000)
                want_alg = op_size(a) / dur_ns  # bytes/ns = GB/s
                assert close(a["algbw_gbs"], want_alg, 1e-5), (a, dur_ns, want_alg)
                want_bus = want_alg * factor(a["kind"], a["group_size"])
                assert close(a["busbw_gbs"], want_bus, 1e-5), (a, want_bus)
                busbw.append(a["busbw_gbs"])
                algbw.append(a["algbw_gbs"])
            assert c["bandwidth_calls"] == len(mine) == c["completed"], c
            assert c["bandwidth_missing"] == {}, c
            # max is exact in the histogram (whole bytes/s); the p50 within its bucket
            assert close(c["busbw_gbs"]["max"], max(busbw), 1e-5, 2e-9), (c, max(busbw))
            assert close(c["algbw_gbs"]["max"], max(algbw), 1e-5, 2e-9), (c, max(algbw))
            lo, hi = sorted(busbw)[(len(busbw) - 1) // 2], sorted(busbw)[len(busbw) // 2]
            p50 = c["busbw_gbs"]["p50"]
            assert lo * (1 - HIST_PRECISION) - 2e-9 <= p50 <= hi * (1 + HIST_PRECISION), \
                (c["function"], p50, statistics.median(busbw))
            timed += 1
    return timed, untimed


def test_bandwidth_mpi(bpf, progs, mpi_available, start_tracer, tmp_path):
    out, chrome = tmp_path / "trace.json", tmp_path / "trace.chrome.json"
    tr = start_tracer(["--json", out, "--chrome", chrome, "-q", "--", *MPIRUN, MPI_PROG,
                       "--iters", 3, "--expect", tmp_path / "expect"], cwd=tmp_path)
    assert tr.wait(180) == 0, tr.describe()
    js, doc = load_trace_json(out), load_chrome(chrome)
    timed, untimed = check_run(js, doc, timed_libs={"mpi"}, enqueue_libs=set())
    # mpi_collectives: 15 blocking functions that move data, per rank; Iallreduce, Isend,
    # Irecv give none
    ranked = [p for p in js["processes"] if p["rank"] is not None]
    assert len(ranked) == 2
    assert timed == 2 * 15 and untimed == 2 * 3, (timed, untimed)


def test_bandwidth_gloo(bpf, progs, torch_available, start_tracer, tmp_path):
    out, chrome = tmp_path / "trace.json", tmp_path / "trace.chrome.json"
    script = tmp_path / "launch.sh"
    script.write_text(LAUNCHER.format(python=PYTHON, prog=GLOO_PROG))
    script.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    tr = start_tracer(["--json", out, "--chrome", chrome, "--", script, free_port(),
                       tmp_path / "expect"], cwd=tmp_path, env=env)
    assert tr.wait(240) == 0, tr.describe()
    js, doc = load_trace_json(out), load_chrome(chrome)
    timed, untimed = check_run(js, doc, timed_libs={"gloo"}, enqueue_libs={"c10d"})
    # gloo_collectives: all_reduce, broadcast, all_gather, timed on Gloo's worker and
    # enqueued by c10d, per rank
    assert timed == 2 * 3 and untimed == 2 * 3, (timed, untimed)
    assert any("BUSBW" in l for l in tr.stderr_lines()), tr.describe()
