#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Node reports of a simulated fleet job, in the tracer's own --json format, for `merge`.

A job of NODES x RANKS_PER_NODE Open MPI ranks in data-, tensor- and pipeline-parallel
groups (MPI_Comm_split of the world, Megatron's layout: TP neighbours, then PP stages,
then DP replicas), one tracer per node. It follows what a real run gives the tracer:

- each rank splits the world three times, then first uses its TP, PP and DP groups (a
  barrier on each) and the world, then runs STEPS steps: two TP all-reduces (forward), a
  PP broadcast, two TP all-reduces (backward), a DP all-reduce of the gradients;
- identities as the tracer names them: LIB#ORDINAL/SIZE@LEADER, the ordinal counted per
  size in the order of first use, the leader the world rank of the group's rank 0;
- per-process sequence numbers; arrivals jittered by up to 2 ms, every member of a
  collective leaving it once the last has arrived; reductions on different groups more
  than the 5 ms serial gap apart; Python call sites per collective;
- each node its own CLOCK_MONOTONIC (a boot time of its own) and an NTP error of up to
  50 us, its tracer window from 1 s before the job's first call to 1 s after its last.

Faults are injected on a chosen rank, group (tp, pp, dp, world) and sequence number:
  --inject late:RANK:GROUP:SEQ[:MS]   RANK arrives MS (default 800) late; the job waits
  --inject mismatch:RANK:GROUP:SEQ    RANK passes twice the count (RANK not the group's rank 0)
  --inject hang:RANK:GROUP:SEQ        RANK never comes; the job stops there: the group's
                                      others block in it, everyone else's log ends, and
                                      the tracers run on until HANG_AFTER + 5 s later

OUT/node<N>.json are the reports; OUT/expected.json lists the findings the diagnosis
must give (kind, ranks, communicator, seq) and nothing else.

  gen-fleet.py --nodes 512 --tp 4 --pp 2 --steps 20 --out DIR \\
      --inject late:1234:dp:7 --inject mismatch:77:tp:30 --inject hang:4001:pp:40
"""
import argparse
import json
import os
import random
import sys

MS = 1_000_000
STEP_NS = 100 * MS
HANG_AFTER_NS = 30_000 * MS  # the tracer's default --hang-after
OPTIONS = {"hang_after_ns": HANG_AFTER_NS, "late_after_ns": 250 * MS,
           "serial_gap_ns": 5 * MS, "min_repeats": 3}
DROPS = ["ringbuf_full", "thread_table_full", "nesting_too_deep", "unpaired_returns",
         "unreadable_args", "returns_lost", "process_events_lost", "op_records_lost",
         "ops_nesting_too_deep", "user_space", "processes_over_limit", "group_size_unknown",
         "python_frames_unresolved", "module_names_by_class"]
KINDS = {"MPI_Allreduce": "all_reduce", "MPI_Bcast": "broadcast", "MPI_Barrier": "barrier",
         "MPI_Comm_split": "comm_split"}
SITES = {  # call site per (group, phase), innermost first
    ("tp", "fwd"): [("RowParallelLinear.forward", "/job/megatron/layers.py", 412),
                    ("TransformerLayer.forward", "/job/megatron/transformer.py", 233),
                    ("train_step", "/job/train.py", 88)],
    ("tp", "bwd"): [("_ReduceFromModelParallelRegion.backward", "/job/megatron/mappings.py",
                     61), ("train_step", "/job/train.py", 91)],
    ("pp", "step"): [("send_forward_recv_backward", "/job/megatron/schedules.py", 301),
                     ("train_step", "/job/train.py", 86)],
    ("dp", "step"): [("DistributedOptimizer.reduce_grads", "/job/megatron/optimizer.py", 540),
                     ("train_step", "/job/train.py", 95)],
    ("init", "init"): [("initialize_model_parallel", "/job/megatron/parallel_state.py", 130),
                       ("main", "/job/train.py", 40)],
}


def fail(msg):
    sys.exit(f"gen-fleet: {msg}")


class Job:
    def __init__(self, a):
        self.nodes, self.rpn, self.tp, self.pp = a.nodes, a.ranks_per_node, a.tp, a.pp
        self.world = self.nodes * self.rpn
        if self.world % (self.tp * self.pp):
            fail(f"{self.world} ranks do not divide into TP {self.tp} x PP {self.pp}")
        self.dp = self.world // (self.tp * self.pp)
        self.steps = a.steps
        self.rng = random.Random(a.seed)

    def group(self, r, g):
        """(members in group rank order, this rank's group rank) of rank r's group g."""
        tp, pp = self.tp, self.pp
        t, s, d = r % tp, (r // tp) % pp, r // (tp * pp)
        if g == "world":
            return list(range(self.world)), r
        if g == "tp":
            base = r - t
            return [base + i for i in range(tp)], t
        if g == "pp":
            return [t + tp * i + tp * pp * d for i in range(pp)], s
        return [t + tp * s + tp * pp * i for i in range(self.dp)], d

    def program(self):
        """Each rank's calls in order, as (slot, group, function, count, phase): slot is the
        nominal time in the job, the same for every member of a collective."""
        calls = [(k * MS, None, "MPI_Comm_split", 0, "init") for k in range(3)]
        for k, g in enumerate(["tp", "pp", "dp", "world"]):
            calls.append(((10 + 5 * k) * MS, g, "MPI_Barrier", 0, "init"))
        t0 = 100 * MS
        for s in range(self.steps):
            b = t0 + s * STEP_NS
            calls += [(b + 10 * MS, "tp", "MPI_Allreduce", 4096, "fwd"),
                      (b + 25 * MS, "tp", "MPI_Allreduce", 4096, "fwd"),
                      (b + 45 * MS, "pp", "MPI_Bcast", 1024, "step"),
                      (b + 60 * MS, "tp", "MPI_Allreduce", 4096, "bwd"),
                      (b + 70 * MS, "tp", "MPI_Allreduce", 4096, "bwd"),
                      (b + 85 * MS, "dp", "MPI_Allreduce", 1 << 20, "step")]
        return calls


def parse_injects(job, specs, calls):
    seq_of = {}  # (group, seq) -> index in the program (every rank has the same program)
    n = {}
    for i, (_, g, fn, _, _) in enumerate(calls):
        if g:
            n[g] = n.get(g, 0) + 1
            seq_of[(g, n[g])] = i
    out = []
    for spec in specs:
        f = spec.split(":")
        if len(f) not in (4, 5) or f[0] not in ("late", "mismatch", "hang") or \
                f[2] not in ("tp", "pp", "dp", "world"):
            fail(f"--inject {spec}: want late|mismatch|hang:RANK:tp|pp|dp|world:SEQ[:MS]")
        try:
            rank, seq = int(f[1]), int(f[3])
            ms = float(f[4]) if len(f) == 5 else 800.0
        except ValueError:
            fail(f"--inject {spec}: RANK, SEQ and MS are numbers")
        if not 0 <= rank < job.world:
            fail(f"--inject {spec}: rank {rank} is not in the {job.world} ranks")
        if (f[2], seq) not in seq_of:
            fail(f"--inject {spec}: {f[2]} has {n[f[2]]} collectives, no #{seq}")
        members, grank = job.group(rank, f[2])
        if f[0] == "mismatch" and grank == 0:
            fail(f"--inject {spec}: rank {rank} is its group's rank 0, the reference a "
                 "mismatch is told against; pick another member")
        if f[0] == "hang" and len(members) > 32:
            fail(f"--inject {spec}: a hang on a group of {len(members)} gives a finding per "
                 "blocked rank, more than the 32 kept; pick a smaller group")
        out.append({"kind": f[0], "rank": rank, "group": f[2], "seq": seq, "ms": ms,
                    "index": seq_of[(f[2], seq)]})
    if sum(x["kind"] == "hang" for x in out) > 1:
        fail("one hang at most: the job stops at the first")
    return out


def identities(job, calls, r):
    """LIB#ORDINAL/SIZE@LEADER of rank r's groups, as the tracer names them: the ordinal
    per size in the order of first use."""
    ids, next_ord = {}, {}
    for _, g, _, _, _ in calls:
        if g and g not in ids:
            members, _ = job.group(r, g)
            size = len(members)
            o = next_ord.get(size, 0)
            next_ord[size] = o + 1
            ids[g] = f"mpi#{o}/{size}@{members[0]}"
    return ids


def simulate(job, calls, injects):
    """Every rank's records (job time), the nominal slot shifted by what the job waited."""
    rng = job.rng
    late = {(x["rank"], x["index"]): x["ms"] * MS for x in injects if x["kind"] == "late"}
    mism = {(x["rank"], x["index"]) for x in injects if x["kind"] == "mismatch"}
    hang = next((x for x in injects if x["kind"] == "hang"), None)
    shift = 0
    recs = [[] for _ in range(job.world)]
    ids = [identities(job, calls, r) for r in range(job.world)]
    last_end = 0
    for i, (slot, g, fn, count, phase) in enumerate(calls):
        if hang and i > hang["index"]:
            break
        t = slot + shift
        if g is None:  # a split of the world: every rank, each its own duration
            for r in range(job.world):
                recs[r].append({"ts": t + rng.randrange(0, 200_000), "dur": 900_000 +
                                rng.randrange(0, 100_000), "fn": fn, "creation": True,
                                "phase": phase})
            continue
        done = set()
        waited = 0
        for r in range(job.world):
            if r in done:
                continue
            members, _ = job.group(r, g)
            done.update(members)
            arr = {m: t + rng.randrange(0, 2 * MS) + late.get((m, i), 0) for m in members}
            if hang and i == hang["index"] and hang["rank"] in arr:
                for m in members:
                    if m != hang["rank"]:
                        recs[m].append({"ts": arr[m], "dur": None, "fn": fn, "group": g,
                                        "count": count, "phase": phase})
                continue
            if hang and i == hang["index"]:
                continue  # the job stopped at the hang: this group's call never came
            top = max(arr.values())
            cost = 200_000 + count * 4 // 10  # 10 GB/s
            waited = max(waited, top - t - 2 * MS)
            for m in members:
                end = top + cost + rng.randrange(0, 20_000)
                recs[m].append({"ts": arr[m], "dur": end - arr[m], "fn": fn, "group": g,
                                "count": count * (2 if (m, i) in mism else 1),
                                "phase": phase})
                last_end = max(last_end, end)
        shift += max(waited, 0)
    return recs, ids, last_end


def stats(records):
    out = {}
    for x in records:
        e = out.setdefault(x["fn"], {"calls": 0, "completed": 0, "bytes": 0, "durs": [],
                                     "dtype": None})
        e["calls"] += 1
        if x["dur"] is not None:
            e["completed"] += 1
            e["durs"].append(x["dur"])
        if not x.get("creation"):
            e["bytes"] += x["count"] * 4
            e["dtype"] = "MPI_FLOAT"
    coll = []
    for fn, e in out.items():
        d = sorted(e["durs"])
        c = {"library": "mpi", "function": fn, "kind": KINDS[fn], "calls": e["calls"],
             "completed": e["completed"], "bytes_sent": e["bytes"], "bytes_received": e["bytes"],
             "dtype": e["dtype"]}
        if fn == "MPI_Allreduce":
            c["op"] = "sum"
        c["time_ns"] = ({"min": d[0], "p50": d[len(d) // 2], "p99": d[min(len(d) - 1,
                         len(d) * 99 // 100)], "max": d[-1], "total": sum(d)} if d else None)
        coll.append(c)
    return {fn: e["calls"] for fn, e in out.items()}, coll


def write_node(job, n, recs, ids, clock, window, hung, out_dir):
    mono_to_wall, ntp = clock
    procs, counts, events = [], {}, 0
    for local in range(job.rpn):
        r = n * job.rpn + local
        pid = 4242 + local  # the same pids on every node, as on real hosts
        stacks, stack_ix, log = [], {}, []
        for x in recs[r]:
            key = ("init", "init") if x["phase"] == "init" else (x.get("group"), x["phase"])
            if key not in stack_ix:
                stack_ix[key] = len(stacks)
                stacks.append([{"qualname": q, "file": f, "line": ln} for q, f, ln in SITES[key]])
            e = {"ts_ns": x["ts"] - mono_to_wall + ntp, "dur_ns": x["dur"], "tid": pid,
                 "function": x["fn"]}
            if x.get("creation"):
                e["creation"] = True
            else:
                members, grank = job.group(r, x["group"])
                e.update({"comm": ids[r][x["group"]], "group_size": len(members),
                          "comm_rank": grank, "count": x["count"], "dtype": "MPI_FLOAT",
                          "bytes": x["count"] * 4})
            e["stack"] = stack_ix[key]
            log.append(e)
        cc, coll = stats(recs[r])
        for fn, c in cc.items():
            counts[fn] = counts.get(fn, 0) + c
        events += 2 * len(recs[r])
        p = {"pid": pid, "rank": r, "world_size": job.world,
             "rank_source": "env:OMPI_COMM_WORLD_RANK", "comm": "train", "exited": not hung}
        if not hung:
            p["exit_code"] = 0
        p.update({"comm_counts": cc, "collectives": coll,
                  "threads": [{"tid": pid, "name": "train"}],
                  "diag_log": {"stacks": stacks, "records": log, "cap": 16384}})
        procs.append(p)
    doc = {"tool": "commtrace-bpf", "version": "gen-fleet", "generated_by": "scripts/gen-fleet.py",
           "comm_counts": counts, "total_counts": sum(counts.values()), "dropped_events": 0,
           "dropped_calls": 0, "python_stacks": True, "drops": {k: 0 for k in DROPS},
           "clock": {"source": "CLOCK_MONOTONIC", "mono_to_wall_ns": mono_to_wall,
                     "mono_to_wall_ns_str": str(mono_to_wall),
                     "start_ns": window[0] - mono_to_wall, "end_ns": window[1] - mono_to_wall},
           "events": events, "processes": procs, "findings": [],
           "diagnosis": {"options": OPTIONS}, "progress": []}
    path = os.path.join(out_dir, f"node{n}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(doc, f, separators=(",", ":"))
    os.replace(path + ".tmp", path)


def expected(job, calls, injects, ids):
    out = []
    for x in injects:
        members, _ = job.group(x["rank"], x["group"])
        comm = ids[x["rank"]][x["group"]]
        if x["kind"] == "late":
            out.append({"kind": "late_rank", "ranks": [x["rank"]], "communicator": comm,
                        "seq": x["seq"]})
        elif x["kind"] == "mismatch":
            out.append({"kind": "mismatch", "ranks": [members[0], x["rank"]],
                        "communicator": comm, "seq": x["seq"]})
        else:
            for m in members:
                if m != x["rank"]:
                    out.append({"kind": "hang", "ranks": [m, x["rank"]], "communicator": comm,
                                "seq": x["seq"]})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--nodes", type=int, required=True)
    ap.add_argument("--ranks-per-node", type=int, default=8)
    ap.add_argument("--tp", type=int, default=4, help="tensor-parallel group size (default 4)")
    ap.add_argument("--pp", type=int, default=2, help="pipeline stages (default 2)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--inject", action="append", default=[], metavar="KIND:RANK:GROUP:SEQ[:MS]")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if a.nodes < 1 or a.ranks_per_node < 1 or a.tp < 1 or a.pp < 1 or a.steps < 3:
        fail("--nodes, --ranks-per-node, --tp and --pp are >= 1, --steps >= 3")
    job = Job(a)
    calls = job.program()
    injects = parse_injects(job, a.inject, calls)
    recs, ids, last_end = simulate(job, calls, injects)
    hung = any(x["kind"] == "hang" for x in injects)
    os.makedirs(a.out, exist_ok=True)
    wall0 = 1_796_000_000_000_000_000  # the job's first call, Unix ns
    first = min(x["ts"] for rs in recs for x in rs)
    end = last_end + (HANG_AFTER_NS + 5_000 * MS if hung else 0)
    window = (wall0 + first - 1_000 * MS, wall0 + end + 1_000 * MS)
    for rs in recs:
        for x in rs:
            x["ts"] += wall0
    for n in range(job.nodes):
        boot = job.rng.randrange(10 ** 12, 10 ** 15)  # up to 11 days of uptime
        ntp = job.rng.randrange(-50_000, 50_001)
        write_node(job, n, recs, ids, (wall0 - boot, ntp), window, hung, a.out)
    exp = {"nodes": job.nodes, "ranks": job.world, "tp": job.tp, "pp": job.pp, "dp": job.dp,
           "steps": job.steps, "communicators_per_rank": 4, "injected": injects,
           "findings": expected(job, calls, injects, ids)}
    with open(os.path.join(a.out, "expected.json"), "w") as f:
        json.dump(exp, f, indent=1)
    print(f"gen-fleet: {job.nodes} node reports of {job.world} ranks (TP {job.tp} x PP {job.pp} "
          f"x DP {job.dp}), {job.steps} steps, {len(injects)} faults injected, in {a.out}")


if __name__ == "__main__":
    main()
