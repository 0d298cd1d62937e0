# SPDX-License-Identifier: MIT
"""Fixtures and helpers for the integration tests: real BPF, real targets.

Run as root from the repository root:  /usr/bin/python3 -m pytest -rs tests/integration
Tests that need BPF skip (with the reason `commtrace-bpf --check` gives) where it is not
usable; tests of argument handling, --help and --dry-run need no BPF and always run.
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# COMMTRACE_BPF=/path/to/binary runs the suite against another build (an installed one).
TRACER = Path(os.environ.get("COMMTRACE_BPF", REPO / "commtrace-bpf")).resolve()
PROGS = REPO / "build" / "progs"
WORKLOADS = REPO / "tests" / "workloads"
PYTHON = "/usr/bin/python3"  # Debian's: the only one with torch here
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2"]
NCCL_LIB = "/usr/local/cuda/lib64/libnccl.so.2"

ATTACH_TIMEOUT = 120  # resolving libtorch_cpu (hundreds of MB) can take a while
EXIT_TIMEOUT = 60


# ---------------------------------------------------------------------------------------
# Session fixtures


@pytest.fixture(scope="session")
def repo():
    return REPO


@pytest.fixture(scope="session")
def tracer_path():
    if not os.access(TRACER, os.X_OK):
        pytest.fail(f"{TRACER} is not built: run `make` first")
    return TRACER


@pytest.fixture(scope="session")
def progs():
    need = ["mpi_collectives", "libhccl.so", "hccl_driver", "nccl_hold"]
    missing = [n for n in need if not (PROGS / n).exists()]
    if missing:
        pytest.fail(f"test programs missing in {PROGS}: {', '.join(missing)}: run `make progs`")
    return PROGS


@pytest.fixture(scope="session")
def bpf(tracer_path):
    """Real BPF is usable here, or the test is skipped with the reason."""
    if os.geteuid() != 0:
        pytest.skip("SKIPPED LOUDLY: integration tests need root (BPF uprobes); run as root")
    r = subprocess.run([str(tracer_path), "--check"], capture_output=True, text=True, timeout=60)
    why = (r.stderr.strip() or r.stdout.strip() or f"exit code {r.returncode}").splitlines()
    if r.returncode not in (0, 3):
        # BPF is there but the kernel refused our programs (the verifier): a bug, not a skip.
        pytest.fail("`commtrace-bpf --check` failed: the kernel refused the BPF programs: "
                    + " | ".join(why[-8:]), pytrace=False)
    if r.returncode != 0:
        pytest.skip(
            "SKIPPED LOUDLY: `commtrace-bpf --check` says BPF uprobes are unusable here: "
            + " | ".join(why[-5:])
        )
    return r.stderr  # "BPF uprobes usable (how probes attach)"


@pytest.fixture(scope="session")
def mpi_available():
    if not shutil.which("mpirun"):
        pytest.skip("SKIPPED LOUDLY: mpirun (Open MPI) not installed")


@pytest.fixture(scope="session")
def torch_available():
    r = subprocess.run(
        [PYTHON, "-c", "import torch.distributed as d; assert d.is_gloo_available()"],
        capture_output=True, text=True, timeout=120,
    )
    if r.returncode != 0:
        pytest.skip(f"SKIPPED LOUDLY: {PYTHON} has no torch with Gloo: {r.stderr.strip()[-300:]}")


# ---------------------------------------------------------------------------------------
# Processes


def descendants(pid):
    """Every live descendant of pid, from /proc (children first found, then theirs)."""
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def kill_pid(pid, sig=signal.SIGKILL):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


class Reaper:
    """Kills what a test started (by pid, with its descendants) when the test ends."""

    def __init__(self):
        self.procs = []
        self.pids = []

    def popen(self, args, **kw):
        p = subprocess.Popen([str(a) for a in args], **kw)
        self.procs.append(p)
        return p

    def add_pid(self, pid):
        self.pids.append(pid)

    def cleanup(self):
        victims = []
        for p in self.procs:
            if p.poll() is None:
                victims += descendants(p.pid) + [p.pid]
        victims += [p for p in self.pids if alive(p)]
        for pid in victims:
            kill_pid(pid)
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass


@pytest.fixture
def reaper():
    r = Reaper()
    yield r
    r.cleanup()


class Tracer:
    """commtrace-bpf running in the background; stdout and stderr collected line by line."""

    def __init__(self, reaper, args, cwd=REPO, env=None):
        self.args = [str(TRACER)] + [str(a) for a in args]
        self.proc = reaper.popen(
            self.args, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
        )
        self.out, self.err = [], []
        self.cond = threading.Condition()
        self.threads = [
            threading.Thread(target=self._pump, args=(self.proc.stdout, self.out), daemon=True),
            threading.Thread(target=self._pump, args=(self.proc.stderr, self.err), daemon=True),
        ]
        for t in self.threads:
            t.start()

    def _pump(self, stream, sink):
        for line in stream:
            with self.cond:
                sink.append(line.rstrip("\n"))
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    def describe(self):
        with self.cond:
            err = "\n".join(self.err[-40:])
        return f"`{' '.join(self.args)}` stderr (last 40 lines):\n{err}"

    def wait_line(self, prefix, timeout=ATTACH_TIMEOUT, after=0):
        """The first stderr line starting with prefix (from line number after on); fails if
        the tracer exits first."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for line in self.err[after:]:
                    if line.startswith(prefix):
                        return line
                if self.proc.poll() is not None and not any(t.is_alive() for t in self.threads):
                    pytest.fail(
                        f"tracer exited ({self.proc.returncode}) before printing "
                        f"'{prefix}'; {self.describe()}"
                    )
                left = deadline - time.monotonic()
                if left <= 0:
                    pytest.fail(f"no '{prefix}' line within {timeout}s; {self.describe()}")
                self.cond.wait(min(left, 0.2))

    def wait_attached(self, timeout=ATTACH_TIMEOUT):
        return self.wait_line("attached:", timeout)

    def signal(self, sig):
        kill_pid(self.proc.pid, sig)

    def wait(self, timeout=EXIT_TIMEOUT):
        """Exit code; fails (and kills it) if the tracer does not end in time."""
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            for pid in descendants(self.proc.pid) + [self.proc.pid]:
                kill_pid(pid)
            self.proc.wait(timeout=10)
            pytest.fail(f"tracer did not exit within {timeout}s; {self.describe()}")
        for t in self.threads:
            t.join(timeout=10)
        return rc

    def stderr_lines(self):
        with self.cond:
            return list(self.err)

    def stdout_lines(self):
        with self.cond:
            return list(self.out)


@pytest.fixture
def start_tracer(reaper, tracer_path):
    def start(args, **kw):
        return Tracer(reaper, args, **kw)

    return start


def run_tracer(args, timeout=60, **kw):
    """Run commtrace-bpf to completion: CompletedProcess (text)."""
    return subprocess.run(
        [str(TRACER)] + [str(a) for a in args], cwd=REPO, capture_output=True, text=True,
        timeout=timeout, stdin=subprocess.DEVNULL, **kw,
    )


def wait_files(paths, timeout=60, procs=()):
    """Wait until every path exists; fail early if one of procs exits first."""
    deadline = time.monotonic() + timeout
    while True:
        missing = [p for p in paths if not os.path.exists(p)]
        if not missing:
            return
        for p in procs:
            if p.poll() is not None:
                pytest.fail(f"{p.args[0]} exited ({p.returncode}) while waiting for {missing}")
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {missing}")
        time.sleep(0.05)


def read_pid(path, timeout=10):
    """The pid in path; the writer may have created it and not yet written the line."""
    deadline = time.monotonic() + timeout
    while True:
        with open(path) as f:
            text = f.read()
        if text.endswith("\n") or time.monotonic() > deadline:
            return int(text.strip())
        time.sleep(0.02)


def touch(path):
    Path(path).touch()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_proc(p, timeout, what):
    try:
        return p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{what} did not finish within {timeout}s")


# ---------------------------------------------------------------------------------------
# The tracer's JSON and the targets' ledgers

TIME_KEYS = ("min", "p50", "p99", "max", "total")
LIBRARIES = {"mpi", "gloo", "c10d", "nccl", "hccl"}


def load_trace_json(path, allow_drops=False):
    """Load --json output and check the contract's structure and internal consistency."""
    assert os.path.exists(path), f"tracer wrote no JSON file at {path}"
    with open(path) as f:
        text = f.read()
    try:
        js = json.loads(text)
    except json.JSONDecodeError as e:
        pytest.fail(f"{path} is not valid JSON ({e}): {text[:400]!r}")
    for key in ("comm_counts", "total_counts", "dropped_events", "processes"):
        assert key in js, f"JSON lacks top-level '{key}'"
    assert isinstance(js["processes"], list)
    if not allow_drops:
        # Exact numbers are only meaningful with nothing lost.
        assert js["dropped_events"] == 0, f"tracer dropped {js['dropped_events']} events"

    total = {}
    for p in js["processes"]:
        for key in ("pid", "rank", "comm_counts", "collectives"):
            assert key in p, f"process entry lacks '{key}': {p}"
        assert isinstance(p["pid"], int) and p["pid"] > 0
        assert p["rank"] is None or isinstance(p["rank"], int)
        seen = set()
        for c in p["collectives"]:
            f = c["function"]
            assert f not in seen, f"pid {p['pid']}: two entries for {f}"
            seen.add(f)
            assert c["library"] in LIBRARIES, f"{f}: library {c['library']!r}"
            assert c["calls"] > 0, f"{f}: zero-call entries must be absent"
            assert c["bytes_sent"] >= 0 and c["bytes_received"] >= 0
            t = c["time_ns"]
            for k in TIME_KEYS:
                assert isinstance(t[k], (int, float)) and t[k] >= 0, f"{f}: time_ns.{k}={t[k]}"
            assert t["min"] <= t["p50"] <= t["p99"] <= t["max"], f"{f}: time_ns out of order {t}"
            # durations are of the completed calls (a call cut short by a kill has none)
            assert t["min"] * c["completed"] <= t["total"] <= t["max"] * c["completed"], (
                f"{f}: time_ns.total {t['total']} not within completed x [min, max] ({t})"
            )
            assert p["comm_counts"].get(f) == c["calls"], (
                f"pid {p['pid']}: comm_counts[{f}]={p['comm_counts'].get(f)} "
                f"but collectives says {c['calls']}"
            )
        for f, n in p["comm_counts"].items():
            total[f] = total.get(f, 0) + n
    assert js["comm_counts"] == total, (
        f"top-level comm_counts {js['comm_counts']} != sum over processes {total}"
    )
    assert js["total_counts"] == sum(total.values())
    return js


def load_ledger(path):
    with open(path) as f:
        return json.load(f)


def process_by_pid(js, pid):
    found = [p for p in js["processes"] if p["pid"] == pid]
    assert len(found) == 1, (
        f"expected one process entry for pid {pid}, found {len(found)}; "
        f"pids in JSON: {[p['pid'] for p in js['processes']]}"
    )
    return found[0]


def ranked(js):
    return [p for p in js["processes"] if p["rank"] is not None]


# Open MPI spells MPI_LONG_LONG as the MPI_LONG_LONG_INT handle; either name is right.
DTYPE_ALIASES = {"MPI_LONG_LONG": {"MPI_LONG_LONG", "MPI_LONG_LONG_INT"}}


def library_of(function):
    for prefix, lib in (("MPI_", "mpi"), ("PMPI_", "mpi"), ("Hccl", "hccl"), ("nccl", "nccl"),
                        ("gloo::", "gloo"), ("ProcessGroup", "c10d"), ("c10d::", "c10d")):
        if function.startswith(prefix):
            return lib
    return None


def assert_matches_ledger(proc, ledger, extras=None, check_dtype=True, bytes_if_nonzero=(),
                          optional=(), strict_libraries=None):
    """Compare one process of the tracer's JSON with the target's own ledger.

    extras: {function: (lo, hi)} calls allowed for functions the ledger does not count
      (setup calls outside its window). optional: ledger functions the tracer may leave
      unprobed (absent), but must count exactly if present. bytes_if_nonzero: libraries
      whose bytes are checked only when the JSON reports some (c10d: tensor metadata).
    strict_libraries: libraries in which any function outside ledger+extras is an error
      (default: those of the ledger); elsewhere extras must at least move no bytes.
      Pass () where the tracer saw setup we cannot enumerate (communicator creation).
    """
    extras = extras or {}
    assert proc["rank"] == ledger["rank"], (
        f"pid {proc['pid']}: rank {proc['rank']}, the program says {ledger['rank']}"
    )
    got = {c["function"]: c for c in proc["collectives"]}
    problems = []
    for fn, want in ledger["functions"].items():
        c = got.get(fn)
        if c is None:
            if fn not in optional:
                problems.append(f"{fn}: absent, expected {want['calls']} calls")
            continue
        if c["library"] != want["library"]:
            problems.append(f"{fn}: library {c['library']!r}, expected {want['library']!r}")
        if c["calls"] != want["calls"]:
            problems.append(f"{fn}: {c['calls']} calls, expected {want['calls']}")
        check_bytes = want["library"] not in bytes_if_nonzero or (
            c["bytes_sent"] or c["bytes_received"]
        )
        if check_bytes:
            for k in ("bytes_sent", "bytes_received"):
                if c[k] != want[k]:
                    problems.append(f"{fn}: {k} {c[k]}, expected {want[k]}")
        if check_dtype:
            ok = DTYPE_ALIASES.get(want["dtype"], {want["dtype"]})
            if c.get("dtype") not in ok:
                problems.append(f"{fn}: dtype {c.get('dtype')!r}, expected {want['dtype']!r}")
        # The reduce op, where the ledger names one: the one op of every call, or "mixed".
        if "op" in want and c.get("op", "absent") != want["op"]:
            problems.append(f"{fn}: op {c.get('op', 'absent')!r}, expected {want['op']!r}")
    if strict_libraries is None:
        strict_libraries = {w["library"] for w in ledger["functions"].values()}
    strict = set(strict_libraries)
    for fn, c in got.items():
        if fn in ledger["functions"]:
            continue
        if fn in extras:
            lo, hi = extras[fn]
            if not lo <= c["calls"] <= hi:
                problems.append(f"{fn}: {c['calls']} calls, expected {lo}..{hi}")
        elif c["library"] in strict:
            problems.append(f"{fn}: {c['calls']} calls reported, but the program made none")
        elif c["bytes_sent"] or c["bytes_received"]:
            problems.append(f"{fn}: unexpected entry moving bytes: {c}")
    for fn, n in proc["comm_counts"].items():
        if fn in got or fn in ledger["functions"]:
            continue  # checked above (comm_counts == calls for every collectives entry)
        if fn in extras:
            lo, hi = extras[fn]
            if not lo <= n <= hi:
                problems.append(f"comm_counts[{fn}] = {n}, expected {lo}..{hi}")
        elif library_of(fn) in strict:
            problems.append(f"comm_counts[{fn}] = {n}, but the program made no such call")
    assert not problems, (
        f"pid {proc['pid']} (rank {ledger['rank']}) differs from its ledger:\n  "
        + "\n  ".join(problems)
    )


# ---------------------------------------------------------------------------------------
# The PyTorch 2.x root: Debian 13 with Debian's python3-torch 2.6 (scripts/torch2-root.sh)

TORCH2_ROOT = REPO / "build" / "torch2-root"
TORCH2_WORK = "/opt/commtrace"  # inside the root: the workloads and test programs, copied


class Torch2Root:
    """The root, with /proc mounted in it and the workloads copied in, while the session
    lasts. Ranks run in it with chroot: the container case and torch 2.x in one."""

    def __init__(self, path):
        self.path = path
        self.mounted = False

    def setup(self):
        proc = self.path / "proc"
        if not os.path.ismount(proc):
            subprocess.run(["mount", "-t", "proc", "proc", str(proc)], check=True, timeout=30)
            self.mounted = True
        work = self.path / TORCH2_WORK.lstrip("/")
        if work.exists():
            shutil.rmtree(work)
        shutil.copytree(WORKLOADS, work / "workloads")
        (work / "progs").mkdir()
        for name in ("hccl_driver", "libhccl.so"):
            shutil.copy2(PROGS / name, work / "progs" / name)

    def teardown(self):
        if self.mounted:
            subprocess.run(["umount", str(self.path / "proc")], timeout=30)

    def host(self, inner):
        """A path inside the root, as this process sees it."""
        return self.path / str(inner).lstrip("/")

    def python(self, script, *args):
        """The command line of a workload run by the root's python3 (torch 2.6)."""
        return ["chroot", str(self.path), "env", "USE_LIBUV=0", "PYTHONUNBUFFERED=1", "python3",
                f"{TORCH2_WORK}/workloads/{script}", *[str(a) for a in args]]


@pytest.fixture(scope="session")
def torch2_root():
    if os.geteuid() != 0:
        pytest.skip("SKIPPED LOUDLY: the PyTorch 2.x root needs root (chroot, mount)")
    stamp = TORCH2_ROOT / ".commtrace-root"
    if not stamp.exists():
        pytest.skip(f"SKIPPED LOUDLY: no PyTorch 2.x root at {TORCH2_ROOT}: "
                    "scripts/torch2-root.sh could not build it here (it needs debootstrap and "
                    "Debian's archive); `make test` runs it first")
    r = Torch2Root(TORCH2_ROOT)
    r.setup()
    yield r
    r.teardown()


def ctx_probe_lines(lib, env=None):
    """--dry-run's probe line for THPFunction_new in lib."""
    r = run_tracer(["--dry-run", "--lib", lib], env=env)
    assert r.returncode == 0, r.stderr
    lines = [l for l in r.stdout.splitlines() if " function=THPFunction_new " in l]
    assert len(lines) == 1, f"THPFunction_new probed {len(lines)} times: {r.stdout}"
    m = re.search(r" addr=0x([0-9a-f]+) offset=0x([0-9a-f]+) .* at=(\S+) ", lines[0])
    assert m, lines[0]
    return int(m[1], 16), int(m[2], 16), m[3]


def check_ctx_probe(lib):
    """THPFunction_new (an autograd ctx's birth) is probed once, inside, on the je that tests
    the result of its call of type->tp_alloc, as objdump decodes the function; with
    COMMTRACE_PROBE_INSIDE=0 at its entry (and return), past an endbr64."""
    addr, off, at = ctx_probe_lines(lib)
    assert at == "inside"
    dis = subprocess.run(["objdump", "-d", f"--start-address={addr:#x}",
                          f"--stop-address={addr + 64:#x}", str(lib)],
                         capture_output=True, text=True, check=True, timeout=120).stdout
    insns = []  # (vaddr, text): a long instruction's continuation lines carry no text
    for line in dis.splitlines():
        f = line.split("\t")
        if len(f) == 3 and re.fullmatch(r"\s*[0-9a-f]+:", f[0]):
            insns.append((int(f[0].strip(" :"), 16), " ".join(f[2].split())))
    calls = [k for k, (_, t) in enumerate(insns) if t == "call *0x130(%rdi)"]
    k = calls[0] + 2 if len(calls) == 1 else 0
    assert k and insns[k - 1][1] == "test %rax,%rax" and insns[k][1].startswith("je "), insns
    entry_addr, entry_off, entry_at = ctx_probe_lines(
        lib, env=dict(os.environ, COMMTRACE_PROBE_INSIDE="0"))
    assert (entry_addr, entry_at) == (addr, "entry")
    skip = insns[1][0] - addr if insns[0][1] == "endbr64" else 0
    assert off - (entry_off - skip) == insns[k][0] - addr, (off, entry_off, insns)
