"""Destroying the process group while an op it owns is still running.

Run on 2 ranks by ranks.py (ctest: python.teardown.<backend>). Rank 0 posts a
recv, chains a Python callback on its Future and drops the Work; it then
destroys the group, whose destructor waits for that recv. Rank 1 sends 2 s
later. When the recv ends, Syncline's completion thread runs the callback,
which takes the GIL: the destructor must not be holding it while it waits.
It did, and the process hung for good. PyTorch's own test_send_recv caught
that once in CI, by another path to the same wait: the completion thread
let go of the last reference to a tensor whose Python object outlived
Python's last use of it (freeing that also takes the GIL). faulthandler
ends a hung rank after 60 s with every thread's Python stack, and the
launcher reports it.

And the data: the recv still lands in the tensor, and the callback sees it.
"""
import faulthandler
import sys
import time

import torch
import torch.distributed as dist

from ranks import init

faulthandler.dump_traceback_later(60, exit=True)
rank, world = init()
if rank == 0:
    t = torch.zeros(1024)
    seen = []
    w = dist.irecv(t, src=1, tag=7)
    # A callback on the op's Future: it runs on the completion thread and
    # needs the GIL there.
    w.get_future().then(lambda fut: seen.append(fut.value()[0][:4].tolist()))
    del w
    start = time.monotonic()
    dist.destroy_process_group()  # waits for the recv: rank 1 sends in 2 s
    waited = time.monotonic() - start
    if seen != [[0.0, 1.0, 2.0, 3.0]] or not torch.equal(t, torch.arange(1024.0)):
        sys.exit(f"rank 0: the recv that was in flight at teardown gave {t[:4].tolist()}, "
                 f"its callback saw {seen}")
    print(f"rank 0: the group was destroyed after {waited:.1f} s, when its recv ended; "
          "the data landed and the Future's callback ran", flush=True)
else:
    time.sleep(2)
    dist.send(torch.arange(1024, dtype=torch.float32), dst=0, tag=7)
    dist.destroy_process_group()
faulthandler.cancel_dump_traceback_later()
