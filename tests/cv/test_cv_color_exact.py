"""uint8 HSV / HLS conversions bit-exact with cv2 (x86-64 wheels: OpenCV's AVX2 code, Intel IPP for
the _FULL codes), on the numpy path and the compiled one.

The sample: 2^20 random pixels plus every triple of multiples of 17, as an image 1019 pixels wide so
each row ends in the scalar tail of the vector loops (1019 % 8 = 3 and 1019 % 32 = 27 pixels), and
the same pixels 1024 wide (no tail). mnnjit/ops/image_color.py (its HSV / HLS section) describes the
arithmetic and the few pixels still one off.
"""
from __future__ import annotations

import numpy as np
import pytest

import mnnjit.cv as cv
from mnnjit import compiler
from mnnjit.cv._common import image_var

cv2 = pytest.importorskip("cv2")

#: exact on every input (checked on all 2^24 triples, rows of 4096, 4093 and 1 pixels)
EXACT = ["BGR2HSV", "RGB2HSV", "BGR2HSV_FULL", "RGB2HSV_FULL", "BGR2HLS", "RGB2HLS", "BGR2HLS_FULL",
         "RGB2HLS_FULL", "HSV2BGR", "HSV2RGB", "HLS2BGR", "HLS2RGB"]
#: IPP's HSV->RGB (_FULL) inputs (H, S, V) where a colour channel still differs by one (all 2^24
#: checked): exact ties of the exact result that IPP's float32 rounding settles otherwise
HSV_FULL_OFF = {(66, 223, 152), (81, 167, 193), (127, 223, 243), (127, 243, 223), (128, 128, 254), (156, 228, 241),
                (156, 241, 228), (162, 199, 206), (162, 206, 199), (164, 242, 246), (166, 58, 182), (179, 219, 243),
                (179, 243, 219), (195, 223, 218), (196, 231, 118), (198, 94, 163), (211, 179, 222), (211, 222, 179),
                (224, 199, 206), (224, 206, 199), (227, 143, 196), (227, 154, 182), (227, 182, 154), (227, 186, 219),
                (227, 196, 143), (227, 219, 186), (228, 174, 219), (228, 219, 174), (231, 176, 228), (231, 192, 209),
                (231, 209, 192), (231, 228, 176), (241, 148, 176), (241, 176, 148), (241, 228, 241), (241, 241, 228),
                (244, 184, 158), (249, 190, 218), (249, 218, 190), (249, 242, 246), (251, 167, 193), (251, 193, 167)}


@pytest.fixture(params=["numpy path", "compiled"])
def path(request):
    compiler.set_threshold(0 if request.param == "compiled" else None)
    yield request.param
    compiler.set_threshold(None)


def sample(hue_max: int = 256) -> np.ndarray:
    """[n, 3] uint8 pixels: 2^20 random ones and all triples of multiples of 17 (first channel below
    ``hue_max``)."""
    rng = np.random.default_rng(20240617)
    px = rng.integers(0, 256, (1 << 20, 3))
    px[:, 0] %= hue_max
    g = np.arange(0, 256, 17)
    grid = np.stack(np.meshgrid(g[g < hue_max], g, g, indexing="ij"), -1).reshape(-1, 3)
    return np.concatenate([px, grid]).astype(np.uint8)


def as_image(px: np.ndarray, w: int) -> np.ndarray:
    n = len(px) - len(px) % w
    return px[:n].reshape(-1, w, 3)


def convert(img: np.ndarray, name: str):
    code = getattr(cv2, "COLOR_" + name)
    return np.asarray(cv.cvtColor(image_var(img), code)), cv2.cvtColor(img, code)


@pytest.mark.parametrize("name", EXACT)
@pytest.mark.parametrize("w", [1019, 1024])
def test_hsv_hls_u8_bit_exact(path, name, w):
    hue_max = 180 if name.startswith(("HSV2", "HLS2")) else 256
    got, ref = convert(as_image(sample(hue_max), w), name)
    assert np.array_equal(got, ref)


@pytest.mark.parametrize("name", ["HSV2BGR_FULL", "HSV2RGB_FULL"])
def test_hsv_full_to_rgb_u8_differs_only_on_known_ties(path, name):
    img = as_image(np.concatenate([sample(), np.array(sorted(HSV_FULL_OFF), np.uint8)]), 1019)
    got, ref = convert(img, name)
    off = np.any(got != ref, -1)
    assert {tuple(int(v) for v in p) for p in img[off]} <= HSV_FULL_OFF
    assert np.abs(got.astype(int) - ref).max() <= 1


@pytest.mark.parametrize("name", ["HLS2BGR_FULL", "HLS2RGB_FULL"])
def test_hls_full_to_rgb_u8_exact_but_in_row_tails(path, name):
    """IPP's vector code is matched exactly; its scalar code for a row's last w % 8 pixels only in
    how it rounds (truncation): ~0.6 % of those pixels differ by one."""
    img = as_image(sample(), 1019)
    got, ref = convert(img, name)
    assert np.array_equal(got[:, :1016], ref[:, :1016])
    tail = np.abs(got[:, 1016:].astype(int) - ref[:, 1016:])
    assert tail.max() <= 1 and np.any(tail, -1).mean() < 0.02
