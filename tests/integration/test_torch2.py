# SPDX-License-Identifier: MIT
"""PyTorch 2.x as people run it: Debian 13's torch 2.6 (CPython 3.13) in a root of its own
(build/torch2-root, scripts/torch2-root.sh), ranks started in it with chroot, commtrace
attached from outside by pid. The oracle is PyTorch's own CommDebugMode, run in-process on
the same model: every (module FQN, phase, collective) count must be equal, forward and
backward, counted inclusively as CommDebugMode counts them."""
import json
import os
import subprocess

import pytest

from conftest import free_port, load_trace_json, read_pid, touch, wait_files

MODELS = ["mlp", "mlp_list", "transformer", "transformer_sp"]
STEPS = 2
RANK_TIMEOUT = 300  # two torch imports on 2 vCPUs, and a Transformer's first step


def run_ranks(reaper, root, tmp_inner, model, *extra, tag="run"):
    """Start 2 ranks of tp_models.py in the root; their popen objects."""
    port = free_port()
    procs = []
    for r in (0, 1):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2",
                   RANK=str(r))
        log = open(root.host(f"{tmp_inner}/{tag}.{r}.log"), "w")
        procs.append(reaper.popen(root.python("tp_models.py", "--model", model, "--steps",
                                              STEPS, *extra), env=env, stdout=log, stderr=log))
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


def traced(reaper, root, start_tracer, tmp_path, tmp_inner, model, *args):
    """The same model run bare, commtrace attached by pid while it waits; the JSON report."""
    wait = f"{tmp_inner}/go"
    procs = run_ranks(reaper, root, tmp_inner, model, "--wait-file", wait, "--linger", "1")
    pids = [root.host(f"{wait}.pid.{r}") for r in (0, 1)]
    wait_files(pids, timeout=RANK_TIMEOUT, procs=procs)
    out = tmp_path / f"{model}.json"
    tr = start_tracer(["-p", ",".join(str(read_pid(p)) for p in pids), "--json", out, *args])
    tr.wait_attached()
    touch(root.host(wait))
    for r, p in enumerate(procs):
        wait_rank(p, root.host(f"{tmp_inner}/run.{r}.log"))
    assert tr.wait(timeout=120) == 0, tr.describe()
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


@pytest.mark.parametrize("model", MODELS)
def test_parity_with_commdebugmode(bpf, torch2_root, reaper, start_tracer, tmp_path, work,
                                   model):
    ref = oracle(reaper, torch2_root, work, model)
    js = traced(reaper, torch2_root, start_tracer, tmp_path, work, model)
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

    def collectives(node):
        if node["type"] == "collective":
            yield node
        for c in node["children"]:
            yield from collectives(c)

    colls = list(collectives(fwd))
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
