"""PyTorch's DistributedDataParallel over `syncline` matches it over `gloo`.

Run on N ranks by ranks.py (ctest: python.ddp.<backend>). Each rank trains
the same small network from the same seed on its shard of the digits data
(data/digits.csv.gz), three times: DDP over the syncline default group, DDP
over syncline with an explicit communication hook (allreduce_hook, which
chains on Work.get_future()), and DDP over a gloo group. Small buckets give
several allreduces per step. The final parameters must agree to 1e-6, while
training on the rank's shard alone (no DDP) must land measurably elsewhere.
"""
import gzip
import os
import sys
import warnings

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

from ranks import init

warnings.filterwarnings("ignore", message=".*(private function|will be deprecated).*")
STEPS, BATCH, TOLERANCE = 25, 16, 1e-6
rank, world = init()
gloo = dist.new_group(backend="gloo")

path = os.path.join(os.path.dirname(__file__), "..", "..", "data", "digits.csv.gz")
with gzip.open(path, "rt") as f:
    rows = torch.tensor([[int(v) for v in line.split(",")] for line in f])
x_all, y_all = rows[:, :64].float() / 16.0, rows[:, 64]
x, y = x_all[rank::world], y_all[rank::world]  # this rank's shard


def train(group, hook=None):
    torch.manual_seed(1234)
    model = torch.nn.Sequential(torch.nn.Linear(64, 48), torch.nn.ReLU(),
                                torch.nn.Linear(48, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 10))
    ddp = model if group == "local" else DDP(model, process_group=group, bucket_cap_mb=0.004)
    if hook is not None:
        ddp.register_comm_hook(group, hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.2, momentum=0.9)
    for step in range(STEPS):
        lo = (step * BATCH) % (len(x) - BATCH)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(ddp(x[lo:lo + BATCH]), y[lo:lo + BATCH])
        loss.backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()], loss.item()


over_gloo, loss_gloo = train(gloo)
over_syncline, loss_syncline = train(None)  # the default group: syncline
with_hook, _ = train(None, default_hooks.allreduce_hook)
# The comparison can fail: without averaging, each rank's shard leads elsewhere.
alone, _ = train("local")
apart = max((a - b).abs().max().item() for a, b in zip(alone, over_gloo))
assert apart > 1e-3, f"training on one shard alone lands within {apart:g} of DDP"
for name, params in (("syncline", over_syncline), ("syncline + allreduce_hook", with_hook)):
    worst = max((a - b).abs().max().item() for a, b in zip(params, over_gloo))
    if worst > TOLERANCE:
        sys.exit(f"rank {rank}: DDP over {name} differs from gloo by {worst:g} (> {TOLERANCE})")
    if rank == 0:
        print(f"DDP over {name} ({world} ranks, {STEPS} steps): largest difference from "
              f"gloo {worst:g}", flush=True)
if rank == 0:
    print(f"final loss: gloo {loss_gloo:.6f}, syncline {loss_syncline:.6f}", flush=True)
dist.destroy_process_group()
