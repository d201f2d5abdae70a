#!/usr/bin/env python3
"""Turns the comparison's raw results into the markdown table and the plot.

Reads every *.json in --raw (rows in bench/common's schema, from
syncline-bench-collectives, -raw-gloo, -raw-ucx, -mpi, -membw and
torch_gloo.py), the DDP results (ddp_pytorch.json, ddp_step.txt,
ddp_step_ucx.txt) and the header lines that
run.sh wrote (machine, date, versions), and writes:
  --md   a markdown report: per op, busbw of every system by size, the
         ratios of each Syncline backend to each reference, small-message
         latency, the issue-5 targets, and the DDP step ratios;
  --png  busbw against message size, one panel per op, a line per system.
Systems that did not run are shown as "n/a" and named in a note.

Usage: report.py --raw DIR --header FILE --md OUT.md --png OUT.png [--ranks 2]
"""
import argparse
import glob
import json
import os
import re
import sys

OPS = ["allreduce", "allgather", "broadcast"]
SYNCLINE = ["syncline-gloo", "syncline-ucx"]
REFERENCES = ["raw-gloo", "raw-ucx", "torch-gloo", "mpi-shm", "mpi-tcp", "membw-bound"]
ALL = SYNCLINE + REFERENCES


def load_rows(raw_dir, ranks):
    rows = []
    for path in sorted(glob.glob(os.path.join(raw_dir, "*.json"))):
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            print("report: skipping %s: %s" % (path, e), file=sys.stderr)
            continue
        rows += [r for r in doc.get("rows", []) if r.get("ranks") == ranks]
    return rows


def human(nbytes):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return "%d %s" % (nbytes >> shift, unit)
    return "%d B" % nbytes


def fmt(x):
    """Three significant figures in fixed point, or x.xe-N below 0.01
    (small-message busbw is tiny, not 0)."""
    if x is None:
        return "n/a"
    if x == 0 or abs(x) >= 100:
        return "%.0f" % x
    if abs(x) >= 1:
        return "%.3g" % x if abs(x) >= 10 else "%.2f" % x
    if abs(x) >= 0.01:
        return "%.3f" % x
    return "%.1e" % x


def table(header, lines):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(line) + " |" for line in lines]
    return "\n".join(out)


def by_system(rows, op):
    result = {}
    for r in rows:
        if r["op"] == op and r["system"] in ALL:
            result.setdefault(r["system"], {})[r["bytes"]] = r
    return result


def op_section(rows, op, ranks):
    data = by_system(rows, op)
    systems = [s for s in ALL if s in data]
    if not systems:
        return "### %s\n\nno results\n" % op, data
    sizes = sorted({b for s in systems for b in data[s]})
    busbw = lambda s, b: data.get(s, {}).get(b, {}).get("busbw")
    lines = [[human(b)] + [fmt(busbw(s, b)) for s in systems] for b in sizes]
    text = ["### %s, %d ranks, f32: busbw (GB/s)" % (op, ranks), "",
            table(["size"] + systems, lines), ""]
    for mine in [s for s in SYNCLINE if s in data]:
        refs = [s for s in REFERENCES if s in data]
        ratio_lines = []
        for b in sizes:
            line = [human(b)]
            for ref in refs:
                a, c = busbw(mine, b), busbw(ref, b)
                line.append(fmt(a / c) if a and c else "n/a")
            ratio_lines.append(line)
        text += ["%s / reference (busbw ratio, >1 means %s is faster):" % (mine, mine), "",
                 table(["size"] + refs, ratio_lines), ""]
    return "\n".join(text), data


def latency_section(rows):
    data = by_system(rows, "allreduce")
    lines = []
    smallest = {s: min(d) for s, d in data.items() if d}
    base = data.get("mpi-shm", {}).get(smallest.get("mpi-shm"), {}).get("time_us")
    for s in ALL:
        if s not in smallest or s == "membw-bound":
            continue
        t = data[s][smallest[s]]["time_us"]
        lines.append([s, human(smallest[s]), "%.2f" % t, "%.1f" % (t / base) if base else "n/a"])
    text = ["### Small-message allreduce latency", "",
            table(["system", "size", "time (us)", "x mpi-shm"], lines), ""]
    pingpong = [r for r in rows if r["system"] == "raw-ucx-pingpong"]
    if pingpong:
        text.append("UCX's own one-way latency (raw-ucx, 8 B ping-pong, half a round trip): "
                    "%.2f us.\n" % pingpong[0]["time_us"])
    return "\n".join(text)


def targets_section(data):
    """Issue 5's allreduce targets for the UCX backend."""
    ar = data.get("allreduce", {})
    lines = []
    for mine in [s for s in ("syncline-ucx",) if s in ar]:
        small = min(ar[mine])
        lines.append([mine, human(small), "latency <= 5 us", "%.2f us" % ar[mine][small]["time_us"]])
        for size in (1 << 20, 16 << 20):
            a = ar[mine].get(size, {}).get("busbw")
            g = ar.get("raw-gloo", {}).get(size, {}).get("busbw")
            m = ar.get("mpi-shm", {}).get(size, {}).get("busbw")
            lines.append([mine, human(size), "x raw-gloo >= 4", fmt(a / g) if a and g else "n/a"])
            lines.append([mine, human(size), "x mpi-shm >= 0.9", fmt(a / m) if a and m else "n/a"])
        big = max(ar[mine]) if ar[mine] else None
        if big:
            a = ar[mine][big]["busbw"]
            m = ar.get("mpi-shm", {}).get(big, {}).get("busbw")
            bound = ar.get("membw-bound", {}).get(big, {}).get("busbw")
            lines.append([mine, human(big), "x mpi-shm >= 1", fmt(a / m) if m else "n/a"])
            lines.append([mine, human(big), "x membw bound >= 0.7", fmt(a / bound) if bound else "n/a"])
            u = ar.get("raw-ucx", {}).get(big, {}).get("busbw")
            lines.append([mine, human(big), "x raw-ucx (same transport, no Syncline layers)",
                          fmt(a / u) if u else "n/a"])
    if not lines:
        return "### Issue 5's allreduce targets\n\nsyncline-ucx was not measured in this run.\n"
    return "\n".join(["### Issue 5's allreduce targets for the UCX backend (measured)", "",
                      table(["system", "size", "target", "measured"], lines), ""])


def ddp_figures(path):
    """(DDP / single, floor / single) from a ddp_step log, None when absent."""
    if not os.path.exists(path):
        return None, None
    text = open(path).read()
    ratio = re.search(r"ratio DDP / single\s+([0-9.]+)", text)
    floor = re.search(r"floor \(no-comm \+ allreduce\) / single\s+([0-9.]+)", text)
    return (float(ratio.group(1)) if ratio else None,
            float(floor.group(1)) if floor else None)


def consistency_section(rows):
    """The collective benchmark run on its own (run.sh's last step, rows
    "<system>/standalone": allreduce at the largest size only) against the
    comparison's figure for the same backend: busbw within 10%."""
    lines = []
    for system in SYNCLINE:
        alone = {r["bytes"]: r for r in rows
                 if r["system"] == system + "/standalone" and r["op"] == "allreduce"}
        here = {r["bytes"]: r for r in rows if r["system"] == system and r["op"] == "allreduce"}
        for nbytes in sorted(set(alone) & set(here)):
            a, c = alone[nbytes]["busbw"], here[nbytes]["busbw"]
            diff = (a - c) / c * 100 if c else float("nan")
            lines.append([system, human(nbytes), fmt(c), fmt(a), "%+.1f%%" % diff,
                          "yes" if abs(diff) <= 10 else "no"])
    if not lines:
        return ""
    return "\n".join(["### The collective benchmark on its own against this comparison", "",
                      "syncline-bench-collectives run again by itself after everything else "
                      "(allreduce, 2 ranks, the largest size) against the figure above.", "",
                      table(["system", "size", "busbw here (GB/s)", "busbw standalone (GB/s)",
                             "difference", "within 10%"], lines), ""])


def ddp_section(raw_dir):
    mine, mine_floor = ddp_figures(os.path.join(raw_dir, "ddp_step.txt"))
    ucx, ucx_floor = ddp_figures(os.path.join(raw_dir, "ddp_step_ucx.txt"))
    torch_ratio = None
    path = os.path.join(raw_dir, "ddp_pytorch.json")
    if os.path.exists(path):
        torch_ratio = json.load(open(path)).get("ratio")
    if mine is None and torch_ratio is None:
        return ""
    lines = [["Syncline DDP (gloo), ddp_step", fmt(mine), fmt(mine_floor)],
             ["Syncline DDP (ucx), ddp_step", fmt(ucx), fmt(ucx_floor)],
             ["PyTorch DDP (gloo), ddp_pytorch.py", fmt(torch_ratio), "n/a"]]
    text = ["### DDP step (MLP 12.6M params, batch 32/rank, 2 ranks, 1 thread each)", "",
            table(["system", "median step with DDP / single process",
                   "floor: (2 ranks without communication + bare allreduce) / single"],
                  lines), ""]
    if mine and torch_ratio:
        text.append("Syncline / PyTorch step-time ratio: %.3f (<1 means Syncline is faster)\n"
                    % (mine / torch_ratio))
    return "\n".join(text)


def plot(data, png, ranks):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(OPS), figsize=(6 * len(OPS), 4.5), sharey=True)
    for ax, op in zip(axes, OPS):
        for s in ALL:
            points = sorted(data.get(op, {}).get(s, {}).items())
            if not points:
                continue
            style = "--" if s == "membw-bound" else "-"
            ax.plot([b for b, _ in points], [max(r["busbw"], 1e-6) for _, r in points],
                    style, marker="o", markersize=3, label=s)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title("%s, %d ranks, f32" % (op, ranks))
        ax.set_xlabel("message size (bytes)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("busbw (GB/s)")
    axes[-1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--raw", required=True)
    p.add_argument("--header", required=True)
    p.add_argument("--md", required=True)
    p.add_argument("--png", required=True)
    p.add_argument("--ranks", type=int, default=2)
    args = p.parse_args()

    rows = load_rows(args.raw, args.ranks)
    parts = [open(args.header).read().rstrip(), ""]
    data = {}
    for op in OPS:
        text, data[op] = op_section(rows, op, args.ranks)
        parts.append(text)
    parts.append(latency_section(rows))
    parts.append(targets_section(data))
    parts.append(consistency_section(rows))
    parts.append(ddp_section(args.raw))
    missing = [s for s in ALL if not any(s in data[op] for op in OPS)]
    if missing:
        parts.append("Not measured in this run: %s.\n" % ", ".join(missing))
    wrong = [(r["system"], r["op"], r["bytes"]) for r in rows if r.get("wrong")]
    parts.append("Correctness: %s.\n" % (
        "every size of every system checked, 0 wrong elements" if not wrong
        else "WRONG RESULTS at %s" % wrong))
    parts.append("![busbw against message size](%s)\n" % os.path.basename(args.png))
    with open(args.md, "w") as f:
        f.write("\n".join(p for p in parts if p))
    try:
        plot(data, args.png, args.ranks)
    except ImportError as e:
        print("report: no plot (%s); install python3-matplotlib" % e, file=sys.stderr)
    print("\n".join(p for p in parts if p))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
