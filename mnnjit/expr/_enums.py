"""MNN.expr's enum types (Backend, PrecisionMode, Padding_Mode, ...) and their module-level aliases.

They print like pybind11 enums (``Padding_Mode.VALID``) and compare as ints, as MNN's do.
"""
from __future__ import annotations

from .._dtypes import _MNNEnum


class Backend(_MNNEnum):
    """Compute backend (mnnjit computes on the CPU whatever is asked; see docs/compat/expr.md)."""

    CPU = 0
    METAL = 1
    CUDA = 2
    OPENCL = 3
    OPENGL = 6
    VULKAN = 7
    TRT = 9
    HIAI = 10


class MemoryMode(_MNNEnum):
    """Memory mode hint."""

    Normal = 0
    High = 1
    Low = 2


class PowerMode(_MNNEnum):
    """Power mode hint."""

    Normal = 0
    High = 1
    Low = 2


class PrecisionMode(_MNNEnum):
    """Precision mode hint."""

    Normal = 0
    High = 1
    Low = 2
    Low_BF16 = 3


class Interp_Method(_MNNEnum):  # noqa: N801 - MNN's name
    """crop_and_resize sampling method."""

    BILINEAR = 0
    NEAREST = 1


class Padding_Mode(_MNNEnum):  # noqa: N801 - MNN's name
    """conv2d / pooling padding mode."""

    CAFFE = 0
    VALID = 1
    SAME = 2


class PadValue_Mode(_MNNEnum):  # noqa: N801 - MNN's name
    """pad mode."""

    CONSTANT = 0
    REFLECT = 1
    SYMMETRIC = 2


class Pooling_Mode(_MNNEnum):  # noqa: N801 - MNN's name
    """roi_align pooling mode."""

    MAXPOOL = 0
    AVEPOOL = 1


CPU, METAL, CUDA, OPENCL, OPENGL, VULKAN, TRT, HIAI = (Backend.CPU, Backend.METAL, Backend.CUDA, Backend.OPENCL,
                                                      Backend.OPENGL, Backend.VULKAN, Backend.TRT, Backend.HIAI)
Normal, High, Low, Low_BF16 = PrecisionMode.Normal, PrecisionMode.High, PrecisionMode.Low, PrecisionMode.Low_BF16
BILINEAR, NEAREST = Interp_Method.BILINEAR, Interp_Method.NEAREST
CAFFE, VALID, SAME = Padding_Mode.CAFFE, Padding_Mode.VALID, Padding_Mode.SAME
CONSTANT, REFLECT, SYMMETRIC = PadValue_Mode.CONSTANT, PadValue_Mode.REFLECT, PadValue_Mode.SYMMETRIC
MAXPOOL, AVEPOOL = Pooling_Mode.MAXPOOL, Pooling_Mode.AVEPOOL

__all__ = ["Backend", "MemoryMode", "PowerMode", "PrecisionMode", "Interp_Method", "Padding_Mode", "PadValue_Mode",
           "Pooling_Mode", "CPU", "METAL", "CUDA", "OPENCL", "OPENGL", "VULKAN", "TRT", "HIAI", "Normal", "High",
           "Low", "Low_BF16", "BILINEAR", "NEAREST", "CAFFE", "VALID", "SAME", "CONSTANT", "REFLECT", "SYMMETRIC",
           "MAXPOOL", "AVEPOOL"]
