#!/usr/bin/env python3
"""Issue 17's Python-path gap by library: where rank 0's time goes, per
call, while PyTorch's collectives run back to back over `syncline`.

python_split.py times torch's dispatch over a process group that does
nothing (2-3.5 us a call), with warm caches. Beside a real op, the same
calls run among the op's data and system calls; this measures them there.
Two ranks (this script re-executed, a FileStore, one intra-op thread each)
run dist.<op> over the `syncline` group (SYNCLINE_BACKEND underneath) for
each op and size: a second of untimed calls (torch_gloo.py's warm_for),
then a timed block of about --seconds, whose call count rank 0 picks and
shares. `perf record` samples
rank 0 (cpu-clock, --freq Hz) over the timed block only: rank 0 waits for
perf to be attached before the barrier that starts it. A library's share of
the samples times the time per call (the slower rank's) is its time per
call. The libraries, grouped:
  torch+Python   the interpreter, libtorch*, libc10*, libgomp, numpy
  syncline_torch this project's module (_C*.so)
  core           libsyncline.so
  backend        libsyncline-backend-*.so (and interposer plugins)
  transport      UCX (libucp, libuct*, libucs, libucm) or Gloo
  kernel         the kernel (system calls: the transport's copies, yields)
  libc           libc, the vDSO (clock reads), libstdc++, the loader
  other          everything else
What torch+Python costs a call here, against what the gap to the C++
benchmark is, tells how much of the gap is torch's own per-call work.

Allreduce runs in place, allgather into the chunks of one flat tensor and
broadcast from rank 0, as in torch_gloo.py. Needs perf (Debian's
linux-perf) and perf_event_paranoid at most 1 (or root).

Usage: python_profile.py [--ops allreduce,allgather,broadcast]
           [--sizes 65536,262144,1048576] [--seconds 2] [--freq 1000]
           [--json FILE]
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from torch_gloo import add_rank_arguments, call_op, launch_ranks, warm_for

GROUPS = ("torch+Python", "syncline_torch", "core", "backend", "transport", "kernel",
          "libc", "other")


def group_of(dso):
    """The GROUPS entry of one perf DSO name (a file name or [kernel...])."""
    name = os.path.basename(dso.strip())
    if name.startswith("[kernel") or name.startswith("[guest"):
        return "kernel"
    if name.startswith("_C.") or name.startswith("_C-"):
        return "syncline_torch"
    if name.startswith("libsyncline-backend-") or name.startswith("libsyncline-plugin-"):
        return "backend"
    if name.startswith("libsyncline."):
        return "core"
    if re.match(r"(libuc[pstm]|libuct|libgloo)", name):
        return "transport"
    if re.match(r"(python3|libpython|libtorch|libc10|libgomp|_multiarray|libopenblas)", name):
        return "torch+Python"
    if name in ("[vdso]",) or re.match(r"(libc\.|libm\.|libstdc\+\+|ld-linux|libpthread)",
                                      name):
        return "libc"
    return "other"


def parse_dso_report(text):
    """{group: share of samples, 0..1} from `perf report --sort dso -n
    --stdio` output: rows "  12.34%  1234  libfoo.so"."""
    counts = {g: 0 for g in GROUPS}
    total = 0
    for line in text.splitlines():
        m = re.match(r"\s*[\d.]+%\s+(\d+)\s+(.+?)\s*$", line)
        if not m:
            continue
        n = int(m.group(1))
        counts[group_of(m.group(2))] += n
        total += n
    return {g: (counts[g] / total if total else 0.0) for g in GROUPS}, total


def write_file(path, text):
    """`text` into `path`, whole or not at all (a rename), for the parent
    that polls for it."""
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.rename(path + ".tmp", path)


def wait_for_file(path, ranks, what, seconds=600):
    """Returns `path`'s text once a rank has written it; exits with a message
    if the ranks end first or it takes longer than `seconds`."""
    deadline = time.monotonic() + seconds
    while not os.path.exists(path):
        if ranks.poll() is not None:
            sys.exit("python_profile: the ranks ended (exit %d) before %s" %
                     (ranks.returncode, what))
        if time.monotonic() > deadline:
            ranks.kill()
            sys.exit("python_profile: no %s after %d s; the ranks were stopped" %
                     (what, seconds))
        time.sleep(0.01)
    with open(path) as f:
        return f.read()


def run_rank(args):
    import torch
    import torch.distributed as dist
    import syncline_torch  # noqa: F401  (registers "syncline")

    torch.set_num_threads(1)
    dist.init_process_group("syncline", init_method="file://" + args.store,
                            rank=args.rank, world_size=2)
    n = 2
    for op in args.ops.split(","):
        for nbytes in [int(s) for s in args.sizes.split(",")]:
            count = max(nbytes // 4, n)
            block = count // n if op == "allgather" else count
            buf = torch.zeros(block)
            outs = list(torch.empty(n * block).chunk(n))

            def call():
                call_op(dist, op, buf, outs)

            # Both ranks must run the same calls: a warm-up agreed in chunks,
            # then 100 calls that rank 0 times to pick the timed count.
            warm_for(1000, call, torch, dist)
            start = time.perf_counter()
            for _ in range(100):
                call()
            per_call = (time.perf_counter() - start) / 100
            planned = torch.tensor([max(100, int(args.seconds / per_call))], dtype=torch.int64)
            dist.broadcast(planned, 0)
            tag = "%s.%d" % (op, count * 4)
            if args.rank == 0:
                write_file(os.path.join(args.dir, tag + ".ready"), str(os.getpid()))
                go = os.path.join(args.dir, tag + ".go")
                while not os.path.exists(go):
                    time.sleep(0.01)
            dist.barrier()
            start = time.perf_counter()
            for _ in range(int(planned.item())):
                call()
            us = torch.tensor([(time.perf_counter() - start) * 1e6 / planned.item()],
                              dtype=torch.float64)
            if args.rank == 0:  # perf stops here, before the result's exchange
                write_file(os.path.join(args.dir, tag + ".done"), "")
            dist.all_reduce(us, op=dist.ReduceOp.MAX)
            if args.rank == 0:
                write_file(os.path.join(args.dir, tag + ".us"),
                           "%.4f %d" % (us.item(), planned.item()))
    dist.destroy_process_group()
    return 0


def profile(args, folder):
    """Launches the ranks and runs perf on rank 0 for each (op, size)."""
    env_args = ["--ops", args.ops, "--sizes", args.sizes, "--seconds", str(args.seconds),
                "--dir", folder]
    ranks = subprocess.Popen([sys.executable, os.path.abspath(__file__)] + env_args +
                             ["--launch"])
    results = {}
    for op in args.ops.split(","):
        for nbytes in [int(s) for s in args.sizes.split(",")]:
            count = max(nbytes // 4, 2)
            tag = "%s.%d" % (op, count * 4)
            pid = wait_for_file(os.path.join(folder, tag + ".ready"), ranks,
                                "start of " + tag).strip()
            data = os.path.join(folder, tag + ".perf")
            perf = subprocess.Popen(["perf", "record", "-q", "-F", str(args.freq), "-p", pid,
                                     "-o", data], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE)
            time.sleep(0.5)  # attached
            if perf.poll() is not None:
                ranks.kill()
                sys.exit("python_profile: perf record failed: %s (perf_event_paranoid "
                         "at most 1, or root, is needed)" % perf.stderr.read().decode())
            open(os.path.join(folder, tag + ".go"), "w").close()
            try:
                wait_for_file(os.path.join(folder, tag + ".done"), ranks, "end of " + tag)
            finally:
                perf.send_signal(signal.SIGINT)
                perf.wait(timeout=60)
            us, calls = wait_for_file(os.path.join(folder, tag + ".us"), ranks,
                                      "time of " + tag).split()
            report = subprocess.run(["perf", "report", "-i", data, "--sort", "dso", "-n",
                                     "--stdio"], stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, universal_newlines=True).stdout
            shares, samples = parse_dso_report(report)
            results[tag] = {"op": op, "bytes": count * 4, "us_per_call": float(us),
                            "calls": int(calls), "samples": samples,
                            "us_by_group": {g: shares[g] * float(us) for g in GROUPS}}
            row = results[tag]
            print("%-10s %9d B  %8.2f us a call (%d calls, %d samples): " %
                  (op, count * 4, row["us_per_call"], row["calls"], samples) +
                  ", ".join("%s %.2f" % (g, row["us_by_group"][g]) for g in GROUPS),
                  flush=True)
    if ranks.wait(timeout=120) != 0:
        sys.exit("python_profile: the ranks failed (%d)" % ranks.returncode)
    return results


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ops", default="allreduce,allgather,broadcast")
    p.add_argument("--sizes", default="65536,262144,1048576")
    p.add_argument("--seconds", type=float, default=2)
    p.add_argument("--freq", type=int, default=1000)
    p.add_argument("--json", default="")
    p.add_argument("--dir", default="", help=argparse.SUPPRESS)
    p.add_argument("--launch", action="store_true", help=argparse.SUPPRESS)
    add_rank_arguments(p)
    args = p.parse_args()
    if args.rank >= 0:
        return run_rank(args)
    if args.launch:
        argv = [a for a in sys.argv[1:] if a != "--launch"]
        return launch_ranks(os.path.abspath(__file__), argv, 2)
    if shutil.which("perf") is None:
        sys.exit("python_profile: needs perf (apt-get install linux-perf)")
    folder = tempfile.mkdtemp(prefix="python_profile.")
    try:
        print("# python_profile.py over syncline/%s, load %s" %
              (os.environ.get("SYNCLINE_BACKEND", "gloo"),
               open("/proc/loadavg").read().split()[0]), flush=True)
        results = profile(args, folder)
        print("# end, load %s" % open("/proc/loadavg").read().split()[0])
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"program": "python_profile.py",
                       "backend": os.environ.get("SYNCLINE_BACKEND", "gloo"),
                       "calls": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
