"""Weights and activations as the CPU kernels keep them for a precision/memory mode.

``modes`` is a :class:`mnnjit.precision.Modes` (read by attribute: backends import no front end): precision=low keeps float16 activation storage
(and float16 classifier weights), memory=low keeps 8-bit and narrower quantized weights as codes.
"""
from __future__ import annotations

from typing import Any, List, Mapping, Tuple

import numpy as np


__all__ = ["weight_storage", "conv_weight_source", "depthwise_weight", "to_storage", "from_storage",
           "step_choice", "plan_choices"]


def weight_storage(modes: Any, weight: Any, shape: Tuple[int, int]):
    """The weight source a GEMM/conv kernel uses for an ``[O, K]`` weight matrix.

    ``weight`` is a float array or a :class:`mnnjit.format.QuantizedWeight`. memory=low keeps a
    quantized weight as codes (:class:`QuantRows`); otherwise it is decoded now, once, and stored
    as float16 (:class:`HalfRows`, precision=low) or float32 (:class:`DenseRows`)."""
    from mnnjit.backends.cpu.quant import DenseRows, HalfRows, QuantRows
    from mnnjit.format import QuantizedWeight
    O, K = shape
    if isinstance(weight, QuantizedWeight):
        if modes.keep_quantized and int(weight.bits) <= 8:  # precision.keeps_quantized's rule
            return QuantRows.from_quantized(weight, (O, K))
        weight = weight.dequantize()
    w = np.asarray(weight, np.float32)
    if w.size != O * K:
        raise ValueError(f"weight has {w.size} values, expected {O}x{K}")
    w = w.reshape(O, K)
    return HalfRows(w) if modes.fp16 else DenseRows(w)


def _quantized_or_float(conv: Mapping[str, Any], what: str):
    from mnnjit.format import conv_weight, quantized_weight
    quan = conv.get("quanParameter")
    w = conv.get("weight")
    if quan is not None and (w is None or len(w) == 0) and quan.get("index") is None \
            and int(quan.get("type") or 0) in (1, 2, 4):
        return quantized_weight(quan, what + ".quanParameter")
    return conv_weight(dict(conv), what)


def conv_weight_source(conv: Mapping[str, Any], modes: Any, what: str = "Convolution2D"):
    """Weights of a ``Convolution2D`` op dict (non-depthwise) as kept in memory for ``modes``:
    ``[outputCount, inputCount/group*kh*kw]``."""
    c = conv["common"]
    O = int(c["outputCount"])
    w = _quantized_or_float(conv, what)
    size = w.codes.size if hasattr(w, "codes") else np.asarray(w).size
    if O <= 0 or size % O:
        raise ValueError(f"{what}: {size} weights do not split into {O} output channels")
    return weight_storage(modes, w, (O, size // O))


def depthwise_weight(conv: Mapping[str, Any], modes: Any, what: str = "Convolution2D"):
    """Weights of a depthwise conv for ``modes``: a float32 ``[C, kh*kw]`` array, or (memory=low,
    quantized) a :class:`QuantRows` whose ``dense()`` the runner calls per forward (a few KB)."""
    c = conv["common"]
    C = int(c["outputCount"])
    w = _quantized_or_float(conv, what)
    size = w.codes.size if hasattr(w, "codes") else np.asarray(w).size
    if C <= 0 or size % C:
        raise ValueError(f"{what}: {size} weights do not split into {C} channels")
    src = weight_storage(modes, w, (C, size // C))
    return src if type(src).__name__ == "QuantRows" else src.dense()


def to_storage(x: np.ndarray, modes: Any) -> np.ndarray:
    """A model input in the activation storage dtype of ``modes`` (float32 -> float16 for
    precision=low, via the F16C kernel)."""
    if modes.fp16 and x.dtype != np.float16:
        from mnnjit.backends.cpu.fp16 import to_f16
        return to_f16(x)
    return x


def from_storage(x: np.ndarray) -> np.ndarray:
    """A model output back in float32 (float16 storage is widened; others pass through)."""
    if x.dtype == np.float16:
        from mnnjit.backends.cpu.fp16 import to_f32
        return to_f32(x)
    return x


#: what a precision=low kernel-step does, per step kind, by measurement on AVX2 + F16C (no fp16
#: arithmetic: every kernel computes in float32; float16 is storage only)
_HALF_COMPUTE = {
    "xdw": "fp32 inside: the block's input widened once per launch, expansion and depthwise in "
           "float32, halves stored at the output",
    "dwpw": "fp32 inside: depthwise bands in a float32 scratch, halves at the edges",
    "conv": "fp32 compute on half loads (F16C in the micro-kernel), halves stored",
    "convres": "fp32 compute, residual added in float32, halves stored",
    "wino": "fp32 transforms and products, halves at the edges",
    "dw": "fp32 compute on half loads, halves stored",
    "fc": "float16 weights (memory-bound GEMV: half the bytes), fp32 sums",
}


def _weight_kind(op: Any) -> str:
    """How a step's weights are kept: float32 panels, int8 / 4-bit codes, float16, Winograd."""
    from mnnjit.backends.cpu.conv_kernels import Winograd
    if isinstance(op, Winograd):
        return getattr(op, "weight_kind", "fp32 Winograd-transformed")
    for name in ("pw", "expand", "w"):
        w = getattr(op, name, None)
        if w is None or isinstance(w, np.ndarray) and name != "w":
            continue
        if hasattr(w, "w") and not hasattr(w, "kind"):   # a nested ConvGemm
            w = w.w
        kind = getattr(w, "kind", None)
        if kind in (2, 4):
            return "int8 codes, dequantized per task" + (
                " (GEMV on the codes)" if getattr(op, "narrow", False) else "")
        if kind == 3:
            return "4-bit codes, dequantized per task"
        if kind == 0:
            return "fp32 panels"
        if isinstance(w, np.ndarray):
            return "fp16" if w.dtype == np.uint16 else "fp32"
    return "-"


def step_choice(kind: str, op: Any, half: bool) -> Tuple[str, str, str]:
    """(activation storage, compute, weights) a kernel step runs with: ``kind`` the step kind,
    ``op`` its prepared op, ``half`` whether the plan stores activations as float16."""
    storage = "fp16" if half else "fp32"
    compute = getattr(op, "choice", None) or (
        _HALF_COMPUTE.get(kind, "fp32 compute on half loads") if half else "fp32")
    return storage, compute, _weight_kind(op)


def plan_choices(plan: Any) -> List[Tuple[int, str, str, str, str, str]]:
    """Per kernel step of a CPU kernel-step plan (``NetPlan``): (step index, step kind, layer,
    activation storage, compute, weights) - the per-layer precision and weight choices the plan
    made, for ``explain``-style output and the benchmarks. Reference steps (numpy on float32
    values) are listed as such."""
    half = np.dtype(getattr(plan, "act_dtype", np.float32)) == np.float16
    order = getattr(plan, "order", None)
    rows = []
    for i, st in enumerate(getattr(plan, "steps", [])):
        if isinstance(st, (list, tuple)):
            kind, op, out = st[0], st[1], st[-1]
        else:
            kind, op, out = getattr(st, "kind", "?"), getattr(st, "op", None), getattr(st, "out", None)
        node = order[out] if order is not None and isinstance(out, int) else None
        layer = f"{node.op} {list(node.shape)}" if node is not None else "?"
        if kind == "ref":
            rows.append((i, kind, layer, "fp32", "numpy reference (float32 values)", "-"))
            continue
        rows.append((i, kind, layer) + step_choice(kind, op, half))
    return rows
