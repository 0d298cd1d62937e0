# SPDX-License-Identifier: MIT
"""PyTorch 2.x as people run it: Debian 13's torch 2.6 (CPython 3.13) in a root of its own
(build/torch2-root, scripts/torch2-root.sh), ranks started in it with chroot, commtrace
attached from outside by pid. The oracle is PyTorch's own CommDebugMode, run in-process on
the same model: every (module FQN, phase, collective) count must be equal, forward and
backward, counted inclusively as CommDebugMode counts them."""
import json
import os
import re
import shutil
import subprocess
from collections import Counter

import pytest

from conftest import (check_ctx_probe, free_port, kill_pid, load_trace_json, read_pid, run_tracer, touch,
                      wait_files)
from test_chrome import check_perfetto_rules, encloses, load_chrome

MODELS = ["mlp", "mlp_list", "transformer", "transformer_sp"]
STEPS = 2
RANK_TIMEOUT = 300  # two torch imports on 2 vCPUs, and a Transformer's first step


def run_ranks(reaper, root, tmp_inner, model, *extra, tag="run", wrap=()):
    """Start 2 ranks of tp_models.py in the root (each command after wrap); their popen
    objects."""
    port = free_port()
    procs = []
    for r in (0, 1):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2",
                   RANK=str(r))
        log = open(root.host(f"{tmp_inner}/{tag}.{r}.log"), "w")
        procs.append(reaper.popen([*wrap, *root.python("tp_models.py", "--model", model,
                                                       "--steps", STEPS, *extra)],
                                  env=env, stdout=log, stderr=log))
    return procs


def wait_rank(p, log):
    """The rank exits 0 in time, or the test fails with the end of its output."""
    try:
        rc = p.wait(timeout=RANK_TIMEOUT)
    except subprocess.TimeoutExpired:
        rc = None
    assert rc == 0, f"{' '.join(map(str, p.args))}: exit {rc}\n" + log.read_text()[-3000:]


def oracle(reaper, root, tmp_inner, model, *extra):
    """CommDebugMode's counts of each rank, run in-process (its own run of the model)."""
    expect = f"{tmp_inner}/cdm"
    procs = run_ranks(reaper, root, tmp_inner, model, "--debug-mode", "--expect", expect, *extra,
                      tag="cdm")
    for r, p in enumerate(procs):
        wait_rank(p, root.host(f"{tmp_inner}/cdm.{r}.log"))
    return [json.loads(root.host(f"{expect}.{r}").read_text()) for r in (0, 1)]


def traced(reaper, root, start_tracer, tmp_path, tmp_inner, model, *args, linger=1, extra=(),
           env=None, wrap=(), stderr=None):
    """The same model run bare (with the workload's extra options; each rank's command after
    wrap), commtrace attached by pid while it waits (env: the tracer's); the JSON report.
    stderr: a list the tracer's stderr lines are put in."""
    wait = f"{tmp_inner}/go"
    pids = [root.host(f"{wait}.pid.{r}") for r in (0, 1)]
    for f in (root.host(wait), *pids):  # an earlier run's, in the same test
        f.unlink(missing_ok=True)
    procs = run_ranks(reaper, root, tmp_inner, model, "--wait-file", wait, "--linger", linger,
                      *extra, wrap=wrap)
    wait_files(pids, timeout=RANK_TIMEOUT, procs=procs)
    out = tmp_path / f"{model}.json"
    tr = start_tracer(["-p", ",".join(str(read_pid(p)) for p in pids), "--json", out, *args],
                      env=env)
    tr.wait_attached()
    touch(root.host(wait))
    for r, p in enumerate(procs):
        wait_rank(p, root.host(f"{tmp_inner}/run.{r}.log"))
    assert tr.wait(timeout=120) == 0, tr.describe()
    if stderr is not None:
        stderr.extend(tr.stderr_lines())
    js = load_trace_json(out)
    # --linger: the model outlives the handling of its last record (names are read live)
    assert js["drops"]["module_names_by_class"] == 0, js["drops"]
    return js


def flat(counts):
    """{module: {phase: {op: n}}} as {(module, phase, op): n}, zeros left out."""
    return {(m, ph, op): n for m, phases in counts.items() for ph, ops in phases.items()
            for op, n in ops.items() if n}


@pytest.fixture
def work(torch2_root, request):
    inner = f"/opt/commtrace/run-{request.node.name}".replace("[", "-").replace("]", "")
    path = torch2_root.host(inner)
    path.mkdir(parents=True, exist_ok=True)
    return inner


def test_autograd_ctx_probed_inside(torch2_root):
    check_ctx_probe(torch2_root.host("/usr/lib/python3/dist-packages/torch/lib/libtorch_python.so"))


# inside: one probe a ctx, after its allocation; entry: THPFunction_new's entry and return
@pytest.mark.parametrize("model,probe", [(m, "inside") for m in MODELS] + [("mlp", "entry")])
def test_parity_with_commdebugmode(bpf, torch2_root, reaper, start_tracer, tmp_path, work,
                                   model, probe):
    ref = oracle(reaper, torch2_root, work, model)
    js = traced(reaper, torch2_root, start_tracer, tmp_path, work, model,
                env=dict(os.environ, COMMTRACE_PROBE_INSIDE="0" if probe == "entry" else "1"))
    assert js["dropped_events"] == 0
    # every backward collective was put under the module that created its autograd ctx
    assert js["autograd"]["backward_unattributed"] == 0, js["autograd"]
    assert js["autograd"]["backward_attributed"] > 0
    for r in (0, 1):
        proc = next(p for p in js["processes"] if p["rank"] == r)
        cd = proc["comm_debug"]
        want, got = flat(ref[r]["comm_module_counts"]), flat(cd["comm_module_counts"])
        diff = {k: (got.get(k), want.get(k)) for k in set(want) | set(got)
                if got.get(k) != want.get(k)}
        assert not diff, f"rank {r}: (module, phase, op): (commtrace, CommDebugMode): {diff}"
        assert any(ph == "backward" for _, ph, _ in want), "the model has backward traffic"
        assert cd["comm_debug_counts"] == ref[r]["comm_counts"]
        # one root per forward and per backward: the layers of a loop are siblings
        roots = cd["records"]
        assert [x["phase"] for x in roots] == ["forward", "backward"] * STEPS, \
            [(x["module_fqn"], x["phase"]) for x in roots]
        # every functional collective's tensor described at the call, the first one's too
        # (its helper's frame not known yet then)
        colls = [c for x in roots for c in nodes_of(x, "collective")]
        assert colls and all(c["op"].startswith("c10d_functional.") for c in colls)
        assert all(c.get("input_shape") for c in colls), \
            [(c["op"], c.get("input_shape_unknown")) for c in colls if not c.get("input_shape")]


def nodes_of(node, kind):
    """The records of one type under node, node included, in order."""
    if node["type"] == kind:
        yield node
    for c in node["children"]:
        yield from nodes_of(c, kind)


def test_unknown_torch_layout(bpf, torch2_root, reaper, start_tracer, tmp_path, work):
    """A torch whose tensor layout this build does not know: torch 2.6 saying it is 9.9.0
    (its version.py mounted over, in the ranks' own mount namespace: the tracer reads it
    through their root). Collectives are counted, named and placed, with the bytes torch 2.6
    gets; shapes and dtypes are marked unknown with the reason, never guessed; placements,
    read from the Python objects, are still there. Said once per process on stderr."""
    version = torch2_root.host("/usr/lib/python3/dist-packages/torch/version.py")
    fake = tmp_path / "version.py"
    fake.write_text(re.sub(r"(?m)^__version__ = .*$", "__version__ = '9.9.0'",
                           version.read_text()))
    wrap = ["unshare", "-m", "--propagation", "private", "sh", "-c",
            'mount --bind "$0" "$1" && shift && exec "$@"', str(fake), str(version)]
    known = traced(reaper, torch2_root, start_tracer, tmp_path, work, "mlp", "--ops")
    err = []
    unknown = traced(reaper, torch2_root, start_tracer, tmp_path, work, "mlp", "--ops",
                     wrap=wrap, stderr=err)
    notices = [x for x in err if "torch 9.9.0: its tensor layout is not known" in x]
    assert len(notices) == 2, err
    assert unknown["dropped_events"] == 0 and unknown["ops"]["lost"] == 0
    for r in (0, 1):
        k, u = (next(p for p in js["processes"] if p["rank"] == r) for js in (known, unknown))
        assert [(c["function"], c["calls"], c["bytes_sent"], c["bytes_received"])
                for c in u["collectives"]] == \
            [(c["function"], c["calls"], c["bytes_sent"], c["bytes_received"])
             for c in k["collectives"]]
        assert u["comm_debug"]["comm_module_counts"] == k["comm_debug"]["comm_module_counts"]
        kc = [c for x in k["comm_debug"]["records"] for c in nodes_of(x, "collective")]
        uc = [c for x in u["comm_debug"]["records"] for c in nodes_of(x, "collective")]
        assert [(c["collective_type"], c["bytes"], c["phase"]) for c in uc] == \
            [(c["collective_type"], c["bytes"], c["phase"]) for c in kc]
        # Every collective of the MLP comes from a functional collective whose first
        # argument is a tensor. With the layout known, its shape is shown (described at the
        # call); unknown, each one says so.
        assert [c.get("op") for c in uc] == [c.get("op") for c in kc]
        helpers = [c for c in uc if (c.get("op") or "").startswith("c10d_functional.")]
        assert helpers and len(helpers) == len(uc), uc
        assert all(c.get("input_shape") for c in kc), kc
        for c in uc:
            assert "input_shape" not in c and c.get("input_shape_unknown") == "no_layout", c
        ko = [o for x in k["comm_debug"]["records"] for o in nodes_of(x, "op")]
        uo = [o for x in u["comm_debug"]["records"] for o in nodes_of(x, "op")]
        assert [o["op_name"] for o in uo] == [o["op_name"] for o in ko] and uo
        tensors = 0
        for o in uo:
            for v in o["inputs"] + o["outputs"]:
                if v["kind"] in ("DTensor", "Tensor", "Parameter"):
                    tensors += 1
                    assert v["shape"] is None and v["dtype"] is None, v
                    assert v["shape_unknown"] == "no_layout", v
                    if v["kind"] == "DTensor" and not v.get("freed"):
                        assert v["placements"], v
        assert tensors > 0


def test_root_gone_mid_trace(bpf, torch2_root, reaper, start_tracer, tmp_path, work):
    """The ranks' container goes away while they are traced: both ranks, in a mount
    namespace of their own inside the root, are killed once their steps are done, and
    their directory in the root is removed. The tracer ends by itself (exit 0, both
    processes marked exited) and loses nothing it had collected: the counts per module,
    phase and collective are CommDebugMode's for the same steps, every module named."""
    ref = oracle(reaper, torch2_root, work, "mlp")
    wait, done = f"{work}/go", f"{work}/done"
    pid_files = [torch2_root.host(f"{wait}.pid.{r}") for r in (0, 1)]
    procs = run_ranks(reaper, torch2_root, work, "mlp", "--wait-file", wait, "--expect", done,
                      "--linger", 300, tag="gone",
                      wrap=["unshare", "--mount", "--propagation", "private"])
    wait_files(pid_files, timeout=RANK_TIMEOUT, procs=procs)
    pids = [read_pid(f) for f in pid_files]
    out = tmp_path / "gone.json"
    tr = start_tracer(["-p", ",".join(map(str, pids)), "--json", out])
    tr.wait_attached()
    touch(torch2_root.host(wait))
    # each rank writes its ledger once its steps are done, then lingers
    wait_files([torch2_root.host(f"{done}.{r}") for r in (0, 1)], timeout=RANK_TIMEOUT,
               procs=procs)
    for pid in pids:
        kill_pid(pid)
    shutil.rmtree(torch2_root.host(work))
    assert tr.wait(timeout=120) == 0, tr.describe()
    js = load_trace_json(out)
    assert js["dropped_events"] == 0 and js["drops"]["module_names_by_class"] == 0, js["drops"]
    for r in (0, 1):
        proc = next(p for p in js["processes"] if p["rank"] == r)
        assert proc["exited"], proc["pid"]
        want = flat(ref[r]["comm_module_counts"])
        assert flat(proc["comm_debug"]["comm_module_counts"]) == want, r


def test_transformer_tree_shape(bpf, torch2_root, reaper, start_tracer, tmp_path, work):
    """Sequence parallelism: under one root per forward, the modules in call order, the
    layers of `for layer in self.layers` siblings; each collective names its op and bytes."""
    js = traced(reaper, torch2_root, start_tracer, tmp_path, work, "transformer_sp")
    proc = next(p for p in js["processes"] if p["rank"] == 0)
    roots = proc["comm_debug"]["records"]
    fwd = roots[0]
    assert fwd["module_fqn"] == "(root)" and fwd["phase"] == "forward"
    assert [c["module_fqn"] for c in fwd["children"]] == [
        "tok_embeddings", "pos_embeddings", "layers.0", "layers.1", "output"]
    layer = fwd["children"][2]
    assert [c["module_fqn"] for c in layer["children"]] == [
        "layers.0.attention", "layers.0.feed_forward"]

    colls = list(nodes_of(fwd, "collective"))
    assert len(colls) == 12  # 6 reduce-scatters, 6 all-gathers per forward
    for c in colls:
        assert c["op"] in ("c10d_functional.reduce_scatter_tensor",
                           "c10d_functional.all_gather_into_tensor"), c
        assert c["bytes"] > 0 and c["dtype"] == "torch.float32", c
        assert c["group_size"] == 2
    bwd = roots[1]
    assert bwd["phase"] == "backward"
    assert [c["module_fqn"] for c in bwd["children"]][:3] == ["output", "layers.1", "layers.0"]


@pytest.mark.parametrize("model", ["mlp", "transformer"])
def test_sharding_matches_commdebugmode(bpf, torch2_root, reaper, start_tracer, tmp_path, work,
                                        model):
    """--sharding on torch 2.x: every DTensor parameter with its placements (read from
    DTensor's _spec slot) as CommDebugMode's get_sharding_info() has them, its global
    shape, and its local shard's shape (the _local_tensor slot)."""
    ref = oracle(reaper, torch2_root, work, model, "--sharding")
    js = traced(reaper, torch2_root, start_tracer, tmp_path, work, model, "--sharding")
    for r in (0, 1):
        proc = next(p for p in js["processes"] if p["rank"] == r)
        cd = proc["comm_debug"]
        root = next(iter(cd["comm_module_counts"].keys() - {"Global"}
                         - {k for k in cd["comm_module_counts"] if "." in k}))
        ours = {f"{root}.{fqn}": pl for fqn, pl in cd["sharding_info"].items()}
        assert ours == ref[r]["sharding_info"] and ours, (ours, ref[r]["sharding_info"])
        for fqn, info in cd["parameter_info"].items():
            pl = cd["sharding_info"].get(fqn)
            if pl is None:
                continue
            assert info["type"] == "DTensor" and info["dtype"] == "torch.float32", info
            want = list(info["shape"])
            if pl.startswith("(Shard(dim="):
                d = int(pl[len("(Shard(dim="):].split(")")[0])
                want[d] //= 2
            assert info["local_shape"] == want, (fqn, info, pl)


# CommDebugMode's trivial ops (torch/distributed/tensor/debug/_comm_mode.py), which its own
# table leaves out below noise level 3. Its module tracker makes some of them itself (the
# grad hooks' view_as, parameters' detach): they are not the model's, and not compared.
TRIVIAL_OPS = {"aten.detach.default", "aten.t.default", "aten.view.default",
               "aten._to_copy.default", "aten.as_strided.default", "aten.transpose.int"}


def dtensor_ops(records, root):
    """(module as CommDebugMode names it, phase, op, node) of every op DTensor dispatched,
    in tree order; the module is the innermost one around the op ("Global": none)."""
    out = []

    def walk(n, mod):
        if n["type"] == "module":
            mod = root if n["module_fqn"] == "(root)" else f"{root}.{n['module_fqn']}"
        if n["type"] == "op" and n["dispatched_by"] == "DTensor":
            out.append((mod or "Global", n["phase"], n["op_name"], n))
        for c in n["children"]:
            walk(c, mod)

    for r in records:
        walk(r, None)
    return out


def mesh_as_ours(s):
    """CommDebugMode's str(mesh), "DeviceMesh('cpu', [0, 1], mesh_dim_names=('tp',))", as
    commtrace spells it: "DeviceMesh(cpu, shape=[2], dims=(tp))"."""
    m = re.fullmatch(r"DeviceMesh\('(\w+)', (\[.*\]), mesh_dim_names=\((.*)\)\)", s)
    assert m, s
    ranks, shape = json.loads(m.group(2)), []
    while isinstance(ranks, list):
        shape.append(len(ranks))
        ranks = ranks[0]
    names = ", ".join(x.strip().strip("'") for x in m.group(3).split(",") if x.strip())
    return f"DeviceMesh({m.group(1)}, shape={shape}, dims=({names}))"


# Where an autograd Function marks a module's backward (from_local, to_local, redistribute:
# the DTensor input and output styles), backward ops are put under the same module as
# CommDebugMode's grad hooks put them. Sequence parallelism's norms take and give DTensors
# with no conversion, so no Function marks them: their backward ops land under the module
# marked before them (docs/ops.md). There the backward is compared by op alone.
OPS_MODELS = {"mlp": True, "mlp_list": True, "transformer": True, "transformer_sp": False}


@pytest.mark.parametrize("how", ["--ops", "--ops-frames"])
@pytest.mark.parametrize("model", list(OPS_MODELS))
def test_ops_match_commdebugmode(bpf, torch2_root, reaper, start_tracer, tmp_path, work, model,
                                 how):
    """--ops on torch 2.6: every DTensor op CommDebugMode lists (its noise level 1: the ops
    with DTensor inputs, less the trivial ones), under the same module and phase, named as
    it names them, counted over both steps; and in the last step, in order per module and
    phase, with the same global shapes, placements and mesh: the placements of every
    DTensor input as it was at the call, read from the copies BPF took then. Seen where
    torch dispatches them (the default on torch 2.x: one probe hit per op, its modules from
    its stack), and by the interpreter's frames (--ops-frames)."""
    ref = oracle(reaper, torch2_root, work, model)
    # a longer linger: the first step's thousands of new code objects are read live
    js = traced(reaper, torch2_root, start_tracer, tmp_path, work, model, how, linger=4)
    ops = js["ops"]
    assert js["dropped_events"] == 0 and ops["unpaired_exits"] == 0, ops
    assert ops["lost"] == 0, ops
    assert ops["values_captured"] > 0, ops
    if how == "--ops":
        # every op dispatched is one entry and one node; each Python autograd Function's
        # backward began with a ctx whose forward was seen
        nodes = sum(1 for p in js["processes"] for root in p["comm_debug"]["records"]
                    for _ in nodes_of(root, "op"))
        assert ops["seen_at"] == "dispatch" and ops["entries"] == ops["kept"] == nodes, ops
        assert ops["backward_functions"] > 0 and ops["backward_functions_unknown"] == 0, ops
    else:
        assert ops["seen_at"] == "frames" and ops["entries"] > ops["kept"], ops
    by_module = OPS_MODELS[model]
    for r in (0, 1):
        cd = next(p for p in js["processes"] if p["rank"] == r)["comm_debug"]
        root = next(k for k in cd["comm_module_counts"] if k != "Global" and "." not in k)
        recs = cd["records"]
        ours = Counter((m, ph, op) for m, ph, op, _ in dtensor_ops(recs, root)
                       if op not in TRIVIAL_OPS)
        want = Counter({(m, ph, op): n for m, phases in ref[r]["dtensor_ops"].items()
                        for ph, ops in phases.items() for op, n in ops.items()
                        if op not in TRIVIAL_OPS})
        assert any(ph == "backward" for _, ph, _ in want) and len(want) >= 7, want
        if not by_module:
            fwd = lambda c: Counter({k: n for k, n in c.items() if k[1] == "forward"})
            bwd = lambda c: Counter(op for (_, ph, op), n in c.items() if ph == "backward"
                                    for _ in range(n))
            assert fwd(ours) == fwd(want), (fwd(ours) - fwd(want), fwd(want) - fwd(ours))
            assert bwd(ours) == bwd(want), (bwd(ours) - bwd(want), bwd(want) - bwd(ours))
            continue
        assert ours == want, f"rank {r}: commtrace - CommDebugMode {ours - want}; " \
                             f"CommDebugMode - commtrace {want - ours}"
        # The last step: from its forward's root module on.
        last = max(i for i, x in enumerate(recs)
                   if x["type"] == "module" and x["phase"] == "forward")
        seq, ref_seq = {}, {}
        for m, ph, op, n in dtensor_ops(recs[last:], root):
            if op not in TRIVIAL_OPS:
                assert n["inputs"] is not None, n  # described: not a first call
                seq.setdefault((m, ph), []).append(
                    (op, [v for v in n["inputs"] if v["kind"] == "DTensor"]))
        for o in ref[r]["last_step_dtensor_ops"]:
            if o["op"] not in TRIVIAL_OPS:
                ref_seq.setdefault((o["module"], o["phase"]), []).append(o)
        assert seq.keys() == ref_seq.keys()
        for key, calls in seq.items():
            assert [op for op, _ in calls] == [o["op"] for o in ref_seq[key]], key
            for (op, vals), o in zip(calls, ref_seq[key]):
                assert [v["shape"] for v in vals] == o["shapes"], (key, op, vals, o)
                # From the copies BPF took at the call (the first DTensor of the run was
                # read live, to learn where a DTensor keeps its placements): temporaries
                # freed since, whose memory may hold another DTensor by now, too.
                assert [v.get("placements") for v in vals] == o["placements"], (key, op, vals)
                assert all(v.get("mesh") == mesh_as_ours(o["mesh"]) and not v.get("freed")
                           for v in vals), (key, op, vals, o)


def test_ops_optimizer_step_after_backward(bpf, torch2_root, reaper, start_tracer, tmp_path,
                                           work):
    """An SGD step after each backward: its ops (one add_ per parameter) are not the
    backward's. The backward spans THPEngine_run_backward on the thread, so they are
    forward ops under no module. (CommDebugMode puts them under the last module its
    backward hooks saw, MLP.fc1, as forward.) The backward's own ops keep CommDebugMode's
    modules."""
    ref = oracle(reaper, torch2_root, work, "mlp", "--optimizer")
    js = traced(reaper, torch2_root, start_tracer, tmp_path, work, "mlp", "--ops", linger=4,
                extra=("--optimizer",))
    for r in (0, 1):
        cd = next(p for p in js["processes"] if p["rank"] == r)["comm_debug"]
        root = next(k for k in cd["comm_module_counts"] if k != "Global" and "." not in k)
        ops = dtensor_ops(cd["records"], root)
        steps = [(m, ph) for m, ph, op, _ in ops if op == "aten.add_.Tensor"]
        assert steps == [("Global", "forward")] * 3 * STEPS, steps  # fc1 w, b; fc2 w
        assert ref[r]["dtensor_ops"]["MLP.fc1"]["forward"]["aten.add_.Tensor"] == 3 * STEPS
        ours = Counter((m, op) for m, ph, op, _ in ops
                       if ph == "backward" and op not in TRIVIAL_OPS)
        want = Counter({(m, op): n for m, phases in ref[r]["dtensor_ops"].items()
                        for op, n in phases.get("backward", {}).items()
                        if op not in TRIVIAL_OPS})
        assert ours == want and sum(want.values()) == 10, (ours, want)


def test_ops_timeline_modules_span_their_ops(bpf, torch2_root, reaper, start_tracer, tmp_path,
                                             work):
    """Seen at their dispatch, ops have entries and exits and modules do not: on the Chrome
    timeline each module of the MLP spans its ops, forward and backward, on the rank's
    main thread."""
    chrome = tmp_path / "trace.chrome.json"
    js = traced(reaper, torch2_root, start_tracer, tmp_path, work, "mlp", "--ops", "--chrome",
                chrome, linger=4)
    assert js["ops"]["seen_at"] == "dispatch", js["ops"]
    doc = load_chrome(chrome)
    tracks = check_perfetto_rules(doc)
    for p in js["processes"]:
        pid = p["pid"]
        xs = tracks[(pid, pid)]
        mods = {m: [e for e in xs if e["name"] == f"Module({m})"] for m in ("fc1", "fc2")}
        for m, slices in mods.items():
            phases = Counter(e["args"]["phase"] for e in slices)
            assert phases == {"forward": STEPS, "backward": STEPS}, (m, phases)
            assert all(e["args"]["extent"] == "first to last descendant call" and e["dur"] > 0
                       for e in slices), slices
        mms = [e for e in xs if e["name"] in ("Op(aten.addmm.default)", "Op(aten.mm.default)")]
        assert len(mms) >= 4 * STEPS, mms
        for e in mms:
            assert any(encloses(m, e) for ms in mods.values() for m in ms), e


def test_redistribute_placements(bpf, torch2_root, reaper, start_tracer, tmp_path, work):
    """A redistribution is one node with its placements before and after: seed 000's MLP,
    where RowwiseParallel fc2 turns its Partial output into a Replicate one."""
    table = tmp_path / "table.txt"
    js = traced(reaper, torch2_root, start_tracer, tmp_path, work, "mlp", "--table", table,
                "--noise-level", "2")
    for r in (0, 1):
        proc = next(p for p in js["processes"] if p["rank"] == r)
        fwd = [x for x in proc["comm_debug"]["records"] if x["phase"] == "forward"]
        assert len(fwd) == STEPS
        for root in fwd:
            fc2 = [c for c in root["children"] if c["module_fqn"] == "fc2"]
            assert len(fc2) == 1, root
            nodes = list(nodes_of(fc2[0], "redistribute"))
            assert [(n["name"], n["src_placements"], n["dst_placements"]) for n in nodes] == [
                ("redistribute", "(Partial(sum),)", "(Replicate(),)")]
            assert [c["op"] for c in nodes[0]["children"]] == ["c10d_functional.all_reduce"]
        # the backward's all-reduce goes under fc1 without one: no redistribute runs it
        bwd = [x for x in proc["comm_debug"]["records"] if x["phase"] == "backward"]
        assert not [n for root in bwd for n in nodes_of(root, "redistribute")]
    # From the second step on, each rank's redistribution stack is named without waking the
    # reader: its specs, temporaries, were copied in BPF at the call (the first step's were
    # read live, and told BPF where a spec keeps its placements).
    known = js["python_stacks_known"]
    assert known["captured"] == 2 * (STEPS - 1), known
    lines = [l for l in table.read_text().splitlines() if "Redistribute(" in l]
    assert len(lines) == 2 * STEPS
    assert all(l.split(None, 1)[1] == "Redistribute(redistribute) (Partial(sum),) -> "
               "(Replicate(),)" for l in lines), lines


def compiled_view(counts, model_class):
    """CommDebugMode's counts of a compiled model, as seen by the module compiled: Dynamo
    skips every frame under CommDebugMode's dispatch mode, so it counted the eager model,
    inside `OptimizedModule._orig_mod`; a compiled graph has no module inside."""
    view = {}
    for fqn, phases in counts.items():
        if "_orig_mod" in fqn.split("."):
            continue
        view[model_class if fqn == "OptimizedModule" else fqn] = phases
    return view


@pytest.mark.parametrize("model,compiled,root_class", [("mlp", "model", "MLP"),
                                                       ("mlp_list", "blocks", "MLPList")])
def test_compiled_collectives(bpf, torch2_root, reaper, start_tracer, tmp_path, work, model,
                              compiled, root_class):
    """torch.compile (Inductor, CPU): a compiled graph's collectives are counted, named as
    functional collectives, under the module compiled (not `_orig_mod`) and its graph, one
    for the forward and one for the backward, named after the file of the code they ran."""
    ref = oracle(reaper, torch2_root, work, model, "--compile", compiled)
    table, rec = tmp_path / "table.txt", tmp_path / "run.ctr"
    js = traced(reaper, torch2_root, start_tracer, tmp_path, work, model, "--table", table,
                "--noise-level", "2", "--record", rec, extra=("--compile", compiled))
    assert js["dropped_events"] == 0
    assert js["autograd"]["backward_unattributed"] == 0, js["autograd"]
    per_step = 2 if model == "mlp_list" else 1  # all-reduces a phase: one a block
    compiled_fqns = [""] if compiled == "model" else ["blocks.0", "blocks.1"]
    for r in (0, 1):
        proc = next(p for p in js["processes"] if p["rank"] == r)
        cd = proc["comm_debug"]
        got = flat(cd["comm_module_counts"])
        assert got == flat(compiled_view(ref[r]["comm_module_counts"], root_class)), got
        assert got[("Global", "forward", "c10d_functional.all_reduce")] == per_step * STEPS
        assert cd["comm_debug_counts"] == ref[r]["comm_counts"]
        roots = cd["records"]
        assert [x["phase"] for x in roots] == ["forward", "backward"] * STEPS
        names = {}
        for root in roots:
            assert root["module_fqn"] == "(root)"
            holders = [root] if compiled == "model" else root["children"]
            assert [h["module_fqn"] for h in holders] == \
                (["(root)"] if compiled == "model" else
                 compiled_fqns[::1 if root["phase"] == "forward" else -1])
            for h in holders:
                gs = [c for c in h["children"] if c["type"] == "graph"]
                assert len(gs) == 1 and gs[0]["phase"] == root["phase"], h
                colls = gs[0]["children"]
                assert [(c["collective_type"], c["op"], c["bytes"], c["phase"])
                        for c in colls] == [("all_reduce", "c10d_functional.all_reduce", 256,
                                             root["phase"])], gs[0]
                names.setdefault(root["phase"], set()).add(gs[0]["name"])
        # the shape from the op's tensor, described at the call, the first step's too
        colls = [c for root in roots for g in nodes_of(root, "graph") for c in g["children"]]
        assert colls and all(c.get("input_shape") == [4, 16] for c in colls), \
            [(c["phase"], c.get("input_shape"), c.get("input_shape_unknown")) for c in colls]
        # one graph a phase (each block runs the same code), its code on disk as named
        assert len(names["forward"]) == len(names["backward"]) == 1, names
        assert names["forward"] != names["backward"]
        for name in names["forward"] | names["backward"]:
            files = list(torch2_root.host("/tmp").glob(f"torchinductor_*/*/{name}.py"))
            assert len(files) == 1, name
            assert "torch.ops._c10d_functional.all_reduce_.default(" in files[0].read_text()
        # no module is named after torch.compile's wrapper
        assert not [k for k in got if "_orig_mod" in k[0] or "OptimizedModule" in k[0]]
    text = table.read_text()
    assert "_orig_mod" not in text
    assert re.search(r"^  +Graph +Graph\(\w+\) \[forward\]$", text, re.M), text
    # a recording keeps the graphs: its replay prints the same table
    r = run_tracer(["replay", rec, "--table", tmp_path / "replay.txt", "--noise-level", "2"])
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "replay.txt").read_text() == text
