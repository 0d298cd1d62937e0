# SPDX-License-Identifier: MIT
"""A real PyTorch Gloo workload (CPU tensors) for the integration tests.

Start one process per rank (torchrun is broken with Debian's torch 1.13 on 3.11):

    MASTER_ADDR=127.0.0.1 MASTER_PORT=29511 WORLD_SIZE=2 RANK=r \
        /usr/bin/python3 tests/workloads/gloo_collectives.py [--iters N]
        [--wait-file PATH] [--expect FILE] [--hold-file PATH]

Each rank issues a known mix of dist.all_reduce (float32, several sizes), dist.broadcast
(float32 and int64, both roots) and dist.all_gather (float32 and int32), and keeps a
ledger of what it asked for:

- c10d layer (`ProcessGroupGloo::allreduce`, `::broadcast`, `::allgather`): one call per
  torch.distributed call, on the caller's thread; bytes from the tensors' metadata.
- Gloo layer (`gloo::allreduce`, `gloo::broadcast`, `gloo::allgather`): one call per
  c10d call, made on one of Gloo's worker threads (see test_collectives.py for what
  bpftrace showed); bytes = elements x elementSize as Gloo sees them: allreduce
  sent = received = numel; broadcast sent = received = the buffer; allgather
  sent = the per-rank input, received = input x world size.

--wait-file PATH: after init_process_group, write our pid to PATH.pid.RANK and poll until
PATH exists before the first collective. --expect FILE: write the ledger to FILE.RANK.
--hold-file PATH: after the ledger is written, poll until PATH exists before tearing the
process group down (no collective is issued while held: a quiet point to read metrics).
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist

ALLREDUCE_SIZES = (1, 17, 1000, 16384)  # float32 elements
BROADCASTS = ((torch.float32, 10, 0), (torch.float32, 256, 1), (torch.int64, 5, 0))
ALLGATHERS = ((torch.float32, 8), (torch.int32, 3))


class Ledger:
    def __init__(self):
        self.functions = {}

    def add(self, library, name, sent, received):
        e = self.functions.setdefault(
            name,
            {"library": library, "calls": 0, "bytes_sent": 0, "bytes_received": 0, "dtype": None},
        )
        e["calls"] += 1
        e["bytes_sent"] += sent
        e["bytes_received"] += received

    def both(self, method, sent, received):
        # c10d bytes come from tensor metadata: the same numbers as the Gloo layer here.
        self.add("c10d", "ProcessGroupGloo::" + method, sent, received)
        self.add("gloo", "gloo::" + method, sent, received)


def nbytes(t):
    return t.numel() * t.element_size()


def one_iteration(rank, world, ledger):
    for n in ALLREDUCE_SIZES:
        t = torch.full((n,), float(rank + 1), dtype=torch.float32)
        dist.all_reduce(t)
        ledger.both("allreduce", nbytes(t), nbytes(t))
        expect = float(world * (world + 1) // 2)
        if t[0].item() != expect:
            raise SystemExit(f"all_reduce gave {t[0].item()}, expected {expect}")

    for dtype, n, src in BROADCASTS:
        src %= world
        t = torch.full((n,), rank, dtype=dtype)
        dist.broadcast(t, src=src)
        ledger.both("broadcast", nbytes(t), nbytes(t))
        if t[0].item() != src:
            raise SystemExit(f"broadcast gave {t[0].item()}, expected {src}")

    for dtype, n in ALLGATHERS:
        t = torch.full((n,), rank, dtype=dtype)
        out = [torch.empty_like(t) for _ in range(world)]
        dist.all_gather(out, t)
        ledger.both("allgather", nbytes(t), nbytes(t) * world)
        if [int(o[0].item()) for o in out] != list(range(world)):
            raise SystemExit("all_gather gave the wrong data")


def write_atomic(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=1)
    ap.add_argument("--wait-file")
    ap.add_argument("--expect")
    ap.add_argument("--hold-file")
    args = ap.parse_args()

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world)

    if args.wait_file:
        write_atomic(f"{args.wait_file}.pid.{rank}", f"{os.getpid()}\n")
        while not os.path.exists(args.wait_file):
            time.sleep(0.01)

    ledger = Ledger()
    for _ in range(args.iters):
        one_iteration(rank, world, ledger)

    if args.expect:
        doc = {
            "program": "gloo_collectives",
            "pid": os.getpid(),
            "rank": rank,
            "size": world,
            "iterations": args.iters,
            "final": True,
            "setup": {},
            "functions": ledger.functions,
        }
        write_atomic(f"{args.expect}.{rank}", json.dumps(doc, indent=2) + "\n")

    if args.hold_file:
        while not os.path.exists(args.hold_file):
            time.sleep(0.01)

    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
