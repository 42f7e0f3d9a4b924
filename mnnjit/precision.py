"""Precision and memory modes on the CPU: what ``precision`` and ``memory`` change.

MNN's runtime config (``MNN.nn.create_runtime_manager(({'precision': ..., 'memory': ...},))``,
``expr.set_global_executor_config(backend, precision, threads)``) takes ``precision`` and
``memory`` as 0/1/2 = normal/high/low (``precision`` also as ``"normal"``/``"high"``/``"low"``/
``"lowBF"``). On mnnjit's CPU backend:

========================  ==========================================================================
``precision`` 0, 1, 3     float32 storage and compute (3 = ``lowBF``: no bf16 path on CPU -> fp32)
``precision`` 2 (low)     models: every activation between kernels is stored as float16
                          (``np.float16``, uint16 bits inside Numba; F16C conversions on load and
                          store, :mod:`mnnjit.backends.cpu.fp16`), every kernel computes in float32;
                          weights stay float32 micro-kernel panels (float16 panels measured 3x
                          slower: one scalar widening per weight per k-step); model inputs and
                          outputs stay float32.
``memory`` 0, 1           weight-quantized models are decoded to float once, at load, as MNN does.
``memory`` 2 (low)        8-bit and <=4-bit quantized convolution weights stay codes in memory
                          (int8, or two 4-bit codes a byte) with per-channel/per-block scale and
                          offset; each convolution task dequantizes the weight panels it needs
                          into a cache-resident scratch once per forward, feeding the GEMM
                          micro-kernel; 8-bit classifiers (1x1 on one pixel) read the codes in a
                          GEMV. Float (non-quantized) models are unaffected, as in MNN.
========================  ==========================================================================

For Vars built with ``mnnjit.expr``: the precision given to ``set_global_executor_config`` is
recorded (:func:`executor_modes`), and computation stays float32. That gives real MNN's numbers:
on this CPU (no fp16 arithmetic) real MNN computes expr graphs in float32 under precision=low too,
and values a user reads are float32 in both. fp16 storage pays off only where intermediates are
stored between kernels of a fixed plan (the model runner). ``memory`` has no effect on expr-built
Vars (they carry no quantized weights).

The model runner (``mnnjit.nn.Module._plan``) calls :func:`plan_for_modes` with the runtime
manager's precision/memory; plans with convolutions run as a
:class:`mnnjit.backends.cpu.kernel_steps.NetPlan` (every mode; fp16 activation storage, quantized weight
codes), others as the program's ExecutionPlan. Lower-level pieces for other runners: :func:`parse_modes`,
:func:`conv_weight_source`/:func:`depthwise_weight`/:func:`weight_storage` (weights as kept in
memory), :func:`activation_dtype`, :func:`to_storage`/:func:`from_storage`.

Only numpy is imported here; the Numba-backed classes are imported inside the functions.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Tuple

import numpy as np

__all__ = ["Modes", "parse_modes", "activation_dtype", "keeps_quantized", "weight_storage",
           "conv_weight_source", "depthwise_weight", "to_storage", "from_storage",
           "weight_nbytes", "plan_for_modes", "set_executor_modes", "executor_modes", "NORMAL", "HIGH", "LOW",
           "LOW_BF"]

NORMAL, HIGH, LOW, LOW_BF = 0, 1, 2, 3
_PRECISION_NAMES = {"normal": NORMAL, "high": HIGH, "low": LOW, "lowbf": LOW_BF}
_MEMORY_NAMES = {"normal": NORMAL, "high": HIGH, "low": LOW}


@dataclass(frozen=True)
class Modes:
    """A resolved (precision, memory) pair."""

    precision: int = NORMAL
    memory: int = NORMAL

    @property
    def fp16(self) -> bool:
        """True when activations and float weights are stored as float16."""
        return self.precision == LOW

    @property
    def keep_quantized(self) -> bool:
        """True when quantized weights stay quantized in memory."""
        return self.memory == LOW


def _mode_value(value: Any, names: Mapping[str, int], key: str, top: int) -> int:
    if isinstance(value, str):
        v = names.get(value.lower())
        if v is None:
            raise ValueError(f"{key}: unknown mode {value!r}; expected one of "
                             f"{sorted(names)} or an int")
        return v
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{key} must be an int or a name, got {type(value).__name__}")
    v = int(value)
    if not 0 <= v <= top:
        raise ValueError(f"{key} must be in 0..{top}, got {v}")
    return v


def parse_modes(config: Optional[Mapping[str, Any]] = None, **overrides: Any) -> Modes:
    """Resolve MNN config keys ``precision``/``memory`` (ints 0/1/2 or names) into :class:`Modes`.
    Missing keys mean normal; other keys (backend, numThread, ...) are ignored here."""
    cfg = dict(config or {})
    cfg.update(overrides)
    p = _mode_value(cfg.get("precision", NORMAL), _PRECISION_NAMES, "precision", LOW_BF)
    m = _mode_value(cfg.get("memory", NORMAL), _MEMORY_NAMES, "memory", LOW)
    return Modes(p, m)


def activation_dtype(precision: int | Modes) -> np.dtype:
    """Storage dtype of float activations: float16 for precision=low (2), else float32."""
    p = precision.precision if isinstance(precision, Modes) else int(precision)
    return np.dtype(np.float16 if p == LOW else np.float32)


def keeps_quantized(modes: Modes, quantized: Any) -> bool:
    """Whether a quantized weight stays as codes: memory=low and an 8-bit or narrower code."""
    return modes.keep_quantized and quantized is not None and int(quantized.bits) <= 8


def weight_storage(modes: Modes, weight: Any, shape: Tuple[int, int]):
    """The weight source a GEMM/conv kernel uses for an ``[O, K]`` weight matrix.

    ``weight`` is a float array or a :class:`mnnjit.format.QuantizedWeight`. memory=low keeps a
    quantized weight as codes (:class:`QuantRows`); otherwise it is decoded now, once, and stored
    as float16 (:class:`HalfRows`, precision=low) or float32 (:class:`DenseRows`)."""
    from .backends.cpu.quant import DenseRows, HalfRows, QuantRows
    from .format import QuantizedWeight
    O, K = shape
    if isinstance(weight, QuantizedWeight):
        if keeps_quantized(modes, weight):
            return QuantRows.from_quantized(weight, (O, K))
        weight = weight.dequantize()
    w = np.asarray(weight, np.float32)
    if w.size != O * K:
        raise ValueError(f"weight has {w.size} values, expected {O}x{K}")
    w = w.reshape(O, K)
    return HalfRows(w) if modes.fp16 else DenseRows(w)


def _quantized_or_float(conv: Mapping[str, Any], what: str):
    from .format import conv_weight, quantized_weight
    quan = conv.get("quanParameter")
    w = conv.get("weight")
    if quan is not None and (w is None or len(w) == 0) and quan.get("index") is None \
            and int(quan.get("type") or 0) in (1, 2, 4):
        return quantized_weight(quan, what + ".quanParameter")
    return conv_weight(dict(conv), what)


def conv_weight_source(conv: Mapping[str, Any], modes: Modes, what: str = "Convolution2D"):
    """Weights of a ``Convolution2D`` op dict (non-depthwise) as kept in memory for ``modes``:
    ``[outputCount, inputCount/group*kh*kw]``."""
    c = conv["common"]
    O = int(c["outputCount"])
    w = _quantized_or_float(conv, what)
    size = w.codes.size if hasattr(w, "codes") else np.asarray(w).size
    if O <= 0 or size % O:
        raise ValueError(f"{what}: {size} weights do not split into {O} output channels")
    return weight_storage(modes, w, (O, size // O))


def depthwise_weight(conv: Mapping[str, Any], modes: Modes, what: str = "Convolution2D"):
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


def to_storage(x: np.ndarray, modes: Modes) -> np.ndarray:
    """A model input in the activation storage dtype of ``modes`` (float32 -> float16 for
    precision=low, via the F16C kernel)."""
    if modes.fp16 and x.dtype != np.float16:
        from .backends.cpu.fp16 import to_f16
        return to_f16(x)
    return x


def from_storage(x: np.ndarray) -> np.ndarray:
    """A model output back in float32 (float16 storage is widened; others pass through)."""
    if x.dtype == np.float16:
        from .backends.cpu.fp16 import to_f32
        return to_f32(x)
    return x


def weight_nbytes(source: Any) -> int:
    """Bytes a weight source (or array) keeps in memory."""
    return int(source.nbytes)


def plan_for_modes(program: Any, signature: tuple, precision: int = NORMAL,
                   memory: int = NORMAL) -> Any:
    """The model runner's hook (``nn.Module._plan``): the plan that runs ``program`` for an input
    signature in the given modes.

    A static plan whose convolutions reach the compile threshold (any convolution in fp16 /
    quantized modes; ``mnnjit.models.netcheck``) runs as a :class:`mnnjit.backends.cpu.kernel_steps.NetPlan` (kernel steps on preallocated
    buffers; fp16 storage under precision=low, quantized weight codes under memory=low), built
    once per (signature, modes, thread count) and cached on the program. Other plans (no
    convolution, control flow, compiling disabled with ``MNNJIT_JIT_THRESHOLD=off``) are the
    program's ExecutionPlan, which imports nothing."""
    modes = parse_modes({"precision": precision, "memory": memory})
    plan = program.plan(signature)
    if getattr(plan, "dynamic", False):
        return plan
    cache = program.__dict__.setdefault("_net_plans", {})
    worth = cache.get(("worth", signature, modes))
    if worth is None:
        from .models.netcheck import runs_as_net
        worth = cache[("worth", signature, modes)] = runs_as_net(plan, modes)
    if not worth:
        return plan
    from .backends.cpu.kernel_steps import NetPlan
    from numba import get_num_threads
    key = (signature, modes, get_num_threads())
    net = cache.get(key)
    if net is None or net.plan is not plan:
        net = cache[key] = NetPlan(plan, modes)
    return net


def set_executor_modes(precision: Any = NORMAL, memory: Any = NORMAL) -> Modes:
    """Set the modes for Vars built with ``mnnjit.expr``; the precision is stored where
    ``expr.set_global_executor_config`` records it (``mnnjit.expr._config.settings``)."""
    from .expr._config import settings
    m = parse_modes({"precision": precision, "memory": memory})
    settings["precision"] = m.precision
    settings["memory"] = m.memory
    return m


def executor_modes() -> Modes:
    """The modes the compiler should apply to expr-built Vars (from ``set_global_executor_config``)."""
    from .expr._config import settings
    return parse_modes({"precision": settings.get("precision", NORMAL),
                        "memory": settings.get("memory", NORMAL)})
