"""Dropping the last reference to a process group from a Future callback.

Run on 2 ranks by ranks.py (ctest: python.teardown_from_callback.<backend>).
Rank 0 starts an allreduce on a subgroup that rank 1 joins 1 s later, and
chains a callback on its Future that destroys the subgroup and drops the
last reference to it. The callback runs on Syncline's completion thread, so
the group's destructor runs there too, and stopping that thread from itself
(a join of the calling thread) ended the process (std::terminate: "Resource
deadlock avoided"). The group must go, the allreduce's data must land, and
the default group must still work afterwards.
"""
import faulthandler
import sys
import time

import torch
import torch.distributed as dist

from ranks import init

faulthandler.dump_traceback_later(60, exit=True)
rank, world = init()
group = dist.new_group(list(range(world)))
t = torch.full((1024,), float(rank + 1))
if rank == 0:
    work = dist.all_reduce(t, group=group, async_op=True)
    holder = [group]
    del group
    seen = []

    def destroy_from_the_callback(fut):
        dist.destroy_process_group(holder.pop())  # the group's last reference
        seen.append(fut.value()[0][:2].tolist())
        return None

    done = work.get_future().then(destroy_from_the_callback)
    del work
    done.wait()
    want = float(sum(range(1, world + 1)))
    if seen != [[want, want]] or not torch.equal(t, torch.full((1024,), want)):
        sys.exit(f"rank 0: the allreduce gave {t[:2].tolist()}, its callback saw {seen}")
    print("rank 0: the subgroup was destroyed from its Future's callback; the data landed",
          flush=True)
else:
    time.sleep(1)  # rank 0's Future is taken while the op is still running
    dist.all_reduce(t, group=group)
    dist.destroy_process_group(group)
# The default group still answers.
x = torch.ones(4)
dist.all_reduce(x)
if not torch.equal(x, torch.full((4,), float(world))):
    sys.exit(f"rank {rank}: the default group's allreduce gave {x.tolist()}")
dist.destroy_process_group()
faulthandler.cancel_dump_traceback_later()
