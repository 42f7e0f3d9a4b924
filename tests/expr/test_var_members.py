"""Var members added for MNN parity: __next__, __delitem__, copy_to_device_ptr, set_device_ptr."""
from __future__ import annotations

import numpy as np
import pytest

import mnnjit.expr as F


def test_next_walks_axis0_then_stops():
    v = F.const([1.0, 2.0, 3.0], [3])
    assert [float(next(v)) for _ in range(3)] == [1.0, 2.0, 3.0]
    with pytest.raises(StopIteration):
        next(v)
    assert float(next(v)) == 1.0  # restarts after StopIteration


def test_delitem_is_numpy_error():
    v = F.const([1.0, 2.0], [2])
    with pytest.raises(ValueError, match="cannot delete"):
        del v[0]


def test_host_pointer_roundtrip():
    v = F.const([1.0, 2.0, 3.0], [3])
    out = np.zeros(3, np.float32)
    v.copy_to_device_ptr(out.ctypes.data, 0)
    np.testing.assert_array_equal(out, [1, 2, 3])
    src = np.array([4.0, 5.0, 6.0], np.float32)
    v.set_device_ptr(src.ctypes.data, 0)
    np.testing.assert_array_equal(v.read(), src)
    with pytest.raises(RuntimeError, match="host memory"):
        v.copy_to_device_ptr(out.ctypes.data, 2)
