"""A process that exits while a Future callback still runs on Syncline's
completion thread.

Run on 2 ranks by ranks.py (ctest: python.exit_during_callback.<mode>.<backend>),
with one argument, the mode:
  keep     the callback's group stays alive until the interpreter ends it
  destroy  the callback destroys its group, whose last reference it drops
           (the thread is let go: Stop() cannot join itself)
Rank 0 chains a callback on an allreduce's Future. The callback tells the
main thread it has started, then sleeps without the GIL; the main thread
meanwhile reaches the end of the script. The callback must run to its end
before the interpreter finalizes: once it has, a thread that takes the GIL
is ended by pthread_exit, and its unwinding through the callback's release
(a destructor) was std::terminate (rank 0 ended with -6, "terminate called
without an active exception", as python.teardown_from_callback.ucx did in
CI). The callback's last act writes a file that rank 1 waits for and reads.
"""
import faulthandler
import os
import sys
import threading
import time

import torch
import torch.distributed as dist

from ranks import init

faulthandler.dump_traceback_later(60, exit=True)
mode = sys.argv[1]
assert mode in ("keep", "destroy"), mode
rank, world = init()
marker = os.path.join(os.environ["SYNCLINE_TEST_DIR"], f"callback-ended-{os.environ['MASTER_PORT']}")
group = dist.new_group(list(range(world)))
t = torch.full((64,), float(rank + 1))
want = float(sum(range(1, world + 1)))
if rank == 0:
    started = threading.Event()
    holder = [group]
    del group

    def slow_callback(fut):
        if mode == "destroy":
            dist.destroy_process_group(holder.pop())
        started.set()
        time.sleep(2)  # without the GIL: the main thread reaches the exit
        with open(marker + ".tmp", "w") as f:
            f.write(f"{fut.value()[0][0].item()}\n")
        os.rename(marker + ".tmp", marker)
        return None

    dist.all_reduce(t, group=holder[0], async_op=True).get_future().then(slow_callback)
    if not started.wait(60):
        sys.exit("rank 0: the callback did not start within 60 s")
    # The script ends here, the callback still asleep.
else:
    dist.all_reduce(t, group=group)
    deadline = time.monotonic() + 60
    while not os.path.exists(marker):
        if time.monotonic() > deadline:
            sys.exit("rank 1: rank 0's callback did not write its file within 60 s")
        time.sleep(0.01)
    with open(marker) as f:
        seen = f.read().strip()
    os.remove(marker)
    if seen != str(want):
        sys.exit(f"rank 1: rank 0's callback saw {seen}, want {want}")
    print(f"rank 1: rank 0's callback ran to its end ({mode}) and saw {seen}", flush=True)
