"""Runs a test script on N ranks of this machine, as torchrun would.

Usage: python3 ranks.py N script.py [args...]

Each rank is a fresh process (fork+exec of the same Python), in its own
process group and with PR_SET_PDEATHSIG, so none outlives this launcher. The
ranks meet through env:// (MASTER_ADDR=127.0.0.1, a free MASTER_PORT, RANK,
WORLD_SIZE). Exits 0 when every rank did; otherwise prints which failed and
kills the rest. A test script calls `init(backend)` below, then checks.
"""
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time


def _die_with_parent():
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    os.setpgrp()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(world_size, argv, timeout_s=240):
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()),
               WORLD_SIZE=str(world_size))
    procs = [subprocess.Popen([sys.executable] + argv, env=dict(env, RANK=str(r)),
                              preexec_fn=_die_with_parent) for r in range(world_size)]
    deadline = time.monotonic() + timeout_s
    failed = []
    # Stop at the first rank that fails: its peers would only wait for it.
    while not failed and any(p.poll() is None for p in procs):
        failed = [(r, p.returncode) for r, p in enumerate(procs) if p.poll() not in (None, 0)]
        if time.monotonic() > deadline:
            failed = [(r, f"no exit within {timeout_s} s") for r, p in enumerate(procs)
                      if p.poll() is None]
        time.sleep(0.05)
    failed = failed or [(r, p.returncode) for r, p in enumerate(procs) if p.returncode != 0]
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    for rank, rc in failed:
        print(f"FAILED: rank {rank} of {world_size} ended with {rc}", flush=True)
    return 0 if not failed else 1


def init(backend="syncline"):
    """Joins the job started by launch() and returns (rank, world_size)."""
    import torch.distributed as dist
    import syncline_torch  # noqa: F401  (registers "syncline")
    dist.init_process_group(backend, init_method="env://")
    return dist.get_rank(), dist.get_world_size()


if __name__ == "__main__":
    sys.exit(launch(int(sys.argv[1]), sys.argv[2:]))
