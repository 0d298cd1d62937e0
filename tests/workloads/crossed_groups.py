# SPDX-License-Identifier: MIT
"""Two Gloo process groups of the same size whose collectives the ranks issue in opposite
orders, for the rank→rank arrows of the Chrome export (tests/integration/test_chrome.py).
One process per rank, 2 ranks:

    MASTER_ADDR=127.0.0.1 MASTER_PORT=29511 WORLD_SIZE=2 RANK=r \\
        /usr/bin/python3 tests/workloads/crossed_groups.py [--steps N] [--wait-file P]

Groups A and B are created before the wait (creation makes no traced collective).
  setup: all_reduce of 8 floats on the default group, then of 16 floats on A, then of 32
    on B, in that order in every rank: the diagnosis' identities (order of first use of a
    communicator of that size) are c10d#0/2, c10d#1/2 (A), c10d#2/2 (B) in both ranks;
  step k, --steps times: rank 0 all-reduces 16 floats on A, then 32 on B; rank 1 32 on
    B, then 16 on A. Both async (Gloo runs each group on its own threads, so neither
    waits for the other), 20 ms apart, then both are waited for.
So the n-th ProcessGroupGloo::allreduce of rank 0 is on A where rank 1's is on B: keyed
per function, rank→rank arrows would join A's halves to B's (16 floats to 32); keyed by
communicator identity and sequence number they join A to A and B to B.
  --wait-file P    write the pid to P.pid.RANK after init, wait for P to exist
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--wait-file")
    a = ap.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if world != 2:
        raise SystemExit("crossed_groups.py runs with 2 ranks")
    ga, gb = dist.new_group([0, 1]), dist.new_group([0, 1])
    if a.wait_file:
        tmp = f"{a.wait_file}.pid.{rank}.tmp"
        with open(tmp, "w") as f:
            f.write(f"{os.getpid()}\n")
        os.replace(tmp, f"{a.wait_file}.pid.{rank}")
        while not os.path.exists(a.wait_file):
            time.sleep(0.01)
    dist.all_reduce(torch.ones(8))
    dist.all_reduce(torch.ones(16), group=ga)
    dist.all_reduce(torch.ones(32), group=gb)
    for _ in range(a.steps):
        order = [(ga, 16), (gb, 32)] if rank == 0 else [(gb, 32), (ga, 16)]
        works = []
        for i, (g, n) in enumerate(order):
            if i:
                time.sleep(0.02)
            works.append(dist.all_reduce(torch.ones(n), group=g, async_op=True))
        for w in works:
            w.wait()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
