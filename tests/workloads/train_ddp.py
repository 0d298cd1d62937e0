# SPDX-License-Identifier: MIT
"""A small real training job: a 2-layer MLP under DistributedDataParallel on the Gloo
backend, one process per rank (start them with MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE).

  --steps N        training steps (default 40)
  --step-sleep S   seconds of "data loading" per step, so a tracer can attach mid-run
  --ready-file P   write "PID\n" to P.RANK once the process group is up
  --wait-file P    write the pid to P.pid.RANK after DDP is set up, wait for P to exist
  --expect F       write this rank's ledger to F.RANK (JSON)
  --time           rank 0 prints "ns_per_step N" and "cpu_ns_per_step N" (the training loop
                   only; CPU: every thread of the rank, kernel time included)
  --torch-profiler run the loop under torch.profiler (CPU, shapes recorded): the in-process
                   reference that scripts/bench.py compares the tracer's cost with
"""
import argparse
import contextlib
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def profiler(on):
    """torch.profiler over the loop (its cost counted, its trace not written), or nothing."""
    if not on:
        return contextlib.nullcontext()
    from torch.profiler import ProfilerActivity, profile
    return profile(activities=[ProfilerActivity.CPU], record_shapes=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--step-sleep", type=float, default=0.05)
    ap.add_argument("--ready-file")
    ap.add_argument("--wait-file")
    ap.add_argument("--expect")
    ap.add_argument("--time", action="store_true")
    ap.add_argument("--torch-profiler", action="store_true")
    a = ap.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 16))
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    if a.ready_file:
        with open(f"{a.ready_file}.{rank}", "w") as f:
            f.write(f"{os.getpid()}\n")
    if a.wait_file:
        with open(f"{a.wait_file}.pid.{rank}", "w") as f:
            f.write(f"{os.getpid()}\n")
        while not os.path.exists(a.wait_file):
            time.sleep(0.02)
    prof = profiler(a.torch_profiler)
    t0, c0 = time.perf_counter_ns(), time.process_time_ns()
    with prof:
        for step in range(a.steps):
            time.sleep(a.step_sleep)
            x = torch.randn(32, 64)
            loss = ddp(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    if a.time and rank == 0:
        print(f"ns_per_step {(time.perf_counter_ns() - t0) / a.steps:.1f}\n"
              f"cpu_ns_per_step {(time.process_time_ns() - c0) / a.steps:.1f}", flush=True)
    if a.expect:
        with open(f"{a.expect}.{rank}", "w") as f:
            json.dump({"rank": rank, "steps": a.steps}, f)
    if rank == 0:
        print(f"train_ddp: {world} ranks, {a.steps} steps, final loss {loss.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
