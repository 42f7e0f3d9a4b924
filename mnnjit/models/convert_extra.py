"""Converters for rarely used MNN op types that ONNX models bring: Det, EyeLike, RandomUniform /
RandomNormal (ONNX RandomUniform(Like) / RandomNormal(Like)) and Unique."""
from __future__ import annotations

import numpy as np

from .._dtypes import I32
from ..ops import build as B
from .translate import MNN_DTYPES, Ctx, converter


@converter("Det")
def det(ctx: Ctx, op, xs):
    """Determinants of the square matrices in the last two dimensions (output shape ``x.shape[:-2]``)."""
    x = B.cast_node(xs[0], np.dtype(np.float32))
    return ctx.emit("det", [x])


@converter("EyeLike")
def eye_like(ctx: Ctx, op, xs):
    """ONNX EyeLike: a 2-D tensor of the input's shape and dtype with ones on diagonal ``k`` (the second
    input, 0 when absent) and zeros elsewhere. It depends only on the input's shape, so it is a constant."""
    x = xs[0]
    if len(x.shape) != 2:
        raise ValueError(f"EyeLike: the input must be 2-D, got shape {list(x.shape)}")
    k = ctx.ints(xs[1], "k")[0] if len(xs) > 1 else 0
    rows, cols = (int(d) for d in x.shape)
    return ctx.const(np.eye(rows, cols, k, dtype=x.dtype), x.dtype)


def _random(ctx: Ctx, op, xs, dist: str):
    """A ``random`` node of the shape given by the first input; ``low``/``high`` are the range (uniform) or
    the mean and the standard deviation (normal). The values come from mnnjit's generator seeded from the
    op's ``seed`` / ``seed2`` (real MNN's own generator cannot be reproduced): fixed for a model, so each
    forward (and each load) gives the same numbers, as in real MNN."""
    p = op.main if isinstance(op.main, dict) else {}
    shape = tuple(ctx.ints(xs[0], "shape"))
    if any(d < 0 for d in shape):
        raise ValueError(f"{op.type}: negative dimension in shape {list(shape)}")
    dtype = MNN_DTYPES.get(str(p.get("type") or "DT_FLOAT"))
    if dtype is None or dtype.kind != "f":
        raise ctx.unsupported(op, f"random numbers of type {p.get('type')}")
    low, high = float(p.get("low", 0.0)), float(p.get("high", 1.0))
    if dist == "normal" and high < 0:
        raise ValueError(f"{op.type}: negative standard deviation {high}")
    seed = (int(p.get("seed") or 0) & 0xFFFFFFFF) << 32 | (int(p.get("seed2") or 0) & 0xFFFFFFFF)
    attrs = {"dist": dist, "shape": shape, "dtype": np.dtype(dtype), "seed": seed, "low": low, "high": high}
    return ctx.emit("random", [], attrs)


@converter("RandomUniform")
def random_uniform(ctx: Ctx, op, xs):
    """Uniform numbers in [low, high) of the shape given by the input (see ``_random``)."""
    return _random(ctx, op, xs, "uniform")


@converter("RandomNormal")
def random_normal(ctx: Ctx, op, xs):
    """Normal numbers (mean ``low``, standard deviation ``high``) of the shape given by the input."""
    return _random(ctx, op, xs, "normal")


@converter("Unique")
def unique(ctx: Ctx, op, xs):
    """ONNX Unique on the flattened input, as real MNN computes it: the distinct values sorted ascending,
    the index of each one's first occurrence, the inverse indices (one per input element) and the counts,
    all indices int32. MNN's converter drops ONNX's ``sorted`` and ``axis`` attributes (the output is
    always sorted, the input flattened). Float inputs are sorted numerically (real MNN sorts them by bit
    pattern, which differs for negative values: see docs/COMPATIBILITY.md). The output size depends on
    the values, so the plan is translated again with the input values at each forward."""
    v = np.asarray(ctx.value(xs[0], "input")).reshape(-1)
    if v.dtype.kind == "f":
        v = np.where(v == 0, np.zeros_like(v), v)  # -0.0 and 0.0 are one value
    vals, first, inverse, counts = np.unique(v, return_index=True, return_inverse=True, return_counts=True)
    outs = [ctx.const(vals, v.dtype)] + [ctx.const(a.reshape(-1), I32) for a in (first, inverse, counts)]
    return outs[:max(1, len(op.outputIndexes or []))]
