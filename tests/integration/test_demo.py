# SPDX-License-Identifier: MIT
"""The README's first command: the demo runs end to end, prints what the README says it
prints (the same shape, line by line), writes the files it names, and stops with exit 3 and
the missing capability where BPF cannot be used."""
import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import REPO


def shape(line):
    """A line with every token that holds a digit made '#' (pids, counts, times, sizes), and
    without a collective's tensor shapes (read from the live tensor: a freed one says so)."""
    line = re.sub(r" input_shape=(?:\([^)]*\)(?: output_shape=\([^)]*\))?|\?\(freed\))", "",
                  line)
    return " ".join("#" if re.search(r"\d", t) else t for t in line.split())


def readme_excerpt():
    text = (REPO / "README.md").read_text()
    m = re.search(r"<!-- demo-output: begin -->\n```\n(.*?)```\n<!-- demo-output: end -->",
                  text, re.S)
    assert m, "README.md has no demo-output block"
    return m.group(1).splitlines()


def assert_shape_follows(excerpt, output):
    """Each excerpt line, in order, has a line of the same shape in the output ('...': any
    lines; a blank line: a blank line)."""
    got = [shape(l) for l in output]
    at = 0
    for want in excerpt:
        if want.strip() == "...":
            continue
        w = shape(want)
        while at < len(got) and got[at] != w:
            at += 1
        assert at < len(got), f"README line not in the demo's output (in order): {want!r}\n" \
                              f"demo output:\n" + "\n".join(output)
        at += 1


def test_readme_excerpt_is_a_real_shape():
    """The check itself can fail: a line the demo never prints is refused."""
    out = ["attached: 101 probes on 2 processes", "commtrace: final: 2 processes"]
    assert_shape_follows(["attached: 3 probes on 2 processes"], out)
    with pytest.raises(AssertionError):
        assert_shape_follows(["attached: 3 probes on 2 threads"], out)
    with pytest.raises(AssertionError):  # order matters
        assert_shape_follows(["commtrace: final: 1 processes", "attached: 1 probes on 2 processes"],
                             out)


def test_demo_matches_readme(bpf, torch_available, tmp_path):
    out_dir = tmp_path / "demo"
    r = subprocess.run(["scripts/demo.sh"], cwd=REPO, capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, DEMO_OUT=str(out_dir)))
    output = (r.stdout + r.stderr).splitlines()
    # stdout and stderr interleave on a terminal; here they come apart: check each in turn.
    assert r.returncode == 0, "\n".join(output[-60:])
    excerpt = [l.replace("/tmp/commtrace-demo", str(out_dir)) for l in readme_excerpt()]
    stderr_like = [l for l in excerpt if l.startswith(("attached:", "commtrace:", "PID "))
                   or re.match(r"^\d", l)]
    stdout_like = [l for l in excerpt if l not in stderr_like]
    assert_shape_follows([l for l in stdout_like if l.strip()], r.stdout.splitlines())
    assert_shape_follows(stderr_like, r.stderr.splitlines())

    # The files it names, and what they hold.
    report = json.loads((out_dir / "report.json").read_text())
    assert len(report["processes"]) == 2 and report["dropped_events"] == 0
    trace = json.loads((out_dir / "trace.json").read_text())
    for p in report["processes"]:
        c = p["comm_counts"]
        # One all-reduce per forward, one per backward, each run by one gloo::allreduce on
        # Gloo's worker thread. The demo attaches to a running job: one all-reduce may have
        # been enqueued just before the probes went in, and its gloo::allreduce run after.
        # Then, and only then, this process's first gloo::allreduce starts before its
        # first ProcessGroupGloo::allreduce.
        pg, gloo = c["ProcessGroupGloo::allreduce"], c["gloo::allreduce"]
        assert pg > 0 and gloo - pg in (0, 1), c
        if gloo != pg:
            first = {n: min(e["ts"] for e in trace["traceEvents"]
                            if e.get("pid") == p["pid"] and e.get("name") == n)
                     for n in ("ProcessGroupGloo::allreduce", "gloo::allreduce")}
            assert first["gloo::allreduce"] < first["ProcessGroupGloo::allreduce"], (c, first)
    assert any(e.get("name") == "Module(fc2)" or "fc2" in str(e.get("name", ""))
               for e in trace["traceEvents"]), "no fc2 slice in the Chrome trace"
    table = (out_dir / "table.txt").read_text().splitlines()
    fwd = [l for l in table if "Collective(differentiable_all_reduce)" in l]
    bwd = [l for l in table if "Collective(" in l and "phase=backward" in l]
    assert fwd and all("phase=forward" in l for l in fwd)
    # attached mid-step: at most one forward or backward of each rank cut off
    assert abs(len(fwd) - len(bwd)) <= 2, (len(fwd), len(bwd))
    # the tree of a step, as the demo prints it: the collective inside fc2, after its linear
    shown = r.stdout.splitlines()
    i = shown.index(next(l for l in shown if l.startswith("demo: which module")))
    step = shown[i + 1:]
    fc2 = next(k for k, l in enumerate(step) if l.split()[-2:] == ["Module(fc2)", "[enter]"])
    assert step[fc2 + 1].split()[:2] == ["Op", "Op(linear)"], step
    assert step[fc2 + 2].split()[:2] == ["Collective", "Collective(differentiable_all_reduce)"]
    # the backward all-reduce, under the module whose forward (hook) made it
    assert step[fc2 + 3].split()[-2:] == ["Module((root))", "[backward]"], step
    assert step[fc2 + 4].split()[-2:] == ["Module(fc2)", "[backward]"], step
    assert step[fc2 + 5].split()[:2] == ["Collective", "Collective(all_reduce)"], step
    assert "phase=backward" in step[fc2 + 5], step


def test_demo_without_bpf_names_the_capability(tmp_path):
    """With every capability dropped, `make demo` runs the installer, then the demo stops
    before starting a job: exit 3 from the demo, the missing capability named."""
    if os.geteuid() != 0:
        pytest.skip("SKIPPED LOUDLY: dropping capabilities from root needs root")
    if not shutil.which("setpriv"):
        pytest.skip("SKIPPED LOUDLY: setpriv (util-linux) is not installed")
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    env["DEMO_OUT"] = str(tmp_path / "demo")
    r = subprocess.run(["setpriv", "--inh-caps=-all", "--bounding-set=-all", "make", "demo"],
                       cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode != 0
    assert "install-deps:" in r.stdout, r.stdout
    assert "missing CAP_BPF" in r.stderr, r.stderr
    assert "nothing was started" in r.stderr
    assert re.search(r"\[Makefile:\d+: demo\] Error 3", r.stderr), r.stderr
    assert not (tmp_path / "demo" / "ranks.log").exists()
