# SPDX-License-Identifier: MIT
"""Figures that hold on a noisy shared machine, for `make bench` (scripts/bench.py).

Configurations are alternated in one run, in a new random order each round, so that a
slow minute of the machine falls on all of them. What a run cost is its CPU time (the
traced process's and the tracer's), which varies far less here than wall time. Each
figure comes with a 95 % interval from a bootstrap over the runs.
"""
import random
import statistics

RESAMPLES = 2000


def alternate(configs, rounds, run_one, seed=1):
    """run_one(config) for every config once per round, in a shuffled order each round:
    {config: [result of each round]}."""
    rng = random.Random(seed)
    out = {c: [] for c in configs}
    for _ in range(rounds):
        order = list(configs)
        rng.shuffle(order)
        for c in order:
            out[c].append(run_one(c))
    return out


def bootstrap(stat, *samples, seed=1):
    """stat(*samples) and its 95 % interval: (estimate, low, high). Each sample is resampled
    with replacement, independently."""
    rng = random.Random(seed)
    est = stat(*samples)
    vals = sorted(stat(*[[rng.choice(s) for _ in s] for s in samples])
                  for _ in range(RESAMPLES))
    return est, vals[int(0.025 * RESAMPLES)], vals[int(0.975 * RESAMPLES) - 1]


def ratio_of_means(a, b):
    return statistics.mean(a) / statistics.mean(b)


def diff_of_means(a, b):
    return statistics.mean(a) - statistics.mean(b)


def mean(a):
    return statistics.mean(a)


def accounted_ratio(added, base):
    """1 + what the tracer accounted per unit over the untraced CPU per unit."""
    return 1 + statistics.mean(added) / statistics.mean(base)


def fmt(ci, unit="", digits=3):
    est, lo, hi = ci
    return f"{est:.{digits}f}{unit} [{lo:.{digits}f}, {hi:.{digits}f}]"


def within(ci, goal):
    """'yes' if the whole interval is at or below goal, 'no' if all of it is above, else
    'inside the noise'."""
    _, lo, hi = ci
    return "yes" if hi <= goal else "no" if lo > goal else "inside the noise"
