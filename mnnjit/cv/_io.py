"""Image file I/O through Pillow: imread, imwrite, imencode, imdecode, haveImageReader/Writer.

Images are HWC uint8 BGR arrays in the NHWC data format (grayscale keeps a channel axis, as in MNN).
JPEG data is decoded by libjpeg through Pillow with the same defaults as OpenCV (islow DCT, fancy
upsampling), so pixels equal ``cv2.imread``'s; a grayscale JPEG read takes the luma plane, as OpenCV does.
"""
from __future__ import annotations

import io
import os
from typing import Any, Sequence

import numpy as np

from ._common import image_array, image_var, to_numpy
from ._constants import IMREAD_ANYDEPTH, IMREAD_COLOR, IMREAD_GRAYSCALE

#: OpenCV's imwrite parameter ids (cv2.IMWRITE_*), accepted in ``params`` lists.
IMWRITE_JPEG_QUALITY = 1
IMWRITE_PNG_COMPRESSION = 16
IMWRITE_WEBP_QUALITY = 64

_READ_EXT = {".jpg", ".jpeg", ".jpe", ".png", ".bmp", ".dib", ".tif", ".tiff", ".webp", ".pbm", ".pgm", ".ppm",
             ".pnm", ".gif"}
_WRITE_FORMAT = {".jpg": "JPEG", ".jpeg": "JPEG", ".jpe": "JPEG", ".png": "PNG", ".bmp": "BMP", ".dib": "BMP",
                 ".tif": "TIFF", ".tiff": "TIFF", ".webp": "WEBP", ".pbm": "PPM", ".pgm": "PPM", ".ppm": "PPM",
                 ".pnm": "PPM"}


def _pil():
    from PIL import Image, ImageOps
    return Image, ImageOps


def _ext(name: str) -> str:
    name = str(name)
    if "." not in name:
        return "." + name.lower()
    return "." + name.rsplit(".", 1)[1].lower()


def _decode(src: Any, flag: int, what: str) -> tuple[np.ndarray, bool]:
    """Decode a file path or a binary stream into an HWC uint8 array: (pixels, is_rgb). Colour images come
    back in RGB order (Pillow's fastest export; 4 channels R, G, B, padding when read in place through the
    Arrow interface); the caller swaps them to BGR with a ``cvt_color`` node."""
    Image, ImageOps = _pil()
    try:
        im = Image.open(src)
        gray = flag == IMREAD_GRAYSCALE
        if im.format == "JPEG" and im.mode in ("RGB", "L", "YCbCr"):
            im.draft("L" if gray else "RGB", im.size)  # let libjpeg do the colour conversion, as OpenCV does
        if im.getexif().get(0x0112, 1) != 1:  # EXIF orientation, applied as OpenCV does
            im = ImageOps.exif_transpose(im)
        rgb = False
        if gray and im.mode == "L":
            arr = np.asarray(im)
        elif gray:
            from ._color import bgr_to_gray_u8
            arr = bgr_to_gray_u8(_to_bgr(im))
        elif im.mode == "RGB":
            from ._arrow import rgbx_view
            arr = rgbx_view(im)  # Pillow's own pixels (R, G, B, pad), no copy; else a 3-channel copy
            if arr is None:
                arr = np.asarray(im)
            rgb = True
        else:
            arr = _to_bgr(im)
    except FileNotFoundError:
        raise
    except Exception as exc:  # Pillow raises UnidentifiedImageError, OSError, SyntaxError, ValueError ...
        raise ValueError(f"cannot decode image {what}: {exc}") from None
    if arr.ndim == 2:
        arr = arr[:, :, None]
    return np.ascontiguousarray(arr), rgb


def _image(arr: np.ndarray, rgb: bool, flag: int):
    """The image Var: RGB data goes through a lazy RGB->BGR ``cvt_color`` node; ANYDEPTH casts to float32."""
    from ..ops import build as B
    from ._color import cvt_node
    node = image_var(arr)._node
    if rgb:  # RGB (3 channels) or Pillow's RGB + padding (4): a lazy swap to BGR
        node = cvt_node(node, 4 if arr.shape[2] == 3 else 3)
    if flag == IMREAD_ANYDEPTH:
        node = B.make_node("cast", (node,), {"dtype": np.dtype(np.float32)}, fmt="NHWC")
    return B.wrap(node)


def _to_bgr(im) -> np.ndarray:
    if im.mode not in ("RGB",):
        if im.mode in ("I;16", "I;16B", "I"):
            a = np.asarray(im).astype(np.float64)
            a = np.clip(np.rint(a / 257.0), 0, 255).astype(np.uint8) if a.max() > 255 else a.astype(np.uint8)
            return np.repeat(a[:, :, None], 3, axis=2)
        im = im.convert("RGB")
    w, h = im.size
    return np.frombuffer(im.tobytes("raw", "BGR"), np.uint8).reshape(h, w, 3)


def imread(filename: str, flag: int = IMREAD_COLOR):
    """Read an image file as an HWC Var (BGR uint8; ``IMREAD_GRAYSCALE``: [h, w, 1] uint8;
    ``IMREAD_ANYDEPTH``: BGR float32). A missing or undecodable file raises a clear error."""
    path = os.fspath(filename)
    if not os.path.exists(path):
        raise FileNotFoundError(f"imread: no such file: {path!r}")
    if os.path.isdir(path):
        raise IsADirectoryError(f"imread: {path!r} is a directory")
    return _image(*_decode(path, int(flag), repr(path)), int(flag))


def imdecode(buf: Any, flag: int = IMREAD_COLOR):
    """Decode an encoded image held in memory (bytes, bytearray, list of ints, ndarray or Var)."""
    if isinstance(buf, (bytes, bytearray, memoryview)):
        data = bytes(buf)
    else:
        arr = to_numpy(buf)
        data = np.asarray(arr).astype(np.uint8, copy=False).tobytes()
    if not data:
        raise ValueError("imdecode: empty buffer")
    return _image(*_decode(io.BytesIO(data), int(flag), f"from a {len(data)}-byte buffer"), int(flag))


def _params(params: Sequence[int] | None) -> dict[int, int]:
    if params is None:
        return {}
    p = [int(v) for v in params]
    if len(p) % 2:
        raise ValueError("imwrite/imencode params must be (id, value) pairs")
    return dict(zip(p[::2], p[1::2]))


def _encode(fmt: str, img: Any, params: Sequence[int] | None, out: Any) -> None:
    Image, _ = _pil()
    arr = image_array(img)
    if arr.ndim == 3 and arr.shape[2] == 1:
        arr = arr[:, :, 0]
    if arr.ndim not in (2, 3) or (arr.ndim == 3 and arr.shape[2] not in (3, 4)):
        raise ValueError(f"cannot encode an image of shape {list(arr.shape)}: need [h, w], [h, w, 1], [h, w, 3] "
                         "or [h, w, 4]")
    if arr.dtype != np.uint8:
        arr = np.clip(np.rint(arr), 0, 255).astype(np.uint8)
    arr = np.ascontiguousarray(arr)
    h, w = arr.shape[:2]
    if arr.ndim == 2:
        im = Image.frombuffer("L", (w, h), arr, "raw", "L", 0, 1)
    elif arr.shape[2] == 3 and fmt == "JPEG":
        # RGBX pixels (a byte-shuffle kernel) are Pillow's own layout: the image maps them without a copy
        from ..ops import build as B
        from ._color import cvt_node
        rgbx = B.wrap(cvt_node(image_var(arr)._node, 2)).read_view()
        im = Image.frombuffer("RGBX", (w, h), rgbx, "raw", "RGBX", 0, 1)
    elif arr.shape[2] == 3:
        im = Image.frombuffer("RGB", (w, h), arr, "raw", "BGR", 0, 1)
    else:
        im = Image.frombuffer("RGBA", (w, h), np.ascontiguousarray(arr[:, :, [2, 1, 0, 3]]), "raw", "RGBA", 0, 1)
        if fmt == "JPEG":
            im = im.convert("RGB")
    opts = _params(params)
    kw: dict[str, Any] = {}
    if fmt == "JPEG":
        kw["quality"] = int(opts.get(IMWRITE_JPEG_QUALITY, 95))
    elif fmt == "PNG":
        kw["compress_level"] = int(opts.get(IMWRITE_PNG_COMPRESSION, 1))
    elif fmt == "WEBP":
        kw["quality"] = int(opts.get(IMWRITE_WEBP_QUALITY, 100))
    im.save(out, format=fmt, **kw)


def imwrite(filename: str, img: Any, params: Sequence[int] | None = None) -> bool:
    """Write an image (HWC BGR or gray) to a file whose extension picks the format; returns True."""
    path = os.fspath(filename)
    fmt = _WRITE_FORMAT.get(_ext(path))
    if fmt is None:
        raise ValueError(f"imwrite: could not find a writer for the specified extension of {path!r}")
    _encode(fmt, img, params, path)
    return True


def imencode(ext: str, img: Any, params: Sequence[int] | None = None) -> tuple[bool, list[int]]:
    """Encode an image to the format of extension ``ext`` ('.jpg' or 'jpg'): ``(True, [bytes as ints])``."""
    fmt = _WRITE_FORMAT.get(_ext(ext))
    if fmt is None:
        raise ValueError(f"imencode: could not find an encoder for the specified extension {ext!r}")
    out = io.BytesIO()
    _encode(fmt, img, params, out)
    return True, list(out.getvalue())


def haveImageReader(filename: str) -> bool:
    """Whether ``filename`` exists and holds an image format mnnjit can decode (as MNN: False when missing)."""
    path = os.fspath(filename)
    if not os.path.isfile(path):
        return False
    Image, _ = _pil()
    try:
        with Image.open(path):
            return True
    except Exception:
        return False


def haveImageWriter(filename: str) -> bool:
    """Whether images can be written to files with ``filename``'s extension."""
    return _ext(os.fspath(filename)) in _WRITE_FORMAT
