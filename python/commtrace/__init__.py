# SPDX-License-Identifier: MIT
"""commtrace: the Python side of commtrace-bpf.

commtrace.devprof samples a MegaKernel's device profile buffers with a schedule, as
torch.profiler samples steps (docs/devprof.md). The tracer itself (commtrace-bpf) needs no
Python in the traced job.
"""
