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

Calibration and check (this machine). Syncline over Gloo: alpha and beta
from its own 2-rank allreduce (ring), gamma from the measured accumulate
bandwidth (syncline-bench-membw). Syncline over UCX: bench/model/ucx_model.py,
the backend's own algorithms round by round with UCX's eager/rendezvous
switch, calibrated on the switch-point sweeps (every op, 2-4 ranks, both
algorithms forced). Both are checked against the measured 2-, 3- and 4-rank
allreduce. With more ranks than cores the ranks time-share them: a rank
that waits for a descheduled peer spins and yields until the scheduler runs
it, so every exchange round pays a delay q_P (fitted, stated below); this
replaces the old blanket ranks/cores factor.

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
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import crossover  # noqa: E402
import switch_points  # noqa: E402
import ucx_model  # noqa: E402

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
    """Fits `system`'s 2-rank allreduce (Gloo's ring: 2 rounds at 2 ranks)
    with a per-op software cost o, a per-round alpha and a per-byte beta
    (least Huber loss of the log error over every size); gamma is the
    measured accumulate time per byte (syncline-bench-membw)."""
    ar = series(rows, system, "allreduce", 2)
    if len(ar) < 4:
        return None
    cal = {"o": 100e-6, "alpha": 50e-6, "beta": 5e-10, "gamma": membw_gamma(rows), "q": {},
           "source": "%s allreduce, 2 ranks" % system}

    def loss(v):
        cal["o"], cal["alpha"], cal["beta"] = (math.exp(u) for u in v)
        return sum(huber(math.log(gloo_time(cal, 2, nb) / t)) for nb, t in ar)

    v, _ = ucx_model.nelder_mead(loss, [math.log(cal[k]) for k in ("o", "alpha", "beta")],
                                 [1.0, 1.0, 1.0], iterations=800)
    cal["o"], cal["alpha"], cal["beta"] = (math.exp(u) for u in v)
    return cal


def membw_gamma(rows):
    sums = sorted((r["bytes"], r["time_us"] * 1e-6) for r in rows if r["system"] == "membw-sum")
    return sums[-1][1] / sums[-1][0] if sums else 1e-10


def gloo_time(cal, p, nb):
    """Gloo's ring through Syncline: the per-op cost o (the hand-off to
    the backend's worker thread), then 2(P-1) rounds, each paying alpha
    and, with more ranks than cores, the scheduling delay q_P."""
    rounds = 2 * (p - 1)
    return (cal["o"] + ring_allreduce(p, nb, cal["alpha"], cal["beta"], cal["gamma"]) +
            rounds * cal["q"].get(p, 0.0))


def fit_gloo_q(rows, cal):
    """q_P (P > 2) for Gloo: the per-round delay that best fits (least
    Huber loss of the log error) that P's measured allreduce."""
    for p in (3, 4):
        pts = series(rows, "syncline-gloo", "allreduce", p)
        if not pts:
            continue

        def loss(v, p=p, pts=pts):
            cal["q"][p] = math.exp(v[0])
            return sum(huber(math.log(gloo_time(cal, p, nb) / t)) for nb, t in pts)

        v, _ = ucx_model.nelder_mead(loss, [math.log(100e-6)], [1.0], iterations=200)
        cal["q"][p] = math.exp(v[0])


def huber(e):
    e = abs(e)
    return e * e if e < 0.5 else 0.5 * (2 * e - 0.5)


def ucx_time(x, p, nb, conf):
    """The UCX backend's allreduce as it runs by default: recursive
    doubling up to the configured switch point for p ranks, ring above."""
    t = conf.get(p, conf.get(0, {})).get("allreduce", 8 << 10)
    return ucx_model.predict(x, "allreduce", p, nb, "small" if nb <= t else "large")


def check_section(rows, system, model, cores):
    """Model against measurement for 2, 3 and 4 ranks; (lines, errors)."""
    lines, errors = [], {}
    for p in (2, 3, 4):
        for nb, t in series(rows, system, "allreduce", p):
            m = model(p, nb)
            err = (m - t) / t * 100
            errors.setdefault(p, []).append(abs(err))
            lines.append("| %d | %d | %.1f | %.1f | %+.0f%% |" % (p, nb, t * 1e6, m * 1e6, err))
    head = ["| ranks | size (B) | measured (us) | model (us) | error |", "|---|---|---|---|---|"]
    return head + lines, errors


def summary(errors):
    parts = []
    for p, e in sorted(errors.items()):
        e = sorted(e)
        parts.append("%d ranks %.0f%% (%d of %d within 50%%)" % (
            p, e[len(e) // 2], sum(v <= 50 for v in e), len(e)))
    return "Median absolute error: " + ", ".join(parts) + "."


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

    models = {}  # system -> f(p, bytes) in seconds
    cal = calibrate(rows, "syncline-gloo")
    if cal:
        fit_gloo_q(rows, cal)
        models["syncline-gloo"] = lambda p, nb, cal=cal: gloo_time(cal, p, nb)
        out += ["## syncline-gloo: calibration and check (%d cores)" % args.cores, "",
                "From %s (fitted over every size): o = %.0f us per op (the hand-off to the "
                "backend's thread), alpha = %.1f us per round, beta = %.3f ns/B "
                "(%.2f GB/s), gamma = %.3f ns/B (membw-sum). Model: Gloo's ring, 2(P-1) rounds. "
                "With more ranks than cores every round waits for a descheduled rank: q_P per "
                "round, fitted to that P's measurement below (one parameter per world size): "
                "%s." % (cal["source"], cal["o"] * 1e6, cal["alpha"] * 1e6, cal["beta"] * 1e9,
                         1 / cal["beta"] / 1e9, cal["gamma"] * 1e9,
                         ", ".join("q_%d = %.0f us" % (p, q * 1e6)
                                   for p, q in sorted(cal["q"].items())) or "none"), ""]
        check, errors = check_section(rows, "syncline-gloo", models["syncline-gloo"], args.cores)
        out += check + ["", summary(errors), ""]
    sweeps = crossover.load_rows(crossover.sweep_files(args.raw))
    ucx = ucx_model.calibrate(sweeps, membw_gamma(rows), cores=args.cores) if sweeps else None
    conf = switch_points.configured()
    if ucx:
        models["syncline-ucx"] = lambda p, nb: ucx_time(ucx, p, nb, conf)
        out += ["## syncline-ucx: calibration and check (%d cores)" % args.cores, "",
                "The UCX backend's model is `bench/model/ucx_model.py` (its docstring states "
                "it): the backend's own algorithms round by round, eager messages up to 8 KiB "
                "and rendezvous above, and per exchange round a scheduling delay q_P when the "
                "ranks share cores. Calibrated on the switch-point sweeps (not on the figures "
                "below): alpha = %.2f us, beta = %.3f ns/B (%.1f GB/s) up to 4 MiB per message "
                "and %.3f ns/B beyond, rendezvous +%.1f us (exchange) / +%.1f us (one-way), "
                "gamma = %.3f ns/B; %s. The allreduce runs recursive doubling up to the "
                "default switch point for P ranks (select.cc), ring above." % (
                    ucx.alpha * 1e6, ucx.beta * 1e9, 1 / ucx.beta / 1e9, ucx.beta_far * 1e9,
                    ucx.rndv * 1e6, ucx.rndv_oneway * 1e6, ucx.gamma * 1e9,
                    ", ".join("q_%d = %.1f us" % (p, q * 1e6) for p, q in sorted(ucx.q.items()))),
                ""]
        check, errors = check_section(rows, "syncline-ucx", models["syncline-ucx"], args.cores)
        out += check + ["", summary(errors), ""]
    if not models:
        out += ["No 2-rank Syncline measurements found in %s; calibration skipped." % args.raw, ""]
    out += ["## UCX switch points", "",
            "Measured, modelled and configured for every op and 2-4 ranks: "
            "[switch_points.md](switch_points.md) (`bench/model/switch_points.py`).", ""]

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
    for system, model in models.items():
        for pr in (2, 3, 4):
            measured = series(rows, system, "allreduce", pr)
            if not measured:
                continue
            sizes_here = [n for n, _ in measured]
            line = left.plot(sizes_here, [busbw(pr, n, t) for n, t in measured], "o",
                             markersize=3, label="%s, %d ranks, measured" % (system, pr))
            left.plot(sizes_here, [busbw(pr, n, model(pr, n)) for n in sizes_here], "-",
                      color=line[0].get_color(),
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
