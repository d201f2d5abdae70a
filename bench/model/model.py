#!/usr/bin/env python3
"""Alpha-beta-gamma cost model of Syncline's collective algorithms.

A message of n bytes between two ranks costs alpha + n*beta; reducing n
bytes costs n*gamma. For P ranks and an N-byte buffer (Thakur, Rabenseifner
and Gropp 2005; Chan et al. 2007):

  allreduce  ring                 2(P-1)a + 2(P-1)/P N b + (P-1)/P N g
             recursive doubling   lg P (a + N b + N g)
             Rabenseifner (recursive halving reduce-scatter + recursive
             doubling allgather)  2 lg P a + 2(P-1)/P N b + (P-1)/P N g
             binary tree          2 lg P (a + N b) + lg P N g
             pipelined tree (chunks of c bytes, best c)
                                  2 (lg P + N/c - 1)(a + c b) + N g
  allgather  ring (P-1)a + (P-1)/P N b;  recursive doubling lg P a + (P-1)/P N b
  broadcast  binomial tree lg P (a + N b);  scatter + allgather
             (lg P + P - 1) a + 2 (P-1)/P N b

Calibration (this machine), per Syncline backend, on its own 2-rank
allreduce: alpha from the smallest sizes (per message step; the software
cost of an op is folded into it), beta from the three largest sizes, gamma from the measured accumulate bandwidth
(syncline-bench-membw). The check predicts the
measured 2-, 3- and 4-rank allreduce with the algorithms the backend runs
(Gloo: ring; UCX: the fastest of recursive doubling, ring and Rabenseifner).
When P exceeds the cores the ranks time-share them: the model multiplies the
cost by P/cores and says so.

Cluster prediction (stated assumptions, not measurements): 8 GPUs per node
on NVLink, one 400 Gb/s InfiniBand NIC per GPU (8 rails). The fastest of: a
flat ring split into 8 rail channels (NCCL's ring), or a hierarchical
allreduce (reduce-scatter inside the node, each GPU's 1/8 reduced across
nodes on its own rail by ring, Rabenseifner or double binary tree, allgather
inside the node). DDP efficiency = compute time / step time, with or without
overlapping bucketed allreduce (25 MB buckets) with backward.

Usage: model.py --raw bench/results/raw --md model.md --png model.png
"""
import argparse
import glob
import json
import math
import os
import re
import sys

# Cluster assumptions (per GPU).
NVLINK_GBPS = 360.0     # effective NVLink busbw inside a node (H100-class)
NVLINK_ALPHA_US = 3.0
IB_GBPS = 46.0          # 400 Gb/s = 50 GB/s line rate, ~92% achievable
IB_ALPHA_US = 5.0       # per message, including software
GPU_REDUCE_GBPS = 1500.0  # HBM-bound reduction
CLUSTER_OP_US = 10.0    # per-op launch and progress overhead
GPUS_PER_NODE = 8
BUCKET_BYTES = 25e6

# Reference models: gradient bytes (f32) and compute per step on one GPU.
MODELS = [
    # name, params, f32 grad bytes, compute ms (forward + backward)
    ("MLP 3x2048^2 (bench, batch 32)", 12.6e6, 12.6e6 * 4, 0.1),
    ("ResNet-50 (batch 256)", 25.6e6, 25.6e6 * 4, 85.0),
    ("BERT-large (seq 512, batch 32)", 340e6, 340e6 * 4, 165.0),
]


def lg(p):
    return math.log2(p) if p > 1 else 0.0


# ---- algorithm costs: a, b, g in seconds, seconds/byte, seconds/byte ----
def ring_allreduce(p, n, a, b, g):
    return 0.0 if p == 1 else 2 * (p - 1) * a + 2 * (p - 1) / p * n * b + (p - 1) / p * n * g


def recursive_doubling_allreduce(p, n, a, b, g):
    return math.ceil(lg(p)) * (a + n * b + n * g)


def rabenseifner_allreduce(p, n, a, b, g):
    return 0.0 if p == 1 else 2 * math.ceil(lg(p)) * a + 2 * (p - 1) / p * n * b + (p - 1) / p * n * g


def tree_allreduce(p, n, a, b, g):
    return 2 * math.ceil(lg(p)) * (a + n * b) + math.ceil(lg(p)) * n * g


def pipelined_tree_allreduce(p, n, a, b, g):
    if p == 1:
        return 0.0
    best = float("inf")
    chunk = 4096.0
    while chunk <= max(n, 4096.0):
        k = max(1.0, n / chunk)
        best = min(best, 2 * (math.ceil(lg(p)) + k - 1) * (a + min(chunk, n) * b) + n * g)
        chunk *= 2
    return best


def double_binary_tree_allreduce(p, n, a, b, g):
    """NCCL's double binary tree: two pipelined trees, each carrying n/2."""
    if p == 1:
        return 0.0
    # Each node is interior in one tree and a leaf in the other, so it sends
    # and receives about n per phase (reduce, then broadcast); the pipeline
    # fills in lg P steps of one chunk.
    chunk = min(n / 2, 512 * 1024.0)
    return 2 * math.ceil(lg(p)) * (a + chunk * b) + 2 * n * b + n * g


ALLREDUCE = {
    "ring": ring_allreduce,
    "recursive doubling": recursive_doubling_allreduce,
    "Rabenseifner": rabenseifner_allreduce,
    "binary tree": tree_allreduce,
    "pipelined tree": pipelined_tree_allreduce,
}


def load_rows(raw):
    rows = []
    for path in sorted(glob.glob(os.path.join(raw, "*.json"))):
        try:
            rows += json.load(open(path)).get("rows", [])
        except (OSError, ValueError):
            pass
    return rows


def series(rows, system, op, ranks):
    return sorted((r["bytes"], r["time_us"] * 1e-6) for r in rows
                  if r["system"] == system and r["op"] == op and r["ranks"] == ranks)


def calibrate(rows, system):
    """Fits alpha and beta to `system`'s 2-rank allreduce, gamma to membw.

    At 2 ranks, ring allreduce is two message steps (2a + N b + N/2 g) and
    recursive doubling one (a + N b + N g). alpha is the smallest sizes'
    time over the steps of the backend's small-message algorithm (the
    per-op software cost is folded into it); beta is the median over the
    three largest sizes (where bandwidth dominates) of the ring formula
    solved for beta; gamma is the measured accumulate
    time per byte (syncline-bench-membw, largest size)."""
    ar = series(rows, system, "allreduce", 2)
    if len(ar) < 4:
        return None
    sums = sorted((r["bytes"], r["time_us"] * 1e-6) for r in rows if r["system"] == "membw-sum")
    gamma = sums[-1][1] / sums[-1][0] if sums else 0.0
    small_steps = 1 if "recursive doubling" in BACKEND_ALGORITHMS[system] else 2
    small = sorted(t for _, t in ar[:3])[1]  # the middle of the 3 smallest
    alpha = small / small_steps
    large = ar[-3:]
    slopes = sorted((t - 2 * alpha - nb * gamma / 2) / nb for nb, t in large)
    beta = max(slopes[len(slopes) // 2], 1e-13)
    return {"alpha": alpha, "beta": beta, "gamma": gamma,
            "source": "%s allreduce, 2 ranks" % system}


# The algorithms each backend runs for allreduce: Gloo's ring, and the UCX
# backend's own set, of which the model assumes it picks the fastest.
BACKEND_ALGORITHMS = {
    "syncline-gloo": ["ring"],
    "syncline-ucx": ["recursive doubling", "ring", "Rabenseifner"],
}


def predict(system, cal, p, nb, cores):
    """Modelled allreduce time of `system` on p ranks sharing `cores`."""
    share = max(1.0, p / cores)
    best = min(ALLREDUCE[name](p, nb, cal["alpha"], cal["beta"], cal["gamma"])
               for name in BACKEND_ALGORITHMS[system])
    return share * best


def check_section(rows, system, cal, cores):
    """Model against measurement for 2, 3 and 4 ranks; (lines, errors)."""
    lines, errors = [], {}
    for p in (2, 3, 4):
        for nb, t in series(rows, system, "allreduce", p):
            model = predict(system, cal, p, nb, cores)
            err = (model - t) / t * 100
            errors.setdefault(p, []).append(abs(err))
            lines.append("| %d | %d | %.1f | %.1f | %+.0f%% |" % (p, nb, t * 1e6, model * 1e6, err))
    head = ["| ranks | size (B) | measured (us) | model (us) | error |", "|---|---|---|---|---|"]
    return head + lines, errors


def crossover(p, a, b, g, small, large):
    n = 8
    while n <= 1 << 30:
        if ALLREDUCE[large](p, n, a, b, g) < ALLREDUCE[small](p, n, a, b, g):
            return n
        n *= 2
    return None


def configured_threshold():
    """allreduce_small_max from backends/ucx/options.h, or None."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                        "backends", "ucx", "options.h")
    try:
        match = re.search(r"size_t\s+allreduce_small_max\s*=\s*([0-9<\s*]+);", open(path).read())
    except OSError:
        return None
    if not match:
        return None
    value = 0
    for factor in match.group(1).split("*"):
        base, _, shift = factor.partition("<<")
        value = (value or 1) * (int(base) << int(shift or 0))
    return value


def measured_crossover(rd, ring):
    """First size from which the forced ring beats forced recursive doubling
    at every larger size; None when it never does."""
    rd, ring = dict(rd), dict(ring)
    sizes = sorted(set(rd) & set(ring))
    for i, n in enumerate(sizes):
        if all(ring[m] < rd[m] for m in sizes[i:]):
            return n
    return None


def switch_section(rows, cal):
    """The UCX allreduce switch point: configured, measured, modelled."""
    threshold = configured_threshold()
    lines = []
    for p in (3, 4):
        rd = series(rows, "syncline-ucx/rd", "allreduce", p)
        ring = series(rows, "syncline-ucx/ring", "allreduce", p)
        if not rd or not ring:
            continue
        measured = measured_crossover(rd, ring)
        first_ring = 2 * threshold if threshold else None
        model = crossover(p, cal["alpha"], cal["beta"], cal["gamma"], "recursive doubling",
                          "ring") if cal else None
        def steps(x):
            if not x or not measured:
                return "n/a"
            return "%+d" % round(math.log2(x / measured))
        lines.append("| %d | %s | %s (%s) | %s (%s) |" % (
            p, "%d B" % measured if measured else "above %d B" % max(n for n, _ in ring),
            "%d B" % first_ring if first_ring else "n/a", steps(first_ring),
            "%d B" % model if model else "n/a", steps(model)))
    if not lines:
        return ["## UCX allreduce switch point", "",
                "Not measured (needs libsyncline-backend-ucx.so; run.sh forces each algorithm "
                "with --backend_options).", ""]
    return ["## UCX allreduce switch point: measured, configured, modelled", "",
            "First message size at which ring beats recursive doubling. Measured: each "
            "algorithm forced (allreduce_small_max=0 / 1 GiB), sizes by 2. Configured: the "
            "first size above allreduce_small_max in backends/ucx/options.h. Modelled: the "
            "UCX calibration above. In parentheses: size steps (factor 2) from the measured "
            "crossover; within one step is the goal.", "",
            "| ranks | measured | configured | model |", "|---|---|---|---|"] + lines + [""]


def cluster_allreduce(p, n):
    """Best allreduce time for p GPUs (8 per node) and its name.

    Candidates: a flat ring over all GPUs split into 8 channels, one per
    rail (pipelined: bandwidth limited by the slower of NVLink and 8 rails,
    but 2(P-1) steps each paying the IB latency), and hierarchical ones
    (NVLink reduce-scatter, each GPU's 1/8 reduced across nodes on its rail
    by ring, Rabenseifner or double binary tree, NVLink allgather; phases
    in sequence)."""
    a_nv, b_nv = NVLINK_ALPHA_US * 1e-6, 1 / (NVLINK_GBPS * 1e9)
    a_ib, b_ib = IB_ALPHA_US * 1e-6, 1 / (IB_GBPS * 1e9)
    g = 1 / (GPU_REDUCE_GBPS * 1e9)
    o = CLUSTER_OP_US * 1e-6
    local = min(p, GPUS_PER_NODE)
    nodes = max(1, p // GPUS_PER_NODE)
    intra = 2 * ((local - 1) * a_nv + (local - 1) / local * n * b_nv) + (local - 1) / local * n * g
    if nodes == 1:
        return o + intra, "ring (NVLink)"
    shard = n / local
    candidates = {
        "flat ring, 8 rail channels":
            2 * (p - 1) * a_ib + 2 * (p - 1) / p * n * max(b_nv, b_ib / local) + (p - 1) / p * n * g,
        "NVLink + IB ring": intra + ring_allreduce(nodes, shard, a_ib, b_ib, g),
        "NVLink + IB Rabenseifner": intra + rabenseifner_allreduce(nodes, shard, a_ib, b_ib, g),
        "NVLink + IB double binary tree":
            intra + double_binary_tree_allreduce(nodes, shard, a_ib, b_ib, g),
    }
    name = min(candidates, key=candidates.get)
    return o + candidates[name], name


def busbw(p, n, t):
    return 2 * (p - 1) / p * n / t / 1e9 if p > 1 else float("inf")


def ddp_efficiency(p, grad_bytes, compute_ms, overlap):
    buckets = max(1, math.ceil(grad_bytes / BUCKET_BYTES))
    per_bucket = grad_bytes / buckets
    comm = buckets * cluster_allreduce(p, per_bucket)[0]
    compute = compute_ms * 1e-3
    if not overlap:
        return compute / (compute + comm)
    backward = compute * 2 / 3
    last = cluster_allreduce(p, per_bucket)[0]
    step = compute / 3 + max(backward, comm - last) + last
    return compute / step


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--raw", required=True)
    p.add_argument("--md", required=True)
    p.add_argument("--png", required=True)
    p.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    args = p.parse_args()
    rows = load_rows(args.raw)
    out = ["# Scaling model", "", __doc__.split("Usage:")[0].strip(), ""]

    cals = {}
    for system in BACKEND_ALGORITHMS:
        cal = calibrate(rows, system)
        if not cal:
            continue
        cals[system] = cal
        a, b, g = cal["alpha"], cal["beta"], cal["gamma"]
        out += ["## %s: calibration and check (%d cores)" % (system, args.cores), "",
                "From %s: alpha = %.2f us (per message step, software included), "
                "beta = %.3f ns/B (%.2f GB/s), gamma = %.3f ns/B (%.2f GB/s, membw-sum). "
                "Model: %s." % (
                    cal["source"], a * 1e6, b * 1e9, 1 / b / 1e9, g * 1e9,
                    (1 / g / 1e9) if g else 0, " or ".join(BACKEND_ALGORITHMS[system])), ""]
        check, errors = check_section(rows, system, cal, args.cores)
        out += check + [""]
        out.append("Median absolute error: " + ", ".join(
            "%d ranks %.0f%%" % (p, sorted(e)[len(e) // 2]) for p, e in sorted(errors.items())) +
            ". With more ranks than %d cores the ranks time-share the cores; the model "
            "multiplies by ranks/cores, which is crude." % args.cores)
        out.append("")
    if "syncline-ucx" in cals:
        cal = cals["syncline-ucx"]
        a, b, g = cal["alpha"], cal["beta"], cal["gamma"]
        out += ["## UCX allreduce switch points the model predicts here", "",
                "The first size at which the large-message algorithm beats recursive doubling "
                "(compare with the thresholds in backends/ucx).", "",
                "| ranks | recursive doubling -> Rabenseifner | recursive doubling -> ring |",
                "|---|---|---|"]
        for pr in (2, 3, 4, 8):
            cells = [crossover(pr, a, b, g, "recursive doubling", "Rabenseifner"),
                     crossover(pr, a, b, g, "recursive doubling", "ring")]
            out.append("| %d | %s |" % (pr, " | ".join("%d B" % c if c else "never" for c in cells)))
        out.append("")
    if not cals:
        out += ["No 2-rank Syncline measurements found in %s; calibration skipped." % args.raw, ""]
    out += switch_section(rows, cals.get("syncline-ucx"))

    ranks = [8 * 2 ** k for k in range(10)]  # 8 .. 4096
    sizes = [1 << 20, 64 << 20, 1 << 30]
    out += ["## Predicted allreduce busbw on a GPU cluster (GB/s)", "",
            "Assumed: %d GPUs/node, NVLink %.0f GB/s busbw and %.0f us per step inside a node; "
            "one %.0f GB/s InfiniBand rail per GPU with %.0f us per message; reduction at %.0f GB/s; "
            "%.0f us per op." % (GPUS_PER_NODE, NVLINK_GBPS, NVLINK_ALPHA_US, IB_GBPS, IB_ALPHA_US,
                                 GPU_REDUCE_GBPS, CLUSTER_OP_US), "",
            "| GPUs | 1 MiB | 64 MiB | 1 GiB | algorithm at 64 MiB |", "|---|---|---|---|---|"]
    for pr in ranks:
        cells = ["%.1f" % busbw(pr, n, cluster_allreduce(pr, n)[0]) for n in sizes]
        out.append("| %d | %s | %s |" % (pr, " | ".join(cells), cluster_allreduce(pr, 64 << 20)[1]))
    out += ["", "## Predicted DDP scaling efficiency (compute time / step time)", "",
            "| GPUs | " + " | ".join("%s, %s" % (m[0], o) for m in MODELS for o in ("no overlap", "overlap")) + " |",
            "|---|" + "---|" * (2 * len(MODELS))]
    for pr in ranks:
        cells = ["%.0f%%" % (100 * ddp_efficiency(pr, m[2], m[3], o)) for m in MODELS for o in (False, True)]
        out.append("| %d | %s |" % (pr, " | ".join(cells)))
    out += ["", "Compute per step assumed: " + "; ".join("%s %.1f ms" % (m[0], m[3]) for m in MODELS) +
            ". Gradients in f32, 25 MB buckets; with overlap, backward is 2/3 of compute and "
            "only the last bucket's allreduce is exposed when communication fits in backward.", "",
            "![scaling model](%s)" % os.path.basename(args.png), ""]
    with open(args.md, "w") as f:
        f.write("\n".join(out))
    print("\n".join(out))

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        print("model: no plot (%s)" % e, file=sys.stderr)
        return 0
    fig, (left, mid, right) = plt.subplots(1, 3, figsize=(18, 4.5))
    for system, cal in cals.items():
        for pr in (2, 3, 4):
            measured = series(rows, system, "allreduce", pr)
            if not measured:
                continue
            sizes_here = [n for n, _ in measured]
            line = left.plot(sizes_here, [busbw(pr, n, t) for n, t in measured], "o",
                             markersize=3, label="%s, %d ranks, measured" % (system, pr))
            left.plot(sizes_here, [busbw(pr, n, predict(system, cal, pr, n, args.cores))
                                   for n in sizes_here], "-", color=line[0].get_color(),
                      label="%s, %d ranks, model" % (system, pr))
    left.set(xscale="log", yscale="log", xlabel="bytes", ylabel="busbw (GB/s)",
             title="allreduce here: model (lines) vs measured (dots)")
    left.legend(fontsize=7)
    for n in sizes:
        mid.plot(ranks, [busbw(pr, n, cluster_allreduce(pr, n)[0]) for pr in ranks], "o-",
                 label="%d MiB" % (n >> 20))
    mid.set(xscale="log", xlabel="GPUs", ylabel="busbw (GB/s)", title="predicted allreduce busbw, cluster")
    mid.legend(fontsize=8)
    for m in MODELS:
        for o in (False, True):
            right.plot(ranks, [100 * ddp_efficiency(pr, m[2], m[3], o) for pr in ranks],
                       "-" if o else "--", label="%s%s" % (m[0], ", overlap" if o else ""))
    right.set(xscale="log", xlabel="GPUs", ylabel="efficiency (%)", title="predicted DDP efficiency")
    right.legend(fontsize=6)
    for ax in (left, mid, right):
        ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
