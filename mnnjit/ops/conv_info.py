"""Whether a model plan runs on the kernel-step executor (``backends/cpu/kernel_steps.NetPlan``).

Decided from the graph alone, without importing numba (nor the compiler, for a graph without
convolutions): a plan qualifies, unless ``MNNJIT_JIT_THRESHOLD=off``, when its convolutions do
at least the compiler's threshold of multiply-adds (``MNNJIT_JIT_THRESHOLD``, default 512K: below
it the numpy reference steps are faster than launching kernels), or, in fp16 / quantized-weight
modes, when it has any such convolution (the modes only exist on the kernel path; models convert
quantized fully connected layers to 1x1 convolutions). :func:`conv_params` is the one definition of
the convolutions the kernel steps run.
"""
from __future__ import annotations

from typing import Any, Optional, Tuple

import numpy as np

from ..graph import topo_order

__all__ = ["runs_as_net", "conv_params", "conv_macs"]


def conv_params(n: Any) -> Optional[Tuple[Any, Optional[np.ndarray], Tuple[int, ...]]]:
    """(weights: ``ConvWeights`` or float array [O, C/group, kh, kw], bias or None, weight shape)
    of a float convolution with constant weights - a model's ``mnn_conv2d`` or a ``conv2d`` whose
    weight and bias are constants - else None."""
    if len(n.shape) != 4 or n.dtype != np.float32:
        return None
    if n.op == "mnn_conv2d":
        w = n.attrs["weights"]
        return w, w.bias, tuple(w.shape)
    if n.op == "conv2d" and n.inputs[1].op == "const" and \
            (len(n.inputs) == 2 or n.inputs[2].op == "const"):
        w = np.asarray(n.inputs[1].value, np.float32)
        b = None if len(n.inputs) == 2 else np.asarray(n.inputs[2].value, np.float32).reshape(-1)
        return w, b, tuple(w.shape)
    return None


def conv_macs(plan: Any) -> int:
    """Multiply-adds of the plan's constant-weight float convolutions."""
    macs = 0
    for n in topo_order(plan.outputs, stop_at_values=False):
        conv = conv_params(n)
        if conv is not None:
            macs += int(np.prod(n.shape, dtype=np.int64)) * int(np.prod(conv[2][1:], dtype=np.int64))
    return macs


def runs_as_net(plan: Any, modes: Any) -> bool:
    """See the module docstring."""
    if getattr(plan, "dynamic", False) or not getattr(plan, "outputs", None):
        return False
    macs = conv_macs(plan)
    if not macs:
        return False            # nothing for the kernel steps: the compiler is not even imported
    from ..settings import compiling_enabled, threshold
    if not compiling_enabled():
        return False
    moded = modes is not None and (modes.fp16 or modes.keep_quantized)
    return moded or macs >= threshold()
