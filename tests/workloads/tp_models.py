# SPDX-License-Identifier: MIT
"""Tensor-parallel models on real PyTorch 2.x DTensor, forward and backward, for comparing
commtrace with PyTorch's own CommDebugMode on the same job (tests/integration/test_torch2.py).

    MASTER_ADDR=127.0.0.1 MASTER_PORT=... WORLD_SIZE=2 RANK=r USE_LIBUV=0 \
        python3 tp_models.py --model M [--steps N] [--debug-mode] [--wait-file P] [--expect F]
            [--warmup N --time]

Models (--model):
  mlp             seed 000's MLP through parallelize_module: ColwiseParallel fc1,
                  RowwiseParallel fc2; the input requires grad, so the backward all-reduces
                  the input's gradient (fc1's ColwiseParallel input)
  mlp_list        a ModuleList of two such blocks, called in a loop by the root
  transformer     PyTorch's own test Transformer (torch.testing._internal...common_dtensor)
                  through Transformer.parallelize, without sequence parallelism
  transformer_sp  the same with sequence parallelism
--compile model|blocks: torch.compile the model, or each block of mlp_list (Inductor on CPU,
which needs g++ in the root). Under CommDebugMode (a TorchDispatchMode) Dynamo skips every
frame, so --debug-mode counts the eager model, as CommDebugMode always does.
On CPU the Transformer runs with local_output_for_attn=True: 2.6's CPU SDPA kernels have no
DTensor sharding strategy.

--debug-mode runs each step under torch.distributed.tensor.debug.CommDebugMode, one step per
`with` (2.6 raises IndexError when one module is called twice inside one, PyTorch issue
191392), and writes its counts to the ledger: comm_module_counts summed over the steps, as
{module FQN: {"forward"|"backward": {op: n}}}, and get_comm_counts() by op. Without it the
steps run bare, as they would under commtrace. The ledger (F.RANK) also holds the loop's
wall time and get_sharding_info() when asked for (--sharding). It is written once the steps
are done, before --linger S keeps the rank alive S seconds more.
"""
import argparse
import datetime
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                               parallelize_module)

from tp_mlp import MLP  # seed 000's MLP, as the GPU check runs it


class MLPList(nn.Module):
    def __init__(self, n=2):
        super().__init__()
        self.blocks = nn.ModuleList(MLP() for _ in range(n))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


MLP_PLAN = {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()}


def build(name, mesh):
    """The model, parallelized, and a function making one step's input."""
    if name == "mlp":
        model = parallelize_module(MLP(), mesh, MLP_PLAN)
        return model, lambda: torch.randn(4, 16, requires_grad=True)
    if name == "mlp_list":
        model = MLPList()
        for block in model.blocks:
            parallelize_module(block, mesh, MLP_PLAN)
        return model, lambda: torch.randn(4, 16, requires_grad=True)
    from torch.testing._internal.distributed._tensor.common_dtensor import (ModelArgs,
                                                                            Transformer)
    args = ModelArgs(dropout_p=0.0)
    model = Transformer.parallelize(Transformer(args), mesh,
                                    use_seq_parallel=name == "transformer_sp",
                                    local_output_for_attn=True)
    return model, lambda: torch.randint(args.vocab_size, (8, args.max_seq_len))


def step(model, make_input, opt=None):
    out = model(make_input())
    loss = out.to_local().sum() if hasattr(out, "to_local") else out.sum()
    loss.backward()
    if opt:
        opt.step()
        opt.zero_grad()


def add_counts(total, mode):
    for fqn, phases in mode.comm_module_counts.items():
        for phase in ("forward", "backward"):
            for op, n in phases.get(phase, {}).items():
                d = total.setdefault(fqn, {}).setdefault(phase, {})
                d[str(op)] = d.get(str(op), 0) + n


def add_ops(total, mode):
    """The DTensor ops (those CommDebugMode saw with DTensor inputs), counted as
    {module FQN: {phase: {op: n}}}; and the step's list of them, in order."""
    ops = []
    for fqn, d in mode.comm_module_operation_counts.items():
        for op in d["operations_list"]:
            if not op["input_sharding"]:
                continue  # a local op DTensor ran on the shards
            phase = "backward" if op["is_bw"] else "forward"
            name = str(op["name"])
            ph = total.setdefault(fqn, {}).setdefault(phase, {})
            ph[name] = ph.get(name, 0) + 1
            ops.append({"module": fqn, "phase": phase, "op": name,
                        "shapes": [list(x) for x in op["input_shape"]],
                        "placements": [str(x) for x in op["input_sharding"]],
                        "mesh": op["device_mesh"]})
    return ops


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="mlp",
                    choices=["mlp", "mlp_list", "transformer", "transformer_sp"])
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--debug-mode", action="store_true")
    ap.add_argument("--sharding", action="store_true")
    ap.add_argument("--optimizer", action="store_true",
                    help="an SGD step after each backward (its ops on the DTensor parameters)")
    ap.add_argument("--print-table", action="store_true",
                    help="with --debug-mode: rank 0 prints CommDebugMode's tracing table "
                         "(noise level 2) of the last step")
    ap.add_argument("--compile", choices=["model", "blocks"],
                    help="torch.compile the model (or, mlp_list, each of its blocks); the "
                         "first step, which compiles, runs before --wait-file")
    ap.add_argument("--wait-file")
    ap.add_argument("--expect")
    ap.add_argument("--linger", type=float, default=0)
    ap.add_argument("--warmup", type=int, default=0,
                    help="steps run first and not timed (make bench)")
    ap.add_argument("--time", action="store_true",
                    help="print ns_per_step and cpu_ns_per_step: the timed steps' mean wall "
                         "and CPU time (make bench)")
    a = ap.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    # A rank that hangs (a peer gone, a rendezvous lost) fails in 90 s with the reason,
    # rather than holding the test until its own timeout.
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=90))
    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("tp",))
    torch.manual_seed(0)
    model, make_input = build(a.model, mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.01) if a.optimizer else None
    if a.compile == "model":
        model = torch.compile(model)
    elif a.compile == "blocks":
        for i, block in enumerate(model.blocks):
            model.blocks[i] = torch.compile(block)
    if a.compile:
        step(model, make_input, opt)
    if a.wait_file:
        with open(f"{a.wait_file}.pid.{rank}", "w") as f:
            f.write(f"{os.getpid()}\n")
        while not os.path.exists(a.wait_file):
            time.sleep(0.02)
    ledger = {"rank": rank, "model": a.model, "steps": a.steps}
    for _ in range(a.warmup):
        step(model, make_input, opt)
    t0, c0 = time.perf_counter(), time.process_time()
    if a.debug_mode:
        from torch.distributed.tensor.debug import CommDebugMode
        counts, comm, ops = {}, {}, {}
        for _ in range(a.steps):
            with CommDebugMode() as mode:
                step(model, make_input, opt)
            add_counts(counts, mode)
            last_ops = add_ops(ops, mode)
            if a.print_table and rank == 0:
                table = mode.generate_comm_debug_tracing_table(noise_level=2)
            for op, n in mode.get_comm_counts().items():
                comm[str(op)] = comm.get(str(op), 0) + n
        if a.print_table and rank == 0:
            print(table, flush=True)
        ledger.update(comm_module_counts=counts, comm_counts=comm, dtensor_ops=ops,
                      last_step_dtensor_ops=last_ops,
                      counted_by="CommDebugMode, one step per with")
        if a.sharding:
            with CommDebugMode() as mode:
                model(make_input())
            ledger["sharding_info"] = {fqn: str(placements) for fqn, placements
                                       in mode.get_sharding_info().items()}
    else:
        for _ in range(a.steps):
            step(model, make_input, opt)
    ledger["loop_seconds"] = time.perf_counter() - t0
    if a.time:  # wall time, and CPU time of all the rank's threads (kernel time included)
        print(f"ns_per_step {ledger['loop_seconds'] * 1e9 / a.steps:.0f}\n"
              f"cpu_ns_per_step {(time.process_time() - c0) * 1e9 / a.steps:.0f}", flush=True)
    if a.expect:  # before lingering: a test may take the rank down once it is there
        with open(f"{a.expect}.{rank}.tmp", "w") as f:
            json.dump(ledger, f)
        os.rename(f"{a.expect}.{rank}.tmp", f"{a.expect}.{rank}")
    time.sleep(a.linger)
    # No teardown: torch 2.6's can hang (the autograd engine's threads against the GIL at
    # interpreter finalization, pytorch/pytorch#190489; destroy_process_group too, once in
    # CI with the GIL held, so that no Python watchdog could run). Every collective is done
    # and the ledger written by now; the peer needs nothing more of this rank.
    sys.stdout.flush()
    os._exit(0)  # the ledger is written: no interpreter finalization to hang in


if __name__ == "__main__":
    main()
