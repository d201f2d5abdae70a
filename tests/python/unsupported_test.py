"""What the syncline backend does not support raises an error naming it.

Run on 2 ranks by ranks.py (ctest: python.unsupported.<backend>). Each case
must raise RuntimeError whose message names the feature, before anything is
posted, so that the ranks stay in step: an allreduce afterwards still gives
the right answer.
"""
import sys
import warnings

import torch
import torch.distributed as dist

from ranks import init

warnings.filterwarnings("ignore")
rank, world = init()
t = torch.ones(4)
cases = {
    "BAND": lambda: dist.all_reduce(torch.ones(4, dtype=torch.int32), op=dist.ReduceOp.BAND),
    "BXOR": lambda: dist.reduce(torch.ones(4, dtype=torch.int64), 0, op=dist.ReduceOp.BXOR),
    "PREMUL_SUM": lambda: dist.all_reduce(t, op=dist._make_nccl_premul_sum(2.0)),
    "AVG on bool": lambda: dist.all_reduce(torch.ones(4, dtype=torch.bool), op=dist.ReduceOp.AVG),
    "Short": lambda: dist.all_reduce(torch.ones(4, dtype=torch.int16)),
    "ComplexFloat": lambda: dist.broadcast(torch.ones(4, dtype=torch.complex64), 0),
    "sparse": lambda: dist.all_reduce(torch.ones(4).to_sparse()),
    "recvAnysource": lambda: dist.recv(torch.ones(4)),
    "tags must be non-negative": lambda: dist.send(t, (rank + 1) % world, tag=-1),
}
# The benchmarks' C++ loop (ProcessGroupSyncline._time_ops) names bad input too.
pg = dist.distributed_c10d._get_default_group()
cases.update({
    "op must be allreduce, allgather or broadcast": lambda: pg._time_ops("reduce", t, t, 1),
    "output must hold": lambda: pg._time_ops("allgather", t, t, 1),
    "contiguous float32": lambda: pg._time_ops("broadcast", torch.ones(4, dtype=torch.int32),
                                               t, 1),
    "at least 1 op": lambda: pg._time_ops("broadcast", t, t, 0),
})
for name, call in cases.items():
    try:
        call()
    except RuntimeError as e:
        if name not in str(e):
            sys.exit(f"rank {rank}: the error for {name} does not name it: {e}")
        if rank == 0:
            print(f"{name}: {str(e).splitlines()[0]}", flush=True)
    else:
        sys.exit(f"rank {rank}: {name} did not raise")
x = torch.full((4,), float(rank + 1))
dist.all_reduce(x)
assert torch.equal(x, torch.full((4,), world * (world + 1) / 2)), x
if rank == 0:
    print(f"{len(cases)} unsupported cases named; the group still reduces right", flush=True)
dist.destroy_process_group()
