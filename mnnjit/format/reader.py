"""Read .mnn files into a :class:`~mnnjit.format.model.Net` (verified, see decoder.py)."""
from __future__ import annotations

import errno
import os
from typing import Optional, Union

from .decoder import Decoder
from .errors import MNNFormatError
from .model import Net, validate_net
from .schema import mnn_schema

__all__ = ["read_net", "read_bytes"]

PathOrBytes = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview]


def read_bytes(source: PathOrBytes) -> tuple:
    """Return ``(data, label, path)`` for a path or an in-memory buffer."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source), "<bytes>", None
    path = os.fspath(source)
    if not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, f"MNN model file not found: {path}", path)
    with open(path, "rb") as fh:
        data = fh.read()
    return data, path, path


def read_net(source: PathOrBytes, *, load_external: bool = True,
             weight_path: Optional[str] = None, validate: bool = True) -> Net:
    """Read a .mnn model from a path or bytes into a :class:`Net`.

    Every offset, size and count is verified; a malformed file raises
    :class:`MNNFormatError` naming the problem, a missing file ``FileNotFoundError``.
    If ops reference external weights (converter ``--saveExternalData``) and
    ``load_external`` is true, they are loaded from ``weight_path`` (default
    ``<model path>.weight``) into the tables, whose ``external`` field is then cleared.
    """
    data, label, path = read_bytes(source)
    if len(data) == 0:
        raise MNNFormatError(f"{label}: empty file, not an MNN model")
    try:
        d = Decoder(data, mnn_schema()).root("Net")
        if d["oplists"] is None:
            raise MNNFormatError("Net has no oplists (not an MNN model?)")
        net = Net.from_dict(d)
        if validate:
            validate_net(net)
    except MNNFormatError as e:
        raise MNNFormatError(f"{label}: not a valid MNN model: {e}") from None
    if load_external:
        from .external import has_external, load_external_data
        if has_external(net):
            if weight_path is None:
                if path is None:
                    raise MNNFormatError(
                        f"{label}: model uses external weights; pass weight_path=")
                weight_path = path + ".weight"
            load_external_data(net, weight_path)
    return net
