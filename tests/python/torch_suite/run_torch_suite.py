"""PyTorch's own distributed test suite, run over the `syncline` backend.

Usage (WORLD_SIZE and SYNCLINE_BACKEND from the environment):
    SYNCLINE_BACKEND=gloo WORLD_SIZE=2 python3 run_torch_suite.py [-k PATTERN ...]
The arguments go to PyTorch's run_tests (unittest): `-k test_all_reduce`
runs a subset. With BACKEND=gloo it runs the same suite over PyTorch's own
gloo, the baseline. Needs syncline_torch on PYTHONPATH.

This is torch.testing._internal.distributed.distributed_test's
DistributedTest._DistTestBase through TestDistBackend, as PyTorch's
test_distributed_spawn.py runs it: each test spawns WORLD_SIZE processes
that meet through file:// in TEMP_DIR. `syncline` joins the suite as a
third-party backend with the features "plugin", "ddp" and "subgroup";
every skip is the suite's own. Two fixes for Debian's torch 1.13 on Python
3.11 come first: the expecttest stand-in beside this file, and
shard_metadata_fix.
"""
import os
import sys
import tempfile

# PyTorch's test utilities take CI=<anything> for PyTorch's own CI and then
# write XML reports through xmlrunner, which Debian does not package: this
# runner reports through ctest instead.
os.environ.pop("CI", None)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # expecttest
import shard_metadata_fix  # noqa: E402

shard_metadata_fix.install()
os.environ.setdefault("BACKEND", "syncline")
os.environ.setdefault("WORLD_SIZE", "2")
os.environ.setdefault("TEMP_DIR", tempfile.mkdtemp(prefix="syncline-torch-suite-"))

import syncline_torch  # noqa: E402,F401  (registers "syncline")
from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402

if os.environ["BACKEND"] == "syncline":
    for feature in ("plugin", "ddp", "subgroup"):
        DistTestCases.backend_feature[feature].add("syncline")

from torch.testing._internal.common_utils import run_tests  # noqa: E402
from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest, TestDistBackend)


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()


if __name__ == "__main__":
    run_tests()
