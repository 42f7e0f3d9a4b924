"""Cache keys of compiled partitions: a digest of the partition's structure, attributes, input
signature and constant values, so a later process finds the SDK's artifacts without building the
partition again (weights are hashed once per array and process)."""
from __future__ import annotations

import hashlib
import platform
import weakref
from pathlib import Path
from typing import Any

import numpy as np

from ... import settings
from ...graph import topo_order

#: bump when the way partitions are built changes (old entries are then never read)
FORMAT = 1
#: id -> (weak reference, digest) of the weights hashed so far
_digests: dict[int, tuple[Any, str]] = {}
_MAX_DIGESTS = 4096


def _array_digest(a: np.ndarray) -> str:
    a = np.ascontiguousarray(a)
    return hashlib.sha256(a.view(np.uint8).reshape(-1) if a.size else b"").hexdigest() + f"{a.dtype.str}{a.shape}"


def _memo(obj: Any, compute: Any) -> str:
    hit = _digests.get(id(obj))
    if hit is not None and hit[0]() is obj:
        return hit[1]
    d = compute()
    if len(_digests) >= _MAX_DIGESTS:  # forget the entries of arrays that are gone
        for k in [k for k, (ref, _) in _digests.items() if ref() is None]:
            del _digests[k]
    try:
        _digests[id(obj)] = (weakref.ref(obj), d)
    except TypeError:  # an object without weak references: not remembered
        pass
    return d


def _canon(v: Any) -> Any:
    """A stable text form of an attribute value."""
    if isinstance(v, np.ndarray):
        return "arr:" + _memo(v, lambda: _array_digest(v))
    if hasattr(v, "dense") and hasattr(v, "bias"):  # ConvWeights: its decoded weights and bias
        return "w:" + _memo(v, lambda: _array_digest(v.dense()) + (
            "" if v.bias is None else _array_digest(v.bias)))
    if isinstance(v, dict):
        return "{" + ",".join(f"{k!r}:{_canon(v[k])}" for k in sorted(v, key=str)) + "}"
    if isinstance(v, (list, tuple)):
        return "(" + ",".join(_canon(x) for x in v) + ")"
    if isinstance(v, (np.generic, float, int, str, bool)) or v is None:
        return repr(v.item() if isinstance(v, np.generic) else v)
    if isinstance(v, np.dtype):
        return str(v)
    return f"{type(v).__name__}:{v!r}"


def graph_key(graph: Any, extra: tuple) -> str:
    """The cache key of partition ``graph`` compiled with settings ``extra``."""
    h = hashlib.sha256()
    h.update(repr((FORMAT, platform.machine(), platform.system(), extra)).encode())
    index: dict[int, int] = {}
    for k, p in enumerate(graph.placeholders):
        index[id(p)] = k
        h.update(f"P{k}:{p.shape}:{p.dtype};".encode())
    for n in topo_order(list(graph.outputs), stop_at_values=False):
        if id(n) in index:
            continue
        index[id(n)] = len(index)
        if n.op == "const":
            h.update(f"C:{_canon(n.value)};".encode())
            continue
        ins = ",".join(str(index[id(i)]) for i in n.inputs)
        h.update(f"N:{n.op}:{n.shape}:{n.dtype}:{ins}:{_canon(n.attrs)};".encode())
    h.update(("O:" + ",".join(str(index[id(o)]) for o in graph.outputs)).encode())
    return h.hexdigest()[:40]


def cache_root(opts: dict) -> Path:
    """Where compiled partitions are kept: the ``cache_dir`` setting, else ``<MNNJIT_CACHE_DIR>/npu``."""
    d = opts.get("cache_dir")
    return Path(d).expanduser() if d else settings.cache_dir() / "npu"
