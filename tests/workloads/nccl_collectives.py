# SPDX-License-Identifier: MIT
"""A real NCCL workload for a machine with a CUDA GPU (PyTorch 2.x, ProcessGroupNCCL).

    python3 tests/workloads/nccl_collectives.py [--iters N] [--wait-file P] [--expect F]

One process per rank (MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE, default a world of one:
NCCL refuses two ranks on one GPU). The communicator is created eagerly (device_id), so a
tracer started with the job sees ncclCommInitRank*. Then, per iteration, on GPU tensors:

- dist.all_reduce of float32 tensors of each of ALLREDUCE_SIZES elements (ncclAllReduce),
- dist.all_gather_into_tensor of 1000 bfloat16 elements (ncclAllGather),
- dist.broadcast of 64 int64 elements from rank 0 (ncclBroadcast).

--wait-file P: write the pid to P.pid.RANK after the communicator exists, then poll until P
exists before the first collective (a tracer attaches with -p meanwhile). --expect F: write
the ledger (calls and bytes per NCCL function as commtrace reports them) to F.RANK.
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist

ALLREDUCE_SIZES = (1, 4096, 1 << 20)  # float32 elements
ALLGATHER_ELEMS = 1000  # bfloat16, per rank
BROADCAST_ELEMS = 64  # int64


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--wait-file")
    ap.add_argument("--expect")
    a = ap.parse_args()
    for k, v in (("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "29531"), ("RANK", "0"),
                 ("WORLD_SIZE", "1")):
        os.environ.setdefault(k, v)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dev = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)
    if a.wait_file:
        with open(f"{a.wait_file}.pid.{rank}", "w") as f:
            f.write(f"{os.getpid()}\n")
        while not os.path.exists(a.wait_file):
            time.sleep(0.02)
    ar = [torch.ones(n, device=dev) for n in ALLREDUCE_SIZES]
    ag_in = torch.ones(ALLGATHER_ELEMS, device=dev, dtype=torch.bfloat16)
    ag_out = torch.empty(ALLGATHER_ELEMS * world, device=dev, dtype=torch.bfloat16)
    bc = torch.arange(BROADCAST_ELEMS, device=dev, dtype=torch.int64)
    for _ in range(a.iters):
        for t in ar:
            dist.all_reduce(t)
        dist.all_gather_into_tensor(ag_out, ag_in)
        dist.broadcast(bc, 0)
    torch.cuda.synchronize()
    assert ag_out.float().sum().item() == ALLGATHER_ELEMS * world
    n = a.iters
    ledger = {
        "rank": rank, "world_size": world,
        "ncclAllReduce": {"calls": n * len(ALLREDUCE_SIZES),
                          "bytes": n * 4 * sum(ALLREDUCE_SIZES), "dtype": "ncclFloat32"},
        "ncclAllGather": {"calls": n, "bytes_sent": n * 2 * ALLGATHER_ELEMS,
                          "bytes_received": n * 2 * ALLGATHER_ELEMS * world,
                          "dtype": "ncclBfloat16"},
        "ncclBroadcast": {"calls": n, "bytes": n * 8 * BROADCAST_ELEMS, "dtype": "ncclInt64"},
    }
    if a.expect:
        with open(f"{a.expect}.{rank}", "w") as f:
            json.dump(ledger, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
