"""The op registry and the op definitions.

Importing this package imports every public module in it, which registers its ops: a new op module
only has to be added to this directory. Private modules (``_name.py``: helpers such as the x86
reciprocal some references need) load when their users ask for them.
"""
import importlib as _importlib
import pkgutil as _pkgutil

from .registry import OpDef, all_ops, get, has, register  # noqa: F401

for _mod in sorted(m.name for m in _pkgutil.iter_modules(__path__)):
    if _mod not in ("registry", "build", "indexing") and not _mod.startswith("_"):
        _importlib.import_module(f"{__name__}.{_mod}")
