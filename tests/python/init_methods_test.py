"""init_process_group("syncline") with each init method PyTorch accepts.

Run on N ranks by ranks.py: python3 ranks.py N init_methods_test.py METHOD,
METHOD one of env, tcp, file (file needs TMPDIR private to the test, as
ctest's per-test folder). Each rank joins, allreduces and checks the sum.
"""
import os
import sys

import torch
import torch.distributed as dist
import syncline_torch  # noqa: F401  (registers "syncline")

method = sys.argv[1]
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
urls = {
    "env": "env://",
    "tcp": f"tcp://{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}",
    "file": "file://" + os.path.join(os.environ.get("SYNCLINE_TEST_DIR", "."),
                                     f"init-{os.environ['MASTER_PORT']}"),
}
dist.init_process_group("syncline", init_method=urls[method], rank=rank, world_size=world)
assert dist.get_backend() == "syncline", dist.get_backend()
x = torch.full((5,), float(rank + 1), dtype=torch.float64)
dist.all_reduce(x)
assert torch.equal(x, torch.full((5,), world * (world + 1) / 2, dtype=torch.float64)), x
if rank == 0:
    print(f"init_method={urls[method].split(':')[0]}://: {world} ranks reduced over "
          f"syncline ({syncline_torch.__file__})", flush=True)
dist.destroy_process_group()
