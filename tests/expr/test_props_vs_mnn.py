"""Property tests: random shapes/axes/attributes through mnnjit.expr and real MNN.expr."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import both, c4

shapes = st.lists(st.integers(1, 5), min_size=1, max_size=4).map(tuple)
S = settings(max_examples=15, deadline=None)


@S
@given(shape=shapes, data=st.data(), seed=st.integers(0, 2**16))
def test_softmax(MF, shape, data, seed):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32) * 3
    both(MF, lambda F: F.softmax(F.const(x, list(shape)), axis), atol=1e-5)


@S
@given(shape=shapes, data=st.data(), keep=st.booleans(), op=st.sampled_from(
    ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"]), seed=st.integers(0, 2**16))
def test_reductions(MF, shape, data, keep, op, seed):
    axes = data.draw(st.lists(st.integers(0, len(shape) - 1), unique=True, max_size=len(shape)))
    x = np.random.default_rng(seed).uniform(-2, 2, shape).astype(np.float32)
    both(MF, lambda F: getattr(F, op)(F.const(x, list(shape)), axes, keep), atol=1e-4)


@S
@given(b=st.lists(st.integers(1, 3), max_size=2).map(tuple), m=st.integers(1, 5), k=st.integers(1, 5),
       n=st.integers(1, 5), ta=st.booleans(), tb=st.booleans(), seed=st.integers(0, 2**16))
def test_matmul_transposes(MF, b, m, k, n, ta, tb, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(b + ((k, m) if ta else (m, k))).astype(np.float32)
    bb = rng.standard_normal(b + ((n, k) if tb else (k, n))).astype(np.float32)
    both(MF, lambda F: F.matmul(F.const(a, list(a.shape)), F.const(bb, list(bb.shape)), ta, tb), atol=1e-4)


@S
@given(shape=st.lists(st.integers(1, 4), min_size=2, max_size=4).map(tuple), depth=st.integers(1, 3),
       seed=st.integers(0, 2**16))
def test_gather_nd(MF, shape, depth, seed):
    rng = np.random.default_rng(seed)
    depth = min(depth, len(shape))
    x = rng.standard_normal(shape).astype(np.float32)
    idx = np.stack([rng.integers(0, shape[d], 3) for d in range(depth)], axis=1).astype(np.int32)
    both(MF, lambda F: F.gather_nd(F.const(x, list(shape)), F.const(idx, list(idx.shape), F.NCHW, F.int)))


@S
@given(n=st.integers(1, 6), depth=st.integers(1, 5), axis=st.sampled_from([-1, 0, 1]), seed=st.integers(0, 2**16))
def test_one_hot(MF, n, depth, axis, seed):
    idx = np.random.default_rng(seed).integers(-1, depth + 1, (2, n)).astype(np.int32)
    both(MF, lambda F: F.one_hot(F.const(idx, [2, n], F.NCHW, F.int), depth, 2.0, -1.0, axis))


@S
@given(c=st.integers(1, 9), hw=st.tuples(st.integers(1, 5), st.integers(1, 5)), slope=st.floats(-1, 1),
       seed=st.integers(0, 2**16))
def test_nc4hw4_activations(MF, c, hw, slope, seed):
    x = np.random.default_rng(seed).standard_normal((2, c) + hw).astype(np.float32) * 4
    slopes = list(np.linspace(-0.5, 0.5, c))
    both(MF, lambda F: F.prelu(c4(F, x), slopes))
    both(MF, lambda F: F.relu(c4(F, x), slope))
    both(MF, lambda F: F.relu6(c4(F, x)))
    both(MF, lambda F: F.softmax(c4(F, x), 1), atol=1e-5)


@S
@given(shape=st.lists(st.integers(1, 5), min_size=2, max_size=4).map(tuple), data=st.data(), seed=st.integers(0, 2**16))
def test_transpose_split_concat(MF, shape, data, seed):
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    perm = data.draw(st.permutations(range(len(shape))))
    axis = data.draw(st.integers(0, len(shape) - 1))
    both(MF, lambda F: F.transpose(F.const(x, list(shape)), list(perm)))
    both(MF, lambda F: F.concat([F.const(x, list(shape)), F.const(x, list(shape))], axis))
    if shape[axis] > 1:
        both(MF, lambda F: F.split(F.const(x, list(shape)), [1, shape[axis] - 1], axis))
