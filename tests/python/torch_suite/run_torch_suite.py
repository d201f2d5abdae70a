"""PyTorch's own distributed test suite, run over the `syncline` backend.

Usage (WORLD_SIZE and SYNCLINE_BACKEND from the environment):
    SYNCLINE_BACKEND=gloo WORLD_SIZE=2 python3 run_torch_suite.py [-k PATTERN ...]
The arguments go to PyTorch's run_tests (unittest): `-k test_all_reduce`
runs a subset (a pattern with * matches the whole test id, so
'*.test_barrier' is that test alone). With BACKEND=gloo it runs the same suite
over PyTorch's own gloo, the baseline. TORCH_SUITE_NO_SKIPS=1 fails the run if
any selected test is skipped (ctest's subsets). Needs syncline_torch on
PYTHONPATH. scripts/run_torch_suite.sh runs the whole suite in every
configuration and compares each with the baseline (suite_results.py).

This is torch.testing._internal.distributed.distributed_test's
DistributedTest._DistTestBase through TestDistBackend, as PyTorch's
test_distributed_spawn.py runs it: each test spawns WORLD_SIZE processes
that meet through file:// in TEMP_DIR.

`syncline` takes gloo's place in the suite's gates, so that it runs the
tests gloo runs and the two can be compared test by test: it joins every
DistTestCases.backend_feature set that gloo is in (the documented path for
third-party backends, with "plugin"), and suite_patches.gloo_gates widens
the suite's `BACKEND == "gloo"` conditions to it. It declares the one feature
it lacks the way the suite asks backends to: skip_collective["sendrecv
anysource"] (recv without src), as nccl and ucc do; those three tests are
then the suite's own skips, and syncline's recv without src raises an error
that names recvAnysource (tests/python/unsupported_test.py). Two fixes for
Debian's torch 1.13 on Python 3.11 come first: the expecttest stand-in
beside this file, and suite_patches.shard_metadata.
"""
import atexit
import os
import shutil
import sys
import tempfile
import unittest

# PyTorch's test utilities take CI=<anything> for PyTorch's own CI and then
# write XML reports through xmlrunner, which Debian does not package: this
# runner reports through ctest instead.
os.environ.pop("CI", None)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # expecttest
import suite_patches  # noqa: E402

suite_patches.shard_metadata()
os.environ.setdefault("BACKEND", "syncline")
os.environ.setdefault("WORLD_SIZE", "2")
if "TEMP_DIR" not in os.environ:
    # The suite's ranks are spawned children that inherit TEMP_DIR; only the
    # process that made the folder removes it, when the run ends.
    os.environ["TEMP_DIR"] = tempfile.mkdtemp(prefix="syncline-torch-suite-")
    atexit.register(shutil.rmtree, os.environ["TEMP_DIR"], ignore_errors=True)
# The ranks meet through file:// (TestDistBackend.init_method), and every
# test's setUp sets INIT_METHOD so; set before the suite is imported, it also
# enables the tests that need file:// (the barrier timeouts, DDP's save/load).
os.environ.setdefault("INIT_METHOD", "file://" + os.path.join(os.environ["TEMP_DIR"], "init"))

import syncline_torch  # noqa: E402,F401  (registers "syncline")
from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402

if os.environ["BACKEND"] == "syncline":
    for backends in DistTestCases.backend_feature.values():
        if "gloo" in backends:
            backends.add("syncline")
    DistTestCases.backend_feature["plugin"].add("syncline")
    DistTestCases.skip_collective["sendrecv anysource"].add("syncline")
    suite_patches.gloo_gates("syncline")

from torch.testing._internal.common_utils import run_tests  # noqa: E402
from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest, TestDistBackend)


if os.environ.get("TORCH_SUITE_NO_SKIPS") == "1":
    # For a chosen subset (ctest): a test that is skipped did not run, so it
    # counts as a failure, with the suite's reason.
    def _skip_fails(result, test, reason):
        result.addFailure(test, (AssertionError, AssertionError(f"skipped: {reason}"), None))

    unittest.TextTestResult.addSkip = _skip_fails


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()


if __name__ == "__main__":
    run_tests()
