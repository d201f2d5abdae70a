#!/usr/bin/env python3
"""How busy the machine was around a comparison run, and whether it was quiet.

run.sh calls `machine_load.py probe LABEL --csv FILE` before the first round,
after every round and at the end, while none of its own programs runs. Each
probe appends one line to FILE:

  label,epoch_s,cpus,load1,load5,load15,busy

load1/5/15 are /proc/loadavg's; busy is the share of all CPUs that were busy
(user, nice, system, irq, softirq, steal) during one second of /proc/stat
while the probe itself slept: work that is not the benchmark's.

report.py reads the file back (`read_probes`) and asks `assess` whether the
run was quiet. The machine was NOT quiet when any of these holds:
  - the 1-minute load average at the first probe is above LOAD_PER_CPU (0.5)
    times the CPU count: something ran in the minute before the run;
  - the 1-minute load average at the last probe exceeds the first by more
    than the benchmark's own ranks (2 processes that may spin) plus
    LOAD_PER_CPU times the CPU count: the load rose during the run beyond
    what the run itself explains;
  - any probe found more than BUSY_SHARE (25 %) of the CPUs busy while the
    benchmark was idle.

Usage: machine_load.py probe LABEL --csv FILE [--seconds 1]
"""
import argparse
import csv
import os
import sys
import time

LOAD_PER_CPU = 0.5
BUSY_SHARE = 0.25
FIELDS = ["label", "epoch_s", "cpus", "load1", "load5", "load15", "busy"]


def _cpu_times():
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal (guest is inside user)
    idle = values[3] + values[4]
    return sum(values[:8]), idle


def probe(label, seconds=1.0):
    """One probe: the load averages now and the busy share over `seconds`."""
    total0, idle0 = _cpu_times()
    time.sleep(seconds)
    total1, idle1 = _cpu_times()
    with open("/proc/loadavg") as f:
        load1, load5, load15 = (float(v) for v in f.read().split()[:3])
    total = total1 - total0
    busy = (total - (idle1 - idle0)) / total if total > 0 else 0.0
    return {"label": label, "epoch_s": int(time.time()), "cpus": os.cpu_count() or 1,
            "load1": load1, "load5": load5, "load15": load15, "busy": round(busy, 3)}


def read_probes(path):
    """The probes in `path`, in order; [] when it does not exist."""
    if not path or not os.path.exists(path):
        return []
    with open(path) as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        r["cpus"] = int(r["cpus"])
        for key in ("epoch_s", "load1", "load5", "load15", "busy"):
            r[key] = float(r[key])
    return rows


def assess(probes, ranks=2):
    """The reasons the machine was not quiet (empty: it was quiet, as far as
    the probes can tell). None when there are no probes."""
    if not probes:
        return None
    first, last = probes[0], probes[-1]
    cpus = first["cpus"]
    reasons = []
    start_limit = LOAD_PER_CPU * cpus
    if first["load1"] > start_limit:
        reasons.append("1-minute load average %.2f at the start, above %.2f (%.1f per CPU, "
                       "%d CPUs)" % (first["load1"], start_limit, LOAD_PER_CPU, cpus))
    rise_limit = first["load1"] + ranks + LOAD_PER_CPU * cpus
    if len(probes) > 1 and last["load1"] > rise_limit:
        reasons.append("1-minute load average rose from %.2f to %.2f during the run, above "
                       "%.2f (the start + %d benchmark ranks + %.1f per CPU)"
                       % (first["load1"], last["load1"], rise_limit, ranks, LOAD_PER_CPU))
    busy = [p for p in probes if p["busy"] > BUSY_SHARE]
    if busy:
        reasons.append("other work kept the CPUs busy while the benchmark was idle: %s "
                       "(above %d %%)" % (", ".join("%s %d %%" % (p["label"], round(p["busy"] * 100))
                                                    for p in busy), round(BUSY_SHARE * 100)))
    return reasons


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    pr = sub.add_parser("probe", help="append one probe to a CSV file")
    pr.add_argument("label")
    pr.add_argument("--csv", required=True)
    pr.add_argument("--seconds", type=float, default=1.0)
    args = p.parse_args()
    row = probe(args.label, args.seconds)
    new = not os.path.exists(args.csv)
    with open(args.csv, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        if new:
            w.writeheader()
        w.writerow(row)
    print("load %s: load average %.2f %.2f %.2f, %d %% of %d CPUs busy with other work"
          % (args.label, row["load1"], row["load5"], row["load15"], round(row["busy"] * 100),
             row["cpus"]), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
