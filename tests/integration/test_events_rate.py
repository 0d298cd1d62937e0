# SPDX-License-Identifier: MIT
"""Drop accounting under overload: calls made = calls counted + calls lost, exactly.

A synthetic target (tests/progs/event_rate.c, calling the HCCL stand-in flat out) overruns
a 1 MiB ring buffer while the tracer is held stopped (SIGSTOP), so drops are certain, not
a matter of machine speed. Nothing here is timed: the event rate itself is measured by
`scripts/bench.py events`.
"""
import json
import os
import re
import signal
import time

import pytest

from conftest import load_trace_json, read_pid, run_tracer, touch, wait_files, wait_proc

CALLS = 400_000


def parse_counts(text):
    out = {}
    for line in text.splitlines():
        k, _, v = line.partition(" ")
        out[k] = int(float(v))
    return out


@pytest.mark.parametrize("threads", [1, 3])
def test_drop_identity_at_overload(bpf, progs, reaper, start_tracer, tmp_path, threads):
    go = tmp_path / "go"
    target = reaper.popen(
        [progs / "event_rate", progs / "libhccl.so", "--calls", CALLS, "--threads", threads,
         "--wait-file", go],
        stdout=open(tmp_path / "target.out", "w"),
    )
    wait_files([f"{go}.pid"], procs=[target])
    pid = read_pid(f"{go}.pid")
    js_path = tmp_path / "trace.json"
    tracer = start_tracer(["-q", "--ringbuf", "1", "-p", pid, "--json", js_path])
    tracer.wait_attached()

    # The reader stopped: the 1 MiB ring holds about 5000 calls, then every record is lost.
    tracer.signal(signal.SIGSTOP)
    try:
        touch(go)
        time.sleep(0.5)
    finally:
        tracer.signal(signal.SIGCONT)
    assert wait_proc(target, 120, "event_rate") == 0
    assert tracer.wait(timeout=60) == 0, tracer.describe()

    made = parse_counts((tmp_path / "target.out").read_text())
    assert made["issued_calls"] == CALLS
    assert made["traced_calls"] == CALLS + 2 * threads  # + HcclCommInitRootInfo, Destroy

    js = load_trace_json(js_path, allow_drops=True)
    drops = js["drops"]
    assert drops["ringbuf_full"] > 0, f"no overload reached: {drops}"
    [proc] = js["processes"]
    calls = {c["function"]: c for c in proc["collectives"]}
    counted = sum(c["calls"] for c in calls.values())
    completed = sum(c["completed"] for c in calls.values())

    # The identity: every call made is either counted or counted as lost.
    assert js["total_counts"] == counted
    assert counted + js["dropped_calls"] == made["traced_calls"], (
        f"made {made['traced_calls']}, counted {counted}, dropped_calls "
        f"{js['dropped_calls']}, drops {drops}")
    assert js["dropped_calls"] == (drops["ringbuf_full"] + drops["thread_table_full"]
                                   + drops["user_space"])
    assert js["dropped_events"] == (js["dropped_calls"] + drops["returns_lost"]
                                    + drops["process_events_lost"])
    # Every counted call returned before the exit: its return was received or counted lost.
    assert completed + drops["returns_lost"] == counted, (counted, completed, drops)
    assert drops["unpaired_returns"] == 0 and drops["nesting_too_deep"] == 0
    # Records received: a call and a return per counted call, less the returns lost, and
    # the process' exit unless that was lost.
    assert js["events"] == 2 * counted - drops["returns_lost"] + 1 - drops["process_events_lost"]
    assert calls["HcclBarrier"]["calls"] <= CALLS

    # Without -i or --metrics (and even with -q), the drops were said on stderr while
    # tracing, at most one line every few seconds, each count at most the final one.
    notes = [l for l in tracer.stderr_lines() if "dropped" in l]
    assert notes, f"no drop line on stderr; {tracer.describe()}"
    counts = []
    for l in notes:
        m = re.fullmatch(r"commtrace-bpf: dropped (\d+) events so far \(ring buffer full\); "
                         r"see --ringbuf \(now 1 MiB\)", l)
        assert m, f"unexpected drop line: {l!r}"
        counts.append(int(m.group(1)))
    assert counts == sorted(set(counts)) and 0 < counts[-1] <= js["dropped_events"], counts


def test_record_replay_same_report(bpf, progs, reaper, start_tracer, tmp_path):
    """--record, then `replay`: the same JSON report as the live run, from the file alone."""
    go = tmp_path / "go"
    target = reaper.popen(
        [progs / "event_rate", progs / "libhccl.so", "--calls", 20_000, "--threads", 2,
         "--wait-file", go], stdout=open(tmp_path / "target.out", "w"))
    wait_files([f"{go}.pid"], procs=[target])
    live, rec = tmp_path / "live.json", tmp_path / "rec.ctr"
    tracer = start_tracer(["-q", "-p", read_pid(f"{go}.pid"), "--json", live, "--record", rec])
    tracer.wait_attached()
    touch(go)
    assert wait_proc(target, 120, "event_rate") == 0
    assert tracer.wait() == 0, tracer.describe()

    out = tmp_path / "replay.json"
    r = run_tracer(["replay", rec, "--json", out, "--chrome", tmp_path / "replay.chrome.json",
                    "--table", tmp_path / "replay.table"])
    assert r.returncode == 0, r.stderr
    assert "python stacks replayed: 0, not replayed: 0" in r.stderr
    a, b = load_trace_json(live), load_trace_json(out)
    assert a["total_counts"] == 20_000 + 4
    assert not [l for l in tracer.stderr_lines() if "dropped" in l], "drop line, no drops"
    for js in (a, b):
        for k in ("version", "diagnosis", "findings", "progress"):  # the diagnosis: live only
            js.pop(k, None)
        for p in js["processes"]:
            p.pop("diag_log", None)
    assert a == b
    json.loads((tmp_path / "replay.chrome.json").read_text())

    # Cut short (a tracer killed mid-run): what is whole is replayed, and said to be cut.
    data = rec.read_bytes()
    cut = tmp_path / "cut.ctr"
    cut.write_bytes(data[: len(data) // 2 + 3])
    r = run_tracer(["replay", cut, "--json", tmp_path / "cut.json"])
    assert r.returncode == 0 and "cut short" in r.stderr, r.stderr
    c = load_trace_json(tmp_path / "cut.json")
    assert 0 < c["total_counts"] < a["total_counts"]

    # Not a recording; another catalog: refused as usage errors, nothing written.
    bad = tmp_path / "bad.ctr"
    bad.write_bytes(b"nonsense" * 8)
    r = run_tracer(["replay", bad, "--json", tmp_path / "bad.json"])
    assert r.returncode == 2 and "not a commtrace recording" in r.stderr
    bad.write_bytes(data[:16] + b"\0\0\0\0" + data[20:64])
    r = run_tracer(["replay", bad, "--json", tmp_path / "bad.json"])
    assert r.returncode == 2 and "another function catalog" in r.stderr
    assert not (tmp_path / "bad.json").exists()


@pytest.mark.parametrize("wide", [True, False])
def test_shared_file_probed_once(bpf, progs, reaper, start_tracer, tmp_path, wide):
    """By pid, a library file that 4 or more of the processes map is probed once for every
    process, the traced ones kept in BPF: each traced process's calls are counted exactly,
    an untraced process calling the same file at the same time is not, and it runs on
    unchanged after the tracer has gone. COMMTRACE_FILE_WIDE=0 keeps one set of links per
    process, with the same counts."""
    n, calls = 4, 3000
    gos = [tmp_path / f"go{i}" for i in range(n + 1)]
    procs = [reaper.popen([progs / "event_rate", progs / "libhccl.so", "--calls", calls,
                           "--wait-file", go], stdout=open(f"{go}.out", "w")) for go in gos]
    wait_files([f"{go}.pid" for go in gos], procs=procs)
    pids = [read_pid(f"{go}.pid") for go in gos]
    out = tmp_path / "t.json"
    env = None if wide else dict(os.environ, COMMTRACE_FILE_WIDE="0")
    tracer = start_tracer(["-v", "-p", ",".join(map(str, pids[:n])), "--json", out], env=env)
    tracer.wait_attached()
    for go in gos:
        touch(go)
    for p in procs:
        assert wait_proc(p, 120, "event_rate") == 0
    assert tracer.wait() == 0, tracer.describe()
    said = [l for l in tracer.stderr_lines() if "shared by the processes" in l]
    assert len(said) == (1 if wide else 0), said
    js = load_trace_json(out)
    got = {p["pid"]: sum(c["calls"] for c in p["collectives"]) for p in js["processes"]}
    want = {pid: parse_counts(open(f"{go}.out").read())["traced_calls"]
            for pid, go in zip(pids[:n], gos)}
    assert got == want and all(v >= calls for v in want.values()), (got, want)
    assert js["dropped_events"] == 0
    assert parse_counts(open(f"{gos[n]}.out").read())["issued_calls"] == calls
