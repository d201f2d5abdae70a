"""ddp_pytorch.py measures its single-process step on one BLAS thread, as
ddp_step does: torch.set_num_threads(1) leaves OpenBLAS's pool as it sized
itself at load, so without the script's pin the step ran on both cores and
every "/ single" ratio of issue 17 was taken against the wrong baseline.

Run with the Python that sees torch (Debian's /usr/bin/python3)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


class SingleStepThreads(unittest.TestCase):
    def test_single_process_step_runs_on_one_os_thread(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "ddp.json")
            env = {k: v for k, v in os.environ.items()
                   if k not in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
            result = subprocess.run(
                [sys.executable, os.path.join(HERE, "ddp_pytorch.py"), "--steps", "2",
                 "--warmup", "1", "--json", out],
                env=env, capture_output=True, text=True, timeout=300)
            self.assertEqual(result.returncode, 0, result.stderr)
            with open(out) as f:
                doc = json.load(f)
        # Before the pin: 2 on a 2-core machine (the main thread and one
        # OpenBLAS worker).
        self.assertEqual(doc["single_os_threads"], 1, result.stdout)
        self.assertGreater(doc["single_ms"], 0)
        self.assertIn("(1 OS threads)", result.stdout)


if __name__ == "__main__":
    unittest.main()
