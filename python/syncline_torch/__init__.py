"""Syncline's PyTorch c10d backend.

Importing this module registers the backend ``syncline``::

    import torch.distributed as dist
    import syncline_torch  # noqa: F401  (registers "syncline")
    dist.init_process_group("syncline", init_method="env://")

Underneath, SYNCLINE_BACKEND picks gloo, ucx or nccl, and SYNCLINE_PLUGINS
stacks interposers (check, trace, faults), as for Syncline's C++ programs.
"""
import torch.distributed as _dist

from syncline_torch._C import ProcessGroupSyncline, create_process_group

__all__ = ["ProcessGroupSyncline", "create_process_group"]

if "SYNCLINE" not in _dist.Backend._plugins:
    _dist.Backend.register_backend("syncline", create_process_group)
