# SPDX-License-Identifier: MIT
"""The Python API of device profiling (commtrace.devprof) through a whole schedule, with
the real C recorder: a MegaKernel that runs on the host (build/progs/libmkhost.so), its
builder binding the names and asking devprof.profile_buffer() per launch, the user's loop
inside mega_kernel_profile() with prof.step(), all of it under one torch.profiler.profile
(CPU) that records every call as record_function("mk_host call SEQ").

Writes OUT/manifest.json for tests/integration/test_devprof_api.py to check: per call its
step, the session's action, whether it sampled and the records the kernel wrote; what
torch.profiler.schedule decides for the same numbers; the windows saved (and their
decoded Chrome traces, written by devprof.chrome_trace_handler); each window fused into
the torch.profiler trace; and the error a fusion without allow_host_align raises. Runs
with torch 1.13 (Debian 12) and torch 2.6 (the Debian 13 root) alike; checks nothing
itself.

  devprof_api.py --mk build/progs/libmkhost.so --out DIR [--schedule 1,1,1,2,2[,SFW]]
                 [--steps 12] [--calls-per-step 2] [--max-per-step 0] [--memory host|torch]
"""
import argparse
import ctypes
import json
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile, record_function
from torch.profiler import schedule as torch_schedule

from commtrace import devprof

KERNEL = "mk_host"
AIC_TASKS, AIV_TASKS = [4, 3], [6, 6, 5]
STAGES = ["qkv", "attn", "mlp"]
OWNERS = ["layer0", "layer1"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mk", required=True, help="libmkhost.so")
    ap.add_argument("--out", required=True)
    ap.add_argument("--schedule", default="1,1,1,2,2",
                    help="SKIP_FIRST,WAIT,WARMUP,ACTIVE,REPEAT[,SKIP_FIRST_WAIT]")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--calls-per-step", type=int, default=2)
    ap.add_argument("--max-per-step", type=int, default=0)
    ap.add_argument("--memory", choices=["host", "torch"], default="host",
                    help="buffers in host memory, or as uint8 tensors on torch's cpu device")
    a = ap.parse_args()
    nums = [int(x) for x in a.schedule.split(",")]
    keys = ["skip_first", "wait", "warmup", "active", "repeat", "skip_first_wait"][:len(nums)]
    sched = dict(zip(keys, nums))
    os.makedirs(a.out, exist_ok=True)

    mk = ctypes.CDLL(os.path.abspath(a.mk))
    mk.mkh_run.restype = ctypes.c_int64
    mk.mkh_run.argtypes = [ctypes.POINTER(devprof.RuntimeConfig), ctypes.c_uint32,
                           ctypes.POINTER(ctypes.c_uint32), ctypes.c_uint32,
                           ctypes.POINTER(ctypes.c_uint32), ctypes.c_uint32, ctypes.c_uint32]
    aic = (ctypes.c_uint32 * len(AIC_TASKS))(*AIC_TASKS)
    aiv = (ctypes.c_uint32 * len(AIV_TASKS))(*AIV_TASKS)

    # The builder's side: bound once, with the names only it knows.
    memory = devprof.TorchMemory("cpu") if a.memory == "torch" else devprof.HostMemory()
    kernel = devprof.MegaKernel(KERNEL, aic_tasks=AIC_TASKS, aiv_tasks=AIV_TASKS,
                                stage_names=STAGES, owner_labels=OWNERS, memory=memory)
    unprofiled = devprof.profile_buffer(kernel)  # outside any profile: never samples
    outside = {"sampled": unprofiled.sampled, "config": bytes(unprofiled.config).hex(),
               "records": mk.mkh_run(ctypes.byref(unprofiled.config), len(AIC_TASKS), aic,
                                     len(AIV_TASKS), aiv, len(STAGES), len(OWNERS))}

    def run_kernel():
        launch = devprof.profile_buffer(kernel)
        with record_function(f"{KERNEL} call {launch.invocation_seq}"):
            n = mk.mkh_run(ctypes.byref(launch.config), len(AIC_TASKS), aic, len(AIV_TASKS),
                           aiv, len(STAGES), len(OWNERS))
        launch.done()
        return launch, n

    # The user's side: a schedule, a context, a step per training step.
    windows_dir = os.path.join(a.out, "windows")
    handler = devprof.chrome_trace_handler(windows_dir)
    saved = []

    def on_ready(window):
        handler(window)
        saved.append(window)

    calls = []
    with profile(activities=[ProfilerActivity.CPU]) as tprof:
        with devprof.mega_kernel_profile(schedule=devprof.schedule(**sched), out_dir=windows_dir,
                                         on_trace_ready=on_ready,
                                         max_per_step=a.max_per_step) as prof:
            for step in range(a.steps):
                for call in range(a.calls_per_step):
                    launch, n = run_kernel()
                    calls.append({"step": step, "call": call, "seq": launch.invocation_seq,
                                  "action": launch.action.name, "sampled": launch.sampled,
                                  "records": n})
                torch.ones(4).add_(1)  # the rest of the step
                prof.step()
    trace = os.path.join(a.out, "torch.json")
    tprof.export_chrome_trace(trace)

    fn = torch_schedule(**{k: v for k, v in sched.items()
                           if k != "skip_first_wait" or "skip_first_wait" in
                           torch_schedule.__code__.co_varnames})
    torch_actions = [fn(s).name for s in range(a.steps)]
    windows = []
    for w in saved:
        fused = os.path.join(a.out, f"fused.window{w.index}.json")
        w.fuse(trace, fused, allow_host_align=True)
        windows.append({"index": w.index, "path": w.path, "steps": w.steps,
                        "invocations": w.invocations, "records": w.records,
                        "dropped": w.dropped, "complete": w.complete,
                        "chrome": os.path.join(windows_dir, os.path.basename(w.path)[:-4] +
                                               ".json"),
                        "fused": fused, "validate": devprof.validate(w.path)})
    refused = None
    try:
        saved[0].fuse(trace, os.path.join(a.out, "refused.json"))
    except devprof.DevprofError as e:
        refused = {"class": type(e).__name__, "code": e.code, "message": str(e),
                   "written": os.path.exists(os.path.join(a.out, "refused.json"))}
    manifest = {"torch": torch.__version__, "python": sys.version.split()[0],
                "schedule": sched, "steps": a.steps, "calls_per_step": a.calls_per_step,
                "max_per_step": a.max_per_step, "memory": a.memory, "kernel": KERNEL,
                "aic_tasks": AIC_TASKS, "aiv_tasks": AIV_TASKS, "stages": STAGES,
                "owners": OWNERS, "plan": kernel.plan, "nbytes": kernel.nbytes,
                "outside": outside, "calls": calls, "torch_actions": torch_actions,
                "windows": windows, "trace": trace, "refused": refused}
    with open(os.path.join(a.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print(f"devprof_api: torch {torch.__version__}: {len(calls)} calls, "
          f"{sum(c['sampled'] for c in calls)} sampled, {len(windows)} windows saved")


if __name__ == "__main__":
    main()
