"""Measured switch points of the UCX backend, from the interleaved sweeps.

Rows come from bench/model/sweep_switch_points.sh: "syncline-ucx/small"
(latency algorithm forced) and "syncline-ucx/large" (bandwidth algorithm
forced), each the median over interleaved repetitions, with every
repetition in samples_us.

Sizes are in the unit of the backend's thresholds (options.h): the bytes of
one rank's buffer, i.e. the allreduce vector, the broadcast/reduce message
and one allgather/reduce_scatter block (the benchmark's size column is the
op's largest buffer, P blocks for those two).

The measured switch point is the threshold (the largest size still run by
the latency algorithm) that loses least against always picking the faster
algorithm: loss(t) = sum over the sizes it gets wrong of the excess of
ln(slower/faster) over ln(1.1). Differences within 10% count as a draw, so
a size where both algorithms cost the same (or noise flips them) does not
move the switch point, and a single outlier costs little. Every threshold
whose loss is within 0.05 of the least is as good: the measured switch point
is that range (its middle is quoted as the point).
"""
import glob
import json
import math
import os

# The ops with a switch point and the names of the two algorithms.
OPS = {
    "allreduce": ("allreduce_small_max", "recursive doubling", "ring"),
    "broadcast": ("broadcast_small_max", "binomial tree", "pipelined chain"),
    "reduce": ("reduce_small_max", "binomial tree", "pipelined chain"),
    "allgather": ("allgather_small_max", "Bruck", "ring"),
    "reduce_scatter": ("reduce_scatter_small_max", "recursive doubling", "ring"),
}
PER_BLOCK = ("allgather", "reduce_scatter")


def load_rows(paths):
    rows = []
    for path in paths:
        try:
            rows += json.load(open(path)).get("rows", [])
        except (OSError, ValueError):
            pass
    return rows


def sweep_files(raw):
    return sorted(glob.glob(os.path.join(raw, "switch_sweep*.json")))


def threshold_bytes(op, ranks, size_column):
    return size_column // ranks if op in PER_BLOCK else size_column


def pairs(rows, op, ranks):
    """{threshold bytes: (small row, large row)} for one op and world size.
    With several sweeps (files) of the same point the samples are pooled."""
    small, large = {}, {}
    for r in rows:
        if r["op"] != op or r["ranks"] != ranks:
            continue
        side = {"syncline-ucx/small": small, "syncline-ucx/large": large}.get(r["system"])
        if side is None:
            continue
        n = threshold_bytes(op, ranks, r["bytes"])
        side.setdefault(n, []).extend(r.get("samples_us") or [r["time_us"]])
    return {n: (median(small[n]), median(large[n]), small[n], large[n])
            for n in sorted(set(small) & set(large))}


def median(values):
    v = sorted(values)
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else 0.5 * (v[mid - 1] + v[mid])


DRAW = math.log(1.1)   # differences below 10% are a draw
TIE = 0.05             # thresholds whose loss is this close to the least


def loss(times, t):
    total = 0.0
    for n, (small, large) in times.items():
        ratio = math.log(small / large)  # > 0: large is faster
        wrong = ratio if n <= t else -ratio
        total += max(0.0, wrong - DRAW)
    return total


def best_threshold(times):
    """(threshold, ties, loss) for {size: (t_small, t_large)}: the
    threshold is the largest size run by the small algorithm (0: always the
    large one; the largest size: never switch within the range); ties are
    every threshold as good to within TIE, and the threshold quoted is the
    middle of them (geometrically)."""
    candidates = [0] + sorted(times)
    losses = [loss(times, t) for t in candidates]
    best = min(losses)
    ties = [t for t, l in zip(candidates, losses) if l <= best + TIE]
    return ties[len(ties) // 2], ties, best


def steps_apart(a, b):
    """Size steps (factor 2) between two thresholds; 0 stands for "below
    every size" and is treated as the smallest measured size / 2."""
    if a is None or b is None:
        return None
    return math.log2(max(a, 1) / max(b, 1))
