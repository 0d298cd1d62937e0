# SPDX-License-Identifier: MIT
"""A small PyTorch Gloo "training" job with faults injected on demand, for the diagnosis
tests (tests/integration/test_diag.py). One process per rank:

    MASTER_ADDR=127.0.0.1 MASTER_PORT=29511 WORLD_SIZE=2 RANK=r \\
        /usr/bin/python3 tests/workloads/diag_faults.py [options]

Collectives on the default group, in this order (its sequence numbers, 1-based):
  setup: one broadcast of the parameters (#1);
  step k (0-based), --steps times: all_reduce of the gradient (#2k+2, 1000 float32),
    all_reduce of the loss (#2k+3, 1 float32);
  teardown: one barrier.
Options add or change calls:
  --sleep-rank R --sleep-step K --sleep S  rank R sleeps S s before step K's gradient
                                           all_reduce (a late rank)
  --hang-rank R --hang-step K              rank R stops before step K's gradient
                                           all_reduce, forever (a hang; kill it)
  --mismatch-rank R --mismatch-step K      rank R all-reduces step K's loss as int32
                                           (the others: float32; same bytes, Gloo does
                                           not notice)
  --new-group                              each step first creates a new process group
                                           and all-reduces 4 floats on it (NEW_GROUP_SITE)
  --full-tensor                            each step first all-gathers the same shard
                                           through full_tensor() (FULL_TENSOR_SITE)
  --serial-groups                          setup also all-reduces once on two new groups
                                           (c10d#1/2, c10d#2/2); each step then sleeps
                                           50 ms, does its two all_reduces, sleeps 50 ms
                                           and all-reduces on the first group
                                           (SERIAL_A_SITE), then at once on the second
                                           (SERIAL_B_SITE): 4 collectives per step
  --grow                                   step k's gradient has 1000 + 500 k floats
  --wait-file P                            write the pid to P.pid.RANK after init, wait
                                           for P to exist before the first collective
  --done-file P                            write P.RANK after the last step
  --hold-file P                            then wait for P to exist before the barrier
                                           (a quiet point: nothing in flight)
The lines marked NEW_GROUP_SITE, FULL_TENSOR_SITE, SERIAL_A_SITE and SERIAL_B_SITE are
the call sites the tests expect in the findings.
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist


def full_tensor(shard, world):
    out = [torch.empty_like(shard) for _ in range(world)]
    dist.all_gather(out, shard)  # FULL_TENSOR_SITE
    return torch.cat(out)


def step(k, a, rank, world, groups):
    if groups:
        time.sleep(0.05)
    if a.new_group:
        g = dist.new_group(list(range(world)))
        dist.all_reduce(torch.ones(4), group=g)  # NEW_GROUP_SITE
    if a.full_tensor:
        full = full_tensor(torch.full((256,), float(rank)), world)
        if full.numel() != 256 * world:
            raise SystemExit("full_tensor gave the wrong size")
    if rank == a.sleep_rank and k == a.sleep_step:
        time.sleep(a.sleep)
    if rank == a.hang_rank and k == a.hang_step:
        while True:
            time.sleep(1)
    grad = torch.full((1000 + (500 * k if a.grow else 0),), float(rank + 1))
    dist.all_reduce(grad)  # GRAD_SITE
    if rank == a.mismatch_rank and k == a.mismatch_step:
        loss = torch.tensor([k], dtype=torch.int32)
    else:
        loss = torch.tensor([float(k)], dtype=torch.float32)
    dist.all_reduce(loss)  # LOSS_SITE
    if groups:
        x, y = torch.ones(16), torch.ones(16)
        time.sleep(0.05)
        dist.all_reduce(x, group=groups[0])  # SERIAL_A_SITE
        dist.all_reduce(y, group=groups[1])  # SERIAL_B_SITE


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=7)
    ap.add_argument("--sleep-rank", type=int, default=-1)
    ap.add_argument("--sleep-step", type=int, default=-1)
    ap.add_argument("--sleep", type=float, default=1.0)
    ap.add_argument("--hang-rank", type=int, default=-1)
    ap.add_argument("--hang-step", type=int, default=-1)
    ap.add_argument("--mismatch-rank", type=int, default=-1)
    ap.add_argument("--mismatch-step", type=int, default=-1)
    ap.add_argument("--new-group", action="store_true")
    ap.add_argument("--full-tensor", action="store_true")
    ap.add_argument("--serial-groups", action="store_true")
    ap.add_argument("--grow", action="store_true")
    ap.add_argument("--wait-file")
    ap.add_argument("--done-file")
    ap.add_argument("--hold-file")
    a = ap.parse_args()

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world)
    groups = []
    if a.serial_groups:  # before the wait: group creation makes no traced collective
        groups = [dist.new_group(list(range(world))) for _ in range(2)]
    if a.wait_file:
        tmp = f"{a.wait_file}.pid.{rank}.tmp"
        with open(tmp, "w") as f:
            f.write(f"{os.getpid()}\n")
        os.replace(tmp, f"{a.wait_file}.pid.{rank}")
        while not os.path.exists(a.wait_file):
            time.sleep(0.01)

    params = torch.zeros(64)
    dist.broadcast(params, src=0)
    for g in groups:
        dist.all_reduce(torch.zeros(1), group=g)
    for k in range(a.steps):
        step(k, a, rank, world, groups)
    if a.done_file:
        with open(f"{a.done_file}.{rank}", "w") as f:
            f.write("done\n")
    if a.hold_file:
        while not os.path.exists(a.hold_file):
            time.sleep(0.01)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
