# SPDX-License-Identifier: MIT
"""Real MPI collectives from a known Python call chain, through ctypes, so that any CPython
(3.10-3.13, pyenv or Debian) can run it without mpi4py. It records where it called from
(qualname and line of every frame of the chain, innermost first), which the tracer's
stacks must reproduce exactly.

  --calls N        barriers per thread (default 3)
  --threads T      T Python threads call at once, each from its own chain (default 1);
                   with --depth or --time they call freely, not in lock-step
  --depth D        recurse D levels before calling (deep stacks; default 0)
  --distinct       with --depth: D distinct functions instead of one recursing, every third
                   one entered from C (through map()), as a framework's stacks are made
  --stay           with --depth (recursing): make every call from the deepest frame, so the
                   stack stays between calls as a training loop's does (else each call
                   recurses from the top, and CPython 3.11+ frees and maps anew the data
                   stack's chunks past the first as the recursion unwinds)
  --wait-file P    write the pid to P.pid, wait for P to exist before calling
  --expect F       write what was called from where to F (JSON)
  --time           print "ns_per_call N": wall time over all calls of all threads,
                   "cpu_s S": the CPU time this process spent making them, and "frames F":
                   the Python frames of the first thread's stack at its calls
  --pause S        with --depth: sleep S seconds after each call
  --hold-file P    before exiting, wait for P to exist (the tracer stays attached)
  --reuse N        call from N functions made at run time one after the other, each freed
                   before the next is made, so that code objects (and their names' and
                   line tables' memory) are reused; the ledger lists each one's name and
                   code object address in call order
  --reuse-calls K  with --reuse: call each made function K times (default 1), sleeping
                   --pause S seconds after each call
  --varied         each call from a stack of its own: 0-3 levels of recursion (two calls in
                   a row at each depth), then one of two call sites; the threads share one
                   CPU and switch often, and sleep 0.2 s after each of their first three
                   calls (by then every code object was met). The ledger lists every call's
                   chain per thread, in call order, with the thread's id (varied)
"""
import argparse
import ctypes
import json
import os
import resource
import sys
import threading
import time

MPI_THREAD_MULTIPLE = 3
mpi = ctypes.CDLL("libmpi.so.40", mode=ctypes.RTLD_GLOBAL)
COMM_WORLD = ctypes.addressof(ctypes.c_char.in_dll(mpi, "ompi_mpi_comm_world"))
mpi.MPI_Barrier.argtypes = [ctypes.c_void_p]
record = {}
lock = threading.Lock()
start = threading.Barrier(1)


def chain():
    """(qualname, line) of the caller's frames, innermost first, up to the thread's root."""
    out = []
    f = sys._getframe(1)
    while f is not None:
        code = f.f_code
        out.append([getattr(code, "co_qualname", code.co_name), f.f_lineno])
        f = f.f_back
    return out


class Worker:
    def __init__(self, name, calls):
        self.name, self.calls = name, calls

    def step(self):
        seen = chain()
        start.wait()
        mpi.MPI_Barrier(COMM_WORLD)  # the collective: its frame is "Worker.step"
        return seen

    def run_a(self):
        for _ in range(self.calls):
            seen = self.step()
        with lock:
            record[self.name] = seen

    def run_b(self):
        for _ in range(self.calls):
            seen = self.step()
        with lock:
            record[self.name] = seen


def deep(n, w, calls=1):
    if n == 0:
        for _ in range(calls):
            seen = w.step()
        return seen
    return deep(n - 1, w, calls)


def site_a(w):
    return w.step()


def site_b(w):
    return w.step()


def varied(w, k, site):
    if k:
        return varied(w, k - 1, site)
    return site(w)


def run_varied(w, calls, log):
    log[w.name] = {"tid": threading.get_native_id(), "chains": []}
    for i in range(calls):
        log[w.name]["chains"].append(varied(w, (i // 2) % 4, site_b if i % 3 == 2 else site_a))
        if i < 3:  # every code object is met by then: the reader resolves them meanwhile
            time.sleep(0.2)


def distinct_chain(depth):
    """A function calling depth distinct functions down to Worker.step, every third one
    through map(): each level its own code object, and the C calls' shim frames between."""
    ns = {}
    for i in range(depth):
        nxt = f"level_{i + 1}" if i + 1 < depth else "w.step"
        call = f"list(map(lambda w: {nxt}(w), [w]))[0]" if i % 3 == 2 else f"{nxt}(w)"
        if nxt == "w.step":
            call = "w.step()" if i % 3 != 2 else "list(map(lambda w: w.step(), [w]))[0]"
        exec(f"def level_{i}(w):\n    return {call}\n", ns)
    return ns["level_0"] if depth else (lambda w: w.step())


def cpu():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def reused(n, calls, pause):
    """Each function is compiled, called (calls times, pausing after each) and freed before
    the next: CPython hands the next code object the freed one's memory. Named after its
    number, so a stale name shows."""
    made = []
    for i in range(n):
        ns = {"barrier": lambda: mpi.MPI_Barrier(COMM_WORLD)}
        exec(compile(f"def made_{i}():\n    barrier()\n", "<made>", "exec"), ns)
        made.append([f"made_{i}", id(ns[f"made_{i}"].__code__)])
        for _ in range(calls):
            ns[f"made_{i}"]()
            time.sleep(pause)
        del ns
    return made


def main():
    global start
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--depth", type=int, default=0)
    ap.add_argument("--distinct", action="store_true")
    ap.add_argument("--stay", action="store_true")
    ap.add_argument("--wait-file")
    ap.add_argument("--expect")
    ap.add_argument("--time", action="store_true")
    ap.add_argument("--reuse", type=int, default=0)
    ap.add_argument("--reuse-calls", type=int, default=1)
    ap.add_argument("--pause", type=float, default=0)
    ap.add_argument("--hold-file")
    ap.add_argument("--varied", action="store_true")
    a = ap.parse_args()
    if a.stay and (not a.depth or a.distinct or a.pause):
        ap.error("--stay takes --depth, without --distinct or --pause")

    provided = ctypes.c_int()
    if mpi.MPI_Init_thread(None, None, MPI_THREAD_MULTIPLE, ctypes.byref(provided)) != 0:
        sys.exit("MPI_Init_thread failed")
    if a.wait_file:
        with open(a.wait_file + ".pid", "w") as f:
            f.write(f"{os.getpid()}\n")
        while not os.path.exists(a.wait_file):
            time.sleep(0.02)
    made, calls_of = [], {}
    if a.varied:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        sys.setswitchinterval(0.0002)
        ts = [threading.Thread(target=run_varied, args=(Worker(f"v{i}", a.calls), a.calls,
                                                         calls_of)) for i in range(a.threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    elif a.reuse:
        made = reused(a.reuse, a.reuse_calls, a.pause)
    elif a.depth or a.time:
        chain_of = (distinct_chain(a.depth) if a.distinct
                    else (lambda w: deep(a.depth, w, a.calls if a.stay else 1)))

        def loop(w):
            for _ in range(1 if a.stay else a.calls):
                seen = chain_of(w)
                if a.pause:
                    time.sleep(a.pause)
            with lock:
                record[w.name] = seen

        ws = [Worker("deep" if i == 0 else f"deep{i}", a.calls) for i in range(a.threads)]
        ts = [threading.Thread(target=loop, args=(w,), name=w.name) for w in ws[1:]]
        cpu0, t0 = cpu(), time.perf_counter_ns()
        for t in ts:
            t.start()
        loop(ws[0])
        for t in ts:
            t.join()
        if a.time:
            ns = (time.perf_counter_ns() - t0) / (a.calls * a.threads)
            spent = cpu() - cpu0  # of this process, calling
            print(f"frames {len(record['deep'])}\nns_per_call {ns:.1f}\ncpu_s {spent:.6f}",
                  flush=True)
    else:
        start = threading.Barrier(a.threads)
        ts = []
        for i in range(a.threads):
            w = Worker(f"t{i}", a.calls)
            ts.append(threading.Thread(target=w.run_a if i % 2 == 0 else w.run_b, name=f"t{i}"))
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    # The line of the MPI_Barrier call in Worker.step, found in this very file.
    with open(__file__) as f:
        call_line = next(i for i, l in enumerate(f, 1) if "# the collective:" in l)
    if a.expect:
        with open(a.expect, "w") as f:
            json.dump({"calls": a.calls, "threads": a.threads, "depth": a.depth,
                       "call_line": call_line, "chains": record, "made": made,
                       "varied": calls_of,
                       "version": list(sys.version_info[:2])}, f)
    if a.hold_file:
        while not os.path.exists(a.hold_file):
            time.sleep(0.02)
    mpi.MPI_Finalize()


if __name__ == "__main__":
    main()
