# SPDX-License-Identifier: MIT
"""Seed 000's tensor-parallel MLP on real PyTorch 2.x DTensor (fc1 ColwiseParallel, fc2
RowwiseParallel), the reference for comparing commtrace with PyTorch's own CommDebugMode.

    MASTER_ADDR=127.0.0.1 MASTER_PORT=29541 WORLD_SIZE=2 RANK=r \
        python3 tests/workloads/tp_mlp.py [--backend gloo|nccl] [--forwards N] [--backward]
        [--debug-mode] [--wait-file P] [--expect F]

--debug-mode runs the loop under torch.distributed.tensor.debug.CommDebugMode and writes
its counts (get_comm_counts, by functional-collective op) to the ledger; without it the
loop runs bare, as it would under commtrace. Either way the ledger (F.RANK) holds the loop's
wall time. Needs torch >= 2.4 (torch.distributed.tensor); Debian's torch 1.13 has no DTensor.
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                               parallelize_module)


class MLP(nn.Module):
    def __init__(self, dim=16, hidden=32):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="gloo")
    ap.add_argument("--forwards", type=int, default=3)
    ap.add_argument("--backward", action="store_true")
    ap.add_argument("--debug-mode", action="store_true")
    ap.add_argument("--wait-file")
    ap.add_argument("--expect")
    a = ap.parse_args()
    dev = "cuda" if a.backend == "nccl" else "cpu"
    rank = int(os.environ["RANK"])
    if dev == "cuda":
        torch.cuda.set_device(rank % torch.cuda.device_count())
    dist.init_process_group(a.backend)
    world = dist.get_world_size()
    mesh = init_device_mesh(dev, (world,))
    torch.manual_seed(0)
    model = parallelize_module(MLP().to(dev), mesh,
                               {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()})
    x = torch.randn(4, 16, device=dev)
    model(x)  # warm-up: DTensor's sharding propagation caches
    if a.wait_file:
        with open(f"{a.wait_file}.pid.{rank}", "w") as f:
            f.write(f"{os.getpid()}\n")
        while not os.path.exists(a.wait_file):
            time.sleep(0.02)

    def loop():
        for _ in range(a.forwards):
            out = model(x)
            if a.backward:
                out.sum().backward()

    counts, how = None, None
    t0 = time.perf_counter()
    if a.debug_mode:
        from torch.distributed.tensor.debug import CommDebugMode
        # One CommDebugMode per forward, counts summed: its module tracker registers a
        # forward hook on a module at every pre-hook and removes only the last one at
        # exit, so a second forward inside one context pops its parent list past
        # "Global" (IndexError in _fw_set_module_hook, docs/PERFORMANCE.md).
        how, counts = "CommDebugMode, one per forward", {}
        for _ in range(a.forwards):
            mode = CommDebugMode()
            with mode:
                out = model(x)
                if a.backward:
                    out.sum().backward()
            for k, v in mode.get_comm_counts().items():
                counts[str(k)] = counts.get(str(k), 0) + v
    else:
        loop()
    if dev == "cuda":
        torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    if a.expect:
        with open(f"{a.expect}.{rank}", "w") as f:
            json.dump({"rank": rank, "forwards": a.forwards, "backward": a.backward,
                       "comm_debug_mode_counts": counts, "counted_by": how,
                       "loop_seconds": wall}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
