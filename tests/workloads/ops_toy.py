# SPDX-License-Identifier: MIT
"""A framework in miniature for --ops on any CPython (3.10-3.13, pyenv or Debian), without
torch: modules called like torch's (instance __call__, entered from C), ops through a
dispatcher object (also entered from C), a real MPI_Barrier (through ctypes) as the
collective, issued in fc2. tests/integration/ops_toy.profile names the frames:

  module  Module.__call__      (self: the module; its name from the parent's _modules)
  op      Dispatcher.__call__  (arg1: the op function; its name is the op's)

Per forward: Module((root)) > Module(fc1) > Op(linear); Op(gelu); Module(fc2) > Op(linear),
MPI_Barrier. Helpers that are not in the profile (scale(), Tensorish.__init__ entered from
C) run in every forward: --ops must not send them after the first sightings.

  --forwards N    forward passes (default 3)
  --nested        the model is a transformer in miniature instead: a ModuleList of 2
                  blocks (never called itself), each with an mlp whose down_proj issues
                  the barrier: FQNs layers.0.mlp.down_proj, layers.1.mlp.down_proj
  --pause S       sleep S seconds after each forward (default 0.25: the tracer reads
                  its ring buffer every 100 ms, and BPF filters a code object only once
                  user space has classified it)
  --wait-file P   write the pid to P.pid, wait for P to exist before the first forward
  --deep N        each Linear first nests N frames entered from C (map calling nest()),
                  past the kernel's limit of 64 nested return probes (after one shallow
                  nest() and a pause, so that BPF filters its frames)
"""
import argparse
import ctypes
import os
import sys
import time

mpi = ctypes.CDLL("libmpi.so.40", mode=ctypes.RTLD_GLOBAL)
COMM_WORLD = ctypes.addressof(ctypes.c_char.in_dll(mpi, "ompi_mpi_comm_world"))
mpi.MPI_Barrier.argtypes = [ctypes.c_void_p]


class Tensorish:
    def __init__(self, v):  # entered from C (type call): not profiled
        self.v = v


class Dispatcher:
    def __call__(self, op, *args):
        return op(*args)


dispatch = Dispatcher()


def linear(x, w):
    return Tensorish(x.v * w)


def gelu(x):
    return Tensorish(max(x.v, 0.0))


def scale(x):
    return x


class Module:
    def __init__(self):
        self._modules = {}

    def add(self, name, m):
        self._modules[name] = m
        setattr(self, name, m)

    def __call__(self, *args):
        return self.forward(*args)


DEEP = 0


def nest(n):  # each level entered from C, by map's __next__
    return n and next(map(nest, (n - 1,)))


class Linear(Module):
    def __init__(self, w, collective=False):
        super().__init__()
        self.w, self.collective = w, collective

    def forward(self, x):
        nest(DEEP)
        y = dispatch(linear, x, self.w)
        if self.collective:
            mpi.MPI_Barrier(COMM_WORLD)
        return y


class MLP(Module):
    def __init__(self):
        super().__init__()
        self.add("fc1", Linear(2.0))
        self.add("fc2", Linear(0.5, collective=True))

    def forward(self, x):
        return self.fc2(dispatch(gelu, self.fc1(scale(x))))


class ModuleList(Module):
    def __init__(self, mods):
        super().__init__()
        for i, m in enumerate(mods):
            self.add(str(i), m)


class MLPBlock(Module):
    def __init__(self):
        super().__init__()
        self.add("up_proj", Linear(2.0))
        self.add("down_proj", Linear(0.5, collective=True))

    def forward(self, x):
        return self.down_proj(dispatch(gelu, self.up_proj(x)))


class Block(Module):
    def __init__(self):
        super().__init__()
        self.add("mlp", MLPBlock())

    def forward(self, x):
        return self.mlp(x)


class Transformer(Module):
    def __init__(self):
        super().__init__()
        self.add("layers", ModuleList([Block(), Block()]))

    def forward(self, x):
        for i in range(2):
            x = self.layers._modules[str(i)](x)
        return x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--forwards", type=int, default=3)
    ap.add_argument("--nested", action="store_true")
    ap.add_argument("--pause", type=float, default=0.25)
    ap.add_argument("--wait-file")
    ap.add_argument("--deep", type=int, default=0)
    a = ap.parse_args()
    global DEEP
    if mpi.MPI_Init(None, None) != 0:
        sys.exit("MPI_Init failed")
    model = Transformer() if a.nested else MLP()
    if a.wait_file:
        with open(a.wait_file + ".pid", "w") as f:
            f.write(f"{os.getpid()}\n")
        while not os.path.exists(a.wait_file):
            time.sleep(0.02)
    if a.deep:
        nest(2)
        time.sleep(a.pause)
        DEEP = a.deep
    for i in range(a.forwards):
        model(Tensorish(float(i)))
        time.sleep(a.pause)
    mpi.MPI_Finalize()


if __name__ == "__main__":
    main()
