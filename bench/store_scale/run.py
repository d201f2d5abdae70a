#!/usr/bin/env python3
"""Startup at scale: Syncline's rendezvous against PyTorch's TCPStore barrier.

For each world size N, simulated ranks (threads, spread over a few worker
processes) all start at once against one store on 127.0.0.1 and do:

  syncline     ConnectTcpStore + RendezvousCheckIn: Syncline's real check-in
               (rank 0's record, claim a rank key, one Add, one blocking Get
               of the verdict the last arrival publishes), one thread a rank;
  syncline-nodes (--per-check-in K) as under syncline-run: one node leader
               per K ranks connects and checks in for all K
               (RendezvousInfo::check_in_ranks), then its K ranks connect
               (workers told SYNCLINE_NODE_CHECKED_IN=1 only connect): the
               store sees N/K check-ins and N + N/K connections;
  torch        torch.distributed.TCPStore client, then the equivalent
               barrier: set(rank key), add(counter), the last arrival sets
               "done", wait(["done"]).

The store server runs in a process of its own. Times are CLOCK_MONOTONIC,
from the moment every worker is released to the latest rank to finish a
phase: "connect" (client connected) and "total" (every rank holds a store
of a job that has met: checked in, or connected after its node did), and the CPU
time the store server spent meanwhile (/proc/<pid>/stat). Output: a CSV
row per run and, with --png, a plot (log-log).

Usage: run.py --sizes 256,512,1024,2048,4096 --processes 4 --repeats 3 \
              --csv bench/results/store_scale.csv --png bench/results/store_scale.png
Raises the open-file limit to the hard limit (each rank holds a socket on
both sides). Needs python3-torch (Debian) for the torch rows (--no-torch
skips them) and python3-matplotlib for the plot.
"""
import argparse
import csv
import datetime
import os
import resource
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def torch_serve():
    from torch.distributed import TCPStore
    store = TCPStore("127.0.0.1", 0, 1, True, datetime.timedelta(seconds=600),
                     wait_for_workers=False)
    print("port", store.port, flush=True)
    sys.stdin.read()


def torch_worker(port, world, first, count):
    from torch.distributed import TCPStore
    threading.stack_size(256 * 1024)
    go = threading.Event()
    lock = threading.Lock()
    state = {"connected": 0, "done": 0, "errors": 0, "first_error": ""}
    clients = [None] * count

    def rank(i):
        r = first + i
        go.wait()
        try:
            c = TCPStore("127.0.0.1", port, world, False, datetime.timedelta(seconds=600))
            clients[i] = c
            t = time.monotonic_ns()
            with lock:
                state["connected"] = max(state["connected"], t)
            c.set("rank/%d" % r, "x")
            if c.add("arrived", 1) == world:
                c.set("done", "1")
            c.wait(["done"])
        except Exception as e:  # noqa: BLE001 -- reported, counted
            with lock:
                state["errors"] += 1
                state["first_error"] = state["first_error"] or str(e)[:300]
        t = time.monotonic_ns()
        with lock:
            state["done"] = max(state["done"], t)

    threads = [threading.Thread(target=rank, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    print("ready", flush=True)
    sys.stdin.readline()
    go.set()
    for t in threads:
        t.join()
    print("done %d %d %d %s" % (state["connected"], state["done"], state["errors"],
                                state["first_error"].replace("\n", " ")), flush=True)


def cpu_seconds(pid):
    """User + system CPU time of a process so far (its threads included)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start(cmd):
    return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, bufsize=1)


def run_case(impl, binary, world, processes, per_check_in):
    me = [sys.executable, os.path.abspath(__file__)]
    server = start(me + ["--torch-serve"] if impl == "torch" else [binary, "--serve", "--world", str(world)])
    port = int(server.stdout.readline().split()[1])
    cpu_before = cpu_seconds(server.pid)
    # Split the ranks into `processes` shares, whole nodes each.
    nodes = world // per_check_in
    workers, first = [], 0
    for p in range(processes):
        share = (nodes // processes + (1 if p < nodes % processes else 0)) * per_check_in
        if share == 0:
            continue
        args = ["--port", str(port), "--world", str(world), "--first", str(first),
                "--count", str(share)]
        if impl == "torch":
            workers.append(start(me + ["--torch-worker"] + args))
        else:
            workers.append(start([binary] + args + ["--per-check-in", str(per_check_in)]))
        first += share
    for w in workers:
        line = w.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError("%s worker did not start: %r" % (impl, line))
    t0 = time.monotonic_ns()
    for w in workers:
        w.stdin.write("go\n")
        w.stdin.flush()
    connected, done, errors, first_error = 0, 0, 0, ""
    for w in workers:
        fields = w.stdout.readline().split(" ", 4)
        connected = max(connected, int(fields[1]))
        done = max(done, int(fields[2]))
        errors += int(fields[3])
        first_error = first_error or (fields[4].strip() if len(fields) > 4 else "")
    server_cpu = cpu_seconds(server.pid) - cpu_before
    for w in workers:
        w.stdin.close()
        w.wait()
    server.stdin.close()
    server.wait()
    return (connected - t0) / 1e9, (done - t0) / 1e9, server_cpu, errors, first_error


def plot(rows, png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    series = {}
    for r in rows:
        key = r["impl"] + ("" if int(r["per_check_in"]) == 1 else " (%s ranks/node)" % r["per_check_in"])
        series.setdefault(key, {}).setdefault(int(r["ranks"]), []).append(float(r["total_s"]))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, points in sorted(series.items()):
        ns = sorted(points)
        med = [sorted(points[n])[len(points[n]) // 2] for n in ns]
        ax.plot(ns, med, marker="o", label=key)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("ranks (threads on one machine)")
    ax.set_ylabel("time until every rank checked in (s, median)")
    ax.set_title("Rendezvous at scale: Syncline vs PyTorch TCPStore barrier")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--torch-serve", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int)
    ap.add_argument("--world", type=int)
    ap.add_argument("--first", type=int)
    ap.add_argument("--count", type=int)
    ap.add_argument("--sizes", default="256,512,1024,2048,4096")
    ap.add_argument("--processes", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--per-check-in", type=int, default=8,
                    help="also run Syncline with one node leader per K ranks (0: skip)")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--binary", default=os.environ.get("STORE_SCALE_BIN", "build/bin/syncline-bench-store-scale"))
    ap.add_argument("--csv", default="store_scale.csv")
    ap.add_argument("--png")
    a = ap.parse_args()
    if a.torch_serve:
        return torch_serve()
    if a.torch_worker:
        return torch_worker(a.port, a.world, a.first, a.count)

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    sizes = [int(s) for s in a.sizes.split(",")]
    if 2 * max(sizes) + 256 > hard:
        sys.exit("the open-file hard limit (%d) is too low for %d ranks: raise it "
                 "(ulimit -Hn, /etc/security/limits.conf)" % (hard, max(sizes)))
    cases = [("syncline", 1)]
    if a.per_check_in > 1:
        cases.append(("syncline", a.per_check_in))
    if not a.no_torch:
        cases.append(("torch", 1))
    rows = []
    fields = ["impl", "ranks", "processes", "per_check_in", "repeat", "connect_s",
              "total_s", "server_cpu_s", "errors", "load1", "first_error"]
    with open(a.csv, "w", newline="") as f:
        out = csv.DictWriter(f, fieldnames=fields)
        out.writeheader()
        for n in sizes:
            for rep in range(a.repeats):
                for impl, k in cases:
                    if n % k:
                        continue
                    load1 = os.getloadavg()[0]
                    conn, total, cpu, errors, err = run_case(impl, a.binary, n, a.processes, k)
                    row = dict(impl=impl, ranks=n, processes=a.processes, per_check_in=k,
                               repeat=rep, connect_s="%.4f" % conn, total_s="%.4f" % total,
                               server_cpu_s="%.3f" % cpu, errors=errors,
                               load1="%.2f" % load1, first_error=err)
                    rows.append(row)
                    out.writerow(row)
                    f.flush()
                    print("%-8s N=%-5d k=%-2d connect %.3f s total %.3f s server cpu %.3f s "
                          "errors %d load %.2f %s"
                          % (impl, n, k, conn, total, cpu, errors, load1, err), flush=True)
    if a.png:
        plot(rows, a.png)


if __name__ == "__main__":
    sys.exit(main())
