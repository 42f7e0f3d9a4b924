"""Whether a model plan runs on the kernel-step executor (``backends/cpu/net_exec.NetPlan``).

Decided from the graph alone, without importing numba (nor the compiler, for a graph without
convolutions): a plan qualifies, unless ``MNNJIT_JIT_THRESHOLD=off``, when its convolutions do
at least the compiler's threshold of multiply-adds (``MNNJIT_JIT_THRESHOLD``, default 512K: below
it the numpy reference steps are faster than launching kernels), or, in fp16 / quantized-weight
modes, when it has any convolution or a fully connected layer with constant weights (the modes
only exist on the kernel path).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..graph import topo_order

__all__ = ["runs_as_net", "conv_macs"]


def conv_macs(plan: Any) -> tuple[int, bool]:
    """(multiply-adds of the plan's float convolutions, whether it has a constant-weight matmul)."""
    macs, fc = 0, False
    for n in topo_order(plan.outputs, stop_at_values=False):
        if n.dtype != np.float32:
            continue
        if n.op == "mnn_conv2d" or (n.op == "conv2d" and n.inputs[1].op == "const"):
            w = n.attrs["weights"].shape if n.op == "mnn_conv2d" else n.inputs[1].shape
            macs += int(np.prod(n.shape, dtype=np.int64)) * int(np.prod(w[1:], dtype=np.int64))
        elif n.op == "matmul_ex" and len(n.inputs) >= 2 and n.inputs[1].op == "const":
            fc = True
    return macs, fc


def runs_as_net(plan: Any, modes: Any) -> bool:
    """See the module docstring."""
    if getattr(plan, "dynamic", False) or not getattr(plan, "outputs", None):
        return False
    macs, fc = conv_macs(plan)
    moded = modes is not None and (modes.fp16 or modes.keep_quantized)
    if not (macs or (moded and fc)):
        return False            # nothing for the kernel steps: the compiler is not even imported
    from ..compiler.config import compiling_enabled, threshold
    if not compiling_enabled():
        return False
    return True if moded else macs >= threshold()
