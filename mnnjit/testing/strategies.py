"""Hypothesis strategies for mnnjit: Vars of MNN's dtypes and data formats, images, shapes, and
small random models built with ``mnnjit.expr`` and saved as .mnn files.

This module imports Hypothesis (``pip install hypothesis``); ``import mnnjit`` and
``import mnnjit.testing`` do not::

    from hypothesis import given
    from mnnjit.testing import strategies as mst

    @given(mst.arrays(mst.dtypes(), mst.shapes(max_dims=3), data_format=mst.data_formats()))
    def test_double(x): ...
"""
from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

try:
    from hypothesis import assume
    from hypothesis import strategies as st
    from hypothesis.errors import InvalidArgument
    from hypothesis.extra import numpy as hnp
except ImportError as exc:  # pragma: no cover - exercised only without hypothesis
    raise ImportError("mnnjit.testing.strategies needs Hypothesis: pip install hypothesis "
                      "(or mnnjit[test])") from exc

from .._dtypes import as_format, as_np_dtype, data_format, dtype
from ..var import Var

__all__ = ["dtypes", "data_formats", "arrays", "images", "shapes", "broadcastable_shapes",
           "mutually_broadcastable_shapes", "models", "GraphModel"]

#: The dtypes a Var holds (MNN narrows double to float and int64 to int).
VAR_DTYPES = (dtype.float, dtype.int, dtype.uint8, dtype.int8)
#: MNN's data formats.
DATA_FORMATS = (data_format.NCHW, data_format.NHWC, data_format.NC4HW4)

#: Default float elements: finite float32 values of moderate size without subnormals (real MNN
#: may flush subnormals to zero, which would make comparisons with it flaky).
_FLOAT_BOUND = 1e6


def dtypes(include: Sequence[Any] = VAR_DTYPES) -> st.SearchStrategy:
    """MNN dtypes (``dtype.float``, ``dtype.int``, ``dtype.uint8``, ``dtype.int8`` by default)."""
    return st.sampled_from([dtype[d] if isinstance(d, str) else dtype(d) for d in include])


def data_formats(include: Sequence[Any] = DATA_FORMATS) -> st.SearchStrategy:
    """MNN data formats (``NCHW``, ``NHWC``, ``NC4HW4`` by default)."""
    return st.sampled_from([data_format[as_format(f)] for f in include])


def default_elements(np_dtype: Any) -> st.SearchStrategy:
    """The elements :func:`arrays` draws by default for a numpy storage dtype: finite float32 in
    [-1e6, 1e6] without subnormals, and every value of an integer dtype."""
    dt = np.dtype(np_dtype)
    if dt.kind == "f":
        return st.floats(-_FLOAT_BOUND, _FLOAT_BOUND, width=32, allow_subnormal=False)
    info = np.iinfo(dt)
    return st.integers(int(info.min), int(info.max))


def _as_strategy(value: Any) -> st.SearchStrategy:
    return value if isinstance(value, st.SearchStrategy) else st.just(value)


def _np_dtype(d: Any) -> np.dtype:
    """The storage dtype of an MNN dtype (enum, name) or numpy dtype, narrowed as MNN narrows."""
    if isinstance(d, str) and d in dtype.__members__:
        d = dtype[d]
    return as_np_dtype(d)


def _make_var(arr: np.ndarray, fmt: str) -> Var:
    """A constant Var holding ``arr`` (its logical value) in data format ``fmt``."""
    from .. import expr as F
    enum = {np.dtype(np.float32): F.float, np.dtype(np.int32): F.int, np.dtype(np.uint8): F.uint8,
            np.dtype(np.int8): F.int8}[arr.dtype]
    if fmt == "NC4HW4":
        # as a pymnn script makes one: NCHW data converted (MNN packs channels in blocks of 4)
        return F.convert(F.const(arr, list(arr.shape), F.NCHW, enum), F.NC4HW4)
    return F.const(arr, list(arr.shape), data_format[fmt], enum)


@st.composite
def arrays(draw: Any, dtype: Any, shape: Any, data_format: Any = "NCHW", *, elements: Any = None,
           fill: Any = None, unique: bool = False) -> Var:
    """Vars of ``dtype`` (an MNN dtype, a numpy dtype, or a strategy of them) and ``shape`` (an int,
    a sequence, or a strategy such as :func:`shapes`), labelled ``data_format`` (or drawn from a
    strategy such as :func:`data_formats`). The Var's logical value is a numpy array drawn as
    ``hypothesis.extra.numpy.arrays`` draws one (``elements``, ``fill``, ``unique``; default elements:
    :func:`default_elements`). NC4HW4 needs at least 2 dimensions (a channel axis to pack): a drawn
    NC4HW4 with a shorter shape is rejected, a fixed one raises InvalidArgument.
    """
    np_dt = _np_dtype(draw(_as_strategy(dtype)))
    shp = draw(_as_strategy(shape))
    shp = (int(shp),) if isinstance(shp, (int, np.integer)) else tuple(int(s) for s in shp)
    fmt = as_format(draw(_as_strategy(data_format)))
    if fmt == "NC4HW4" and len(shp) < 2:
        if not isinstance(data_format, st.SearchStrategy):
            raise InvalidArgument(f"arrays: NC4HW4 needs at least 2 dimensions, got shape {list(shp)}")
        assume(False)
    elems = default_elements(np_dt) if elements is None else elements
    arr = draw(hnp.arrays(np_dt, shp, elements=elems, fill=fill, unique=unique))
    return _make_var(arr, fmt)


@st.composite
def images(draw: Any, height: Any = st.integers(1, 64), width: Any = st.integers(1, 64), channels: Any = 3,
           dtype: Any = "uint8", batch: bool = False) -> Var:
    """Images as ``mnnjit.cv.imread`` returns them: NHWC Vars of shape [height, width, channels]
    ([1, height, width, channels] with ``batch``). uint8 images take every value 0..255, float
    ones float32 values in [0, 255]. ``height``, ``width`` and ``channels`` are ints or strategies.
    """
    h, w, c = draw(_as_strategy(height)), draw(_as_strategy(width)), draw(_as_strategy(channels))
    if min(h, w, c) < 1:
        raise InvalidArgument(f"images: height, width and channels must be positive, got {(h, w, c)}")
    np_dt = _np_dtype(draw(_as_strategy(dtype)))
    if np_dt.kind == "f":
        elems = st.floats(0.0, 255.0, width=32, allow_subnormal=False)
    else:
        info = np.iinfo(np_dt)
        elems = st.integers(max(0, int(info.min)), min(255, int(info.max)))
    shape = (1, h, w, c) if batch else (h, w, c)
    arr = draw(hnp.arrays(np_dt, shape, elements=elems))
    return _make_var(arr, "NHWC")


def shapes(min_dims: int = 1, max_dims: int = 4, min_side: int = 1, max_side: int = 8) -> st.SearchStrategy:
    """Array shapes as tuples (``hypothesis.extra.numpy.array_shapes`` with MNN-friendly defaults:
    1 to 4 dimensions of 1 to 8)."""
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side)


def broadcastable_shapes(shape: Sequence[int], min_dims: int = 0, max_dims: int | None = None,
                         min_side: int = 1, max_side: int | None = None) -> st.SearchStrategy:
    """Shapes that broadcast against ``shape`` (``hypothesis.extra.numpy.broadcastable_shapes``)."""
    return hnp.broadcastable_shapes(tuple(shape), min_dims=min_dims, max_dims=max_dims, min_side=min_side,
                                    max_side=max_side)


def mutually_broadcastable_shapes(num_shapes: int = 2, base_shape: Sequence[int] = (), min_dims: int = 0,
                                  max_dims: int | None = None, min_side: int = 1,
                                  max_side: int | None = None) -> st.SearchStrategy:
    """``num_shapes`` shapes that broadcast together: ``BroadcastableShapes(input_shapes, result_shape)``
    (``hypothesis.extra.numpy.mutually_broadcastable_shapes``)."""
    return hnp.mutually_broadcastable_shapes(num_shapes=num_shapes, base_shape=tuple(base_shape), min_dims=min_dims,
                                             max_dims=max_dims, min_side=min_side, max_side=max_side)


# ------------------------------------------------------------------------------------------ models
_model_dir: str | None = None


def _default_model_dir() -> str:
    """A temporary directory for drawn models, removed when the process exits."""
    global _model_dir
    if _model_dir is None:
        _model_dir = tempfile.mkdtemp(prefix="mnnjit-models-")
        atexit.register(shutil.rmtree, _model_dir, True)
    return _model_dir


@dataclass(repr=False)
class GraphModel:
    """A small model drawn by :func:`models`: a .mnn file with one NCHW float input ``x`` of
    ``input_shape`` and one NCHW output ``y``, and the mnnjit.expr graph it was saved from.

    ``layers`` describes the layers in order (for failure reports); :meth:`evaluate` computes the
    output from the in-memory graph (the oracle for the loaded file); :meth:`sample_input` draws an
    input with a seed.
    """

    path: str
    input_shape: tuple[int, ...]
    layers: tuple[str, ...]
    input_name: str = "x"
    output_name: str = "y"
    _x: Var | None = field(default=None, repr=False, compare=False)
    _y: Var | None = field(default=None, repr=False, compare=False)

    def __repr__(self) -> str:
        return f"GraphModel(path={self.path!r}, input_shape={self.input_shape}, layers={self.layers})"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        # Hypothesis prints drawn values with this (its dataclass printer would show the graph's Vars)
        p.text(repr(self))

    def sample_input(self, seed: int = 0) -> np.ndarray:
        """A standard-normal float32 input of ``input_shape``."""
        return np.random.default_rng(seed).standard_normal(self.input_shape).astype(np.float32)

    def evaluate(self, x: Any) -> np.ndarray:
        """The output for input ``x`` (a numpy array or Var) computed from the in-memory graph."""
        from .assertions import to_numpy
        self._x.write(np.asarray(to_numpy(x), np.float32).reshape(self.input_shape))
        return np.array(self._y.read_view(), copy=True)


_ACTIVATIONS = ("relu", "relu6", "sigmoid", "tanh")


@st.composite
def _layer_specs(draw: Any, min_layers: int, max_layers: int, channels: int, size: tuple[int, int]) -> list[tuple]:
    """A list of layer specs that fit the running shape (pools only while the plane is 2x2 or more)."""
    n = draw(st.integers(min_layers, max_layers))
    specs: list[tuple] = []
    c, (h, w) = channels, size
    for _ in range(n):
        kinds = ["conv", "depthwise", "act", "affine"] + (["pool"] if h >= 2 and w >= 2 else [])
        kind = draw(st.sampled_from(kinds))
        if kind == "conv":
            out = draw(st.integers(1, 8))
            k, s = draw(st.sampled_from((1, 3))), draw(st.sampled_from((1, 2)))
            specs.append(("conv", out, k, s))
            c, h, w = out, -(-h // s), -(-w // s)
        elif kind == "depthwise":
            specs.append(("depthwise", c, 3, 1))
        elif kind == "act":
            specs.append(("act", draw(st.sampled_from(_ACTIVATIONS))))
        elif kind == "affine":
            a = draw(st.floats(-2.0, 2.0, width=32, allow_subnormal=False))
            b = draw(st.floats(-2.0, 2.0, width=32, allow_subnormal=False))
            specs.append(("affine", float(a), float(b)))
        else:
            specs.append(("pool", draw(st.sampled_from(("max", "avg")))))
            h, w = h // 2, w // 2
    return specs


def _build(specs: list[tuple], shape: tuple[int, ...], seed: int, softmax: bool) -> tuple[Var, Var, tuple[str, ...]]:
    """The expr graph for ``specs`` on an NCHW placeholder ``x`` of ``shape``; (x, y, layer names)."""
    from .. import expr as F
    rng = np.random.default_rng(seed)
    x = F.placeholder(list(shape), F.NCHW, F.float)
    x.name = "x"
    h = F.convert(x, F.NC4HW4)  # convolutions and pools take NC4HW4, as in real MNN
    c = shape[1]
    names = []
    for spec in specs:
        kind = spec[0]
        if kind in ("conv", "depthwise"):
            out, k, s = spec[1:]
            group = c if kind == "depthwise" else 1
            fan_in = (c // group) * k * k
            wgt = (rng.standard_normal((out, c // group, k, k)) / np.sqrt(fan_in)).astype(np.float32)
            bias = (0.1 * rng.standard_normal(out)).astype(np.float32)
            h = F.conv2d(h, F.const(wgt, list(wgt.shape)), F.const(bias, [out]), [s, s], [0, 0], [1, 1], group,
                         F.SAME)
            c = out
            names.append(f"{kind}{k}x{k}/s{s}->{out}")
        elif kind == "act":
            h = getattr(F, spec[1])(h)
            names.append(spec[1])
        elif kind == "affine":
            h = h * spec[1] + spec[2]
            names.append(f"*{spec[1]:.3g}+{spec[2]:.3g}")
        else:
            h = (F.max_pool if spec[1] == "max" else F.avg_pool)(h, [2, 2], [2, 2])
            names.append(f"{spec[1]}pool2x2")
    y = F.convert(h, F.NCHW)
    if softmax:
        y = F.softmax(y, 1)
        names.append("softmax(axis=1)")
    y.name = "y"
    return x, y, tuple(names)


@st.composite
def models(draw: Any, min_layers: int = 1, max_layers: int = 4, channels: Any = st.integers(1, 6),
           height: Any = st.integers(1, 12), width: Any = st.integers(1, 12), directory: str | None = None) -> GraphModel:
    """Small random CNNs built with ``mnnjit.expr`` and saved as .mnn files: convolutions (1x1/3x3,
    stride 1/2, SAME padding), depthwise 3x3, activations, scale-and-shift and 2x2 pools, then an
    optional softmax over channels. The input is ``x`` [1, channels, height, width] (NCHW float),
    the output ``y`` (NCHW). Files go to ``directory`` (default: a temporary directory removed at exit).
    """
    if not 0 < min_layers <= max_layers:
        raise InvalidArgument(f"models: need 0 < min_layers <= max_layers, got {min_layers}, {max_layers}")
    c, h, w = draw(_as_strategy(channels)), draw(_as_strategy(height)), draw(_as_strategy(width))
    specs = draw(_layer_specs(min_layers, max_layers, c, (h, w)))
    softmax = draw(st.booleans())
    seed = draw(st.integers(0, 2**32 - 1))
    shape = (1, c, h, w)
    x, y, names = _build(specs, shape, seed, softmax)
    key = hashlib.sha1(repr((specs, shape, seed, softmax)).encode()).hexdigest()[:16]
    d = directory or _default_model_dir()
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, f"model_{key}.mnn")
    if not os.path.exists(path):
        from .. import expr as F
        tmp = f"{path}.{os.getpid()}.tmp"
        F.save([y], tmp)
        os.replace(tmp, path)  # (another process drawing the same model sees a whole file)
    return GraphModel(path, shape, names, _x=x, _y=y)
