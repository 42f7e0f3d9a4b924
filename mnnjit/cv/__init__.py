"""mnnjit.cv: MNN.cv - OpenCV-style image functions on HWC uint8 BGR Vars (NHWC data format).

Every function builds graph nodes of registered image ops (``mnnjit/ops/image_*.py``), so chains such
as ``resize -> [..., ::-1] -> astype -> - mean -> * scale`` are one lazy graph the compiler can fuse.
Image I/O goes through Pillow; nothing here imports Numba or OpenCV at import time.
"""
from __future__ import annotations

from ._constants import *  # noqa: F401,F403
from ._color import cvtColor, cvtColorTwoPlane  # noqa: F401
from ._geometry import (convertMaps, flip, getAffineTransform, getPerspectiveTransform,  # noqa: F401
                        getRectSubPix, getRotationMatrix2D, invertAffineTransform, remap, resize, rotate,
                        warpAffine, warpPerspective)
from ._io import haveImageReader, haveImageWriter, imdecode, imencode, imread, imwrite  # noqa: F401

try:  # modules added step by step; each is optional until it exists
    from ._filter import *  # noqa: F401,F403
except ImportError as _e:  # pragma: no cover
    if "_filter" not in str(_e):
        raise
try:
    from ._misc import *  # noqa: F401,F403
except ImportError as _e:  # pragma: no cover
    if "_misc" not in str(_e):
        raise
try:
    from ._draw import *  # noqa: F401,F403
except ImportError as _e:  # pragma: no cover
    if "_draw" not in str(_e):
        raise
try:
    from ._contours import *  # noqa: F401,F403
except ImportError as _e:  # pragma: no cover
    if "_contours" not in str(_e):
        raise
