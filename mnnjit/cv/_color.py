"""cvtColor and cvtColorTwoPlane: build ``cvt_color`` graph nodes."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..ops import build as B
from ..ops.image_color import FWD3, expected_channels, gray_u8, output_shape
from ..ops.indexing import getitem
from ._common import as_hwc, image_node, out_var


def bgr_to_gray_u8(bgr: np.ndarray) -> np.ndarray:
    """OpenCV's fixed-point BGR -> gray of a uint8 [h, w, 3] array (used by imread)."""
    b, g, r = (bgr[..., i].astype(np.int32) for i in range(3))
    return gray_u8(b, g, r)


#: OpenCV takes a 3- or a 4-channel image for every BGR/RGB code: the code for the other count
#: (alpha dropped, kept or added as that code does)
_CHANNEL_TWIN = {(6, 4): 10, (7, 4): 11, (10, 3): 6, (11, 3): 7,
                 (12, 4): 16, (13, 4): 17, (22, 4): 26, (23, 4): 27,
                 (16, 3): 12, (17, 3): 13, (26, 3): 22, (27, 3): 23,
                 (127, 4): 129, (128, 4): 130, (131, 4): 133, (132, 4): 134,
                 (129, 3): 127, (130, 3): 128, (133, 3): 131, (134, 3): 132,
                 (4, 4): 3, (3, 3): 4, (2, 4): 5, (5, 3): 2}
#: codes that hand a 4-channel (0: BGR2BGRA) or a 3-channel (1: BGRA2BGR) image back unchanged
_CHANNEL_SAME = {(0, 4), (1, 3)}


def cvt_node(node, code: int):
    """A ``cvt_color`` node converting HWC ``node`` with ``code`` (argument checks included)."""
    code = int(code)
    node = as_hwc(node)
    c = node.shape[2] if len(node.shape) == 3 else 0
    if (code, c) in _CHANNEL_SAME and node.dtype in (np.uint8, np.float32):
        return node
    code = _CHANNEL_TWIN.get((code, c), code)
    if c == 4 and code in FWD3:     # a colour space of BGR: the alpha channel is ignored
        node = B.as_node(getitem(B.wrap(node), (slice(None), slice(None), slice(0, 3))))
    need = expected_channels(code)
    c = node.shape[2]
    if c not in need:
        raise ValueError(f"cvtColor: code {code} needs an image with {' or '.join(map(str, need))} channel(s), "
                         f"got shape {list(node.shape)}")
    if node.dtype not in (np.uint8, np.float32):
        raise TypeError(f"cvtColor: unsupported image dtype {node.dtype} (need uint8 or float32)")
    shape = output_shape(code, node.shape)
    if min(shape) <= 0 or (code in range(90, 107) and node.shape[0] % 3) or \
            (code in range(90, 127) and (shape[0] % 2 or shape[1] % 2)) or \
            (code in range(127, 135) and (node.shape[0] % 2 or node.shape[1] % 2)):
        raise ValueError(f"cvtColor: code {code} needs even image sizes (and a height divisible by 3 for "
                         f"YUV 4:2:0 input), got shape {list(node.shape)}")
    return B.make_node("cvt_color", (node,), {"code": code}, fmt="NHWC")


def cvtColor(src: Any, code: int, dstCn: int = 0):
    """Convert ``src`` between colour spaces (OpenCV's COLOR_* codes); grayscale keeps a channel axis."""
    return out_var(cvt_node(image_node(src), code))


def cvtColorTwoPlane(src1: Any, src2: Any, code: int):
    """YUV 4:2:0 semi-planar conversion from a luma plane [h, w(, 1)] and an interleaved chroma plane
    [h/2, w/2, 2], or its h*w/2 bytes as a flat array as in MNN's docs (codes COLOR_YUV2*_NV12 / _NV21)."""
    from ..var import Var
    y = as_hwc(image_node(src1, "src1"))
    flat = src2._node if isinstance(src2, Var) else None
    uv = flat if flat is not None and len(flat.shape) == 1 else image_node(src2, "src2")
    h, w = y.shape[0], y.shape[1]
    if uv.size * 2 != h * w:
        raise ValueError(f"cvtColorTwoPlane: chroma plane of shape {list(uv.shape)} does not match luma "
                         f"plane of shape {list(y.shape)}")
    uvr = B.make_node("reshape", (uv,), {"shape": (h // 2, w, 1)})
    stacked = B.make_node("concat", (y, uvr), {"axis": 0})
    return out_var(cvt_node(stacked, code))
