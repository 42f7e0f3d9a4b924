"""`import mnnjit` and its front ends must not pull in heavy modules (Numba, cv2, onnx, pyopencl)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_front_ends_import_no_heavy_modules():
    code = ("import sys, mnnjit, mnnjit.numpy, mnnjit.cv, mnnjit.expr, mnnjit.nn\n"
            "print(','.join(sorted(m for m in ('numba', 'llvmlite', 'cv2', 'onnx', 'onnxruntime', 'pyopencl', 'MNN')"
            " if m in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == ""
