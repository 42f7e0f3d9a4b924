"""The ONNX front end: ONNX models -> .mnn files, in pure Python (``mnnjit convert``).

    from mnnjit.converter import convert_onnx, ConvertOptions, save_mnn
    net = convert_onnx("model.onnx", ConvertOptions(biz_code="demo", weight_quant_bits=8))
    save_mnn(net, "model.mnn")            # loads in real MNN and in mnnjit

The ONNX file is read with the ``onnx`` package (shapes inferred by ``onnx.shape_inference``);
every node maps onto the MNN ops real MNN's converter writes for it (``ops_*.py``), values known
while converting are folded with ONNX's reference implementation, and clean-up passes
(``passes.py``) remove layout round trips and dead ops. Unsupported nodes are all reported at once
(:class:`UnsupportedOnnxError`) and nothing is produced.
"""
from __future__ import annotations

import os
from typing import Any

from .core import UnsupportedOnnxError, supported_onnx_ops
from .onnx_to_mnn import MNN_FORMAT_VERSION, ConvertOptions, convert_onnx, count_nodes, load_onnx
from .quantize import compress_weights

__all__ = ["convert_onnx", "ConvertOptions", "UnsupportedOnnxError", "supported_onnx_ops", "save_mnn",
           "compress_weights", "load_onnx", "count_nodes", "MNN_FORMAT_VERSION"]


def save_mnn(net: Any, path: str, external: bool = False) -> list[str]:
    """Write ``net`` to ``path`` (with ``external``, weights go to ``<path>.weight`` as
    ``--saveExternalData`` does); returns the files written. Files are written whole or not at
    all (a temporary file is renamed into place)."""
    from ..format import net_to_bytes
    from ..format.external_write import split_external
    path = os.fspath(path)
    written = []
    if external:
        weights = split_external(net)
        _atomic_write(path + ".weight", weights)
        written.append(path + ".weight")
    _atomic_write(path, net_to_bytes(net))
    written.insert(0, path)
    return written


def _atomic_write(path: str, data: bytes) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
