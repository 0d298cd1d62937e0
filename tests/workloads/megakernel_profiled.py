# SPDX-License-Identifier: MIT
"""The real CUDA MegaKernel (tests/progs/megakernel.cu, built with -DMK_LIBRARY as
libmegakernel.so) under torch.profiler, for `commtrace-bpf devprof fuse` against a real
Kineto trace with device kernel events. Run by scripts/gpu-check.sh (step_devprof).

run: loads the library with ctypes and, inside one torch.profiler.profile(activities=
CPU+CUDA) that records every call:
  - PRE calls of a separate, never-sampled session (the launches a trace holds before
    the sampling session's call 0: `fuse --skip PRE`);
  - CALLS calls of the sampling session, with the five numbers of torch.profiler.schedule
    (--schedule SKIP_FIRST,WAIT,WARMUP,ACTIVE,REPEAT); sampled buffers are appended to
    OUT/mk.bin with their invocation_seq;
  - a small torch kernel on the same stream after every call, so the trace holds other
    kernels between the MegaKernel's.
Each call runs inside record_function("mk_call pre I") or ("mk_call session S"), so a
checker can tell which kernel event is which call without trusting the fusion's own
numbering: the call's range holds the launch's runtime event, whose correlation id is the
kernel event's. Writes OUT/mk.bin, OUT/kineto.json (export_chrome_trace) and
OUT/manifest.json (what was run and what the session decided per call, next to what
torch.profiler.schedule decides for the same numbers).

check: reads the manifest, the Kineto trace and the output of
`devprof fuse --device OUT/mk.bin --profiler OUT/kineto.json --skip PRE -o FUSED`, and
checks that every sampled invocation was aligned by its invocation_seq to the kernel event
of its own call (found independently, as above), that its AIC/AIV tracks are all there
with every record, on that kernel's process, and that each record lies inside that
kernel event (within --tolerance-us, default 1 us, for %globaltimer granularity; the
strict count is printed too). Needs no torch or GPU. Prints one summary line,
"devprof fusion check: PASS ..." or "devprof fusion check: FAIL ...", and exits 0 or 1.

  megakernel_profiled.py run --lib build/progs/libmegakernel.so --out DIR
        [--pre 2] [--calls 12] [--schedule 2,1,1,2,2]
  megakernel_profiled.py check --manifest DIR/manifest.json --fused DIR/fused.json
"""
import argparse
import ctypes
import json
import os
import re
import sys
from collections import Counter, defaultdict

KERNEL = "megakernel"  # the kernel's name in its metadata and in the trace
FUSE_TID_BASE = 0x40000000
ACTIONS = ["none", "warmup", "record", "record_and_save"]  # enum ct_devprof_action
RANGE = re.compile(r"^mk_call (pre|session) (\d+)$")


# ---------------------------------------------------------------------------------------
# run (GPU, torch)

def load_lib(path):
    lib = ctypes.CDLL(os.path.abspath(path))
    u32 = ctypes.c_uint32
    lib.mk_open.restype = ctypes.c_void_p
    lib.mk_open.argtypes = [ctypes.c_char_p, u32, u32, u32, u32, u32]
    lib.mk_call.restype = ctypes.c_int
    lib.mk_call.argtypes = [ctypes.c_void_p]
    lib.mk_close.restype = ctypes.c_int
    lib.mk_close.argtypes = [ctypes.c_void_p]
    lib.mk_info.restype = None
    lib.mk_info.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64 * 8)]
    lib.mk_error.restype = ctypes.c_char_p
    return lib


def mk(lib, rc, what):
    if rc is None or (isinstance(rc, int) and rc < 0):
        sys.exit(f"megakernel_profiled: {what} failed: {lib.mk_error().decode(errors='replace')}")
    return rc


def run(a):
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    sched = [int(x) for x in a.schedule.split(",")]
    if len(sched) != 5 or min(sched) < 0 or sched[3] < 1:
        sys.exit("megakernel_profiled: --schedule SKIP_FIRST,WAIT,WARMUP,ACTIVE,REPEAT, "
                 "ACTIVE >= 1")
    if not torch.cuda.is_available():
        sys.exit("megakernel_profiled: torch sees no CUDA device")
    os.makedirs(a.out, exist_ok=True)
    buf, trace = os.path.join(a.out, "mk.bin"), os.path.join(a.out, "kineto.json")
    lib = load_lib(a.lib)
    x = torch.ones(1 << 16, device="cuda")

    # Both sessions are laid out before profiling starts; one call of the pre session
    # outside the profiler loads the kernel's module, so the trace holds only the calls.
    pre = mk(lib, lib.mk_open(None, 0, 0, 0, 0, 0), "mk_open (pre)")
    ses = mk(lib, lib.mk_open(buf.encode(), *sched), "mk_open")
    mk(lib, lib.mk_call(pre), "warm-up call")
    x.mul_(0.5).add_(1.0)
    torch.cuda.synchronize()

    actions = []
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i in range(a.pre):
            with record_function(f"mk_call pre {i}"):
                mk(lib, lib.mk_call(pre), f"pre call {i}")
            x.mul_(0.5).add_(1.0)
        for s in range(a.calls):
            with record_function(f"mk_call session {s}"):
                actions.append(mk(lib, lib.mk_call(ses), f"session call {s}"))
            x.mul_(0.5).add_(1.0)
        torch.cuda.synchronize()
    info = (ctypes.c_uint64 * 8)()
    lib.mk_info(ses, ctypes.byref(info))
    mk(lib, lib.mk_close(pre), "mk_close (pre)")
    mk(lib, lib.mk_close(ses), "mk_close")
    prof.export_chrome_trace(trace)

    # What torch.profiler.schedule decides for the same numbers, step by step.
    fn = schedule(skip_first=sched[0], wait=sched[1], warmup=sched[2], active=sched[3],
                  repeat=sched[4])
    names = {"NONE": "none", "WARMUP": "warmup", "RECORD": "record",
             "RECORD_AND_SAVE": "record_and_save"}
    torch_actions = [names[fn(s).name] for s in range(a.calls)]
    saved = [s for s, act in enumerate(actions) if act >= 2]
    manifest = {
        "lib": os.path.abspath(a.lib), "buffer": os.path.abspath(buf),
        "trace": os.path.abspath(trace), "kernel": KERNEL, "pre": a.pre, "calls": a.calls,
        "schedule": dict(zip(["skip_first", "wait", "warmup", "active", "repeat"], sched)),
        "actions": [ACTIONS[act] for act in actions], "torch_schedule_actions": torch_actions,
        "saved_seqs": saved, "aic": info[0], "aiv": info[1], "records_per_call": info[2],
        "capacity": [info[3], info[4]], "buffer_bytes": info[5], "saved": info[7],
        "torch": torch.__version__, "device": torch.cuda.get_device_name(0),
    }
    with open(os.path.join(a.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    size = os.path.getsize(buf)
    print(f"megakernel_profiled: {a.pre} pre-session + {a.calls} session calls on "
          f"{manifest['device']} ({info[0]} AIC + {info[1]} AIV workers), torch "
          f"{torch.__version__}; actions {' '.join(manifest['actions'])}; saved "
          f"invocation_seq {saved} ({size} bytes, {info[5]} per buffer) to {buf}; "
          f"trace {trace}")
    if size != len(saved) * info[5] or info[7] != len(saved):
        sys.exit(f"megakernel_profiled: {buf} has {size} bytes, want {len(saved)} x {info[5]}")


# ---------------------------------------------------------------------------------------
# check (no torch, no GPU)

def events_of(doc):
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def is_x(e, cat=None):
    return isinstance(e, dict) and e.get("ph") == "X" and (cat is None or e.get("cat") == cat)


def inside(ts, dur, outer, tol=0.0):
    return outer["ts"] - tol <= ts and ts + dur <= outer["ts"] + outer["dur"] + tol


def overlap(a, b):
    return a["ts"] < b["ts"] + b["dur"] and b["ts"] < a["ts"] + a["dur"]


def identify(events, kernel):
    """Which call each kernel event of `kernel` is, without the fusion's numbering: the
    "mk_call ..." range on the CPU that holds the launch's runtime event (same correlation
    id); failing that, the one range that overlaps the kernel's interval (the call waits
    for its kernel, and the ranges are apart).
    Returns ({("pre"|"session", n): (event index, event, method)}, problems)."""
    # Kineto's record_function ranges; gpu_user_annotation copies on the GPU are not them.
    ranges = [e for e in events if is_x(e) and e.get("cat", "user_annotation") ==
              "user_annotation" and RANGE.match(e.get("name", ""))]
    runtime = {}
    for e in events:
        if is_x(e) and e.get("cat") in ("cuda_runtime", "cuda_driver"):
            corr = (e.get("args") or {}).get("correlation")
            if corr is not None:
                runtime.setdefault(corr, e)
    calls, problems = {}, []
    for i, k in enumerate(events):
        if not (is_x(k) and str(k.get("cat", "")).lower() == "kernel"
                and kernel in k.get("name", "")):
            continue
        rt = runtime.get((k.get("args") or {}).get("correlation"))
        owners, method = [], "correlation"
        if rt:
            owners = [r for r in ranges if (r.get("pid"), r.get("tid")) ==
                      (rt.get("pid"), rt.get("tid")) and inside(rt["ts"], rt.get("dur", 0), r)]
        if len(owners) != 1:
            method = "time"
            owners = [r for r in ranges if overlap(k, r)]
        if len(owners) != 1:
            problems.append(f"kernel event {i} (ts {k['ts']}) matches {len(owners)} mk_call "
                            "ranges, not 1")
            continue
        m = RANGE.match(owners[0]["name"])
        key = (m.group(1), int(m.group(2)))
        if key in calls:
            problems.append(f"two kernel events ({calls[key][0]} and {i}) for mk_call {key[0]} "
                            f"{key[1]}")
        calls[key] = (i, k, method)
    return calls, problems


def check(a):
    problems = []

    def need(cond, msg):
        if not cond:
            problems.append(msg)
        return cond

    def verdict(detail):
        for p in problems[:20]:
            print(f"  problem: {p}")
        if len(problems) > 20:
            print(f"  ... {len(problems) - 20} more problems")
        word = f"FAIL ({len(problems)} problems)" if problems else "PASS"
        print(f"devprof fusion check: {word}: {detail}")
        return 0 if not problems else 1

    try:
        with open(a.manifest) as f:
            man = json.load(f)
        with open(a.trace or man["trace"]) as f:
            events = events_of(json.load(f))
        with open(a.fused) as f:
            fused = json.load(f)
    except (OSError, ValueError, KeyError) as e:
        problems.append(f"cannot read the inputs: {e}")
        return verdict("nothing to check")

    kernel, pre, calls = man["kernel"], man["pre"], man["calls"]
    saved = man["saved_seqs"]
    need(man["actions"] == man.get("torch_schedule_actions", man["actions"]),
         f"the session's actions {man['actions']} differ from torch.profiler.schedule's "
         f"{man.get('torch_schedule_actions')}")
    need(saved, "the session saved no buffer: nothing was sampled")

    # 1. Every call's kernel event, found independently of the fusion.
    found, probs = identify(events, kernel)
    problems.extend(probs)
    want = {("pre", i) for i in range(pre)} | {("session", s) for s in range(calls)}
    need(set(found) == want, f"kernel events identified for {len(found)} calls, want {len(want)}: "
         f"missing {sorted(want - set(found))[:8]}, unexpected {sorted(set(found) - want)[:8]}")
    methods = Counter(v[2] for v in found.values())
    order = sorted(found.items(), key=lambda kv: kv[1][1]["ts"])
    need([k for k, _ in order] == [("pre", i) for i in range(pre)] +
         [("session", s) for s in range(calls)], "the calls' kernel events are not in call order")

    # 2. The fusion's alignment.
    md = (fused.get("metadata") or {}).get("commtrace_devprof") or {}
    need(md.get("alignment") == "device_kernel" and md.get("host_alignment") is False,
         f"alignment {md.get('alignment')!r}, host_alignment {md.get('host_alignment')!r}: "
         "want device_kernel, false")
    need(md.get("align_by") == "invocation_seq", f"align_by {md.get('align_by')!r}")
    need(md.get("skip") == pre, f"skip {md.get('skip')} but {pre} pre-session calls")
    invs = md.get("invocations") or []
    seqs = [i.get("invocation_seq") for i in invs]
    need(seqs == saved, f"fused invocation_seq {seqs}, the session saved {saved}")
    kernel_of = {}  # invocation index -> the kernel event it must lie in
    aligned = 0
    for inv in invs:
        k, seq, to = inv.get("invocation"), inv.get("invocation_seq"), inv.get("aligned_to") or {}
        ref = found.get(("session", seq))
        if not need(ref, f"invocation {k} (invocation_seq {seq}): no kernel event of that call"):
            continue
        idx, ev, _ = ref
        kernel_of[k] = ev
        aligned += need(to.get("event_index") == idx and to.get("ts") == ev["ts"],
                        f"invocation {k} (invocation_seq {seq}) aligned to trace event "
                        f"{to.get('event_index')} at {to.get('ts')}, but call {seq}'s kernel is "
                        f"event {idx} at {ev['ts']}")
        need(kernel in str(to.get("name", "")), f"invocation {k} aligned to {to.get('name')!r}")

    # 3. The tracks: every core of every invocation, every record, inside its kernel.
    cores = {f"AIC {i}" for i in range(man["aic"])} | {f"AIV {i}" for i in range(man["aiv"])}
    recs, names, strict_out, over = defaultdict(int), defaultdict(set), 0, 0.0
    for e in events_of(fused):
        tid = e.get("tid") if isinstance(e, dict) else None
        if not isinstance(tid, int) or tid < FUSE_TID_BASE:
            continue
        if e.get("ph") == "i":
            problems.append(f"dropped records: {e.get('name')} on {e.get('args')}")
        if e.get("ph") != "X":
            continue
        args = e.get("args") or {}
        k = args.get("invocation")
        ev = kernel_of.get(k)
        if not need(ev, f"a fused record of invocation {k} that was not aligned"):
            continue
        recs[k] += 1
        names[k].add(args.get("core"))
        need(e.get("pid") == ev.get("pid"), f"invocation {k}: a record on pid {e.get('pid')}, "
             f"its kernel on pid {ev.get('pid')}")
        if not inside(e["ts"], e["dur"], ev):
            strict_out += 1
            over = max(over, ev["ts"] - e["ts"], e["ts"] + e["dur"] - ev["ts"] - ev["dur"])
            need(inside(e["ts"], e["dur"], ev, a.tolerance_us),
                 f"invocation {k}: record {e.get('name')} on {args.get('core')} at "
                 f"[{e['ts']}, {e['ts'] + e['dur']}] outside its kernel "
                 f"[{ev['ts']}, {ev['ts'] + ev['dur']}] by more than {a.tolerance_us} us")
    for inv in invs:
        k = inv.get("invocation")
        need(recs[k] == man["records_per_call"],
             f"invocation {k}: {recs[k]} records, want {man['records_per_call']}")
        need(names[k] == cores, f"invocation {k}: tracks {len(names[k])}, want {len(cores)} "
             f"(missing {sorted(cores - names[k])[:6]})")
    durs = sorted(ev["dur"] for ev in kernel_of.values()) or [0]
    per = sorted({recs[i.get("invocation")] for i in invs})
    oor = (md.get("out_of_range") or {}).get("count")
    return verdict(
        f"{len(invs)} sampled invocations (invocation_seq {','.join(map(str, seqs))}) of "
        f"{calls} session calls after {pre} pre-session calls (--skip {pre}); each call's "
        f"kernel event found by {dict(methods)}; {aligned} of {len(invs)} invocations "
        f"aligned to their own call's kernel event; {sum(recs.values())} records "
        f"({'/'.join(map(str, per))} per invocation) on {len(cores)} AIC/AIV tracks each; "
        f"records outside their own kernel event: {strict_out} (max {over:.3f} us, "
        f"tolerance {a.tolerance_us} us; fuse's out_of_range {oor}); kernel durations "
        f"{durs[0]:.1f}-{durs[-1]:.1f} us")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="the kernel under torch.profiler (GPU)")
    r.add_argument("--lib", required=True, help="libmegakernel.so")
    r.add_argument("--out", required=True, help="directory for mk.bin, kineto.json, manifest")
    r.add_argument("--pre", type=int, default=2, help="calls before the session (default 2)")
    r.add_argument("--calls", type=int, default=12, help="session calls (default 12)")
    r.add_argument("--schedule", default="2,1,1,2,2",
                   help="SKIP_FIRST,WAIT,WARMUP,ACTIVE,REPEAT (default 2,1,1,2,2)")
    c = sub.add_parser("check", help="check a fused trace (no GPU)")
    c.add_argument("--manifest", required=True)
    c.add_argument("--fused", required=True, help="devprof fuse's output")
    c.add_argument("--trace", help="the Kineto trace (default: the manifest's)")
    c.add_argument("--tolerance-us", type=float, default=1.0)
    a = ap.parse_args()
    sys.exit(run(a) if a.cmd == "run" else check(a))


if __name__ == "__main__":
    main()
