"""Source patches that PyTorch's distributed suite needs here, applied on import.

Each patch replaces exact text in one module of Debian's torch 1.13 when that
module loads, and raises ImportError if the text is not there as often as
expected (another torch: look again, and drop or adjust the patch).

shard_metadata: torch 1.13 declares `tensor_properties: TensorProperties =
  field(default=TensorProperties())` in _shard/sharded_tensor/metadata.py.
  Python 3.11 rejects a dataclass default of an unhashable type, so importing
  torch.distributed._shard (which DDP's tests reach) fails. PyTorch 2.0 made
  it `field(default_factory=TensorProperties)`; the patch does exactly that.

gloo_gates(backend): distributed_test runs about 40 tests only when
  BACKEND is "gloo" (`BACKEND == "gloo"`, `BACKEND != "gloo"`,
  `require_backend({"gloo"})`: timeouts, coalesced allreduce, get_future,
  batch isend/irecv, monitored_barrier, ...) and takes the gloo branch inside
  a few test bodies (DDP's CPU model in step_model). The patch widens exactly
  those conditions to `backend` as well, so `backend` runs the tests gloo runs,
  the way gloo runs them. Nothing else in the module changes.
"""
import importlib.abc
import importlib.machinery
import importlib.util
import sys

SHARD_METADATA = "torch.distributed._shard.sharded_tensor.metadata"
DISTRIBUTED_TEST = "torch.testing._internal.distributed.distributed_test"


class _Patcher(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Loads the named modules with [(old, new, expected count)] applied."""

    def __init__(self):
        self.patches = {}

    def find_spec(self, name, path, target=None):
        if name not in self.patches:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        return importlib.util.spec_from_file_location(name, spec.origin, loader=self)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        with open(module.__file__) as f:
            source = f.read()
        for old, new, expected in self.patches[module.__name__]:
            found = source.count(old)
            if found != expected:
                raise ImportError(f"{module.__file__} has '{old}' {found} times, not "
                                  f"{expected}: see tests/python/torch_suite/suite_patches.py")
            source = source.replace(old, new)
        exec(compile(source, module.__file__, "exec"), module.__dict__)


def _patcher():
    for finder in sys.meta_path:
        if isinstance(finder, _Patcher):
            return finder
    finder = _Patcher()
    sys.meta_path.insert(0, finder)
    return finder


def shard_metadata():
    if sys.version_info >= (3, 11):
        _patcher().patches[SHARD_METADATA] = [
            ("field(default=TensorProperties())", "field(default_factory=TensorProperties)", 1)]


def gloo_gates(backend):
    both = f'("gloo", "{backend}")'
    _patcher().patches[DISTRIBUTED_TEST] = [
        ('BACKEND != "gloo"', f"BACKEND not in {both}", 17),
        ('BACKEND == "gloo"', f"BACKEND in {both}", 3),
        ('require_backend({"gloo"})', f'require_backend({{"gloo", "{backend}"}})', 18),
    ]
