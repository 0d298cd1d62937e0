# SPDX-License-Identifier: MIT
"""--metrics: the Prometheus endpoint, scraped by a real Prometheus server (Debian's
`prometheus`) while the tracer traces the Open MPI and Gloo workloads.

Each test starts Prometheus on a free loopback port with a temporary configuration that
scrapes the tracer every second and a temporary TSDB, lets the workload run its ledgered
collectives, holds the workload at a quiet point (no collective in flight), waits until
Prometheus holds a sample whose snapshot was taken after the workload's last collective
(commtrace_snapshot_timestamp_seconds), and then compares, through Prometheus' HTTP query
API, every (rank, function) series with the workload's own ledger: calls, bytes sent and
received, exactly. The same numbers must also be the tracer's final --json.
"""
import json
import os
import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from conftest import (
    PROGS, PYTHON, WORKLOADS, assert_matches_ledger, free_port, library_of, load_ledger,
    kill_pid, load_trace_json, process_by_pid, read_pid, run_tracer, touch, wait_files, wait_proc,
)

MPI_PROG = PROGS / "mpi_collectives"
GLOO_PROG = WORKLOADS / "gloo_collectives.py"
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
METRICS_LINE = re.compile(r"^metrics: serving http://(\S+):(\d+)/metrics$")


@pytest.fixture(scope="session")
def prometheus_bin():
    if not os.access(PROMETHEUS, os.X_OK):
        pytest.skip(
            f"SKIPPED LOUDLY: no Prometheus server binary ({PROMETHEUS}); "
            "scripts/install-deps.sh installs Debian's `prometheus`"
        )
    return PROMETHEUS


def http_get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.headers.get("Content-Type", ""), r.read().decode()


class Prometheus:
    """A Prometheus server on loopback, scraping one target every second."""

    def __init__(self, reaper, tmp_path, target):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        cfg = tmp_path / "prometheus.yml"
        cfg.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n"
            "scrape_configs:\n  - job_name: commtrace\n"
            f"    static_configs:\n      - targets: ['{target}']\n"
        )
        self.log = tmp_path / "prometheus.log"
        self.proc = reaper.popen(
            [PROMETHEUS, f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdin=subprocess.DEVNULL, stdout=open(self.log, "w"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                pytest.fail(f"prometheus exited ({self.proc.returncode}): {self.tail()}")
            try:
                if http_get(self.base + "/-/ready", timeout=2)[0] == 200:
                    return
            except (OSError, urllib.error.URLError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"prometheus not ready within 60s: {self.tail()}")
            time.sleep(0.2)

    def tail(self):
        return self.log.read_text()[-2000:] if self.log.exists() else ""

    def query(self, expr):
        """Instant query: [(labels, value)] with values as floats."""
        url = self.base + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        status, _, body = http_get(url)
        js = json.loads(body)
        assert status == 200 and js["status"] == "success", f"query {expr!r}: {body[:400]}"
        return [(r["metric"], float(r["value"][1])) for r in js["data"]["result"]]

    def wait_snapshot_after(self, wall_s, timeout=60):
        """Wait until Prometheus holds a snapshot taken after wall_s (time.time())."""
        deadline = time.monotonic() + timeout
        seen = None
        while time.monotonic() < deadline:
            r = self.query('commtrace_snapshot_timestamp_seconds{job="commtrace"}')
            if r:
                seen = r[0][1]
                if seen > wall_s:
                    return seen
            time.sleep(0.25)
        pytest.fail(f"no scrape of a snapshot after {wall_s} within {timeout}s (latest: "
                    f"{seen}); prometheus: {self.tail()}")


def metrics_target(tracer):
    line = tracer.wait_line("metrics: serving", timeout=30)
    m = METRICS_LINE.match(line)
    assert m, f"unexpected metrics line {line!r}"
    assert m.group(1) == "127.0.0.1", f"--metrics 0 must bind loopback: {line!r}"
    return f"{m.group(1)}:{m.group(2)}"


def series(prom, metric, extra=""):
    """{(rank, function): value} of one per-call metric, checking label sanity."""
    out = {}
    for labels, v in prom.query(f'{metric}{{job="commtrace"{extra}}}'):
        for k in ("pid", "library", "function", "kind"):
            assert labels.get(k), f"{metric} sample without label {k}: {labels}"
        key = (int(labels["rank"]), labels["function"])
        assert key not in out, f"{metric}: two series for {key}"
        assert v == int(v), f"{metric}{labels} = {v} is not an integer"
        out[key] = int(v)
    return out


def check_against_ledgers(prom, ledgers, bytes_if_nonzero=()):
    """Every ledgered (rank, function): calls, bytes exactly; nothing else in its library."""
    calls = series(prom, "commtrace_calls_total")
    done = series(prom, "commtrace_calls_completed_total")
    sent = series(prom, "commtrace_sent_bytes_total")
    recv = series(prom, "commtrace_received_bytes_total")
    hist = series(prom, "commtrace_call_duration_seconds_bucket", ',le="+Inf"')
    inflight = series(prom, "commtrace_in_flight_calls")
    busbw = series(prom, "commtrace_busbw_bytes_per_second_count")
    problems = []
    for ledger in ledgers:
        r = ledger["rank"]
        libs = {w["library"] for w in ledger["functions"].values()}
        for fn, want in ledger["functions"].items():
            k = (r, fn)
            if calls.get(k) != want["calls"]:
                problems.append(f"rank {r} {fn}: calls {calls.get(k)}, ledger {want['calls']}")
            # a quiet point: everything returned, so the histogram counts every call
            if done.get(k) != want["calls"] or hist.get(k) != want["calls"]:
                problems.append(f"rank {r} {fn}: completed {done.get(k)}, histogram count "
                                f"{hist.get(k)}, expected {want['calls']}")
            if inflight.get(k) != 0:
                problems.append(f"rank {r} {fn}: in flight {inflight.get(k)}, expected 0")
            # bus bandwidth where the duration times the transfer: blocking calls that move
            # data on MPI and Gloo (test_bandwidth.py checks the values)
            timed = (want["library"] in ("mpi", "gloo") and not fn.startswith("MPI_I") and
                     (want["bytes_sent"] or want["bytes_received"]))
            if busbw.get(k, 0) != (want["calls"] if timed else 0):
                problems.append(f"rank {r} {fn}: busbw histogram count {busbw.get(k)}, "
                                f"expected {want['calls'] if timed else 0}")
            if want["library"] in bytes_if_nonzero and not (sent.get(k) or recv.get(k)):
                continue
            if sent.get(k) != want["bytes_sent"] or recv.get(k) != want["bytes_received"]:
                problems.append(f"rank {r} {fn}: bytes {sent.get(k)}/{recv.get(k)}, ledger "
                                f"{want['bytes_sent']}/{want['bytes_received']}")
        for (rr, fn), n in calls.items():
            if rr == r and fn not in ledger["functions"] and library_of(fn) in libs:
                problems.append(f"rank {r} {fn}: {n} calls in Prometheus, none in the ledger")
    assert not problems, "Prometheus differs from the ledgers:\n  " + "\n  ".join(problems)
    return calls, sent, recv


def check_json_equals_prometheus(js, calls, sent, recv, pids):
    """The tracer's own final report says the same as what Prometheus scraped."""
    for r, pid in enumerate(pids):
        p = process_by_pid(js, pid)
        for c in p["collectives"]:
            k = (r, c["function"])
            if k not in calls:
                continue  # called after the quiet point (MPI_Finalize, teardown)
            assert (calls[k], sent[k], recv[k]) == (
                c["calls"], c["bytes_sent"], c["bytes_received"]), (
                f"rank {r} {c['function']}: Prometheus {calls[k]}/{sent[k]}/{recv[k]}, "
                f"--json {c['calls']}/{c['bytes_sent']}/{c['bytes_received']}")


def assert_endpoint_closed(target):
    host, port = target.rsplit(":", 1)
    with socket.socket() as s:
        s.settimeout(2)
        assert s.connect_ex((host, int(port))) != 0, f"{target} still accepts after the tracer"


class Hammer:
    """Scrapes /metrics in a few threads while the workload runs (bounded: 400 requests)."""

    def __init__(self, target, threads=3, limit=400):
        self.url = f"http://{target}/metrics"
        self.stop = threading.Event()
        self.ok, self.errors, self.left = 0, [], limit
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run, daemon=True) for _ in range(threads)]
        for t in self.threads:
            t.start()

    def run(self):
        while not self.stop.is_set():
            with self.lock:
                if self.left <= 0:
                    return
                self.left -= 1
            try:
                status, ctype, body = http_get(self.url)
                good = (status == 200 and ctype.startswith("text/plain; version=0.0.4")
                        and "commtrace_snapshot_timestamp_seconds" in body)
                with self.lock:
                    if good:
                        self.ok += 1
                    else:
                        self.errors.append(f"{status} {ctype}")
            except (OSError, urllib.error.URLError) as e:
                with self.lock:
                    self.errors.append(repr(e))

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=30)
        assert not self.errors, f"scrapes failed during tracing: {self.errors[:5]}"
        assert self.ok >= 10, f"only {self.ok} scrapes completed during the workload"


# ---------------------------------------------------------------------------------------


def test_metrics_mpi_prometheus(bpf, progs, mpi_available, prometheus_bin, reaper,
                                start_tracer, tmp_path):
    iters = 1000  # about 31,000 ledgered calls per rank: scrapes run during heavy tracing
    wait, pause, prog = tmp_path / "go", tmp_path / "pause", tmp_path / "progress"
    out = tmp_path / "trace.json"
    log = open(tmp_path / "mpirun.log", "w")
    mpi = reaper.popen(
        ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", MPI_PROG,
         "--iters", iters, "--wait-file", wait, "--progress", prog,
         "--pause-after", iters, "--pause-file", pause],
        cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    pid_files = [f"{wait}.pid.{r}" for r in (0, 1)]
    wait_files(pid_files, procs=[mpi])
    pids = [read_pid(f) for f in pid_files]

    tr = start_tracer(["-p", f"{pids[0]},{pids[1]}", "--metrics", "0", "--json", out])
    target = metrics_target(tr)
    tr.wait_attached()
    prom = Prometheus(reaper, tmp_path, target)
    hammer = Hammer(target)
    touch(wait)
    deadline = time.monotonic() + 120
    while True:
        try:
            ledgers = [load_ledger(f"{prog}.{r}") for r in (0, 1)]
            if all(l["iterations"] == iters for l in ledgers):
                break
        except (OSError, ValueError):
            pass
        assert mpi.poll() is None, f"mpirun exited early: {(tmp_path / 'mpirun.log').read_text()}"
        assert time.monotonic() < deadline, "MPI workload did not finish its iterations"
        time.sleep(0.05)
    done_at = time.time()
    hammer.finish()
    prom.wait_snapshot_after(done_at)

    up = prom.query('up{job="commtrace"}')
    assert up and up[0][1] == 1, f"Prometheus says the target is down: {up}"
    assert [v for _, v in prom.query('commtrace_dropped_events_total{job="commtrace"}')] == [0]
    calls, sent, recv = check_against_ledgers(prom, ledgers)
    info = prom.query('commtrace_process_info{job="commtrace"}')
    assert sorted((int(l["pid"]), int(l["rank"]), l["world_size"]) for l, _ in info) == [
        (pids[0], 0, "2"), (pids[1], 1, "2")]

    touch(pause)
    assert wait_proc(mpi, 120, "mpirun") == 0, (tmp_path / "mpirun.log").read_text()
    assert tr.wait() == 0, tr.describe()
    assert_endpoint_closed(target)
    js = load_trace_json(out)
    check_json_equals_prometheus(js, calls, sent, recv, pids)


def test_metrics_gloo_prometheus(bpf, progs, torch_available, prometheus_bin, reaper,
                                 start_tracer, tmp_path):
    wait, hold, expect = tmp_path / "go", tmp_path / "hold", tmp_path / "expect"
    out = tmp_path / "trace.json"
    port = free_port()
    ranks = []
    for r in (0, 1):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   WORLD_SIZE="2", RANK=str(r))
        ranks.append(reaper.popen(
            [PYTHON, GLOO_PROG, "--iters", 3, "--wait-file", wait, "--expect", expect,
             "--hold-file", hold],
            cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
            stdout=open(tmp_path / f"rank{r}.log", "w"), stderr=subprocess.STDOUT))
    pid_files = [f"{wait}.pid.{r}" for r in (0, 1)]
    wait_files(pid_files, timeout=120, procs=ranks)
    pids = [read_pid(f) for f in pid_files]

    tr = start_tracer(["-p", f"{pids[0]},{pids[1]}", "--metrics", "0", "--json", out])
    target = metrics_target(tr)
    tr.wait_attached()
    prom = Prometheus(reaper, tmp_path, target)
    touch(wait)
    wait_files([f"{expect}.{r}" for r in (0, 1)], timeout=120, procs=ranks)
    done_at = time.time()
    ledgers = [load_ledger(f"{expect}.{r}") for r in (0, 1)]
    prom.wait_snapshot_after(done_at)

    # c10d's bytes come from tensor metadata: compared where the tracer reports them.
    calls, sent, recv = check_against_ledgers(prom, ledgers, bytes_if_nonzero=("c10d",))
    assert any(k[1].startswith("gloo::") for k in calls), f"no Gloo series: {sorted(calls)}"

    touch(hold)
    for r, p in enumerate(ranks):
        assert wait_proc(p, 120, f"gloo rank {r}") == 0, (tmp_path / f"rank{r}.log").read_text()
    assert tr.wait() == 0, tr.describe()
    assert_endpoint_closed(target)
    js = load_trace_json(out)
    check_json_equals_prometheus(js, calls, sent, recv, pids)
    for r, pid in enumerate(pids):
        assert_matches_ledger(process_by_pid(js, pid), ledgers[r], check_dtype=False,
                              bytes_if_nonzero=("c10d",))


# ---------------------------------------------------------------------------------------
# The endpoint itself: where it binds, what it refuses, HTTP behaviour. Argument errors
# and a port in use are found before any BPF work: no root needed.


@pytest.mark.parametrize("spec", ["abc", "1.2.3:80", "127.0.0.1:", "127.0.0.1:70000", ":80",
                                  "[::1]80", "[zz]:80", "-1", "80x"])
def test_metrics_bad_address(spec):
    r = run_tracer(["-p", "1", "--metrics", spec])
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert f"invalid --metrics '{spec}'" in r.stderr, r.stderr


def test_metrics_port_in_use():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        r = run_tracer(["-p", str(os.getpid()), "--metrics", str(port)])
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert (f"--metrics 127.0.0.1:{port}: cannot listen there: Address already in use"
            in r.stderr), r.stderr
    assert "attached:" not in r.stderr


def test_metrics_endpoint_http(bpf, reaper, start_tracer):
    sleeper = reaper.popen(["sleep", "60"])
    tr = start_tracer(["-p", sleeper.pid, "--wait-libs", "--metrics", "0.0.0.0:0", "-d", "30"])
    line = tr.wait_line("metrics: serving", timeout=30)
    m = METRICS_LINE.match(line)
    assert m and m.group(1) == "0.0.0.0", line  # bound where it was told
    base = f"http://127.0.0.1:{m.group(2)}"
    tr.wait_attached()
    status, ctype, body = http_get(base + "/metrics")
    assert status == 200 and ctype == "text/plain; version=0.0.4; charset=utf-8", ctype
    assert f'commtrace_process_info{{pid="{sleeper.pid}",rank="",world_size="",comm="sleep"}} 1' \
        in body, body[:2000]
    assert "commtrace_traced_processes 1\n" in body
    # every sample belongs to a declared family; counters end in _total
    families = dict(re.findall(r"^# TYPE (\S+) (\S+)$", body, re.M))
    for name, typ in families.items():
        if typ == "counter":
            assert name.endswith("_total"), name
    for line in body.splitlines():
        if line and not line.startswith("#"):
            name = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0)
            base_name = re.sub(r"_(bucket|sum|count)$", "", name)
            assert name in families or base_name in families, f"undeclared sample {line!r}"
    for path, code in (("/nope", 404), ("/", 200)):
        try:
            got = http_get(base + path)[0]
        except urllib.error.HTTPError as e:
            got = e.code
        assert got == code, (path, got)
    req = urllib.request.Request(base + "/metrics", data=b"x", method="POST")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=10)
    assert e.value.code == 405
    tr.signal(2)
    assert tr.wait() == 0, tr.describe()
    assert_endpoint_closed(f"127.0.0.1:{m.group(2)}")


# ---------------------------------------------------------------------------------------
# The diagnosis' findings as metrics (user/diag/diag_metrics.c), on diag_faults.py's
# Gloo job with a fault injected: scraped while the tracer still runs.

EXPO_LINE = re.compile(r'^([a-z_]+)(?:\{(.*)\})? (\S+)$')


def scrape(target):
    """{(metric, ((label, value), ...)): value} of one scrape of the endpoint."""
    status, ctype, body = http_get(f"http://{target}/metrics")
    assert status == 200 and ctype.startswith("text/plain; version=0.0.4"), (status, ctype)
    out = {}
    for line in body.splitlines():
        if not line or line.startswith("#"):
            continue
        m = EXPO_LINE.match(line)
        assert m, f"unparsable exposition line {line!r}"
        labels = tuple(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def findings_of(sample):
    return {dict(l)["kind"]: v for (n, l), v in sample.items() if n == "commtrace_findings_total"}


def late_of(sample):
    return {dict(l)["rank"]: v for (n, l), v in sample.items()
            if n == "commtrace_late_collectives_total"}


def scrape_until(target, pred, timeout=60, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        s = scrape(target)
        if pred(s):
            return s
        assert time.monotonic() < deadline, f"no scrape with {what} within {timeout}s: " + \
            str({k: v for k, v in s.items() if "commtrace_diag" in k[0] or
                 "finding" in k[0] or "hung" in k[0] or "matched" in k[0]})
        time.sleep(0.3)


KINDS = ["late_rank", "mismatch", "hang", "comm_creation_in_steps", "repeated_full_allgather",
         "serialized_reductions", "traffic_growth"]


def test_metrics_diag_hang_prometheus(bpf, torch_available, prometheus_bin, reaper,
                                      start_tracer, tmp_path):
    from test_diag import FAULTS, start_ranks

    k = 2
    out = tmp_path / "trace.json"
    ranks, pids, wait = start_ranks(reaper, tmp_path, FAULTS,
                                    ["--steps", 5, "--hang-rank", 1, "--hang-step", k])
    tr = start_tracer(["-p", ",".join(map(str, pids)), "--json", out, "--hang-after", 2,
                       "--metrics", "0"])
    target = metrics_target(tr)
    tr.wait_attached()
    prom = Prometheus(reaper, tmp_path, target)
    s = scrape(target)
    assert s[("commtrace_diagnosis_available", ())] == 1
    assert findings_of(s) == {kind: 0 for kind in KINDS}, findings_of(s)
    assert s[("commtrace_hung_ranks", ())] == 0
    touch(wait)
    tr.wait_line("commtrace: HANG:", timeout=60)
    # The endpoint, while the ranks hang: rank 0 blocked in #2k+2, rank 1 never came.
    s = scrape_until(target, lambda s: s[("commtrace_hung_ranks", ())] == 1, what="a hung rank")
    assert findings_of(s) == dict({kind: 0 for kind in KINDS}, hang=1), findings_of(s)
    # broadcast #1 and steps 0..k-1 (2 each) matched; #2k+2 is the one rank 0 waits in
    assert s[("commtrace_collectives_matched_total", ())] == 1 + 2 * k
    assert late_of(s) == {"0": 0, "1": 0}, late_of(s)
    # ... and Prometheus, scraping it
    deadline = time.monotonic() + 60
    while True:
        hung = prom.query('commtrace_hung_ranks{job="commtrace"}')
        hang = prom.query('commtrace_findings_total{job="commtrace",kind="hang"}')
        if hung and hang and hung[0][1] == 1 and hang[0][1] == 1:
            break
        assert time.monotonic() < deadline, f"Prometheus: hung {hung}, hang findings {hang}"
        time.sleep(0.25)
    assert [v for _, v in prom.query(
        'sum(commtrace_findings_total{job="commtrace",kind!="hang"})')] == [0]
    assert tr.proc.poll() is None, tr.describe()
    for p in ranks:
        for pid in [p.pid] + pids:
            kill_pid(pid)
    assert tr.wait() == 0, tr.describe()
    assert [f["kind"] for f in load_trace_json(out)["findings"]] == ["hang"]


def run_held(reaper, start_tracer, tmp_path, args):
    """diag_faults.py held at a quiet point after its last step: (scrape, tracer, pids)."""
    from test_diag import FAULTS, start_ranks

    done, hold = tmp_path / "done", tmp_path / "hold"
    ranks, pids, wait = start_ranks(reaper, tmp_path, FAULTS,
                                    [*args, "--done-file", done, "--hold-file", hold])
    tr = start_tracer(["-p", ",".join(map(str, pids)), "--metrics", "0", "--hang-after", 2])
    target = metrics_target(tr)
    tr.wait_attached()
    touch(wait)
    wait_files([f"{done}.{r}" for r in (0, 1)], timeout=180, procs=ranks)
    steps = int(args[args.index("--steps") + 1])
    s = scrape_until(target, lambda s: s.get(("commtrace_collectives_matched_total", ())) ==
                     1 + 2 * steps, what=f"{1 + 2 * steps} collectives matched")
    assert tr.proc.poll() is None, tr.describe()
    touch(hold)
    for r, p in enumerate(ranks):
        assert wait_proc(p, 120, f"rank {r}") == 0
    assert tr.wait() == 0, tr.describe()
    return s


def test_metrics_diag_late_rank(bpf, torch_available, reaper, start_tracer, tmp_path):
    delay = 1.0
    s = run_held(reaper, start_tracer, tmp_path,
                 ["--steps", 5, "--sleep-rank", 1, "--sleep-step", 3, "--sleep", delay])
    assert findings_of(s) == dict({kind: 0 for kind in KINDS}, late_rank=1), findings_of(s)
    assert late_of(s) == {"0": 0, "1": 1}, late_of(s)
    assert abs(s[("commtrace_skew_max_seconds", ())] - delay) <= 0.4, s
    assert s[("commtrace_hung_ranks", ())] == 0


def test_metrics_diag_clean(bpf, torch_available, reaper, start_tracer, tmp_path):
    s = run_held(reaper, start_tracer, tmp_path, ["--steps", 5])
    assert s[("commtrace_diagnosis_available", ())] == 1
    assert findings_of(s) == {kind: 0 for kind in KINDS}, findings_of(s)
    assert late_of(s) == {"0": 0, "1": 0}, late_of(s)
    assert s[("commtrace_hung_ranks", ())] == 0 and s[("commtrace_late_ranks", ())] == 0
