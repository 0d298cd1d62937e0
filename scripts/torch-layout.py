# SPDX-License-Identifier: MIT
"""Measure the PyTorch object offsets that user/catalog/c10d.c reads, in this torch:
TensorImpl.numel_ and data_type_, and rank_/size_ of ProcessGroup and of the backends
(the `this` of c10d::ProcessGroupGloo/NCCL methods: a ProcessGroup in torch 1.x, a Backend
in 2.x). Run it with the interpreter that has the torch to measure:

    python3 scripts/torch-layout.py

It builds objects with known values (a tensor of 123457 bfloat16 elements; groups of rank 3
of 7, which never connect) and finds those values in their memory, through ctypes.
"""
import ctypes
import struct

import torch
import torch.distributed as dist


def mem(addr, n):
    return bytes((ctypes.c_char * n).from_address(addr))


def cxx_ptr(obj):
    # a pybind11 instance with its value inline: PyObject_HEAD, then the C++ pointer
    return struct.unpack("<Q", mem(id(obj) + 16, 8))[0]


def find_rank_size(name, make):
    try:
        obj = make()
        raw = mem(cxx_ptr(obj), 512)
        offs = [o for o in range(0, 504, 4) if struct.unpack_from("<ii", raw, o) == (3, 7)]
        print(f"{name}: rank_,size_ (3,7) at {offs}")
    except Exception as e:  # a backend this build lacks, or that insists on connecting
        print(f"{name}: not measured: {e!r}")


t = torch.empty(123457, dtype=torch.bfloat16)
raw = mem(t._cdata, 512)
print("torch", torch.__version__)
print("TensorImpl: numel_ (123457) at",
      [o for o in range(0, 504, 8) if struct.unpack_from("<q", raw, o)[0] == 123457],
      "(the first may be sizes[0]); data_type_ (bfloat16 = 15) at",
      [o for o in range(0, 510, 2) if struct.unpack_from("<H", raw, o)[0] == 15])
find_rank_size("ProcessGroup", lambda: dist.ProcessGroup(dist.HashStore(), 3, 7))
if torch.cuda.is_available() and hasattr(dist, "ProcessGroupNCCL"):
    find_rank_size("ProcessGroupNCCL", lambda: dist.ProcessGroupNCCL(dist.HashStore(), 3, 7))
