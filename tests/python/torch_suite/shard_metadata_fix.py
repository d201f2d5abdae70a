"""Loads torch 1.13's torch.distributed._shard with Python 3.11.

Debian's torch 1.13 declares `tensor_properties: TensorProperties =
field(default=TensorProperties())` in _shard/sharded_tensor/metadata.py.
Python 3.11 rejects a dataclass default of an unhashable type, so importing
torch.distributed._shard (which DDP's tests reach) fails. PyTorch 2.0 made it
`field(default_factory=TensorProperties)`. install() adds an import hook that
applies exactly that change to that one module when it loads, and raises
ImportError if the line is not there (a torch that needs no fix, or another).
"""
import importlib.abc
import importlib.machinery
import importlib.util
import sys

MODULE = "torch.distributed._shard.sharded_tensor.metadata"
BROKEN = "field(default=TensorProperties())"
FIXED = "field(default_factory=TensorProperties)"


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name != MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        return importlib.util.spec_from_file_location(name, spec.origin, loader=self)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        with open(module.__file__) as f:
            source = f.read()
        if BROKEN not in source:
            raise ImportError(f"{module.__file__} has no '{BROKEN}': remove this fix")
        code = compile(source.replace(BROKEN, FIXED), module.__file__, "exec")
        exec(code, module.__dict__)


def install():
    if sys.version_info >= (3, 11) and not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
