"""Weight compression of a Net's convolutions (``--weightQuantBits``, ``--weightQuantBlock``,
``--weightQuantAsymmetric``, ``--fp16``), in the form real MNN's converter writes.

Every Convolution, ConvolutionDepthwise, Deconvolution and DeconvolutionDepthwise (the MatMuls and
RNN projections written as 1x1 convolutions included) gets an ``IDSTQuan`` table instead of float
weights. Groups are contiguous runs of the flat weight, ``outputCount`` of them; with a block size
each convolution's input channels are cut into blocks of that many (when they divide evenly).
"""
from __future__ import annotations

from typing import Iterator

import numpy as np

from ..format import Net, Op
from ..format.quant import conv_weight
from ..format.quant_write import fp16_weight, quantize_weight

_CONV_TYPES = ("Convolution", "ConvolutionDepthwise", "Deconvolution", "DeconvolutionDepthwise")


def conv_ops(net: Net) -> Iterator[Op]:
    """Convolution-family ops of the main graph and the subgraphs."""
    for op in net.oplists:
        if op.type in _CONV_TYPES and op.main_type == "Convolution2D":
            yield op
    for sub in net.subgraphs or []:
        for op in sub.nodes:
            if op.type in _CONV_TYPES and op.main_type == "Convolution2D":
                yield op


def _groups(op: Op, size: int, block: int) -> int:
    common = op.main.get("common") or {}
    oc = int(common.get("outputCount") or 0)
    if oc <= 0 or size % oc:
        return 1
    groups = oc
    ic = int(common.get("inputCount") or 0) // max(1, int(common.get("group") or 1))
    if block and op.type == "Convolution" and ic > block and ic % block == 0:
        groups = oc * (ic // block)
    return groups


def compress_weights(net: Net, bits: int = 0, block: int = 0, asymmetric: bool = True, fp16: bool = False) -> int:
    """Quantize (``bits`` 2..8) or halve (``fp16``) every convolution's weights in place; returns
    how many ops changed. Already compressed weights are decoded first (re-quantizing a model)."""
    if bits and not 2 <= bits <= 8:
        raise ValueError(f"--weightQuantBits must be 2..8, got {bits}")
    if block < 0:
        raise ValueError(f"--weightQuantBlock must be >= 0, got {block}")
    changed = 0
    for op in conv_ops(net):
        main = op.main
        if main.get("external") is not None and len(main["external"]):
            raise ValueError(f"op {op.name!r}: weights are in an external file; load them first")
        w = conv_weight(main, f"op {op.name!r}")
        if w is None or np.asarray(w).size == 0:
            continue
        w = np.asarray(w, np.float32).reshape(-1)
        if bits:
            main["quanParameter"] = quantize_weight(w, _groups(op, w.size, block), bits, asymmetric)
        elif fp16:
            main["quanParameter"] = fp16_weight(w)
        else:
            continue
        main["weight"] = None
        changed += 1
    return changed
