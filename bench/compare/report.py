#!/usr/bin/env python3
"""Turns the comparison's raw results into the markdown report, CSVs and plot.

run.sh measures every system once per round, in interleaved rounds, into
--raw/round-N/*.json (rows in bench/common's schema, from
syncline-bench-collectives, -raw-gloo, -raw-ucx, -mpi, -membw and
torch_gloo.py); each row is one sample. This script gathers them into
--raw/samples.csv (round,system,op,ranks,bytes,count,time_us,busbw,wrong) or
reads such a CSV given with --samples, reads the load probes (--load,
machine_load.py's CSV), the header lines that run.sh wrote (machine, date,
versions), the DDP results (round-N/ddp_{gloo,ucx,pytorch}.json; older runs:
ddp_pytorch.json, ddp_step.txt, ddp_step_ucx.txt)
and the standalone check (--raw/standalone.json), and writes:
  --md     the markdown report: the machine's load and whether it was quiet;
           per op, busbw of every system by size as median (min-max over the
           rounds); the ratios of each Syncline backend to each reference
           with their interval and verdict (level, faster, slower: see
           spread.py); small-message latency; the issue-5 targets; the DDP
           step ratios;
  --csv    one line per (op, system, size): rounds, median/min/max of time
           and busbw, wrong elements, and the run's load average at the start
           and end and whether it was quiet; next to it, *_ratios.csv: one
           line per (op, Syncline system, reference, size): ratio, low, high,
           verdict;
  --png    busbw against message size, one panel per op, a line per system
           (median) and its min-max band;
  --raw/compare_medians.json  the medians as rows (with samples_us), which
           bench/model reads.
Systems that did not run are shown as "n/a" and named in a note. Exits 1
when any sample has wrong elements.

Usage: report.py --raw DIR --header FILE --md OUT.md --csv OUT.csv
                 [--png OUT.png] [--samples FILE.csv] [--load FILE.csv] [--ranks 2]
"""
import argparse
import csv
import glob
import json
import os
import re
import sys

import machine_load
import spread

OPS = ["allreduce", "allgather", "reduce_scatter", "broadcast"]
# The systems of run.sh's own rows. A backend's rows (backends/<name>/
# bench_rows.sh) add theirs: a Syncline system "syncline-<name>" found in the
# data is compared with every reference, and backends/<name>/
# bench_systems.txt may name more, and references of its own
# (read_backend_systems, systems_of).
SYNCLINE_OWN = ["syncline-gloo", "syncline-ucx"]
REFERENCES_OWN = ["raw-gloo", "raw-ucx", "torch-gloo", "mpi-shm", "mpi-tcp", "membw-bound"]
# PyTorch's collectives over the `syncline` process group (torch_gloo.py
# --backend syncline), against the C++ figures of the same backend: the
# comparison's own (allreduce out of place) and, for allreduce, the same
# benchmark in place ("/in_place", run.sh's syncline_inplace), the only
# form torch's all_reduce has.
PYTHON_PATH = {"torch-syncline-ucx": ("syncline-ucx", "syncline-ucx/in_place"),
               "torch-syncline-gloo": ("syncline-gloo",)}
# Read for that table only (the others show ALL).
PYTHON_PATH_REFERENCES = {cpp for cpps in PYTHON_PATH.values() for cpp in cpps}
BACKENDS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "backends")
# What this report shows, in this order (set by use_systems()).
SYNCLINE, REFERENCES, ALL = [], [], []
PYTHON_PATH_FROM = 64 << 10  # bytes; issue 17: within 10% of C++ from here up


def read_backend_systems(backends_dir):
    """[(kind, system, after)] from every <backends_dir>/*/bench_systems.txt,
    folders in name order: lines "syncline <system>" or "reference <system>
    [<after>]"; "#" starts a comment."""
    declared = []
    for path in sorted(glob.glob(os.path.join(backends_dir, "*", "bench_systems.txt"))):
        with open(path) as f:
            for number, line in enumerate(f, 1):
                words = line.split("#", 1)[0].split()
                if not words:
                    continue
                if words[0] not in ("syncline", "reference") or not 2 <= len(words) <= 3:
                    raise SystemExit("report: %s:%d: expected 'syncline <system>' or "
                                     "'reference <system> [<after>]', not %r"
                                     % (path, number, line.strip()))
                declared.append((words[0], words[1], words[2] if len(words) == 3 else None))
    return declared


def systems_of(declared, measured):
    """(Syncline systems, references) to report: run.sh's own, then the
    backends' `declared` ones, then any "syncline-<name>" in `measured`
    (the systems of the samples) that is not named yet, in name order. A
    declared reference goes right after the one it names (after those
    placed there before it), or last when that one is not known."""
    syncline = list(SYNCLINE_OWN)
    references = list(REFERENCES_OWN)
    placed = {}  # anchor -> references declared after it so far
    for kind, system, after in declared:
        if kind == "syncline":
            if system not in syncline:
                syncline.append(system)
        elif system not in references:
            if after in references:
                at = references.index(after) + 1 + placed.get(after, 0)
                placed[after] = placed.get(after, 0) + 1
                references.insert(at, system)
            else:
                references.append(system)
    syncline += sorted(s for s in set(measured) - set(syncline)
                       if re.match(r"syncline-[A-Za-z0-9_.-]+$", s))
    return syncline, references


def use_systems(syncline, references):
    global SYNCLINE, REFERENCES, ALL
    SYNCLINE, REFERENCES = syncline, references
    ALL = SYNCLINE + list(PYTHON_PATH) + REFERENCES


SAMPLE_FIELDS = ["round", "system", "op", "ranks", "bytes", "count", "time_us", "busbw", "wrong"]


def round_docs(raw_dir, name="*"):
    """(round number, parsed JSON) of each --raw/round-N/<name>.json that reads."""
    for path in sorted(glob.glob(os.path.join(raw_dir, "round-*", name + ".json"))):
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            print("report: skipping %s: %s" % (path, e), file=sys.stderr)
            continue
        yield int(os.path.basename(os.path.dirname(path)).split("-", 1)[1]), doc


def gather_samples(raw_dir):
    """Every row of every round (--raw/round-N/*.json) as a sample."""
    samples = []
    for rnd, doc in round_docs(raw_dir):
        for r in doc.get("rows", []):
            samples.append({"round": rnd, "system": r["system"],
                            "op": r["op"], "ranks": r["ranks"], "bytes": r["bytes"],
                            "count": r.get("count", 0), "time_us": r["time_us"],
                            "busbw": r.get("busbw", 0.0), "wrong": r.get("wrong", 0)})
    return samples


def read_samples(path):
    with open(path) as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        for key in ("round", "ranks", "bytes", "count", "wrong"):
            r[key] = int(r[key])
        for key in ("time_us", "busbw"):
            r[key] = float(r[key])
    return rows


def write_csv(path, fields, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def summarize_samples(samples):
    """{(system, op, ranks, bytes): point}; a point holds the summaries of
    busbw and time_us over its rounds, its wrong elements and its count."""
    groups = {}
    for r in samples:
        groups.setdefault((r["system"], r["op"], r["ranks"], r["bytes"]), []).append(r)
    points = {}
    for key, rows in groups.items():
        points[key] = {"busbw": spread.summarize([r["busbw"] for r in rows]),
                       "time_us": spread.summarize([r["time_us"] for r in rows]),
                       "wrong": sum(r["wrong"] for r in rows), "count": rows[0]["count"],
                       "samples_us": [r["time_us"] for r in sorted(rows, key=lambda r: r["round"])]}
    return points


def medians_json(points, path):
    """The medians as bench/common rows, for bench/model."""
    rows = []
    for (system, op, ranks, nbytes), p in sorted(points.items()):
        rows.append({"system": system, "op": op, "ranks": ranks, "bytes": nbytes,
                     "count": p["count"], "time_us": p["time_us"]["median"],
                     "busbw": p["busbw"]["median"], "wrong": p["wrong"],
                     "samples_us": p["samples_us"]})
    with open(path, "w") as f:
        json.dump({"program": "bench/compare/report.py (medians over rounds)", "rows": rows}, f,
                  indent=1)


def load_standalone(raw_dir, ranks):
    rows = []
    path = os.path.join(raw_dir, "standalone.json")
    if os.path.exists(path):
        try:
            rows = [r for r in json.load(open(path)).get("rows", []) if r.get("ranks") == ranks]
        except ValueError as e:
            print("report: skipping %s: %s" % (path, e), file=sys.stderr)
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


def fmt_point(summary, rounds):
    """"median (min-max)", and "k of n rounds" when some rounds lack it."""
    if summary is None:
        return "n/a"
    text = "%s (%s-%s)" % (fmt(summary["median"]), fmt(summary["min"]), fmt(summary["max"]))
    if summary["n"] < rounds:
        text += ", %d of %d rounds" % (summary["n"], rounds)
    return text


def fmt_ratio(r, with_verdict=True):
    if r is None:
        return "n/a"
    text = "%s (%s-%s)" % (fmt(r["ratio"]), fmt(r["low"]), fmt(r["high"]))
    return text + " " + spread.verdict(r) if with_verdict else text


def by_system(points, op, ranks):
    """{system: {bytes: point}} for the systems the report shows."""
    result = {}
    for (system, o, n, nbytes), p in points.items():
        if o == op and n == ranks and (system in ALL or system in PYTHON_PATH_REFERENCES):
            result.setdefault(system, {})[nbytes] = p
    return result


def busbw_of(data, system, nbytes):
    p = data.get(system, {}).get(nbytes)
    return p["busbw"] if p else None


def op_section(points, op, ranks, rounds):
    """The op's busbw table and ratio tables, its ratio lines for the CSV,
    and its data."""
    data = by_system(points, op, ranks)
    systems = [s for s in ALL if s in data]
    if not systems:
        return "### %s\n\nno results\n" % op, [], data
    sizes = sorted({b for s in systems for b in data[s]})
    lines = [[human(b)] + [fmt_point(busbw_of(data, s, b), rounds) for s in systems]
             for b in sizes]
    text = ["### %s, %d ranks, f32: busbw (GB/s), median (min-max) over %d rounds"
            % (op, ranks, rounds), "", table(["size"] + systems, lines), ""]
    ratio_rows = []
    for mine in [s for s in SYNCLINE if s in data]:
        refs = [s for s in REFERENCES if s in data]
        ratio_lines = []
        for b in sizes:
            line = [human(b)]
            for ref in refs:
                r = spread.ratio(busbw_of(data, mine, b), busbw_of(data, ref, b))
                line.append(fmt_ratio(r))
                if r is not None:
                    ratio_rows.append(dict(r, op=op, system=mine, reference=ref, bytes=b,
                                           verdict=spread.verdict(r)))
            ratio_lines.append(line)
        text += ["%s / reference, busbw ratio (low-high) and verdict: faster or slower only "
                 "when the whole interval is above or below 1, level otherwise:" % mine, "",
                 table(["size"] + refs, ratio_lines), ""]
    return "\n".join(text), ratio_rows, data


def latency_section(points, ranks):
    data = by_system(points, "allreduce", ranks)
    lines = []
    smallest = {s: min(d) for s, d in data.items() if d}
    base = data.get("mpi-shm", {}).get(smallest.get("mpi-shm"))
    for s in ALL:
        if s not in smallest or s == "membw-bound":
            continue
        t = data[s][smallest[s]]["time_us"]
        x = spread.ratio(t, base["time_us"]) if base else None  # time / mpi-shm's
        lines.append([s, human(smallest[s]), "%.2f (%.2f-%.2f)" % (t["median"], t["min"], t["max"]),
                      fmt_ratio(x, with_verdict=False)])
    text = ["### Small-message allreduce latency, median (min-max) over the rounds", "",
            table(["system", "size", "time (us)", "x mpi-shm"], lines), ""]
    pingpong = [p for (system, _, _, _), p in points.items() if system == "raw-ucx-pingpong"]
    if pingpong:
        t = pingpong[0]["time_us"]
        text.append("UCX's own one-way latency (raw-ucx, 8 B ping-pong, half a round trip): "
                    "%.2f us (%.2f-%.2f).\n" % (t["median"], t["min"], t["max"]))
    return "\n".join(text)


def targets_section(data):
    """Issue 5's allreduce targets for the UCX backend, ratios with their
    intervals."""
    ar = data.get("allreduce", {})
    lines = []

    def cell(a, b):
        return fmt_ratio(spread.ratio(a, b), with_verdict=False)

    for mine in [s for s in ("syncline-ucx",) if s in ar]:
        small = min(ar[mine])
        t = ar[mine][small]["time_us"]
        lines.append([mine, human(small), "latency <= 5 us",
                      "%.2f us (%.2f-%.2f)" % (t["median"], t["min"], t["max"])])
        for size in (1 << 20, 16 << 20):
            a = busbw_of(ar, mine, size)
            lines.append([mine, human(size), "x raw-gloo >= 4", cell(a, busbw_of(ar, "raw-gloo", size))])
            lines.append([mine, human(size), "x mpi-shm >= 0.9", cell(a, busbw_of(ar, "mpi-shm", size))])
        big = max(ar[mine])
        a = busbw_of(ar, mine, big)
        lines.append([mine, human(big), "x mpi-shm >= 1", cell(a, busbw_of(ar, "mpi-shm", big))])
        lines.append([mine, human(big), "x membw bound >= 0.7",
                      cell(a, busbw_of(ar, "membw-bound", big))])
        lines.append([mine, human(big), "x raw-ucx (same transport, no Syncline layers)",
                      cell(a, busbw_of(ar, "raw-ucx", big))])
    if not lines:
        return "### Issue 5's allreduce targets\n\nsyncline-ucx was not measured in this run.\n"
    return "\n".join(["### Issue 5's allreduce targets for the UCX backend (measured: median "
                      "ratio, low-high)", "",
                      table(["system", "size", "target", "measured"], lines), ""])


ISSUE18_FROM = 64 << 10  # bytes; issue 18's busbw targets hold from here up


def met(r, target):
    """"yes" when the whole interval of ratio `r` is at or above `target`,
    "no" when all of it is below, "unclear" otherwise."""
    return "yes" if r["low"] >= target else "no" if r["high"] < target else "unclear"


def issue18_section(data, raw_dir):
    """Issue 18's targets, each with its measurement and whether it is met
    (the whole interval on the right side of the target), unmet (all of it
    on the wrong side) or unclear; busbw targets per size from 64 KiB up."""
    lines = []
    busbw_targets = [(op, "syncline-ucx", "mpi-shm", 0.9)
                     for op in ("allgather", "broadcast", "reduce_scatter")]
    busbw_targets.append(("allreduce", "syncline-ucx", "raw-ucx", 0.9))
    for op, mine, ref, target in busbw_targets:
        d = data.get(op, {})
        if mine not in d or ref not in d:
            continue
        for b in sorted(x for x in d[mine] if x >= ISSUE18_FROM):
            r = spread.ratio(busbw_of(d, mine, b), busbw_of(d, ref, b))
            if r is not None:
                lines.append(["%s: %s / %s >= %g" % (op, mine, ref, target), human(b),
                              fmt_ratio(r, False), met(r, target)])
    ar = data.get("allreduce", {})
    if "syncline-ucx" in ar:
        small = min(ar["syncline-ucx"])
        t = ar["syncline-ucx"][small]["time_us"]
        lines.append(["allreduce latency, syncline-ucx, median <= 1.0 us", human(small),
                      "%.2f us (%.2f-%.2f)" % (t["median"], t["min"], t["max"]),
                      "yes" if t["median"] <= 1.0 else "no"])
    found = ddp_rounds(raw_dir)
    ucx = found.get("ddp_ucx", {})
    over = [v["ratio"] / v["floor"] for v in ucx.values() if v["floor"]]
    if over:
        r = spread.summarize(over)
        lines.append(["DDP step over UCX / its floor <= 1.1", "48 MiB of gradients",
                      "%s (%s-%s)" % (fmt(r["median"]), fmt(r["min"]), fmt(r["max"])),
                      "yes" if r["max"] <= 1.1 else "no" if r["min"] > 1.1 else "unclear"])
    torch = found.get("ddp_pytorch", {})
    if ucx and torch:
        r = spread.ratio(spread.summarize([v["ratio"] for v in torch.values()]),
                         spread.summarize([v["ratio"] for v in ucx.values()]))
        lines.append(["PyTorch DDP (gloo) / Syncline DDP over UCX, step time >= 1.3",
                      "48 MiB of gradients", fmt_ratio(r, False), met(r, 1.3)])
    mine = found.get("ddp_gloo", {})
    both = sorted(set(mine) & set(torch))
    if both:
        wins = sum(1 for rnd in both if mine[rnd]["ratio"] <= torch[rnd]["ratio"])
        lines.append(["Syncline DDP over Gloo no slower than PyTorch's, in every round",
                      "48 MiB of gradients", "%d of %d rounds" % (wins, len(both)),
                      "yes" if wins == len(both) else "no"])
    if not lines:
        return ""
    return "\n".join(["### Issue 18's targets (2 ranks; met: the whole interval on the target's "
                      "side, no: all of it on the other side; busbw ratios as median (low-high))",
                      "", table(["target", "size", "measured", "met"], lines), ""])


ISSUE16_FROM = 64 << 10  # bytes; issue 16's busbw target holds from here up


def per_round(samples, system, op, key):
    """{bytes: {round: sample[key]}} of one system's op, 2 ranks or more."""
    out = {}
    for r in samples:
        if r["system"] == system and r["op"] == op:
            out.setdefault(r["bytes"], {})[r["round"]] = r[key]
    return out


def issue16_section(samples):
    """Issue 16's targets for the mpi backend, each round's syncline-mpi
    against the same round's mpi-shm (both measured in it, so a change of
    the machine between rounds hits both): busbw within 5 % from 64 KiB up,
    and at most 1 us added to the smallest allreduce. Met: every round on
    the target's side; no: every round on the other side; unclear otherwise."""
    lines = []
    for op in OPS:
        mine = per_round(samples, "syncline-mpi", op, "busbw")
        ref = per_round(samples, "mpi-shm", op, "busbw")
        for b in sorted(x for x in mine if x >= ISSUE16_FROM and x in ref):
            ratios = [mine[b][k] / ref[b][k] for k in sorted(mine[b])
                      if k in ref[b] and ref[b][k] > 0]
            if not ratios:
                continue
            s = spread.summarize(ratios)
            ok = sum(1 for x in ratios if x >= 0.95)
            lines.append(["%s: syncline-mpi / mpi-shm busbw >= 0.95" % op, human(b),
                          "%s (%s-%s), %d of %d rounds" % (fmt(s["median"]), fmt(s["min"]),
                                                          fmt(s["max"]), ok, len(ratios)),
                          "yes" if ok == len(ratios) else "no" if ok == 0 else "unclear"])
    mine = per_round(samples, "syncline-mpi", "allreduce", "time_us")
    ref = per_round(samples, "mpi-shm", "allreduce", "time_us")
    both = sorted(set(mine) & set(ref))
    if both:
        b = both[0]
        added = [mine[b][k] - ref[b][k] for k in sorted(mine[b]) if k in ref[b]]
        if added:
            s = spread.summarize(added)
            ok = sum(1 for x in added if x <= 1.0)
            lines.append(["allreduce: time syncline-mpi adds to mpi-shm <= 1 us", human(b),
                          "%.2f us (%.2f-%.2f), %d of %d rounds" % (s["median"], s["min"],
                                                                    s["max"], ok, len(added)),
                          "yes" if ok == len(added) else "no" if ok == 0 else "unclear"])
    if not lines:
        return ""
    return "\n".join(["### Issue 16's targets for the mpi backend (2 ranks; paired by round: "
                      "each round's syncline-mpi against the same round's mpi-shm, median "
                      "(min-max) and the rounds on the target's side; met: every round, no: "
                      "none)", "", table(["target", "size", "measured", "met"], lines), ""])


def python_path_section(data):
    """Issue 17: PyTorch's collectives over `syncline` within 10% of
    Syncline's C++ benchmark on the same backend, from 64 KiB up."""
    lines = []
    for op in OPS:
        d = data.get(op, {})
        for python, cpps in PYTHON_PATH.items():
            for cpp in cpps:
                if python not in d or cpp not in d:
                    continue
                for b in sorted(x for x in d[python] if x >= PYTHON_PATH_FROM):
                    r = spread.ratio(busbw_of(d, python, b), busbw_of(d, cpp, b))
                    if r is None:
                        continue
                    lines.append([op, "%s / %s" % (python, cpp), human(b),
                                  fmt_ratio(r, False), met(r, 0.9)])
    if not lines:
        return ""
    return "\n".join(["### PyTorch over `syncline` against Syncline's C++ benchmark (issue 17: "
                      ">= 0.9 from 64 KiB up; busbw ratio, median (low-high); met: the whole "
                      "interval at or above 0.9)", "",
                      table(["op", "Python path / C++", "size", "busbw ratio", "met"], lines),
                      ""])


def consistency_section(standalone, data):
    """The collective benchmark run on its own (run.sh's last step, rows
    "<system>/standalone": allreduce at the largest size only) against the
    comparison's median for the same backend: busbw within 10%."""
    lines = []
    ar = data.get("allreduce", {})
    for system in SYNCLINE:
        alone = {r["bytes"]: r for r in standalone
                 if r["system"] == system + "/standalone" and r["op"] == "allreduce"}
        for nbytes in sorted(alone):
            here = busbw_of(ar, system, nbytes)
            if not here:
                continue
            a, c = alone[nbytes]["busbw"], here["median"]
            diff = (a - c) / c * 100 if c else float("nan")
            inside = here["min"] <= a <= here["max"]
            lines.append([system, human(nbytes), fmt_point(here, here["n"]), fmt(a),
                          "%+.1f%%" % diff, "yes" if abs(diff) <= 10 else "no",
                          "yes" if inside else "no"])
    if not lines:
        return ""
    return "\n".join(["### The collective benchmark on its own against this comparison", "",
                      "syncline-bench-collectives run again by itself after everything else "
                      "(allreduce, 2 ranks, the largest size) against the median above.", "",
                      table(["system", "size", "busbw here (GB/s)", "busbw standalone (GB/s)",
                             "difference", "within 10%", "within the rounds' range"], lines), ""])


def load_section(probes, ranks):
    """The machine's load around the run, and whether it was quiet."""
    reasons = machine_load.assess(probes, ranks)
    if reasons is None:
        return "- Load: not recorded (no probes); whether the machine was quiet is unknown.", None
    first, last = probes[0], probes[-1]
    text = ["- Load average (1, 5, 15 min): %.2f %.2f %.2f before the first round, "
            "%.2f %.2f %.2f after the last (%d CPUs); other work while the benchmark was idle: "
            "%s" % (first["load1"], first["load5"], first["load15"], last["load1"], last["load5"],
                    last["load15"], first["cpus"],
                    ", ".join("%s %d %%" % (p["label"], round(p["busy"] * 100)) for p in probes))]
    if reasons:
        text.append("- **The machine was NOT quiet**: %s. Read the spreads before the medians; "
                    "compare only this run's side-by-side figures." % "; ".join(reasons))
    else:
        text.append("- The machine was quiet (start load average at most %.1f per CPU, no rise "
                    "beyond the benchmark's own %d ranks, at most %d %% of the CPUs busy with "
                    "other work at every probe)." % (machine_load.LOAD_PER_CPU, ranks,
                                                     round(machine_load.BUSY_SHARE * 100)))
    return "\n".join(text), not reasons


def ddp_figures(path):
    """(DDP / single, floor / single) from a ddp_step log, None when absent."""
    if not os.path.exists(path):
        return None, None
    text = open(path).read()
    ratio = re.search(r"ratio DDP / single\s+([0-9.]+)", text)
    floor = re.search(r"floor \(no-comm \+ allreduce\) / single\s+([0-9.]+)", text)
    return (float(ratio.group(1)) if ratio else None,
            float(floor.group(1)) if floor else None)


# The DDP step systems of run.sh's rounds: round-N/<name>.json each.
DDP_ROUND_SYSTEMS = [("ddp_gloo", "Syncline DDP (gloo), ddp_step"),
                     ("ddp_ucx", "Syncline DDP (ucx), ddp_step"),
                     ("ddp_pytorch", "PyTorch DDP (gloo), ddp_pytorch.py"),
                     ("ddp_torch_syncline", "PyTorch DDP (syncline/ucx), ddp_pytorch.py --syncline"),
                     ("ddp_torch_floor", "PyTorch DDP without communication, ddp_pytorch.py --floor"),
                     # --bucket-view: gradient_as_bucket_view=True, ddp_step's default layout.
                     ("ddp_torch_syncline_view", "PyTorch DDP (syncline/ucx), gradient_as_bucket_view, "
                      "ddp_pytorch.py --syncline --bucket-view"),
                     ("ddp_torch_floor_view", "PyTorch DDP without communication, "
                      "gradient_as_bucket_view, ddp_pytorch.py --floor --bucket-view")]


def ddp_rounds(raw_dir):
    """{name: {round: {"ratio": step/single, "floor": floor/single or None}}}
    from the rounds' DDP step JSONs (run.sh runs the DDP step once per round)."""
    found = {}
    for name, _ in DDP_ROUND_SYSTEMS:
        for rnd, doc in round_docs(raw_dir, name):
            if not doc.get("ratio"):
                continue
            found.setdefault(name, {})[rnd] = {"ratio": float(doc["ratio"]),
                                               "floor": doc.get("floor"),
                                               "ms": doc.get("ddp_ms")}
            over = doc.get("syncline") or {}  # ddp_pytorch.py --syncline, same processes
            if name == "ddp_pytorch" and over.get("ratio"):
                found.setdefault("ddp_torch_syncline", {})[rnd] = {
                    "ratio": float(over["ratio"]), "floor": None, "ms": over.get("ddp_ms")}
            if name == "ddp_pytorch" and doc.get("floor_ms") and doc.get("single_ms"):
                found.setdefault("ddp_torch_floor", {})[rnd] = {
                    "ratio": float(doc["floor_ms"]) / float(doc["single_ms"]), "floor": None}
            view = doc.get("syncline_view") or {}  # --bucket-view, same processes
            if name == "ddp_pytorch" and view.get("ratio"):
                found.setdefault("ddp_torch_syncline_view", {})[rnd] = {
                    "ratio": float(view["ratio"]), "floor": None, "ms": view.get("ddp_ms")}
            if name == "ddp_pytorch" and doc.get("floor_view_ms") and doc.get("single_ms"):
                found.setdefault("ddp_torch_floor_view", {})[rnd] = {
                    "ratio": float(doc["floor_view_ms"]) / float(doc["single_ms"]),
                    "floor": None}
    return found


def time_ratio(a, b):
    """a / b of two step-time summaries (lower is better): median ratio with
    the worst-pairing bounds and a verdict for a (faster, slower, level)."""
    r = spread.ratio(a, b)
    if r is None:
        return "n/a"
    text = "%s (%s-%s)" % (fmt(r["ratio"]), fmt(r["low"]), fmt(r["high"]))
    if r["n"] < 2:
        return text + " unknown (1 round)"
    return text + (" faster" if r["high"] < 1 else " slower" if r["low"] > 1 else " level")


def floor_verdict(r, target=1.10):
    """What torch's DDP floor against the C++ DDP step says of issue 17's
    DDP target (PyTorch's DDP at most `target` x the C++ one)."""
    if r is None or r["n"] < 2:
        return "unknown"
    if r["low"] > target:
        return "above %.2f: the DDP target is out of the backend's reach" % target
    if r["high"] <= target:
        return "at most %.2f: the DDP target is within the backend's reach" % target
    return "straddling %.2f: whether the DDP target is within reach is unclear" % target


def paired_step_times(found, target=1.10):
    """Issue 17's DDP figure without the single-process steps: PyTorch's DDP
    step over syncline/ucx over the C++ DDP step over UCX, both in ms, paired
    round by round (the same model, batch and threads, minutes apart), so
    that neither side's single-process step, which moves between rounds,
    enters the ratio."""
    cpp = found.get("ddp_ucx", {})
    lines = []
    for name, what in (("ddp_torch_syncline", "PyTorch DDP over syncline/ucx"),
                       ("ddp_torch_syncline_view", "PyTorch DDP over syncline/ucx with "
                        "gradient_as_bucket_view")):
        per_round = [found[name][r]["ms"] / cpp[r]["ms"]
                     for r in sorted(set(found.get(name, {})) & set(cpp))
                     if found[name][r].get("ms") and cpp[r].get("ms")]
        if not per_round:
            continue
        within = sum(1 for v in per_round if v <= target)
        lines.append("- %s / Syncline's C++ DDP over UCX, step time (ms) paired by round: %s, "
                     "at most %.2f in %d of %d rounds (issue 17)"
                     % (what, fmt_point(spread.summarize(per_round), len(per_round)), target,
                        within, len(per_round)))
    return lines


def ddp_rounds_section(found):
    rounds = max(len(v) for v in found.values())
    lines = []
    summaries = {}
    for name, label in DDP_ROUND_SYSTEMS:
        per_round = found.get(name, {})
        if not per_round:
            lines.append([label, "n/a", "n/a", "n/a"])
            continue
        ratio = spread.summarize([v["ratio"] for v in per_round.values()])
        floors = [v["floor"] for v in per_round.values() if v["floor"]]
        over = [v["ratio"] / v["floor"] for v in per_round.values() if v["floor"]]
        summaries[name] = ratio
        lines.append([label, fmt_point(ratio, rounds),
                      fmt_point(spread.summarize(floors), rounds) if floors else "n/a",
                      fmt_point(spread.summarize(over), rounds) if over else "n/a"])
    text = ["### DDP step (MLP 12.6M params, batch 32/rank, 2 ranks, 1 thread each)", "",
            "Each system once per round, in the rounds above: median (min-max) over the "
            "rounds.", "",
            table(["system", "step with DDP / single process",
                   "floor: (2 ranks without communication + bare allreduce) / single",
                   "DDP / its floor (per round)"], lines), ""]
    torch = summaries.get("ddp_pytorch")
    for name, label in DDP_ROUND_SYSTEMS[:2]:
        if name in summaries and torch:
            text.append("- %s / PyTorch DDP step time: %s (<1: Syncline is faster)"
                        % (label.split(",")[0], time_ratio(summaries[name], torch)))
    over = summaries.get("ddp_torch_syncline")
    if over and torch:
        text.append("- PyTorch DDP over syncline/ucx / over gloo step time: %s (<1: faster)"
                    % time_ratio(over, torch))
    # Against the C++ DDP over UCX (issue 17), each torch figure in turn;
    # "{floor}" takes the floor's verdict. ddp_step makes each .grad a view
    # into its bucket by default; PyTorch's DDP copies into the buckets and
    # back unless gradient_as_bucket_view is set (the *_view rows: like for like).
    against_cpp = [
        ("ddp_torch_syncline", "PyTorch DDP over syncline/ucx", "issue 17: at most 1.10"),
        ("ddp_torch_floor", "PyTorch DDP without communication", "torch's own floor, {floor}"),
        ("ddp_torch_syncline_view", "PyTorch DDP over syncline/ucx with "
         "gradient_as_bucket_view", "the same gradient layout; issue 17: at most 1.10"),
        ("ddp_torch_floor_view", "PyTorch DDP without communication, "
         "gradient_as_bucket_view", "{floor}")]
    cpp = summaries.get("ddp_ucx")
    for name, what, note in against_cpp:
        if name in summaries and cpp:
            verdict = floor_verdict(spread.ratio(summaries[name], cpp))
            text.append("- %s / Syncline's C++ DDP over UCX: %s (%s)"
                        % (what, time_ratio(summaries[name], cpp), note.format(floor=verdict)))
    text += paired_step_times(found)
    mine, theirs = found.get("ddp_gloo", {}), found.get("ddp_pytorch", {})
    both = sorted(set(mine) & set(theirs))
    if both:
        wins = sum(1 for r in both if mine[r]["ratio"] <= theirs[r]["ratio"])
        text.append("- Syncline DDP over Gloo no slower than PyTorch's in %d of %d rounds"
                    % (wins, len(both)))
    return "\n".join(text) + "\n"


def ddp_section(raw_dir):
    found = ddp_rounds(raw_dir)
    if found:
        return ddp_rounds_section(found)
    # An older raw folder: the DDP step ran once, after the rounds.
    mine, mine_floor = ddp_figures(os.path.join(raw_dir, "ddp_step.txt"))
    ucx, ucx_floor = ddp_figures(os.path.join(raw_dir, "ddp_step_ucx.txt"))
    torch_ratio, over = None, {}
    path = os.path.join(raw_dir, "ddp_pytorch.json")
    if os.path.exists(path):
        torch_json = json.load(open(path))
        torch_ratio = torch_json.get("ratio")
        over = torch_json.get("syncline") or {}  # ddp_pytorch.py --syncline
    if mine is None and torch_ratio is None:
        return ""
    lines = [["Syncline DDP (gloo), ddp_step", fmt(mine), fmt(mine_floor)],
             ["Syncline DDP (ucx), ddp_step", fmt(ucx), fmt(ucx_floor)],
             ["PyTorch DDP (gloo), ddp_pytorch.py", fmt(torch_ratio), "n/a"]]
    if over:
        lines.append(["PyTorch DDP (syncline/%s), ddp_pytorch.py" % over["backend"],
                      fmt(over["ratio"]), "n/a"])
    text = ["### DDP step (MLP 12.6M params, batch 32/rank, 2 ranks, 1 thread each)", "",
            table(["system", "median step with DDP / single process",
                   "floor: (2 ranks without communication + bare allreduce) / single"],
                  lines), ""]
    if mine and torch_ratio:
        text.append("Syncline / PyTorch step-time ratio: %.3f (<1 means Syncline is faster)\n"
                    % (mine / torch_ratio))
    if over and torch_ratio:
        text.append("PyTorch DDP over syncline/%s / over gloo, same run: %.3f (<1: faster)\n"
                    % (over["backend"], over["ratio"] / torch_ratio))
    cpp = ucx if over.get("backend") == "ucx" else mine
    if over and cpp:
        text.append("PyTorch DDP over syncline/%s / Syncline's C++ DDP over %s: %.3f "
                    "(issue 17: <= 1.10)\n" % (over["backend"], over["backend"], over["ratio"] / cpp))
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
            x = [b for b, _ in points]
            clip = lambda v: max(v, 1e-6)
            line, = ax.plot(x, [clip(p["busbw"]["median"]) for _, p in points], style,
                            marker="o", markersize=3, label=s)
            ax.fill_between(x, [clip(p["busbw"]["min"]) for _, p in points],
                            [clip(p["busbw"]["max"]) for _, p in points],
                            color=line.get_color(), alpha=0.2, linewidth=0)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title("%s, %d ranks, f32" % (op, ranks))
        ax.set_xlabel("message size (bytes)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("busbw (GB/s): median, band min-max")
    axes[-1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def point_rows(points, ranks, probes, quiet):
    first = probes[0]["load1"] if probes else ""
    last = probes[-1]["load1"] if probes else ""
    rows = []
    for (system, op, n, nbytes), p in sorted(points.items()):
        if n != ranks:
            continue
        row = {"op": op, "system": system, "ranks": n, "bytes": nbytes, "rounds": p["busbw"]["n"],
               "wrong": p["wrong"], "load1_start": first, "load1_end": last,
               "quiet": "" if quiet is None else ("yes" if quiet else "no")}
        for what in ("time_us", "busbw"):
            for stat in ("median", "min", "max"):
                row["%s_%s" % (what, stat)] = "%.6g" % p[what][stat]
        rows.append(row)
    return rows


POINT_FIELDS = ["op", "system", "ranks", "bytes", "rounds", "time_us_median", "time_us_min",
                "time_us_max", "busbw_median", "busbw_min", "busbw_max", "wrong", "load1_start",
                "load1_end", "quiet"]
RATIO_FIELDS = ["op", "system", "reference", "bytes", "ratio", "low", "high", "verdict"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--raw", required=True)
    p.add_argument("--header", required=True)
    p.add_argument("--md", required=True)
    p.add_argument("--csv", required=True)
    p.add_argument("--png", default="")
    p.add_argument("--samples", default="", help="read the samples from this CSV, not --raw")
    p.add_argument("--load", default="", help="machine_load.py's probes (default --raw/load.csv)")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--backends", default=BACKENDS_DIR,
                   help="the folder of backends/<name>/bench_systems.txt (default: this tree's)")
    args = p.parse_args()

    if args.samples:
        samples = read_samples(args.samples)
    else:
        samples = gather_samples(args.raw)
        write_csv(os.path.join(args.raw, "samples.csv"), SAMPLE_FIELDS, samples)
    points = summarize_samples(samples)
    use_systems(*systems_of(read_backend_systems(args.backends), {r["system"] for r in samples}))
    if not args.samples:
        medians_json(points, os.path.join(args.raw, "compare_medians.json"))
    rounds = len({r["round"] for r in samples})
    probes = machine_load.read_probes(args.load or os.path.join(args.raw, "load.csv"))
    load_text, quiet = load_section(probes, args.ranks)

    parts = [open(args.header).read().rstrip(), load_text,
             "- Spread: every system measured once per round, %d interleaved rounds; each cell "
             "is the median (min-max) over the rounds, which holds the true median with "
             "probability %.0f %% (bench/README.md, *Reading the spread*)."
             % (rounds, spread.coverage(rounds) * 100) + "\n"]
    data, ratio_rows = {}, []
    for op in OPS:
        text, ratios, data[op] = op_section(points, op, args.ranks, rounds)
        ratio_rows += ratios
        parts.append(text)
    parts.append(latency_section(points, args.ranks))
    parts.append(targets_section(data))
    parts.append(consistency_section(load_standalone(args.raw, args.ranks), data))
    parts.append(python_path_section(data))
    parts.append(issue16_section(samples))
    parts.append(issue18_section(data, args.raw))
    parts.append(ddp_section(args.raw))
    missing = [s for s in ALL if not any(s in data[op] for op in OPS)]
    if missing:
        parts.append("Not measured in this run: %s.\n" % ", ".join(missing))
    wrong = sorted({(r["system"], r["op"], r["bytes"]) for r in samples if r["wrong"]})
    parts.append("Correctness: %s.\n" % (
        "every size of every system checked in every round, 0 wrong elements" if not wrong
        else "WRONG RESULTS at %s" % wrong))
    if args.png:
        parts.append("![busbw against message size](%s)\n" % os.path.basename(args.png))
    with open(args.md, "w") as f:
        f.write("\n".join(p for p in parts if p))
    write_csv(args.csv, POINT_FIELDS, point_rows(points, args.ranks, probes, quiet))
    for r in ratio_rows:
        for key in ("ratio", "low", "high"):
            r[key] = "%.6g" % r[key]
    write_csv(re.sub(r"(\.csv)?$", "_ratios.csv", args.csv, count=1), RATIO_FIELDS, ratio_rows)
    if args.png:
        try:
            plot(data, args.png, args.ranks)
        except ImportError as e:
            print("report: no plot (%s); install python3-matplotlib" % e, file=sys.stderr)
    print("\n".join(p for p in parts if p))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
