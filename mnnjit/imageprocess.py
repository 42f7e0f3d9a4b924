"""MNN's deprecated V2 image helpers: ``CVMatrix`` (Skia-style 3x3 matrix), ``CVImageProcess`` and the
``MNN.CV_*`` constants.

A CVMatrix maps DESTINATION pixels to SOURCE pixels (as MNN documents). ``cv.warpAffine`` accepts a
CVMatrix as OpenCV accepts a 2x3 matrix (source to destination), as real MNN's cv functions do.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

CV_ImageFormat_RGBA = 0
CV_ImageFormat_RGB = 1
CV_ImageFormat_BGR = 2
CV_ImageFormat_GRAY = 3
CV_ImageFormat_BGRA = 4
CV_ImageFormat_YUV_NV21 = 11
CV_Filter_NEAREST = 0
CV_Filter_BILINEAL = 1
CV_Filter_BICUBIC = 2
CV_Wrap_CLAMP_TO_EDGE = 0
CV_Wrap_ZERO = 1
CV_Wrap_REPEAT = 2

_CHANNELS = {CV_ImageFormat_RGBA: 4, CV_ImageFormat_RGB: 3, CV_ImageFormat_BGR: 3, CV_ImageFormat_GRAY: 1,
             CV_ImageFormat_BGRA: 4, CV_ImageFormat_YUV_NV21: 1}


class CVMatrix:
    """A 3x3 float matrix with Skia's pre/post transform builders (MNN's CVMatrix)."""

    def __init__(self) -> None:
        self._m = np.eye(3, dtype=np.float64)

    # ---- values
    def read(self) -> list[float]:
        """The 9 values, row major, as float32 numbers (MNN stores floats)."""
        return [float(v) for v in self._m.astype(np.float32).ravel()]

    def write(self, value: Sequence[float]) -> None:
        """Set the matrix from 6 values (an affine 2x3, last row 0 0 1) or 9 values (3x3)."""
        from .cv._common import to_numpy
        v = np.asarray(to_numpy(value), dtype=np.float64).ravel()
        if v.size == 6:
            self._m = np.vstack([v.reshape(2, 3), [0.0, 0.0, 1.0]])
        elif v.size == 9:
            self._m = v.reshape(3, 3).copy()
        else:
            raise ValueError(f"CVMatrix.write needs 6 or 9 values, got {v.size}")

    def matrix(self) -> np.ndarray:
        """The matrix as a float64 3x3 array (a copy)."""
        return self._m.copy()

    @classmethod
    def from_array(cls, m: np.ndarray) -> "CVMatrix":
        """A CVMatrix holding ``m`` (2x3 or 3x3)."""
        out = cls()
        out.write(np.asarray(m, dtype=np.float64).ravel())
        return out

    def __repr__(self) -> str:
        m = self._m.astype(np.float32)
        rows = ["\t".join(f"{float(v):f}" for v in row) for row in m]
        return "[[" + "]\n [".join(rows) + "]]"

    __str__ = __repr__

    # ---- builders
    @staticmethod
    def _scale(sx, sy, px, py):
        return np.array([[sx, 0, px - sx * px], [0, sy, py - sy * py], [0, 0, 1]], np.float64)

    @staticmethod
    def _rotate(degrees, px, py):
        r = math.radians(degrees)
        s, c = math.sin(r), math.cos(r)
        if abs(s) < 1e-12:
            s = 0.0
        if abs(c) < 1e-12:
            c = 0.0
        return np.array([[c, -s, s * py + (1 - c) * px], [s, c, -s * px + (1 - c) * py], [0, 0, 1]], np.float64)

    @staticmethod
    def _translate(dx, dy):
        return np.array([[1, 0, dx], [0, 1, dy], [0, 0, 1]], np.float64)

    def setScale(self, sx: float, sy: float, px: float = 0, py: float = 0) -> None:
        """Scale by (sx, sy) about (px, py)."""
        self._m = self._scale(sx, sy, px, py)

    def preScale(self, sx: float, sy: float, px: float = 0, py: float = 0) -> None:
        """Matrix = Matrix * S(sx, sy, px, py)."""
        self._m = self._m @ self._scale(sx, sy, px, py)

    def postScale(self, sx: float, sy: float, px: float = 0, py: float = 0) -> None:
        """Matrix = S(sx, sy, px, py) * Matrix."""
        self._m = self._scale(sx, sy, px, py) @ self._m

    def setRotate(self, degrees: float, px: float = 0, py: float = 0) -> None:
        """Rotate by ``degrees`` (clockwise in image coordinates) about (px, py)."""
        self._m = self._rotate(degrees, px, py)

    def preRotate(self, degrees: float, px: float = 0, py: float = 0) -> None:
        """Matrix = Matrix * R(degrees, px, py)."""
        self._m = self._m @ self._rotate(degrees, px, py)

    def postRotate(self, degrees: float, px: float = 0, py: float = 0) -> None:
        """Matrix = R(degrees, px, py) * Matrix."""
        self._m = self._rotate(degrees, px, py) @ self._m

    def setTranslate(self, dx: float, dy: float) -> None:
        """Translate by (dx, dy)."""
        self._m = self._translate(dx, dy)

    def preTranslate(self, dx: float, dy: float) -> None:
        """Matrix = Matrix * T(dx, dy)."""
        self._m = self._m @ self._translate(dx, dy)

    def postTranslate(self, dx: float, dy: float) -> None:
        """Matrix = T(dx, dy) * Matrix."""
        self._m = self._translate(dx, dy) @ self._m

    def invert(self) -> None:
        """Invert the matrix in place (a singular matrix raises ValueError)."""
        if abs(np.linalg.det(self._m)) < 1e-12:
            raise ValueError("CVMatrix.invert: the matrix is singular")
        self._m = np.linalg.inv(self._m)

    def setPolyToPoly(self, src: Sequence[float], dst: Sequence[float]) -> None:
        """Set the matrix mapping up to 4 points ``src`` to ``dst`` (flat x, y lists): translation for 1
        point, similarity for 2, affine for 3, perspective for 4."""
        s = np.asarray(src, np.float64).reshape(-1, 2)
        d = np.asarray(dst, np.float64).reshape(-1, 2)
        n = min(len(s), len(d))
        if n == 0:
            self._m = np.eye(3)
        elif n == 1:
            self._m = self._translate(*(d[0] - s[0]))
        elif n == 2:
            vs, vd = s[1] - s[0], d[1] - d[0]
            ls = np.hypot(*vs)
            if ls == 0:
                raise ValueError("setPolyToPoly: degenerate source points")
            scale = np.hypot(*vd) / ls
            ang = math.atan2(vd[1], vd[0]) - math.atan2(vs[1], vs[0])
            c, si = scale * math.cos(ang), scale * math.sin(ang)
            a = np.array([[c, -si, 0], [si, c, 0], [0, 0, 1]])
            t = d[0] - a[:2, :2] @ s[0]
            a[0, 2], a[1, 2] = t
            self._m = a
        elif n == 3:
            from .cv._geometry import affine_from_points
            self._m = np.vstack([affine_from_points(s[:3], d[:3]), [0, 0, 1]])
        else:
            from .cv._geometry import perspective_from_points
            self._m = perspective_from_points(s[:4], d[:4])


class CVImageProcess:
    """MNN's V2 image pipeline: colour conversion + affine sampling (dst->src CVMatrix) + (x - mean) * normal."""

    def __init__(self, config: dict | None = None) -> None:
        config = dict(config or {})
        self.filterType = int(config.get("filterType", CV_Filter_NEAREST))
        self.sourceFormat = int(config.get("sourceFormat", CV_ImageFormat_BGRA))
        self.destFormat = int(config.get("destFormat", CV_ImageFormat_BGRA))
        self.wrap = int(config.get("wrap", CV_Wrap_ZERO))
        self.mean = [float(v) for v in config.get("mean", (0, 0, 0, 0))]
        self.normal = [float(v) for v in config.get("normal", (1, 1, 1, 1))]
        for key, fmt in (("sourceFormat", self.sourceFormat), ("destFormat", self.destFormat)):
            if fmt not in _CHANNELS:
                raise ValueError(f"CVImageProcess: unknown {key} {fmt}")
        self._matrix = CVMatrix()
        self._padding = 0

    def setMatrix(self, matrix: CVMatrix) -> None:
        """Set the destination -> source transform."""
        if not isinstance(matrix, CVMatrix):
            raise TypeError(f"setMatrix needs a CVMatrix, not {type(matrix).__name__}")
        self._matrix = CVMatrix.from_array(matrix.matrix())

    def setPadding(self, value: int) -> None:
        """The value of pixels outside the source image when wrap is CV_Wrap_ZERO."""
        self._padding = int(value)

    def _source(self, src: Any, iw: int, ih: int, stride: int) -> np.ndarray:
        from .cv._common import to_numpy
        from .hostmem import is_address, read_address, read_buffer
        cn = _CHANNELS[self.sourceFormat]
        if is_address(src):
            # an int address or a PyCapsule (an image Var's .ptr): MNN reads the image's bytes from it
            if self.sourceFormat == CV_ImageFormat_YUV_NV21:
                need = (stride or iw) * (ih * 3 // 2)
            else:
                need = (stride or iw * cn) * (ih - 1) + iw * cn
            flat = read_address(src, max(need, 0), np.uint8, "CVImageProcess.convert")
        elif isinstance(src, (bytes, bytearray, memoryview)):
            flat = read_buffer(src, np.uint8)
        else:
            flat = np.asarray(to_numpy(src)).ravel()
            if flat.dtype != np.uint8:
                flat = np.clip(np.rint(flat), 0, 255).astype(np.uint8) if flat.dtype.kind == "f" else \
                    flat.astype(np.uint8)
        if self.sourceFormat == CV_ImageFormat_YUV_NV21:
            stride = stride or iw
            rows = ih * 3 // 2
            if flat.size < stride * rows:
                raise ValueError(f"CVImageProcess.convert: {flat.size} bytes is too few for a {iw}x{ih} NV21 image")
            return flat[: stride * rows].reshape(rows, stride)[:, :iw, None]
        stride = stride or iw * cn
        if flat.size < stride * (ih - 1) + iw * cn:
            raise ValueError(f"CVImageProcess.convert: {flat.size} values is too few for a {iw}x{ih}x{cn} image")
        flat = np.concatenate([flat, np.zeros(stride * ih - flat.size, np.uint8)]) if flat.size < stride * ih \
            else flat[: stride * ih]
        return flat.reshape(ih, stride)[:, : iw * cn].reshape(ih, iw, cn)

    def _colour(self, img: np.ndarray) -> np.ndarray:
        from .ops.image_color import cvt_color_ref
        s, d = self.sourceFormat, self.destFormat
        if s == CV_ImageFormat_YUV_NV21:
            bgr = cvt_color_ref(img, 93)
            s = CV_ImageFormat_BGR
            img = bgr
        if s == d:
            return img
        order = {CV_ImageFormat_RGBA: "RGBA", CV_ImageFormat_RGB: "RGB", CV_ImageFormat_BGR: "BGR",
                 CV_ImageFormat_BGRA: "BGRA", CV_ImageFormat_GRAY: "GRAY"}
        src, dst = order[s], order[d]
        if dst == "GRAY":
            bidx = 0 if src.startswith("B") else 2
            return cvt_color_ref(img, 6 if bidx == 0 else 7) if len(src) == 3 else \
                cvt_color_ref(img, 10 if bidx == 0 else 11)
        if src == "GRAY":
            base = np.repeat(img, 3, axis=2)
            return np.concatenate([base, np.full_like(img, 255)], 2) if len(dst) == 4 else base
        planes = {ch: img[..., src.index(ch)] for ch in src}
        planes.setdefault("A", np.full(img.shape[:2], 255, np.uint8))
        return np.stack([planes[ch] for ch in dst], -1)

    def convert_array(self, src: Any, iw: int, ih: int, stride: int, ow: int, oh: int,
                      dtype: Any = np.float32) -> np.ndarray:
        """Run the pipeline and return the [oh, ow, c] result (float32 unless ``dtype`` is uint8).

        As real MNN: sample the source image (``_imagesampler``), convert its format, then (float output
        only) compute ``(x - mean) * normal``."""
        img = self._source(src, int(iw), int(ih), int(stride))
        if self.sourceFormat == CV_ImageFormat_YUV_NV21:
            out = self._sample_planar(self._colour(img), oh, ow)
        else:
            from ._imagesampler import sample
            out = self._colour(sample(img, self._matrix.matrix(), int(oh), int(ow),
                                      self.filterType == CV_Filter_BILINEAL, self.wrap == CV_Wrap_ZERO,
                                      self._padding))
        if np.dtype(dtype) == np.uint8:
            # a uint8 destination gets the converted pixels: real MNN applies mean/normal to float output only
            return out
        cn = out.shape[2]
        mean = np.array((self.mean + [0.0] * 4)[:cn], np.float32)
        normal = np.array((self.normal + [1.0] * 4)[:cn], np.float32)
        return ((out.astype(np.float32) - mean) * normal).astype(np.float32)

    def _sample_planar(self, img: np.ndarray, oh: int, ow: int) -> np.ndarray:
        """NV21 sources: the converted image resampled through the matrix (OpenCV's remap)."""
        from .ops.image_geometry import CV_BORDER_CONSTANT, CV_BORDER_REPLICATE, remap_ref
        m = self._matrix.matrix()
        ys, xs = np.mgrid[0:oh, 0:ow].astype(np.float64)
        w = m[2, 0] * xs + m[2, 1] * ys + m[2, 2]
        w = np.where(w == 0, 1, w)
        mx = ((m[0, 0] * xs + m[0, 1] * ys + m[0, 2]) / w).astype(np.float32)
        my = ((m[1, 0] * xs + m[1, 1] * ys + m[1, 2]) / w).astype(np.float32)
        border = CV_BORDER_CONSTANT if self.wrap == CV_Wrap_ZERO else CV_BORDER_REPLICATE
        interp = 1 if self.filterType == CV_Filter_BILINEAL else 0
        out = remap_ref(img, mx, my, interp, border, (float(self._padding),) * 4)
        return np.clip(np.rint(out), 0, 255).astype(np.uint8)

    def convert(self, src: Any, iw: int, ih: int, stride: int, dst: Any) -> None:
        """Convert the image in ``src`` (iw x ih, row stride in bytes; 0 = packed) into tensor ``dst``."""
        shape = list(dst.getShape()) if hasattr(dst, "getShape") else list(dst.shape)
        cn = _CHANNELS[self.destFormat]
        dim_type = dst.getDimensionType() if hasattr(dst, "getDimensionType") else None
        nchw = len(shape) == 4 and (dim_type in (1, "CAFFE") or (dim_type is None and shape[1] == cn))
        if len(shape) == 4:
            oh, ow = (shape[2], shape[3]) if nchw else (shape[1], shape[2])
        elif len(shape) == 3:
            oh, ow = shape[0], shape[1]
        else:
            raise ValueError(f"CVImageProcess.convert: dst tensor of shape {shape} is not an image tensor")
        if hasattr(dst, "getDataType"):
            elem = getattr(dst.getDataType(), "dtype", None)
        else:
            elem = getattr(getattr(dst, "_node", None), "dtype", None)
        dt = np.uint8 if elem == np.uint8 else np.float32
        out = self.convert_array(src, iw, ih, stride, ow, oh, dt)
        if nchw:
            out = np.transpose(out, (2, 0, 1))
        out = np.ascontiguousarray(out).reshape(shape)
        if hasattr(dst, "fromNumpy"):
            dst.fromNumpy(out)
        elif hasattr(dst, "write"):
            dst.write(out)
        else:
            raise TypeError(f"CVImageProcess.convert: cannot write into a {type(dst).__name__}")

    def createImageTensor(self, dtype: Any, width: int, height: int, channel: int, data: Any = None):
        """A [1, height, width, channel] image tensor (needs mnnjit's session API Tensor)."""
        import mnnjit
        Tensor = getattr(mnnjit, "Tensor")
        return Tensor((1, int(height), int(width), int(channel)), dtype)
