# SPDX-License-Identifier: MIT
"""Seed 000's worked example, rebuilt on PyTorch 1.13 (no DTensor there): a DTensor-like
tensor subclass whose __torch_function__ goes through OpDispatcher.dispatch(op_call, args,
kwargs), an MLP with a ColwiseParallel fc1 and a RowwiseParallel fc2, and fc2's output
hook all-reducing the partial sums through a differentiable_all_reduce platform helper
over torch.distributed.nn.functional. One all-reduce per forward; with --backward, one
more per backward (the autograd Function's backward all-reduces the gradient). The
parameters carry their placements as a `_placements` attribute (fc1: Shard(0), fc2.weight:
Shard(1)), and tensors and parameters their `_device_mesh` (device type "cpu", mesh = the
ranks, dim names ("tp",)). Placements and the mesh are shaped as the real hyper-parallel's:
private fields (`_dim`, `_device_type`, `_mesh`, `_mesh_dim_names`) behind properties.

Ranks: MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE in the environment, Gloo backend.
  --forwards N      forward passes (default 3)
  --backward        run loss.backward() after each forward
  --wait-file P     write the pid to P.pid.RANK after init, wait for P to exist
  --pid-file P      write the pid to P.RANK after init and go on (a job already running,
                    as the demo attaches to it)
  --expect F        write this rank's ledger (what it did) to F.RANK as JSON
  --time            rank 0 prints "ns_per_forward N" and "cpu_ns_per_forward N" (the loop
                    only; CPU: every thread of the rank, kernel time included)
  --linger S        stay S seconds after the loop (a tracer reading the live model, as
                    --sharding does, then still finds it)
  --torch-profiler  run the loop under torch.profiler (CPU, shapes recorded)
  --pause S         sleep S seconds after each forward (--ops tests: BPF describes an
                    op's arguments once user space has classified its code object)
  --redistribute    fc2's hook reduces its partial sum through a TensorRedistribution
                    (hyper-parallel's shape: internal methods, a sorted() key C enters)
"""
import argparse
import contextlib
import json
import os
import time

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_fn
import torch.nn as nn
import torch.nn.functional as F


class DeviceMesh:
    """hyper-parallel's DeviceMesh shape: the device type, the mesh of ranks, its dim names,
    private behind properties."""

    def __init__(self, device_type, mesh, mesh_dim_names=None):
        self._device_type, self._mesh, self._mesh_dim_names = device_type, mesh, mesh_dim_names

    @property
    def device_type(self):
        return self._device_type

    @property
    def mesh(self):
        return self._mesh

    @property
    def mesh_dim_names(self):
        return self._mesh_dim_names


class Shard:
    """hyper-parallel's Shard: its dim private, behind a property."""

    def __init__(self, dim):
        self._dim = dim

    @property
    def dim(self):
        return self._dim


class Replicate:
    pass


MESH = None  # DeviceMesh("cpu", [0, 1, ...], ("tp",)), once the group exists


class OpDispatcher:
    """hyper-parallel's dispatcher shape: every DTensor op goes through dispatch()."""

    def dispatch(self, op_call, args, kwargs):
        local_args = [a.to_local() if isinstance(a, DTensor) else a for a in args]
        with torch._C.DisableTorchFunction():
            out = op_call(*local_args, **kwargs)
        return DTensor.from_local(out, (Replicate(),))


_dispatcher = OpDispatcher()


class DTensor(torch.Tensor):
    @staticmethod
    def __new__(cls, local, placements):
        r = torch.Tensor._make_subclass(cls, local, local.requires_grad)
        r._local = local
        r._placements = placements
        r._device_mesh = MESH
        return r

    @classmethod
    def from_local(cls, local, placements):
        return cls(local, placements)

    def to_local(self):
        return self._local

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return _dispatcher.dispatch(func, args, kwargs or {})


class platform:
    """hyper-parallel's platform layer: differentiable collective helpers."""

    @staticmethod
    def differentiable_all_reduce(tensor, group=None):
        return dist_fn.all_reduce(tensor, group=group or dist.group.WORLD)


class TensorRedistribution:
    """hyper-parallel's redistribution shape (--redistribute): a partial sum reduced through
    internal methods, one of which C enters (sorted()'s key)."""

    def reduce_partial(self, local):
        ops = sorted([("AllReduce", "sum")], key=lambda op: op[0] != "ReduceScatter")
        return self._allreduce_along_dev_dim(local, ops[0][1])

    def _allreduce_along_dev_dim(self, local, op):
        return platform.differentiable_all_reduce(local)


REDISTRIBUTION = TensorRedistribution()
REDISTRIBUTE = False  # --redistribute


class MLP(nn.Module):
    def __init__(self, world, rank):
        super().__init__()
        # ColwiseParallel fc1: out features sharded; RowwiseParallel fc2: in features sharded.
        self.fc1 = nn.Linear(16, 32 // world)
        self.fc2 = nn.Linear(32 // world, 16, bias=False)
        self.fc2.register_forward_hook(rowwise_output_hook)
        # What get_sharding_info() reports, kept on the parameters as DTensor keeps them
        # (read from outside by --sharding).
        self.fc1.weight._placements = (Shard(0),)
        self.fc1.bias._placements = (Shard(0),)
        self.fc2.weight._placements = (Shard(1),)
        for p in self.parameters():
            p._device_mesh = MESH

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


def rowwise_output_hook(module, inputs, output):
    local = output.to_local() if isinstance(output, DTensor) else output
    if REDISTRIBUTE:
        return DTensor.from_local(REDISTRIBUTION.reduce_partial(local), (Replicate(),))
    return DTensor.from_local(platform.differentiable_all_reduce(local), (Replicate(),))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--forwards", type=int, default=3)
    ap.add_argument("--backward", action="store_true")
    ap.add_argument("--wait-file")
    ap.add_argument("--pid-file")
    ap.add_argument("--expect")
    ap.add_argument("--time", action="store_true")
    ap.add_argument("--torch-profiler", action="store_true")
    ap.add_argument("--linger", type=float, default=0)
    ap.add_argument("--pause", type=float, default=0)
    ap.add_argument("--redistribute", action="store_true")
    a = ap.parse_args()

    global MESH, REDISTRIBUTE
    REDISTRIBUTE = a.redistribute
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    MESH = DeviceMesh("cpu", torch.arange(world), ("tp",))
    torch.manual_seed(rank)
    model = MLP(world, rank)
    if a.pid_file:
        with open(f"{a.pid_file}.{rank}.tmp", "w") as f:
            f.write(f"{os.getpid()}\n")
        os.rename(f"{a.pid_file}.{rank}.tmp", f"{a.pid_file}.{rank}")
    if a.wait_file:
        with open(f"{a.wait_file}.pid.{rank}", "w") as f:
            f.write(f"{os.getpid()}\n")
        while not os.path.exists(a.wait_file):
            time.sleep(0.02)
    prof = contextlib.nullcontext()
    if a.torch_profiler:
        from torch.profiler import ProfilerActivity, profile
        prof = profile(activities=[ProfilerActivity.CPU], record_shapes=True)
    t0, c0 = time.perf_counter_ns(), time.process_time_ns()
    with prof:
        for _ in range(a.forwards):
            x = DTensor.from_local(torch.randn(4, 16), (Replicate(),))
            out = model(x)
            if a.backward:
                out.to_local().sum().backward()
            time.sleep(a.pause)
    if a.time and rank == 0:
        print(f"ns_per_forward {(time.perf_counter_ns() - t0) / a.forwards:.1f}\n"
              f"cpu_ns_per_forward {(time.process_time_ns() - c0) / a.forwards:.1f}", flush=True)
    time.sleep(a.linger)
    ledger = {
        "rank": rank,
        "forwards": a.forwards,
        "backwards": a.forwards if a.backward else 0,
        "all_reduce_bytes": 4 * 16 * 4,
    }
    if a.expect:
        with open(f"{a.expect}.{rank}", "w") as f:
            json.dump(ledger, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
