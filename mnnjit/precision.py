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
                          slower: one scalar widening per weight per k-step); fused blocks keep
                          their insides float32 (the expand+depthwise block widens its input once
                          per launch, halves only at its output); model inputs and outputs stay
                          float32. Each step's choice: ``backends.cpu.weights.plan_choices``.
                          This CPU has no fp16 arithmetic: float16 pays only where a layer is
                          bound by memory traffic (``benchmarks/RESULTS.md``).
``memory`` 0, 1           weight-quantized models are decoded to float once, at load, as MNN does.
``memory`` 2 (low)        8-bit and <=4-bit quantized convolution weights stay codes in memory
                          (int8, or two 4-bit codes a byte) with per-channel/per-block scale and
                          offset; each convolution task dequantizes the weight panels it needs
                          into a cache-resident scratch once per forward (the expand+depthwise
                          block: one L1-resident panel at a time, right before its use),
                          feeding the GEMM micro-kernel; 8-bit classifiers (1x1 on one pixel)
                          read the codes in a GEMV. Float (non-quantized) models are
                          unaffected, as in MNN.
========================  ==========================================================================

For Vars built with ``mnnjit.expr``: the precision given to ``set_global_executor_config`` is
recorded (:func:`executor_modes`), and computation stays float32. That gives real MNN's numbers:
on this CPU (no fp16 arithmetic) real MNN computes expr graphs in float32 under precision=low too,
and values a user reads are float32 in both. fp16 storage pays off only where intermediates are
stored between kernels of a fixed plan (the model runner). ``memory`` has no effect on expr-built
Vars (they carry no quantized weights).

The compiler's graph lowering (``mnnjit.compiler.lower``) passes the modes to the backend: the CPU
backend's kernel-step plans apply them (fp16 activation storage, quantized weight codes; the
weight sources are in :mod:`mnnjit.backends.cpu.weights`). Only numpy is imported here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional

import numpy as np

__all__ = ["Modes", "parse_modes", "activation_dtype", "keeps_quantized", "weight_nbytes",
           "set_executor_modes", "executor_modes", "NORMAL", "HIGH", "LOW", "LOW_BF"]

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


def weight_nbytes(source: Any) -> int:
    """Bytes a weight source (or array) keeps in memory."""
    return int(source.nbytes)


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
