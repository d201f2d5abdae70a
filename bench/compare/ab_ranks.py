#!/usr/bin/env python3
"""Two builds of syncline-bench-collectives side by side, in interleaved rounds.

For the question "did this change make anything slower?" at rank counts the
main comparison (run.sh, 2 ranks) does not cover: the same collectives, sizes
and world sizes run by a baseline binary and a new one, alternating A B B A
... so that drift in the machine's load falls on both alike. Each (op, ranks,
size) gets one sample per round per binary; the report gives both medians
(min-max) and new / baseline busbw as a ratio with its interval and
verdict, as spread.py defines them (level when the interval holds 1).

Usage:
  ab_ranks.py --baseline WT/build/bin/syncline-bench-collectives \\
              --new build/bin/syncline-bench-collectives [--rounds 3] \\
              [--world_sizes 3,4] [--ops allreduce,allgather,reduce_scatter,broadcast] \\
              [--backends ucx] [--min_bytes 64K] [--max_bytes 16M] [--md OUT.md]
Exits 1 when a run fails or any sample has wrong elements.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import spread  # noqa: E402
from report import human  # noqa: E402


def run_once(binary, args, folder, tag):
    path = os.path.join(folder, tag + ".json")
    cmd = [binary, "--backends=" + args.backends, "--world_sizes=" + args.world_sizes,
           "--ops=" + args.ops, "--min_bytes=" + args.min_bytes, "--max_bytes=" + args.max_bytes,
           "--factor=" + str(args.factor), "--repetitions=1", "--json=" + path]
    result = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            universal_newlines=True, timeout=args.timeout_s)
    if result.returncode != 0:
        sys.exit("ab_ranks: %s failed (%d):\n%s" % (" ".join(cmd), result.returncode,
                                                    result.stdout[-2000:]))
    with open(path) as f:
        return json.load(f)["rows"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--baseline", required=True)
    p.add_argument("--new", required=True)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--world_sizes", default="3,4")
    p.add_argument("--ops", default="allreduce,allgather,reduce_scatter,broadcast")
    p.add_argument("--backends", default="ucx")
    p.add_argument("--min_bytes", default="64K")
    p.add_argument("--max_bytes", default="16M")
    p.add_argument("--factor", type=int, default=4)
    p.add_argument("--timeout_s", type=int, default=600)
    p.add_argument("--md", default="")
    args = p.parse_args()

    samples = {}  # (which, system, op, ranks, bytes) -> [busbw per round]
    wrong = []
    with tempfile.TemporaryDirectory(prefix="ab_ranks.") as folder:
        for rnd in range(args.rounds):
            order = [("baseline", args.baseline), ("new", args.new)]
            if rnd % 2:
                order.reverse()
            for which, binary in order:
                for row in run_once(binary, args, folder, "%s-%d" % (which, rnd)):
                    key = (which, row["system"], row["op"], row["ranks"], row["bytes"])
                    samples.setdefault(key, []).append(row["busbw"])
                    if row["wrong"]:
                        wrong.append(key)
    lines = ["| op | ranks | size | baseline busbw (GB/s) | new busbw (GB/s) | new / baseline |",
             "|---|---|---|---|---|---|"]
    verdicts = {}
    for (which, system, op, ranks, nbytes) in sorted(k for k in samples if k[0] == "baseline"):
        new = samples.get(("new", system, op, ranks, nbytes))
        if not new:
            continue
        a = spread.summarize(samples[("baseline", system, op, ranks, nbytes)])
        b = spread.summarize(new)
        r = spread.ratio(b, a)
        verdict = spread.verdict(r)
        verdicts[verdict] = verdicts.get(verdict, 0) + 1
        cell = lambda s: "%.3g (%.3g-%.3g)" % (s["median"], s["min"], s["max"])  # noqa: E731
        lines.append("| %s | %d | %s | %s | %s | %.3g (%.3g-%.3g) %s |" % (
            op, ranks, human(nbytes), cell(a), cell(b), r["ratio"], r["low"], r["high"],
            verdict))
    text = "\n".join(
        ["%s, %s ranks, %d interleaved rounds (A B B A ...): busbw median (min-max); "
         "new / baseline with its interval (level: the interval holds 1)."
         % (args.backends, args.world_sizes, args.rounds), "", *lines, "",
         "Verdicts: " + ", ".join("%s %d" % kv for kv in sorted(verdicts.items())),
         "Correctness: " + ("every sample checked, 0 wrong elements" if not wrong
                            else "WRONG RESULTS at %s" % wrong)])
    print(text)
    if args.md:
        with open(args.md, "w") as f:
            f.write(text + "\n")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
