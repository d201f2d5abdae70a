#!/usr/bin/env python3
"""PyTorch's own DDP on the DDP step benchmark's model: the reference for
bench/ddp_step (syncline-bench-ddp-step).

Model: an MLP of three 2048x2048 linear layers with ReLU between them (four
layers of width 2048 counting the input; 12.6M parameters, 48 MiB of f32
gradients), per-rank batch 32, MSE loss, SGD (lr 0.01), one intra-op thread
per rank, the BLAS that torch links (OpenBLAS after scripts/setup.sh).
Three measurements, each the median step time (for 2 processes, the slower
rank's median):
  single  one process, no DDP
  nocomm  2 processes training at once without communication (the cost of
          sharing the cores)
  ddp     2 processes with torch.nn.parallel.DistributedDataParallel over the
          gloo backend (default buckets, 25 MiB), on 127.0.0.1
It prints them and the ratios ddp/single (the figure of merit), nocomm/single
and ddp/nocomm. Ranks are this script re-executed (subprocess: fork+exec).
--syncline adds, in the same run, the DDP step over the `syncline` process
group (syncline_torch on PYTHONPATH; SYNCLINE_BACKEND, e.g. ucx, underneath).
--floor adds PyTorch's DDP step with the communication taken out: DDP over
the `syncline` group with a comm hook that returns an already-completed
Future of the bucket unchanged (the reducer's own cost: bucket copies,
hooks, autograd bookkeeping; the floor no backend can go below).
--bucket-view adds, for --syncline and --floor, the same steps with
gradient_as_bucket_view=True, the layout Syncline's C++ DDP uses by default
(bench/ddp_step): each .grad is a view into its bucket, so the reducer makes
no copy into the bucket before the allreduce and none back after it (2 x 48
MiB per step with PyTorch's default, False). Those are the like-for-like
figures against ddp_step's default.

Usage: ddp_pytorch.py [--steps 20] [--warmup 3] [--syncline] [--floor]
           [--bucket-view] [--json FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

WIDTH = 2048
BATCH = 32


def step_times(role, rank, world, store, steps, warmup, bucket_view=False):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU(),
        torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU(),
        torch.nn.Linear(WIDTH, WIDTH))
    ddp_roles = ("ddp", "ddp_syncline", "ddp_floor")
    if role in ddp_roles:
        backend = "gloo" if role == "ddp" else "syncline"
        if backend == "syncline":
            import syncline_torch  # noqa: F401  (registers "syncline")
        dist.init_process_group(backend, init_method="file://" + store,
                                rank=rank, world_size=world)
        model = torch.nn.parallel.DistributedDataParallel(
            model, gradient_as_bucket_view=bucket_view)
        if role == "ddp_floor":
            def no_communication(state, bucket):
                done = torch.futures.Future()
                done.set_result(bucket.buffer())
                return done
            model.register_comm_hook(None, no_communication)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(1 + rank)
    x = torch.randn(BATCH, WIDTH, generator=gen)
    y = torch.randn(BATCH, WIDTH, generator=gen)
    times = []
    for i in range(warmup + steps):
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        elapsed = time.perf_counter() - start
        if i >= warmup:
            times.append(elapsed)
    if role in ddp_roles:
        dist.destroy_process_group()
    return statistics.median(times) * 1e3


def run_pair(role, args, bucket_view=False):
    """Runs 2 ranks of `role` (DDP with gradient_as_bucket_view=`bucket_view`);
    returns the slower rank's median step (ms)."""
    fd, store = tempfile.mkstemp(prefix="syncline-ddp-pytorch-")
    os.close(fd)
    os.unlink(store)
    outs, procs = [], []
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    for r in range(2):
        out = store + ".rank%d" % r
        outs.append(out)
        procs.append(subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--role", role,
             "--rank", str(r), "--store", store, "--out", out,
             "--steps", str(args.steps), "--warmup", str(args.warmup)]
            + (["--bucket-view"] if bucket_view else []), env=env))
    codes = [p.wait(timeout=600) for p in procs]
    if any(codes):
        raise SystemExit("ddp_pytorch: a %s rank failed (%s)" % (role, codes))
    values = []
    for out in outs:
        with open(out) as f:
            values.append(float(f.read()))
        os.unlink(out)
    if os.path.exists(store):
        os.unlink(store)
    return max(values)


def pin_blas_threads():
    """One BLAS thread per process, as ddp_step pins it: OpenBLAS sizes its
    pool when it loads, from the environment, and torch.set_num_threads(1)
    does not shrink it, so the single-process step ran on both cores
    (28-42 ms, against 61-62 ms on one) before this pin."""
    if os.environ.get("OPENBLAS_NUM_THREADS") != "1" or os.environ.get("OMP_NUM_THREADS") != "1":
        os.environ["OPENBLAS_NUM_THREADS"] = "1"
        os.environ["OMP_NUM_THREADS"] = "1"
        os.execv(sys.executable, [sys.executable] + sys.argv)


def main():
    pin_blas_threads()
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--json", default="")
    p.add_argument("--syncline", action="store_true")
    p.add_argument("--floor", action="store_true")
    # At the top: also time --syncline and --floor with gradient_as_bucket_view;
    # for a rank (--role): use it.
    p.add_argument("--bucket-view", action="store_true")
    p.add_argument("--role", default="", help=argparse.SUPPRESS)
    p.add_argument("--rank", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--store", default="", help=argparse.SUPPRESS)
    p.add_argument("--out", default="", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.role:
        ms = step_times(args.role, args.rank, 2, args.store, args.steps, args.warmup,
                        args.bucket_view)
        with open(args.out, "w") as f:
            f.write("%.6f" % ms)
        return 0

    import torch
    single = step_times("single", 0, 1, "", args.steps, args.warmup)
    single_threads = len(os.listdir("/proc/self/task"))  # the BLAS pool's included
    nocomm = run_pair("nocomm", args)
    ddp = run_pair("ddp", args)
    over = None
    if args.syncline:
        ms = run_pair("ddp_syncline", args)
        over = {"backend": os.environ.get("SYNCLINE_BACKEND", "gloo"), "ddp_ms": ms,
                "ratio": ms / single}
    floor = run_pair("ddp_floor", args) if args.floor else None
    over_view = floor_view = None
    if args.bucket_view and args.syncline:
        ms = run_pair("ddp_syncline", args, bucket_view=True)
        over_view = {"backend": over["backend"], "ddp_ms": ms, "ratio": ms / single}
    if args.bucket_view and args.floor:
        floor_view = run_pair("ddp_floor", args, bucket_view=True)
    print("ddp_pytorch: MLP 3x%dx%d (12.6M params), batch %d/rank, SGD, "
          "1 thread/rank, torch %s, gloo, 2 ranks" % (WIDTH, WIDTH, BATCH, torch.__version__))
    print("%-38s %10.2f ms (%d OS threads)" % ("single process, no DDP", single,
                                                single_threads))
    print("%-38s %10.2f ms" % ("2 processes, no communication", nocomm))
    print("%-38s %10.2f ms" % ("2 processes, DDP", ddp))
    print("%-38s %10.3f" % ("ratio DDP / single", ddp / single))
    print("%-38s %10.3f" % ("ratio no-comm / single (shared cores)", nocomm / single))
    print("%-38s %10.3f" % ("ratio DDP / no-comm (communication)", ddp / nocomm))
    if over:
        name = "syncline/" + over["backend"]
        print("%-38s %10.2f ms" % ("2 processes, DDP over " + name, over["ddp_ms"]))
        print("%-38s %10.3f" % ("ratio DDP over %s / single" % name, over["ratio"]))
        print("%-38s %10.3f" % ("ratio DDP over %s / over gloo" % name, over["ddp_ms"] / ddp))
    if floor is not None:
        print("%-38s %10.2f ms" % ("2 processes, DDP, no communication", floor))
        print("%-38s %10.3f" % ("ratio DDP floor / no-comm (reducer)", floor / nocomm))
    if over_view:
        name = "syncline/" + over_view["backend"]
        print("%-38s %10.2f ms" % ("DDP over %s, bucket views" % name, over_view["ddp_ms"]))
        print("%-38s %10.3f" % ("ratio DDP over %s, views / single" % name, over_view["ratio"]))
    if floor_view is not None:
        print("%-38s %10.2f ms" % ("DDP, no communication, bucket views", floor_view))
    if args.json:
        doc = {"system": "pytorch-ddp", "torch": torch.__version__,
               "single_ms": single, "single_os_threads": single_threads,
               "nocomm_ms": nocomm, "ddp_ms": ddp,
               "ratio": ddp / single, "syncline": over}
        if floor is not None:
            doc["floor_ms"] = floor
        if over_view:
            doc["syncline_view"] = over_view
        if floor_view is not None:
            doc["floor_view_ms"] = floor_view
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
