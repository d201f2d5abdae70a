"""run_torch_suite.py leaves nothing behind in the temp folder.

Each run of the suite made a TEMP_DIR for the ranks' file:// rendezvous in
every process, the spawned ranks included, and removed none: three folders
per test at 2 ranks, which piled up by the thousand in /tmp. This runs one
test of the suite with TMPDIR set to a fresh folder and checks that the run
passed and that the folder is empty again afterwards.
"""
import os
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
with tempfile.TemporaryDirectory(prefix="syncline-suite-cleanup-") as tmp:
    env = dict(os.environ, TMPDIR=tmp, WORLD_SIZE="2")
    env.pop("TEMP_DIR", None)
    run = subprocess.run([sys.executable, os.path.join(here, "run_torch_suite.py"),
                          "-k", "*.test_barrier"], env=env, capture_output=True, text=True)
    print(run.stdout[-2000:], run.stderr[-4000:])
    if run.returncode != 0:
        sys.exit(f"cleanup_test: the suite's test_barrier failed (exit {run.returncode})")
    if "Ran 1 test" not in run.stderr:
        sys.exit("cleanup_test: the run did not run exactly one test")
    left = sorted(os.listdir(tmp))
    if left:
        sys.exit(f"cleanup_test: the run left {len(left)} entries in TMPDIR: {left[:5]}")
print("cleanup_test: passed; TMPDIR is empty after the run")
