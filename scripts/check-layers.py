#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""No file of user/ reaches back to a file that reaches it.

Reads the built objects (build/user/**/*.o, or DIR/user/... with --build DIR) with nm: a
file reaches another when its object uses a symbol (function or data) the other defines.
A cycle of such uses (a strongly connected component of more than one file) is printed
with the symbols that close it, and the exit status is 1. Static functions do not count:
they cannot be called from another file.

    scripts/check-layers.py [--build DIR] [-v]   (-v: every file and what it reaches)
"""
import argparse
import collections
import glob
import os
import subprocess
import sys


def symbols(obj):
    out = subprocess.run(["nm", "--defined-only", "-g", obj], capture_output=True, text=True,
                         check=True).stdout
    defined = {l.split()[-1] for l in out.splitlines() if len(l.split()) == 3}
    out = subprocess.run(["nm", "-u", obj], capture_output=True, text=True, check=True).stdout
    used = {l.split()[-1] for l in out.splitlines() if l.strip()}
    return defined, used


def sccs(graph):
    """Tarjan's algorithm, iteratively (a deep chain must not hit the recursion limit)."""
    index, low, on, stack, out, n = {}, {}, set(), [], [], 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = n
        n += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = n
                    n += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("-v", action="store_true")
    a = ap.parse_args()
    objs = sorted(glob.glob(os.path.join(a.build, "user", "**", "*.o"), recursive=True))
    if not objs:
        print(f"check-layers: no objects under {a.build}/user: run make first", file=sys.stderr)
        return 2
    owner, uses = {}, {}
    for o in objs:
        src = os.path.relpath(o, a.build)[:-2] + ".c"
        defined, used = symbols(o)
        for d in defined:
            owner[d] = src
        uses[src] = used
    graph = collections.defaultdict(set)
    why = collections.defaultdict(set)
    for src, used in uses.items():
        graph[src]
        for u in used:
            dst = owner.get(u)
            if dst and dst != src:
                graph[src].add(dst)
                why[src, dst].add(u)
    if a.v:
        for src in sorted(graph):
            print(f"{src} -> {', '.join(sorted(graph[src])) or '(nothing)'}")
    bad = [c for c in sccs(graph) if len(c) > 1]
    for c in bad:
        print(f"check-layers: {len(c)} files reach each other: {' '.join(c)}")
        members = set(c)
        for src in c:
            for dst in sorted(graph[src] & members):
                print(f"  {src} -> {dst}: {', '.join(sorted(why[src, dst]))}")
    if bad:
        return 1
    print(f"check-layers: {len(graph)} files of user/, no file reaches back to one that "
          "reaches it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
