"""SYNCLINE_PLUGINS works from Python: the trace and check interposers.

Run on 2 ranks by ranks.py (ctest: python.plugins.<mode>.<backend>), with
SYNCLINE_PLUGINS set by ctest to the mode:
  trace  each rank runs a known list of ops, destroys the group and reads
         its trace-rank<r>.json (SYNCLINE_TRACE_DIR): every op it ran is
         there, in order, with the kind, dtype and count it was called with.
  check  the ranks first agree (an allreduce that must sum right), then call
         all_reduce with different counts (8 on rank 0, 16 on rank 1). The
         check interposer's desync error must reach Python as a RuntimeError
         on both ranks, naming both calls; the group then stays failed, and
         says why.
"""
import json
import os
import re
import sys
import warnings

import torch
import torch.distributed as dist

from ranks import init

warnings.filterwarnings("ignore")
mode = sys.argv[1]
plugins = os.environ.get("SYNCLINE_PLUGINS", "")
if mode not in plugins.split(","):
    sys.exit(f"plugins_test.py {mode} needs SYNCLINE_PLUGINS={mode}, not '{plugins}'")
trace_file = os.path.join(os.environ.get("SYNCLINE_TRACE_DIR", "."),
                          f"trace-rank{os.environ['RANK']}.json")
if mode == "trace" and os.path.exists(trace_file):
    os.remove(trace_file)  # from an earlier run
rank, world = init()


def trace():
    x = torch.full((1000,), float(rank + 1))
    dist.all_reduce(x)
    assert torch.equal(x, torch.full((1000,), 3.0)), x
    y = torch.arange(7, dtype=torch.int64) * (rank + 1)
    dist.broadcast(y, src=1)
    assert torch.equal(y, torch.arange(7) * 2), y
    z = [torch.empty(5, dtype=torch.float64) for _ in range(world)]
    dist.all_gather(z, torch.full((5,), float(rank), dtype=torch.float64))
    assert all(torch.equal(t, torch.full((5,), float(r), dtype=torch.float64))
               for r, t in enumerate(z)), z
    p = torch.full((3,), 9, dtype=torch.int32)
    if rank == 0:
        dist.send(p, dst=1)
    else:
        dist.recv(p, src=0)
    dist.destroy_process_group()  # writes the trace
    with open(trace_file) as f:
        events = json.load(f)["traceEvents"]
    # Op descriptions as every interposer writes them ("allreduce #1 (f32 x
    # 1000, sum)", "send p2p#1 (...)"), less the sequence numbers, which count
    # the group's own ops too.
    ops = [re.sub(r" (p2p)?#\d+", "", e["args"]["op"]) for e in events
           if e.get("cat") in ("collective", "p2p") and e.get("ph") in ("X", "b")]
    p2p = ("send (i32 x 3, to rank 1, tag 0)" if rank == 0
           else "recv (i32 x 3, from rank 0, tag 0)")
    expected = ["allreduce (f32 x 1000, sum)", "broadcast (i64 x 7, root 1)",
                "allgather (f64 x 5)", p2p]
    # The group's creation may add its own ops (e.g. a barrier); the user's
    # ops must all be there, in the order they were called.
    found = [op for op in ops if op in expected]
    assert found == expected, f"rank {rank}: trace has {ops}, expected {expected} in order"
    print(f"rank {rank}: {trace_file} has {found}", flush=True)


def check():
    x = torch.ones(4)
    dist.all_reduce(x)
    assert torch.equal(x, torch.full((4,), float(world))), x
    try:
        dist.all_reduce(torch.ones(8 if rank == 0 else 16))
    except RuntimeError as e:
        message = str(e)
    else:
        sys.exit(f"rank {rank}: all_reduce with different counts did not raise")
    for part in ("allreduce (f32 x 8, sum)", "allreduce (f32 x 16, sum)", "rank 0", "rank 1"):
        assert part in message, f"rank {rank}: the desync error does not name {part!r}: {message}"
    print(f"rank {rank}: {message.splitlines()[0]}", flush=True)
    try:
        dist.all_reduce(torch.ones(4))
    except RuntimeError as e:
        assert "desync" in str(e), f"rank {rank}: after the desync: {e}"
    else:
        sys.exit(f"rank {rank}: the group still reduced after a desync")


{"trace": trace, "check": check}[mode]()
