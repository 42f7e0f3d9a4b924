"""mnnjit.numpy.random: MNN.numpy.random (rand, randn, randint, random) plus ``seed``.

Every call builds a node of the ``random`` op with its own 63-bit seed drawn from this module's
generator, so results are reproducible after ``seed(n)`` and a node always yields the same values.
"""
from __future__ import annotations

from typing import Any

import numpy as _np

from .._dtypes import F32, I32
from .._dtypes import as_np_dtype as _as_np_dtype
from ..ops import build as B
from ..var import Var
from ._core import as_shape

_rng = None  # created on first use (importing numpy.random costs ~10 ms)


def seed(seed: int | None = None) -> None:
    """Reseed the generator (the same seed gives the same sequence of arrays)."""
    global _rng
    _rng = _np.random.default_rng(seed)


def _next_seed() -> int:
    global _rng
    if _rng is None:
        _rng = _np.random.default_rng()
    return int(_rng.integers(0, 2 ** 63 - 1))


def _shape_args(args: tuple) -> tuple[int, ...]:
    if len(args) == 1 and not isinstance(args[0], (int, _np.integer)):
        return as_shape(args[0])
    return as_shape(args)


def _node(dist: str, shape: tuple[int, ...], dtype: Any, **params: Any) -> Var:
    attrs = {"dist": dist, "shape": shape, "dtype": _np.dtype(dtype),
             "seed": _next_seed(), **params}
    return B.wrap(B.make_node("random", (), attrs))


def rand(*args: Any) -> Var:
    """Uniform [0, 1) float32 numbers of shape ``args`` (``rand(2, 3)`` or ``rand([2, 3])``)."""
    return _node("uniform", _shape_args(args), F32, low=0.0, high=1.0)


def randn(*args: Any) -> Var:
    """Standard normal float32 numbers of shape ``args``."""
    return _node("normal", _shape_args(args), F32, low=0.0, high=1.0)


def random(shape: Any = None) -> Var:
    """Uniform [0, 1) float32 numbers of ``shape`` (a 0-d Var when None)."""
    return _node("uniform", () if shape is None else as_shape(shape), F32, low=0.0, high=1.0)


random_sample = random
ranf = random
sample = random


def randint(low: int, high: int | None = None, size: Any = None, dtype: Any = I32) -> Var:
    """Random integers in [low, high) (or [0, low)), int32 by default; without ``size`` a [1] Var, as real
    MNN gives (numpy: a scalar)."""
    if high is None:
        low, high = 0, low
    low, high = int(low), int(high)
    if low >= high:
        raise ValueError(f"low >= high ({low} >= {high})")
    dt = _as_np_dtype(dtype)
    if isinstance(size, float):  # MNN's docs pass ``h * w / 2``: real MNN truncates a float size
        size = int(size)
    return _node("integers", (1,) if size is None else as_shape(size), dt, low=low, high=high)


def uniform(low: float = 0.0, high: float = 1.0, size: Any = None) -> Var:
    """Uniform float32 numbers in [low, high)."""
    return _node("uniform", () if size is None else as_shape(size), F32, low=float(low), high=float(high))


def normal(loc: float = 0.0, scale: float = 1.0, size: Any = None) -> Var:
    """Normal float32 numbers (mean ``loc``, standard deviation ``scale``)."""
    if scale < 0:
        raise ValueError("scale < 0")
    return _node("normal", () if size is None else as_shape(size), F32, low=float(loc), high=float(scale))
