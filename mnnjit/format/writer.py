"""Write a :class:`~mnnjit.format.model.Net` to a .mnn file (FlatBuffers)."""
from __future__ import annotations

import os
from typing import Union

from .encoder import Encoder
from .model import Net
from .schema import mnn_schema

__all__ = ["net_to_bytes", "write_net"]


def net_to_bytes(net: Net) -> bytes:
    """Serialize ``net`` to .mnn bytes. Raises MNNFormatError for values that do not fit
    the schema (unknown fields or enum names, out-of-range integers...)."""
    return Encoder(mnn_schema()).finish(net.to_dict(), "Net")


def write_net(net: Net, path: Union[str, "os.PathLike[str]"]) -> None:
    """Write ``net`` as a .mnn file at ``path`` (weights inline; nothing external)."""
    data = net_to_bytes(net)
    with open(os.fspath(path), "wb") as fh:
        fh.write(data)
