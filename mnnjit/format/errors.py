"""Exceptions of the .mnn format layer."""
from __future__ import annotations

__all__ = ["MNNFormatError"]


class MNNFormatError(ValueError):
    """A .mnn file (or a Net being written) is malformed; the message says what and where."""
