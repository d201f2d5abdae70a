#!/usr/bin/env python3
"""PyTorch's gloo process group on this machine: the reference a PyTorch
user would compare Syncline against.

Starts `--world_size` processes of this script (subprocess, i.e. fork+exec),
joined through a FileStore (`file://` init method) on 127.0.0.1 with
GLOO_SOCKET_IFNAME=lo, one intra-op thread each. For each op and size it
follows bench/common's rules: the sizes (64 MiB down by 4 to 8 B), about
16 MiB of traffic per repetition (3 to 100 iterations), warm-ups first
(the first one checked against the same input formula as the C++
benchmarks, then untimed ops until every rank has run them for
--warmup_ms, as bench/common's WarmFor), and the median over repetitions
of the slowest rank's mean time. busbw uses nccl-tests' factors.

  all_reduce  in place (torch has no out-of-place allreduce), sum
  all_gather  into a list of world_size tensors (gloo has no
              all_gather_into_tensor in torch 1.13): the chunks of one
              flat tensor, the output Syncline's C++ benchmark gathers
              into (--allgather_outputs separate: world_size tensors
              of their own, which a backend must copy into)
  broadcast   in place from rank 0

--backend syncline runs the same ops over the `syncline` process group
(syncline_torch on PYTHONPATH, SYNCLINE_BACKEND picks what is underneath):
the rows are then system "torch-syncline-<SYNCLINE_BACKEND>", PyTorch's
collectives over Syncline.

Usage: torch_gloo.py [--world_size 2] [--ops allreduce,allgather,broadcast]
           [--backend gloo|syncline] [--allgather_outputs chunks|separate]
           [--min_bytes 8] [--max_bytes 64M] [--factor 4] [--warmup 2]
           [--warmup_ms 20] [--repetitions 5] [--json FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def parse_bytes(text):
    units = {"K": 10, "M": 20, "G": 30}
    if text and text[-1] in units:
        return int(text[:-1]) << units[text[-1]]
    return int(text)


def sizes(lo, hi, factor):
    """bench/common's Sizes(): from hi down by factor, then lo; ascending."""
    out, b = [], max(hi, lo)
    while b > lo:
        out.append(b)
        b //= factor
    return sorted(out + [lo])


def iterations_for(nbytes):
    return int(min(100, max(3, 16.0 * (1 << 20) / max(nbytes, 1))))


def bus_factor(op, n):
    if op == "broadcast":
        return 1.0
    return (2.0 if op == "allreduce" else 1.0) * (n - 1) / n


def input_values(torch, rank, start, count):
    i = torch.arange(start, start + count, dtype=torch.int64)
    return ((i * 5 + rank * 3 + 1) % 8).to(torch.float32)


def system_name(backend):
    if backend == "syncline":
        return "torch-syncline-" + os.environ.get("SYNCLINE_BACKEND", "gloo")
    return "torch-" + backend


def run_rank(args):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    if args.backend == "syncline":
        import syncline_torch  # noqa: F401  (registers "syncline")
    dist.init_process_group(args.backend, init_method="file://" + args.store,
                           rank=args.rank, world_size=args.world_size)
    rank, n = args.rank, args.world_size
    rows = []
    for op in args.ops.split(","):
        for nominal in sizes(args.min_bytes, args.max_bytes, args.factor):
            count = max(nominal // 4, 1)
            if op == "allgather":
                count = max(count // n, 1) * n
            block = count // n if op == "allgather" else count
            send = input_values(torch, rank if op != "broadcast" else 0, 0, block)
            if op == "broadcast" and rank != 0:
                send = torch.full((block,), -1.0)
            if args.allgather_outputs == "chunks":
                outs = list(torch.empty(n * block).chunk(n))
            else:
                outs = [torch.empty(block) for _ in range(n)]
            work = torch.zeros(block)

            def once(buf):
                call_op(dist, op, buf, outs)

            wrong = 0
            reps = []
            for _ in range(args.repetitions):
                checked = send.clone()
                once(checked)
                if op == "allreduce":
                    want = sum(input_values(torch, r, 0, count) for r in range(n))
                    wrong += int((checked != want).sum())
                elif op == "allgather":
                    for r in range(n):
                        wrong += int((outs[r] != input_values(torch, r, 0, block)).sum())
                else:
                    wrong += int((checked != input_values(torch, 0, 0, count)).sum())
                # Timed ops run on zeros so in-place sums cannot grow.
                for _ in range(args.warmup - 1):
                    once(work)
                warm_for(args.warmup_ms, lambda: once(work), torch, dist)
                iters = iterations_for(count * 4)
                start = time.perf_counter()
                for _ in range(iters):
                    once(work)
                reps.append((time.perf_counter() - start) * 1e6 / iters)
            stats = torch.tensor(reps + [float(wrong)], dtype=torch.float64)
            wrong_all = torch.tensor([float(wrong)], dtype=torch.float64)
            dist.all_reduce(stats, op=dist.ReduceOp.MAX)
            dist.all_reduce(wrong_all)
            time_us = statistics.median(stats[:-1].tolist())
            algbw = count * 4 / time_us / 1e3
            row = {"system": system_name(args.backend), "op": op, "dtype": "f32",
                   "redop": "sum" if op == "allreduce" else "none", "ranks": n,
                   "bytes": count * 4, "count": count, "time_us": time_us,
                   "algbw": algbw, "busbw": algbw * bus_factor(op, n),
                   "wrong": int(wrong_all.item())}
            rows.append(row)
            if rank == 0:
                print("%15d %12d %6s %6s %10.2f %8.3f %8.3f %7d  %s" % (
                    row["bytes"], count, "f32", row["redop"], time_us, algbw,
                    row["busbw"], row["wrong"], op), flush=True)
    dist.destroy_process_group()
    if rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump({"program": "torch_gloo.py", "torch": torch.__version__,
                       "rows": rows}, f, indent=1)
    return 1 if any(r["wrong"] for r in rows) else 0


def call_op(dist, op, buf, outs):
    """One call as every script here times it: all_reduce of `buf` in
    place, all_gather of `buf` into the tensors `outs`, or broadcast of
    `buf` from rank 0."""
    if op == "allreduce":
        dist.all_reduce(buf)
    elif op == "allgather":
        dist.all_gather(outs, buf)
    else:
        dist.broadcast(buf, 0)


def warm_for(ms, run_op, torch, dist):
    """Untimed ops until every rank has run them for `ms` milliseconds, in
    chunks of 1, 2, 4, ... with an agreement (a MIN all_reduce) after each:
    bench/common's WarmFor."""
    if ms <= 0:
        return
    start = time.perf_counter()
    chunk = 1
    while True:
        for _ in range(chunk):
            run_op()
        done = torch.tensor([1 if (time.perf_counter() - start) * 1e3 >= ms else 0])
        dist.all_reduce(done, op=dist.ReduceOp.MIN)
        if int(done.item()) == 1:
            return
        chunk *= 2


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--world_size", type=int, default=2)
    p.add_argument("--ops", default="allreduce,allgather,broadcast")
    p.add_argument("--min_bytes", type=parse_bytes, default=8)
    p.add_argument("--max_bytes", type=parse_bytes, default=64 << 20)
    p.add_argument("--factor", type=int, default=4)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--warmup_ms", type=float, default=20)
    p.add_argument("--repetitions", type=int, default=5)
    p.add_argument("--json", default="")
    p.add_argument("--backend", choices=["gloo", "syncline"], default="gloo")
    p.add_argument("--allgather_outputs", choices=["chunks", "separate"], default="chunks")
    add_rank_arguments(p)
    args = p.parse_args()
    if args.rank >= 0:
        return run_rank(args)
    print("# %s, %d ranks, f32 (size B, count, type, redop, time us, "
          "algbw, busbw GB/s, #wrong, op)" % (system_name(args.backend), args.world_size),
          flush=True)
    return launch_ranks(os.path.abspath(__file__), sys.argv[1:], args.world_size)


def add_rank_arguments(parser):
    """The hidden --rank and --store that launch_ranks() gives each rank."""
    parser.add_argument("--rank", type=int, default=-1, help=argparse.SUPPRESS)
    parser.add_argument("--store", default="", help=argparse.SUPPRESS)


def launch_ranks(script, argv, world_size):
    """Runs `script` once per rank with `argv` + --rank R --store FILE (a
    fresh FileStore path), GLOO_SOCKET_IFNAME=lo and one OpenMP thread; only
    rank 0's stdout shows. Returns the worst exit code."""
    fd, store = tempfile.mkstemp(prefix="syncline-torch-ranks-")
    os.close(fd)
    os.unlink(store)  # the FileStore creates it
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1",
               MASTER_ADDR="127.0.0.1")
    procs = []
    for r in range(world_size):
        cmd = [sys.executable, script, "--rank", str(r), "--store", store] + argv
        procs.append(subprocess.Popen(
            cmd, env=env, stdout=None if r == 0 else subprocess.DEVNULL))
    codes = [proc.wait(timeout=900) for proc in procs]
    if os.path.exists(store):
        os.unlink(store)
    return max(codes)


if __name__ == "__main__":
    sys.exit(main())
