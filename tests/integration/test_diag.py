# SPDX-License-Identifier: MIT
"""The diagnosis layer (README "Diagnosis") on real ranks with known, injected faults,
and its silence on the clean workloads of the earlier issues.

Faults come from tests/workloads/diag_faults.py (its docstring gives the sequence
numbers on the default group: broadcast #1, step k's gradient all_reduce #2k+2, its
loss all_reduce #2k+3). Every test attaches with -p after the ranks' --wait-file, so
sequence numbers count from the first collective of the job.
"""
import json
import os
import signal
import subprocess
import time

from conftest import (
    MPIRUN, PROGS, PYTHON, WORKLOADS, free_port, kill_pid, load_ledger, load_trace_json,
    read_pid, touch, wait_files, wait_proc,
)

FAULTS = WORKLOADS / "diag_faults.py"
HANG_AFTER = 2  # seconds, --hang-after in every test


def gloo_env(port, rank):
    return dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2",
                RANK=str(rank))


def site_line(marker):
    for i, line in enumerate(FAULTS.read_text().splitlines(), 1):
        if line.rstrip().endswith("# " + marker):
            return i
    raise AssertionError(f"no {marker} in {FAULTS}")


def start_ranks(reaper, tmp_path, prog, args, n=2):
    wait = tmp_path / "go"
    port = free_port()
    ranks = []
    for r in range(n):
        log = open(tmp_path / f"rank{r}.log", "w")
        ranks.append(reaper.popen([PYTHON, prog, *args, "--wait-file", wait], cwd=tmp_path,
                                  env=gloo_env(port, r), stdin=subprocess.DEVNULL, stdout=log,
                                  stderr=subprocess.STDOUT))
    pid_files = [f"{wait}.pid.{r}" for r in range(n)]
    wait_files(pid_files, timeout=120, procs=ranks)
    return ranks, [read_pid(f) for f in pid_files], wait


def rank_log(tmp_path, r):
    p = tmp_path / f"rank{r}.log"
    return p.read_text()[-2000:] if p.exists() else ""


def run_gloo(reaper, start_tracer, tmp_path, prog, args, extra=()):
    """Ranks to completion under the tracer; (json, tracer)."""
    out, chrome = tmp_path / "trace.json", tmp_path / "trace.chrome.json"
    ranks, pids, wait = start_ranks(reaper, tmp_path, prog, args)
    tr = start_tracer(["-p", ",".join(map(str, pids)), "--json", out, "--chrome", chrome,
                       "--hang-after", HANG_AFTER, *extra])
    tr.wait_attached()
    touch(wait)
    for r, p in enumerate(ranks):
        assert wait_proc(p, 180, f"rank {r}") == 0, rank_log(tmp_path, r)
    assert tr.wait() == 0, tr.describe()
    js = load_trace_json(out)
    return js, tr, pids


def findings(js, kind=None):
    assert isinstance(js.get("findings"), list), "JSON lacks the findings array"
    return [f for f in js["findings"] if kind is None or f["kind"] == kind]


def diag_proc(js, pid):
    found = [p for p in js["diagnosis"]["processes"] if p["pid"] == pid]
    assert len(found) == 1, js["diagnosis"]["processes"]
    return found[0]


def chrome_instants(path):
    with open(path) as f:
        doc = json.load(f)
    return [e for e in doc["traceEvents"] if e.get("ph") == "i" and e.get("cat") == "diagnosis"]


def assert_steps(js, pids, steps, per_step):
    for pid in pids:
        p = diag_proc(js, pid)
        assert (p["steps"], p["collectives_per_step"]) == (steps, per_step), p


# ---------------------------------------------------------------------------------------


def test_late_rank_named_with_skew(bpf, torch_available, reaper, start_tracer, tmp_path):
    delay, k = 1.0, 3
    js, tr, pids = run_gloo(reaper, start_tracer, tmp_path, FAULTS,
                            ["--steps", 7, "--sleep-rank", 1, "--sleep-step", k,
                             "--sleep", delay])
    late = findings(js, "late_rank")
    assert len(late) == 1, js["findings"]
    f = late[0]
    assert f["ranks"] == [1] and f["pids"] == [pids[1]], f
    ev = f["evidence"]
    assert ev["function"] == "ProcessGroupGloo::allreduce"
    assert ev["max_skew_seq"] == 2 * k + 2, ev
    assert ev["collectives_late"] == 1, ev
    assert abs(ev["max_skew_ns"] / 1e9 - delay) <= 0.4, ev
    assert ev["call_site"].endswith(f"diag_faults.py:{site_line('GRAD_SITE')})"), ev
    # Nothing else: the sleep is below --hang-after, the collectives agree.
    assert [x["kind"] for x in findings(js)] == ["late_rank"], js["findings"]
    # Rank 0 waited for rank 1 about the delay; top offender is that collective.
    top = js["diagnosis"]["top_skew"][0]
    assert (top["seq"], top["last_rank"]) == (2 * k + 2, 1), top
    w0, w1 = diag_proc(js, pids[0])["wait_ns"], diag_proc(js, pids[1])["wait_ns"]
    assert w0 / 1e9 >= delay - 0.4 and w1 < w0, (w0, w1)
    # 1 broadcast + 2 per step + 1 barrier, all matched across both ranks.
    assert js["diagnosis"]["collectives_matched"] == 1 + 2 * 7 + 1
    assert_steps(js, pids, 7, 2)
    err = "\n".join(tr.stderr_lines())
    assert "[warning] late_rank: rank 1" in err, err[-3000:]
    inst = chrome_instants(tmp_path / "trace.chrome.json")
    assert [e["name"] for e in inst] == ["late_rank"], inst
    assert inst[0]["pid"] == pids[1]


def test_mismatch_named_with_both_stacks(bpf, torch_available, reaper, start_tracer, tmp_path):
    k = 2
    js, tr, pids = run_gloo(reaper, start_tracer, tmp_path, FAULTS,
                            ["--steps", 5, "--mismatch-rank", 1, "--mismatch-step", k])
    mm = findings(js, "mismatch")
    assert len(mm) == 1, js["findings"]
    f = mm[0]
    assert f["severity"] == "error"
    assert sorted(f["ranks"]) == [0, 1], f
    ev = f["evidence"]
    assert ev["seq"] == 2 * k + 3, ev
    assert ev["differs"] == "dtype torch.float32 vs torch.int32", ev
    assert ev["mismatched_collectives"] == 1, ev
    loss = f"diag_faults.py:{site_line('LOSS_SITE')})"
    for key in ("stack", "stack_other"):
        assert ev[key] and loss in ev[key] and "step" in ev[key], ev
    assert [x["kind"] for x in findings(js)] == ["mismatch"], js["findings"]
    err = "\n".join(tr.stderr_lines())
    assert "commtrace: MISMATCH: mismatched collective at #%d" % (2 * k + 3) in err, err[-3000:]


def test_hang_alert_live(bpf, torch_available, reaper, start_tracer, tmp_path):
    k = 2
    out = tmp_path / "trace.json"
    ranks, pids, wait = start_ranks(reaper, tmp_path, FAULTS,
                                    ["--steps", 5, "--hang-rank", 1, "--hang-step", k])
    tr = start_tracer(["-p", ",".join(map(str, pids)), "--json", out,
                       "--hang-after", HANG_AFTER])
    tr.wait_attached()
    touch(wait)
    t0 = time.monotonic()
    line = tr.wait_line("commtrace: HANG:", timeout=60)
    # Within the threshold plus the check period, with room for a loaded machine.
    assert time.monotonic() - t0 < HANG_AFTER + 20, line
    seq = 2 * k + 2
    assert line.startswith(
        f"commtrace: HANG: rank 0 (pid {pids[0]}) blocked "), line
    assert f" in ProcessGroupGloo::allreduce #{seq} on c10d#0/2; missing: rank 1 (pid " \
        f"{pids[1]}) at #{seq - 1}" in line, line
    lines = tr.stderr_lines()
    stack = lines[lines.index(line) + 1]
    assert stack.startswith("  stack: ") and \
        f"diag_faults.py:{site_line('GRAD_SITE')})" in stack, stack
    # The tracer keeps running; the ranks are killed; it then ends by itself, cleanly.
    time.sleep(1)
    assert tr.proc.poll() is None, tr.describe()
    for p in ranks:
        for pid in [p.pid] + pids:
            kill_pid(pid)
    assert tr.wait() == 0, tr.describe()
    js = load_trace_json(out)
    hangs = findings(js, "hang")
    assert len(hangs) == 1, js["findings"]
    h = hangs[0]
    assert h["ranks"] == [0, 1] and h["pids"] == pids, h
    assert h["evidence"]["seq"] == seq and h["evidence"]["blocked_ns"] >= HANG_AFTER * 1e9
    assert [x["kind"] for x in findings(js)] == ["hang"], js["findings"]


def scrape(target):
    """{(metric, labels...): value} of the progress families on /metrics."""
    import urllib.request
    text = urllib.request.urlopen(f"http://{target}/metrics", timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith(("commtrace_comm_last_seq{", "commtrace_comm_inflight_seconds{")):
            name, rest = line.split("{", 1)
            labels, value = rest.rsplit("} ", 1)
            kv = dict(x.split("=", 1) for x in labels.split(","))
            kv = {k: v.strip('"') for k, v in kv.items()}
            out[(name, kv["pid"], kv["communicator"], kv.get("state"))] = float(value)
    return out


def test_progress_on_hang(bpf, torch_available, reaper, start_tracer, tmp_path):
    """Rank 1 stops before step k's gradient all-reduce: every rank's last sequence numbers,
    exactly, in the SIGUSR1 dump (tracing goes on), the metrics and the JSON."""
    k = 2
    out = tmp_path / "trace.json"
    ranks, pids, wait = start_ranks(reaper, tmp_path, FAULTS,
                                    ["--steps", 5, "--hang-rank", 1, "--hang-step", k])
    tr = start_tracer(["-p", ",".join(map(str, pids)), "--json", out, "--metrics", "0",
                       "--hang-after", HANG_AFTER])
    from test_metrics import metrics_target
    target = metrics_target(tr)
    tr.wait_attached()
    touch(wait)
    tr.wait_line("commtrace: HANG:", timeout=60)
    seq = 2 * k + 2  # the broadcast, then 2 all-reduces a step: rank 0 is inside #seq
    site = f"diag_faults.py:{site_line('GRAD_SITE')})"
    for attempt in (1, 2):  # twice: the dump does not stop the trace
        n = len(tr.stderr_lines())
        kill_pid(tr.proc.pid, signal.SIGUSR1)
        tr.wait_line("commtrace: progress per communicator (SIGUSR1):", timeout=20,
                     after=n)
        time.sleep(0.5)
        lines = tr.stderr_lines()
        at = max(i for i, l in enumerate(lines) if "progress per communicator" in l)
        head, r0, r1 = lines[at + 1:at + 4]
        assert head.split()[:5] == ["PID", "RANK", "COMMUNICATOR", "ENTERED", "COMPLETED"]
        assert r0.split()[:5] == [str(pids[0]), "0", "c10d#0/2", str(seq), str(seq - 1)], r0
        assert f"#{seq} ProcessGroupGloo::allreduce, " in r0 and " s in it at " in r0 and \
            r0.endswith(site), r0
        assert r1.split() == [str(pids[1]), "1", "c10d#0/2", str(seq - 1), str(seq - 1), "-"]
        assert tr.proc.poll() is None, tr.describe()
    m = scrape(target)
    assert m[("commtrace_comm_last_seq", str(pids[0]), "c10d#0/2", "entered")] == seq, m
    assert m[("commtrace_comm_last_seq", str(pids[0]), "c10d#0/2", "completed")] == seq - 1
    assert m[("commtrace_comm_last_seq", str(pids[1]), "c10d#0/2", "entered")] == seq - 1
    assert m[("commtrace_comm_last_seq", str(pids[1]), "c10d#0/2", "completed")] == seq - 1
    assert m[("commtrace_comm_inflight_seconds", str(pids[0]), "c10d#0/2", None)] >= HANG_AFTER
    assert m[("commtrace_comm_inflight_seconds", str(pids[1]), "c10d#0/2", None)] == 0
    for p in ranks:
        for pid in [p.pid] + pids:
            kill_pid(pid)
    assert tr.wait() == 0, tr.describe()
    js = load_trace_json(out)  # nothing lost
    prog = {g["pid"]: g for g in js["progress"]}
    assert sorted(prog) == sorted(pids) and len(js["progress"]) == 2, js["progress"]
    g0, g1 = prog[pids[0]], prog[pids[1]]
    assert (g0["rank"], g0["communicator"], g0["entered"], g0["completed"]) == \
        (0, "c10d#0/2", seq, seq - 1), g0
    assert g0["in_flight"]["seq"] == seq and g0["in_flight"]["cut_short"] is True, g0
    assert g0["in_flight"]["function"] == "ProcessGroupGloo::allreduce"
    assert g0["in_flight"]["site"].endswith(site), g0
    assert (g1["rank"], g1["entered"], g1["completed"], g1["in_flight"]) == \
        (1, seq - 1, seq - 1, None), g1


def test_new_group_every_step(bpf, torch_available, reaper, start_tracer, tmp_path):
    steps = 6
    js, tr, pids = run_gloo(reaper, start_tracer, tmp_path, FAULTS,
                            ["--steps", steps, "--new-group"])
    cc = findings(js, "comm_creation_in_steps")
    assert len(cc) == 1, js["findings"]
    f = cc[0]
    assert sorted(f["ranks"]) == [0, 1], f
    ev = f["evidence"]
    # The first step's group is the first step; every later step makes one more.
    assert ev["communicators"] == steps - 1 and ev["steps"] == steps, ev
    assert ev["call_site"] == f"step ({FAULTS}:{site_line('NEW_GROUP_SITE')})", ev
    assert [x["kind"] for x in findings(js)] == ["comm_creation_in_steps"], js["findings"]
    assert_steps(js, pids, steps, 3)


def test_full_tensor_every_step(bpf, torch_available, reaper, start_tracer, tmp_path):
    steps = 6
    js, tr, pids = run_gloo(reaper, start_tracer, tmp_path, FAULTS,
                            ["--steps", steps, "--full-tensor"])
    ag = findings(js, "repeated_full_allgather")
    assert len(ag) == 1, js["findings"]
    f = ag[0]
    assert sorted(f["ranks"]) == [0, 1], f
    ev = f["evidence"]
    assert ev["steps"] == steps and ev["bytes"] == 256 * 4 * 2, ev
    assert ev["function"] == "ProcessGroupGloo::allgather"
    assert ev["call_site"] == f"full_tensor ({FAULTS}:{site_line('FULL_TENSOR_SITE')})", ev
    assert [x["kind"] for x in findings(js)] == ["repeated_full_allgather"], js["findings"]
    assert_steps(js, pids, steps, 3)


# ---------------------------------------------------------------------------------------
# Silence on clean jobs


def test_clean_faults_workload_steps_exact(bpf, torch_available, reaper, start_tracer,
                                           tmp_path):
    js, tr, pids = run_gloo(reaper, start_tracer, tmp_path, FAULTS, ["--steps", 9])
    assert findings(js) == [], js["findings"]
    assert_steps(js, pids, 9, 2)
    assert js["diagnosis"]["collectives_matched"] == 1 + 2 * 9 + 1
    assert chrome_instants(tmp_path / "trace.chrome.json") == []


def test_clean_gloo_collectives(bpf, torch_available, reaper, start_tracer, tmp_path):
    expect = tmp_path / "expect"
    js, tr, pids = run_gloo(reaper, start_tracer, tmp_path, WORKLOADS / "gloo_collectives.py",
                            ["--iters", 3, "--expect", expect])
    assert findings(js) == [], js["findings"]
    ledger = load_ledger(f"{expect}.0")
    c10d = sum(v["calls"] for f, v in ledger["functions"].items()
               if f.startswith("ProcessGroupGloo::"))
    assert c10d > 0 and js["diagnosis"]["collectives_matched"] == c10d


def test_clean_train_ddp(bpf, torch_available, reaper, start_tracer, tmp_path):
    js, tr, pids = run_gloo(reaper, start_tracer, tmp_path, WORKLOADS / "train_ddp.py",
                            ["--steps", 8, "--step-sleep", 0.01])
    assert findings(js) == [], js["findings"]
    assert js["diagnosis"]["collectives_matched"] >= 8
    assert "\ncommtrace: HANG" not in "\n".join(tr.stderr_lines())


MATCHABLE = ("MPI_Allreduce", "MPI_Iallreduce", "MPI_Reduce", "MPI_Bcast", "MPI_Allgather",
             "MPI_Allgatherv", "MPI_Gather", "MPI_Gatherv", "MPI_Scatter", "MPI_Scatterv",
             "MPI_Alltoall", "MPI_Alltoallv", "MPI_Reduce_scatter", "MPI_Reduce_scatter_block",
             "MPI_Barrier")


def test_clean_mpi_collectives(bpf, progs, mpi_available, reaper, start_tracer, tmp_path):
    wait, expect, out = tmp_path / "go", tmp_path / "expect", tmp_path / "trace.json"
    log = open(tmp_path / "mpirun.log", "w")
    mpi = reaper.popen(MPIRUN + [PROGS / "mpi_collectives", "--iters", 3, "--wait-file", wait,
                                 "--expect", expect],
                       cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=log,
                       stderr=subprocess.STDOUT)
    pid_files = [f"{wait}.pid.{r}" for r in (0, 1)]
    wait_files(pid_files, procs=[mpi])
    pids = [read_pid(f) for f in pid_files]
    tr = start_tracer(["-p", f"{pids[0]},{pids[1]}", "--json", out,
                       "--hang-after", HANG_AFTER])
    tr.wait_attached()
    touch(wait)
    assert wait_proc(mpi, 120, "mpirun") == 0, (tmp_path / "mpirun.log").read_text()[-2000:]
    assert tr.wait() == 0, tr.describe()
    js = load_trace_json(out)
    assert findings(js) == [], js["findings"]
    ledger = load_ledger(f"{expect}.0")
    n = sum(v["calls"] for f, v in ledger["functions"].items() if f in MATCHABLE)
    assert n > 0 and js["diagnosis"]["collectives_matched"] == n, (
        n, js["diagnosis"])
    assert [c["id"] for c in js["diagnosis"]["communicators"]] == ["mpi#0/2@0"]


# ---------------------------------------------------------------------------------------
# The same faults in an Open MPI job (tests/progs/mpi_faults.c: broadcast #1, step k's
# gradient MPI_Allreduce #2k+2, its loss MPI_Allreduce #2k+3, then a barrier). MPI calls
# carry no Python stack: no call site.

MPI_FAULTS = PROGS / "mpi_faults"


def start_mpi(reaper, tmp_path, args, prog=MPI_FAULTS, n=2):
    wait = tmp_path / "go"
    log = open(tmp_path / "mpirun.log", "w")
    mpi = reaper.popen(MPIRUN[:-1] + [str(n), prog, *args, "--wait-file", wait], cwd=tmp_path,
                       stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    pid_files = [f"{wait}.pid.{r}" for r in range(n)]
    wait_files(pid_files, timeout=120, procs=[mpi])
    return mpi, [read_pid(f) for f in pid_files], wait


def run_mpi(reaper, start_tracer, tmp_path, args, prog=MPI_FAULTS, n=2):
    out = tmp_path / "trace.json"
    mpi, pids, wait = start_mpi(reaper, tmp_path, args, prog, n)
    tr = start_tracer(["-p", ",".join(map(str, pids)), "--json", out,
                       "--hang-after", HANG_AFTER])
    tr.wait_attached()
    touch(wait)
    assert wait_proc(mpi, 120, "mpirun") == 0, (tmp_path / "mpirun.log").read_text()[-2000:]
    assert tr.wait() == 0, tr.describe()
    return load_trace_json(out), tr, pids


def test_mpi_late_rank(bpf, progs, mpi_available, reaper, start_tracer, tmp_path):
    delay, k, steps = 1.0, 3, 7
    js, tr, pids = run_mpi(reaper, start_tracer, tmp_path,
                           ["--steps", steps, "--sleep-rank", 1, "--sleep-step", k,
                            "--sleep-ms", int(delay * 1000)])
    assert [x["kind"] for x in findings(js)] == ["late_rank"], js["findings"]
    f = findings(js)[0]
    assert f["ranks"] == [1] and f["pids"] == [pids[1]], f
    ev = f["evidence"]
    assert (ev["communicator"], ev["function"], ev["max_skew_seq"], ev["collectives_late"]) \
        == ("mpi#0/2@0", "MPI_Allreduce", 2 * k + 2, 1), ev
    assert ev["call_site"] is None, ev
    assert abs(ev["max_skew_ns"] / 1e9 - delay) <= 0.4, ev
    assert js["diagnosis"]["collectives_matched"] == 1 + 2 * steps + 1
    w0, w1 = diag_proc(js, pids[0])["wait_ns"], diag_proc(js, pids[1])["wait_ns"]
    assert w0 / 1e9 >= delay - 0.4 and w1 < w0, (w0, w1)
    # Without a Python stack both all-reduces have one signature (sizes are not part of
    # it): the period found is one all-reduce, two per step.
    assert_steps(js, pids, 2 * steps, 1)


def test_mpi_mismatch(bpf, progs, mpi_available, reaper, start_tracer, tmp_path):
    k = 2
    js, tr, pids = run_mpi(reaper, start_tracer, tmp_path,
                           ["--steps", 5, "--mismatch-rank", 1, "--mismatch-step", k])
    assert [x["kind"] for x in findings(js)] == ["mismatch"], js["findings"]
    f = findings(js)[0]
    assert f["severity"] == "error" and f["ranks"] == [0, 1] and f["pids"] == pids, f
    ev = f["evidence"]
    assert (ev["seq"], ev["differs"], ev["function"], ev["function_other"]) == (
        2 * k + 3, "count 1 vs 2", "MPI_Allreduce", "MPI_Allreduce"), ev
    assert (ev["bytes"], ev["bytes_other"], ev["mismatched_collectives"]) == (8, 8, 1), ev
    err = "\n".join(tr.stderr_lines())
    assert "commtrace: MISMATCH: mismatched collective at #%d of mpi#0/2@0" % (2 * k + 3) in err


def test_mpi_hang_alert_live(bpf, progs, mpi_available, reaper, start_tracer, tmp_path):
    k = 2
    out = tmp_path / "trace.json"
    mpi, pids, wait = start_mpi(reaper, tmp_path,
                                ["--steps", 5, "--hang-rank", 1, "--hang-step", k])
    tr = start_tracer(["-p", ",".join(map(str, pids)), "--json", out,
                       "--hang-after", HANG_AFTER])
    tr.wait_attached()
    touch(wait)
    line = tr.wait_line("commtrace: HANG:", timeout=60)
    seq = 2 * k + 2
    assert line.startswith(f"commtrace: HANG: rank 0 (pid {pids[0]}) blocked "), line
    assert f" in MPI_Allreduce #{seq} on mpi#0/2@0; missing: rank 1 (pid {pids[1]}) at " \
        f"#{seq - 1}" in line, line
    time.sleep(1)
    assert tr.proc.poll() is None, tr.describe()
    for pid in pids + [mpi.pid]:
        kill_pid(pid)
    assert tr.wait() == 0, tr.describe()
    js = load_trace_json(out, allow_drops=True)
    assert [x["kind"] for x in findings(js)] == ["hang"], js["findings"]
    h = findings(js)[0]
    assert h["ranks"] == [0, 1] and h["pids"] == pids, h
    assert h["evidence"]["seq"] == seq and h["evidence"]["blocked_ns"] >= HANG_AFTER * 1e9
    # How far each rank got: rank 0 inside #seq (a C program: no Python call site)
    prog = {g["rank"]: g for g in js["progress"]}
    assert sorted(prog) == [0, 1] and len(js["progress"]) == 2, js["progress"]
    assert (prog[0]["communicator"], prog[0]["entered"], prog[0]["completed"]) == \
        ("mpi#0/2@0", seq, seq - 1), prog[0]
    assert prog[0]["in_flight"]["seq"] == seq and prog[0]["in_flight"]["site"] is None
    assert prog[0]["in_flight"]["function"] == "MPI_Allreduce", prog[0]
    assert (prog[1]["entered"], prog[1]["completed"], prog[1]["in_flight"]) == \
        (seq - 1, seq - 1, None), prog[1]


# ---------------------------------------------------------------------------------------
# serialized_reductions and traffic_growth on diag_faults.py


def log_records(js, pid):
    p = [p for p in js["processes"] if p["pid"] == pid][0]
    return p["diag_log"]["records"]


def test_serialized_reductions(bpf, torch_available, reaper, start_tracer, tmp_path):
    steps = 6
    js, tr, pids = run_gloo(reaper, start_tracer, tmp_path, FAULTS,
                            ["--steps", steps, "--serial-groups"])
    assert [x["kind"] for x in findings(js)] == ["serialized_reductions"], js["findings"]
    f = findings(js)[0]
    assert f["severity"] == "info" and sorted(f["ranks"]) == [0, 1], f
    ev = f["evidence"]
    assert ev["call_site"] == f"step ({FAULTS}:{site_line('SERIAL_A_SITE')})", ev
    assert ev["call_site_next"] == f"step ({FAULTS}:{site_line('SERIAL_B_SITE')})", ev
    assert ev["communicators"] == "c10d#1/2 then c10d#2/2", ev
    assert ev["function"] == ev["function_next"] == "ProcessGroupGloo::allreduce", ev
    # The count, exactly: per rank, the steps whose second reduction was issued at most
    # 5 ms after the first completed, from the calls the report logged; the largest.
    counts, gaps = [], []
    for pid in pids:
        recs = [r for r in log_records(js, pid) if r.get("comm") in ("c10d#1/2", "c10d#2/2")]
        assert len(recs) == 2 + 2 * steps, recs  # a warm-up each, then two per step
        n = 0
        for a, b in zip(recs[2::2], recs[3::2]):
            assert (a["comm"], b["comm"]) == ("c10d#1/2", "c10d#2/2"), (a, b)
            gap = b["ts_ns"] - (a["ts_ns"] + a["dur_ns"])
            if 0 <= gap <= 5_000_000:
                n += 1
                gaps.append(gap)
        counts.append(n)
    assert ev["occurrences"] == max(counts) and ev["occurrences"] >= 3, (ev, counts)
    assert ev["max_gap_ns"] == max(gaps), (ev, gaps)
    assert_steps(js, pids, steps, 4)


def test_traffic_growth(bpf, torch_available, reaper, start_tracer, tmp_path):
    steps = 6
    js, tr, pids = run_gloo(reaper, start_tracer, tmp_path, FAULTS,
                            ["--steps", steps, "--grow"])
    assert [x["kind"] for x in findings(js)] == ["traffic_growth"], js["findings"]
    f = findings(js)[0]
    assert f["severity"] == "warning" and sorted(f["ranks"]) == [0, 1], f
    ev = f["evidence"]
    # step k: the gradient (1000 + 500 k floats) and the loss (1 float)
    assert ev == {"steps_growing": steps - 1, "steps": steps,
                  "bytes_per_step_from": 1000 * 4 + 4,
                  "bytes_per_step_to": (1000 + 500 * (steps - 1)) * 4 + 4}, ev
    assert_steps(js, pids, steps, 2)
    for pid in pids:
        p = diag_proc(js, pid)
        assert (p["first_step_bytes"], p["last_step_bytes"], p["steps_growing"]) == (
            4004, (1000 + 500 * (steps - 1)) * 4 + 4, steps - 1), p


def test_mpi_groups_one_node_eight_ranks(bpf, progs, mpi_available, reaper, start_tracer,
                                         tmp_path):
    """One node of a 3-D parallel job: 8 real Open MPI ranks, each in 4 communicators (the
    world and TP, PP and DP pairs from MPI_Comm_split). The three pair kinds have one size
    and the four pairs of a kind one creation order: only their leaders (the world rank of
    a group's rank 0) tell them apart. Every collective matched, no identity ambiguous,
    no drop, every (rank, communicator) as far as the program went."""
    steps = 5
    js, _, _ = run_mpi(reaper, start_tracer, tmp_path, ["--steps", steps],
                       prog=PROGS / "mpi_groups", n=8)
    d = js["diagnosis"]
    assert findings(js) == [], js["findings"]
    # TP pairs {0,1},{2,3},..; PP pairs {0,2},{1,3},{4,6},{5,7}; DP pairs {0,4},..,{3,7}:
    # first used in that order, so ordinals 0, 1, 2 of size 2
    want = {"mpi#0/8@0": (8, 2)}
    want.update({f"mpi#0/2@{r}": (2, 1 + 2 * steps) for r in (0, 2, 4, 6)})
    want.update({f"mpi#1/2@{r}": (2, 1 + steps) for r in (0, 1, 4, 5)})
    want.update({f"mpi#2/2@{r}": (2, 1 + steps) for r in (0, 1, 2, 3)})
    assert {c["id"]: (c["traced_ranks"], c["collectives"] // c["traced_ranks"])
            for c in d["communicators"]} == want
    assert not any(c["ambiguous"] for c in d["communicators"])
    assert d["collectives_matched"] == sum(n for _, n in want.values())
    assert {k: v for k, v in d["drops"].items() if v} == {}
    assert js["dropped_events"] == 0
    prog = {(p["rank"], p["communicator"]): (p["entered"], p["completed"])
            for p in js["progress"]}
    assert len(prog) == 32 and all(e == c == want[k[1]][1] for k, (e, c) in prog.items())
