"""Creation functions, products, linalg, random and iteration helpers of mnnjit.numpy against numpy.

Tolerances: products rtol 1e-4 (float32 BLAS vs numpy's float32 summation order), linalg rtol 1e-3
(float32 results of float64 decompositions), creation functions exact (or 1e-6 for float ranges).
"""
from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import mnnjit.numpy as mnp
from numpy_testlib import arrays, assert_close, float_arrays, int_arrays, shapes, to_np


def _same_outcome(mfn, nfn, **tol):
    try:
        want = nfn()
    except (ValueError, TypeError, IndexError, np.linalg.LinAlgError) as exc:
        with pytest.raises(type(exc)):
            to_np(mfn())
        return
    assert_close(mfn(), want, **tol)


def _case_zeros_ones(d):
    shp = d.draw(st.lists(st.integers(0, 3), max_size=3))
    k = d.draw(st.sampled_from(["zeros", "ones", "empty"]))
    dt = d.draw(st.sampled_from([None, np.int32, np.float32, np.uint8]))
    want = (lambda: np.zeros(shp, dt or np.float32)) if k == "empty" else (lambda: getattr(np, k)(shp, dt or np.float32))
    return (lambda: getattr(mnp, k)(shp, dt)), want


def _case_like(d):
    a = d.draw(arrays(shapes()))
    k = d.draw(st.sampled_from(["zeros_like", "ones_like", "empty_like", "full_like"]))
    if k == "full_like":
        return (lambda: mnp.full_like(a, 3)), (lambda: np.full_like(a, 3))
    if k == "empty_like":
        return (lambda: mnp.empty_like(a)), (lambda: np.zeros_like(a))
    return (lambda: getattr(mnp, k)(a)), (lambda: getattr(np, k)(a))


def _case_full(d):
    shp = d.draw(st.lists(st.integers(0, 3), max_size=3))
    v = d.draw(st.one_of(st.integers(-5, 5), st.floats(-5, 5, width=32)))
    return (lambda: mnp.full(shp, v)), (lambda: np.full(shp, v))


def _case_arange(d):
    start = d.draw(st.integers(-10, 10))
    stop = d.draw(st.integers(-10, 20))
    step = d.draw(st.sampled_from([1, 2, -1, 3, 0.5, -0.25]))
    return (lambda: mnp.arange(start, stop, step)), (lambda: np.arange(start, stop, step))


def _case_spaces(d):
    start = d.draw(st.integers(-5, 5))
    stop = d.draw(st.integers(1, 10))
    num = d.draw(st.integers(0, 12))
    endpoint = d.draw(st.booleans())
    k = d.draw(st.sampled_from(["linspace", "logspace", "geomspace"]))
    if k == "geomspace":
        start = abs(start) + 1
    return (lambda: getattr(mnp, k)(start, stop, num, endpoint=endpoint)), \
        (lambda: getattr(np, k)(start, stop, num, endpoint=endpoint))


def _case_linspace_int(d):
    num = d.draw(st.integers(0, 12))
    return (lambda: mnp.linspace(0, 10, num, dtype=np.int32)), (lambda: np.linspace(0, 10, num, dtype=np.int32))


def _case_eye_tri(d):
    n, m = d.draw(st.integers(0, 4)), d.draw(st.one_of(st.none(), st.integers(0, 4)))
    k = d.draw(st.integers(-3, 3))
    name = d.draw(st.sampled_from(["eye", "tri"]))
    return (lambda: getattr(mnp, name)(n, m, k)), (lambda: getattr(np, name)(n, m, k, dtype=np.float32))


def _case_identity(d):
    n = d.draw(st.integers(0, 4))
    return (lambda: mnp.identity(n)), (lambda: np.identity(n, np.float32))


def _case_vander(d):
    x = d.draw(int_arrays(shapes(1, 1, 0, 4), -3, 3))
    n = d.draw(st.one_of(st.none(), st.integers(0, 4)))
    inc = d.draw(st.booleans())
    return (lambda: mnp.vander(x, n, inc)), (lambda: np.vander(x, n, inc))


def _case_meshgrid(d):
    xs = [d.draw(arrays(shapes(1, 1, 0, 3))) for _ in range(d.draw(st.integers(1, 3)))]
    idx = d.draw(st.sampled_from(["xy", "ij"]))
    sparse = d.draw(st.booleans())
    return (lambda: mnp.meshgrid(*xs, indexing=idx, sparse=sparse)), \
        (lambda: list(np.meshgrid(*xs, indexing=idx, sparse=sparse)))


def _case_array_funcs(d):
    a = d.draw(arrays(shapes()))
    k = d.draw(st.sampled_from(["array", "asarray", "asanyarray", "copy", "ascontiguousarray", "asfarray",
                                "asfortranarray", "require"]))
    if k == "asfarray":
        return (lambda: mnp.asfarray(a)), (lambda: a.astype(np.float32))
    if k in ("ascontiguousarray", "asfortranarray"):
        return (lambda: getattr(mnp, k)(a)), (lambda: np.atleast_1d(a))
    return (lambda: getattr(mnp, k)(a)), (lambda: np.array(a))


def _case_mat(d):
    a = d.draw(arrays(shapes(max_dims=2)))
    return (lambda: mnp.mat(a)), (lambda: np.asarray(np.asmatrix(a)))


def _case_fromfunction(d):
    shp = tuple(d.draw(st.lists(st.integers(1, 3), min_size=1, max_size=3)))
    return (lambda: mnp.fromfunction(lambda *ix: sum(ix), shp)), \
        (lambda: np.fromfunction(lambda *ix: sum(ix), shp, dtype=np.float32))


def _case_products(d):
    sa = d.draw(st.sampled_from([(), (3,), (2, 3), (2, 2, 3)]))
    sb = d.draw(st.sampled_from([(), (3,), (3, 2), (2, 3, 2)]))
    a = d.draw(float_arrays(st.just(sa), -5, 5))
    b = d.draw(float_arrays(st.just(sb), -5, 5))
    k = d.draw(st.sampled_from(["dot", "inner", "outer", "matmul"]))
    return (lambda: getattr(mnp, k)(a, b)), (lambda: getattr(np, k)(a, b))


def _case_vdot(d):
    a = d.draw(float_arrays(st.just((2, 3)), -5, 5))
    b = d.draw(float_arrays(st.sampled_from([(6,), (3, 2)]), -5, 5))
    return (lambda: mnp.vdot(a, b)), (lambda: np.vdot(a, b))


def _case_tensordot(d):
    a = d.draw(float_arrays(st.just((2, 3, 4)), -5, 5))
    b = d.draw(float_arrays(st.just((3, 4, 2)), -5, 5))
    axes = d.draw(st.sampled_from([2, 1, 0, ([1, 2], [0, 1]), ([0], [2])]))
    return (lambda: mnp.tensordot(a, b, axes)), (lambda: np.tensordot(a, b, axes))


def _case_cross(d):
    shp = d.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=2, max_side=3)).input_shapes
    da, db = d.draw(st.sampled_from([2, 3])), d.draw(st.sampled_from([2, 3]))
    a = d.draw(float_arrays(st.just(shp[0] + (da,)), -5, 5))
    b = d.draw(float_arrays(st.just(shp[1] + (db,)), -5, 5))
    return (lambda: mnp.cross(a, b)), (lambda: np.cross(a, b))


def _case_norm(d):
    a = d.draw(float_arrays(shapes(1, 2, 1, 4), -5, 5))
    if a.ndim == 1:
        ord_ = d.draw(st.sampled_from([None, 1, 2, np.inf, -np.inf, 0, 3]))
    else:
        ord_ = d.draw(st.sampled_from([None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf]))
    keep = d.draw(st.booleans())
    return (lambda: mnp.linalg.norm(a, ord_, keepdims=keep)), \
        (lambda: np.asarray(np.linalg.norm(a, ord_, keepdims=keep), np.float32))


def _case_norm_axis(d):
    a = d.draw(float_arrays(shapes(2, 3, 1, 4), -5, 5))
    ax = d.draw(st.integers(-a.ndim, a.ndim - 1))
    return (lambda: mnp.linalg.norm(a, axis=ax)), (lambda: np.linalg.norm(a, axis=ax))


def _case_solve(d):
    n = d.draw(st.integers(1, 4))
    a = d.draw(float_arrays(st.just((n, n)), -5, 5)) + np.eye(n, dtype=np.float32) * 20
    b = d.draw(float_arrays(st.sampled_from([(n,), (n, 2)]), -5, 5))
    return (lambda: mnp.linalg.solve(a, b)), (lambda: np.linalg.solve(a, b))


CASES = {name[len("_case_"):]: fn for name, fn in globals().items() if name.startswith("_case_")}


@pytest.mark.parametrize("name", sorted(CASES))
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_function(name, data):
    mfn, nfn = CASES[name](data)
    _same_outcome(mfn, nfn, rtol=1e-4, atol=1e-4)


@settings(max_examples=20, deadline=None)
@given(a=float_arrays(shapes(2, 2, 1, 4), -5, 5), full=st.booleans())
def test_svd_reconstructs(a, full):
    u, s, vh = mnp.linalg.svd(a, full_matrices=full)
    np.testing.assert_allclose(s.read(), np.linalg.svd(a, compute_uv=False), rtol=1e-3, atol=1e-3)
    k = s.read().shape[0]
    rec = u.read()[:, :k] @ np.diag(s.read()) @ vh.read()[:k, :]
    np.testing.assert_allclose(rec, a, rtol=1e-3, atol=1e-3)
    assume(True)


def test_linalg_errors():
    with pytest.raises(np.linalg.LinAlgError):
        mnp.linalg.solve(np.zeros((2, 2), np.float32), np.ones(2, np.float32)).read()
    with pytest.raises(np.linalg.LinAlgError):
        mnp.linalg.solve(np.zeros((2, 3), np.float32), np.ones(2, np.float32))
    assert repr(mnp.linalg.norm(mnp.arange(9) - 4)) == "array(7.745967, dtype=float32)"  # MNN doc example


def test_random_seeded_and_distributions():
    mnp.random.seed(42)
    a = [mnp.random.rand(2, 3).read(), mnp.random.randn([2, 3]).read(), mnp.random.randint(0, 4, size=10).read(),
         mnp.random.random([4]).read()]
    mnp.random.seed(42)
    b = [mnp.random.rand(2, 3).read(), mnp.random.randn([2, 3]).read(), mnp.random.randint(0, 4, size=10).read(),
         mnp.random.random([4]).read()]
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert a[0].dtype == np.float32 and a[0].shape == (2, 3) and (a[0] >= 0).all() and (a[0] < 1).all()
    assert a[2].dtype == np.int32 and (a[2] >= 0).all() and (a[2] < 4).all()
    big = mnp.random.randn(20000).read()
    assert abs(big.mean()) < 0.05 and abs(big.std() - 1) < 0.05
    u = mnp.random.rand(20000).read()
    assert abs(u.mean() - 0.5) < 0.02
    ints = mnp.random.randint(5, size=(1000,)).read()
    assert set(np.unique(ints).tolist()) == {0, 1, 2, 3, 4}
    assert not np.array_equal(mnp.random.rand(5).read(), mnp.random.rand(5).read())


def test_iterators_and_strings():
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    assert list(mnp.ndenumerate(a)) == [(i, v.item()) for i, v in np.ndenumerate(a)]
    assert list(mnp.ndindex(2, 3)) == list(np.ndindex(2, 3))
    assert list(mnp.flatiter(mnp.array(a))) == list(range(6))
    assert [x.item() for x in mnp.nditer(mnp.array(a))] == list(range(6))
    assert mnp.binary_repr(-5, 8) == np.binary_repr(-5, 8)
    assert mnp.base_repr(255, 16) == "FF"
    bits = np.array([[1, 0, 1], [0, 1, 1]], np.int32)
    assert_close(mnp.packbits(bits, axis=1), np.packbits(bits, axis=1))
    packed = np.packbits(bits)
    assert_close(mnp.unpackbits(packed, count=6), np.unpackbits(packed, count=6))
    assert_close(mnp.unpackbits(packed, bitorder="little"), np.unpackbits(packed, bitorder="little"))


def test_buffers_and_files(tmp_path):
    data = np.arange(5, dtype=np.float32)
    assert_close(mnp.frombuffer(data.tobytes()), data)
    assert_close(mnp.fromstring("1 2 3", sep=" "), np.array([1, 2, 3], np.float32))
    assert_close(mnp.fromiter(iter(range(4)), np.int32), np.arange(4, dtype=np.int32))
    path = tmp_path / "d.bin"
    data.tofile(path)
    assert_close(mnp.fromfile(str(path)), data)
    assert_close(mnp.loadtxt(io.StringIO("1 2\n3 4")), np.array([[1, 2], [3, 4]], np.float32))


def test_scalars_and_misc():
    assert mnp.asscalar(mnp.array([24])) == 24
    assert mnp.dot(3, 4) == 12
    assert mnp.inner([1, 2, 3], [0, 1, 0]) == 2
    assert mnp.vdot([[1, 0], [0, 1]], [[4, 1], [2, 2]]) == 6  # numpy's vdot (flattened), not a matmul
    assert_close(mnp.ix_([0, 1], [2, 4]), np.ix_([0, 1], [2, 4]))
    assert_close(mnp.bmat([[np.eye(2), np.zeros((2, 1))]]), np.asarray(np.bmat([[np.eye(2), np.zeros((2, 1))]])))
    with pytest.raises(ValueError):
        mnp.asarray_chkfinite([1.0, np.inf])
