#!/usr/bin/env python3
"""Issue 17's per-call gap, split: what torch's Python dispatch costs on its
own, and what the `syncline` process group's layer adds.

Two ranks (this script re-executed, a FileStore on 127.0.0.1, one intra-op
thread each) with the default group over `syncline` (SYNCLINE_BACKEND
underneath, e.g. ucx) and two more groups over the same ranks:
  mock     a Python ProcessGroup whose ops return one Work that has already
           completed (torch's _create_work_from_future): dist.all_reduce etc.
           over it cost torch's Python dispatch alone, with no communication
  gloo     torch's own gloo group: torch's per-call cost around a backend
For each op (allreduce in place, allgather into the chunks of one flat
tensor, broadcast from rank 0) and size, the time per call (us) of
  mock          dist.<op>(..., group=mock)
  gloo          dist.<op>(..., group=gloo)
  sl_dist       dist.<op>(...) over syncline
  sl_direct     pg.<op>([...], opts).wait() over syncline: the same ops
                without distributed_c10d.py's Python wrapper
The variants run interleaved (each block of `--iters` calls, then the next
variant), `--rounds` times; each figure is the median over rounds of the
slower rank's mean. sl_dist - sl_direct is torch's Python wrapper on our
group; sl_direct less the C++ benchmark's time (syncline-bench-collectives,
same sizes, run beside this) is pybind's call plus this module's layer.

Usage: python_split.py [--ops allreduce,allgather,broadcast]
           [--sizes 8,65536] [--iters 400] [--rounds 5] [--json FILE]
"""
import argparse
import json
import os
import statistics
import sys
import time

from torch_gloo import add_rank_arguments, launch_ranks

VARIANTS = ("mock", "gloo", "sl_dist", "sl_direct")


def run_rank(args):
    import torch
    import torch.distributed as dist
    from torch._C._distributed_c10d import _create_work_from_future
    import syncline_torch  # noqa: F401  (registers "syncline")

    torch.set_num_threads(1)
    done = torch.futures.Future()
    done.set_result([])
    finished = _create_work_from_future(done)

    class MockGroup(dist.ProcessGroup):
        """Every op completes at once: torch's dispatch with no backend."""

        def getBackendName(self):
            return "python-split-mock"

        def allreduce(self, tensors, opts=None):
            return finished

        def allgather(self, outputs, inputs, opts=None):
            return finished

        def broadcast(self, tensors, opts=None):
            return finished

    dist.Backend.register_backend(
        "splitmock", lambda store, rank, size, timeout: MockGroup(rank, size))
    dist.init_process_group("syncline", init_method="file://" + args.store,
                            rank=args.rank, world_size=2)
    groups = {"mock": dist.new_group(backend="splitmock"),
              "gloo": dist.new_group(backend="gloo")}
    pg = dist.distributed_c10d._get_default_group()
    n = 2
    results = {}
    for op in args.ops.split(","):
        for nbytes in [int(s) for s in args.sizes.split(",")]:
            count = max(nbytes // 4, n)
            block = count // n if op == "allgather" else count
            buf = torch.zeros(block)
            outs = list(torch.empty(n * block).chunk(n))

            ar_opts = dist.AllreduceOptions()
            bc_opts = dist.BroadcastOptions()
            bc_opts.rootRank = 0

            def call(variant):
                group = groups.get(variant)
                if variant == "sl_direct":
                    if op == "allreduce":
                        pg.allreduce([buf], ar_opts).wait()
                    elif op == "allgather":
                        pg.allgather([outs], [buf]).wait()
                    else:
                        pg.broadcast([buf], bc_opts).wait()
                elif op == "allreduce":
                    dist.all_reduce(buf, group=group)
                elif op == "allgather":
                    dist.all_gather(outs, buf, group=group)
                else:
                    dist.broadcast(buf, 0, group=group)

            per = {v: [] for v in VARIANTS}
            for _ in range(args.rounds):
                for variant in VARIANTS:
                    for _ in range(10):
                        call(variant)
                    dist.barrier()
                    start = time.perf_counter()
                    for _ in range(args.iters):
                        call(variant)
                    us = (time.perf_counter() - start) * 1e6 / args.iters
                    slow = torch.tensor([us], dtype=torch.float64)
                    dist.all_reduce(slow, op=dist.ReduceOp.MAX)
                    per[variant].append(slow.item())
            results["%s/%d" % (op, count * 4)] = per
            if args.rank == 0:
                print("%-10s %9d B  " % (op, count * 4) + "  ".join(
                    "%s %.2f (%.2f-%.2f)" % (v, statistics.median(per[v]), min(per[v]),
                                             max(per[v])) for v in VARIANTS), flush=True)
    dist.destroy_process_group()
    if args.rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump({"program": "python_split.py", "torch": torch.__version__,
                       "backend": os.environ.get("SYNCLINE_BACKEND", "gloo"),
                       "us_per_call": results}, f, indent=1)
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ops", default="allreduce,allgather,broadcast")
    p.add_argument("--sizes", default="8,65536")
    p.add_argument("--iters", type=int, default=400)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--json", default="")
    add_rank_arguments(p)
    args = p.parse_args()
    if args.rank >= 0:
        return run_rank(args)
    return launch_ranks(os.path.abspath(__file__), sys.argv[1:], 2)


if __name__ == "__main__":
    sys.exit(main())
