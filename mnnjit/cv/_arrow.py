"""Zero-copy access to a decoded Pillow image's pixels through the Arrow C data interface.

Pillow (11.2 and later) exports an image as an Arrow array (``Image.__arrow_c_array__``): an RGB image is
a fixed-size list of 4 uint8 per pixel (R, G, B, padding), pointing at Pillow's own pixel storage. Reading
it in place saves the copy ``np.asarray(im)`` makes (``tobytes``: 2.4 ms of CPU time for a 1080p image,
a quarter of the decode). The view keeps the image and the export capsules alive; when the export is not
available (older Pillow, storage in several blocks, another layout) the caller copies as before.
"""
from __future__ import annotations

import ctypes
from ctypes import POINTER, Structure, c_char_p, c_int64, c_void_p

import numpy as np


class _ArrowSchema(Structure):
    pass


_ArrowSchema._fields_ = [("format", c_char_p), ("name", c_char_p), ("metadata", c_char_p), ("flags", c_int64),
                         ("n_children", c_int64), ("children", POINTER(POINTER(_ArrowSchema))),
                         ("dictionary", c_void_p), ("release", c_void_p), ("private_data", c_void_p)]


class _ArrowArray(Structure):
    pass


_ArrowArray._fields_ = [("length", c_int64), ("null_count", c_int64), ("offset", c_int64), ("n_buffers", c_int64),
                        ("n_children", c_int64), ("buffers", POINTER(c_void_p)),
                        ("children", POINTER(POINTER(_ArrowArray))), ("dictionary", c_void_p),
                        ("release", c_void_p), ("private_data", c_void_p)]

_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = c_void_p
_get_pointer.argtypes = [ctypes.py_object, c_char_p]


class _Owner:
    """Keeps the image and its export capsules alive for as long as a view of its pixels exists."""

    def __init__(self, keep: tuple, address: int, nbytes: int):
        self.keep = keep
        self.__array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (address, True), "version": 3}


def rgbx_view(im) -> np.ndarray | None:
    """A read-only [h, w, 4] uint8 view of an RGB Pillow image's pixels (R, G, B, padding), or None."""
    export = getattr(im, "__arrow_c_array__", None)
    if export is None or im.mode != "RGB":
        return None
    try:
        schema_cap, array_cap = export()
        schema = _ArrowSchema.from_address(_get_pointer(schema_cap, b"arrow_schema"))
        array = _ArrowArray.from_address(_get_pointer(array_cap, b"arrow_array"))
        w, h = im.size
        if (schema.format != b"+w:4" or schema.n_children != 1 or schema.children[0].contents.format != b"C"
                or array.length != w * h or array.offset != 0 or array.null_count != 0 or array.n_children != 1):
            return None
        child = array.children[0].contents
        if child.offset != 0 or child.length != 4 * w * h or child.n_buffers != 2 or not child.buffers[1]:
            return None
        owner = _Owner((im, schema_cap, array_cap), child.buffers[1], 4 * w * h)
    except (ValueError, TypeError, AttributeError, OSError):  # Pillow refuses (e.g. storage in several blocks)
        return None
    view = np.asarray(owner).reshape(h, w, 4)
    view.flags.writeable = False
    return view
