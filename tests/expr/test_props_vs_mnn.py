"""Property tests: random shapes/axes/attributes through mnnjit.expr and real MNN.expr."""
from __future__ import annotations

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from expr_oracle import both, c4

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


@S
@given(k=st.integers(1, 4), pooled=st.tuples(st.integers(1, 3), st.integers(1, 3)),
       scale=st.sampled_from([0.25, 0.5, 1.0]), ratio=st.integers(0, 3), aligned=st.booleans(),
       avg=st.booleans(), seed=st.integers(0, 2**16))
def test_roi_align(MF, k, pooled, scale, ratio, aligned, avg, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 3, 9, 11)).astype(np.float32)
    xy = rng.uniform(-2, 12 / scale, (k, 2, 2)).astype(np.float32)
    rois = np.concatenate([rng.integers(0, 2, (k, 1)).astype(np.float32), xy.min(1), xy.max(1)], axis=1)
    both(MF, lambda F: F.roi_align(c4(F, x), F.const(rois, [k, 5]), pooled[0], pooled[1], scale, ratio, aligned,
                                   F.AVEPOOL if avg else F.MAXPOOL), atol=1e-4)


@S
@given(k=st.integers(1, 4), pooled=st.tuples(st.integers(1, 3), st.integers(1, 3)),
       scale=st.sampled_from([0.5, 1.0]), seed=st.integers(0, 2**16))
def test_roi_pooling(MF, k, pooled, scale, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 3, 9, 11)).astype(np.float32)
    xy = rng.uniform(0, 9 / scale, (k, 2, 2)).astype(np.float32)
    rois = np.concatenate([rng.integers(0, 2, (k, 1)).astype(np.float32), xy.min(1), xy.max(1)], axis=1)
    both(MF, lambda F: F.roi_pooling(c4(F, x), F.const(rois, [k, 5]), pooled[0], pooled[1], scale))


@S
@given(n=st.integers(2, 20), iou=st.floats(0.0, 0.9), thr=st.floats(0.0, 0.8), seed=st.integers(0, 2**16))
def test_nms(MF, n, iou, thr, seed):
    # max_detections = n: real MNN returns wrong indices when max_detections truncates the result
    # (max_detections=1 on 2 boxes gives the lower-scored box), and fails when nothing is kept
    rng = np.random.default_rng(seed)
    b = rng.uniform(0, 10, (n, 4)).astype(np.float32)
    b[:, 2:] += b[:, :2]
    s = (rng.permutation(n).astype(np.float32) + 1) / n  # distinct positive scores
    assume((s > thr).any())
    both(MF, lambda F: F.nms(F.const(b, [n, 4]), F.const(s, [n]), n, iou, thr))


@S
@given(c=st.sampled_from([4, 8, 12]), hw=st.tuples(st.integers(1, 4), st.integers(1, 4)), seed=st.integers(0, 2**16))
def test_channel_and_depth_shuffles(MF, c, hw, seed):
    x = np.random.default_rng(seed).standard_normal((2, c) + hw).astype(np.float32)
    both(MF, lambda F: F.depth_to_space(F.const(x, list(x.shape)), 2))
    both(MF, lambda F: F.channel_shuffle(F.convert(F.const(x, list(x.shape)), F.NHWC), 2))
    y = np.random.default_rng(seed).standard_normal((2, c, hw[0] * 2, hw[1] * 2)).astype(np.float32)
    both(MF, lambda F: F.space_to_depth(F.const(y, list(y.shape)), 2))
    both(MF, lambda F: F.space_to_batch_nd(c4(F, y), [2, 2], [[0, 0], [0, 0]]))


@S
@given(k=st.integers(1, 12), c=st.integers(1, 4), maxd=st.integers(1, 6), per=st.just(1),
       thr=st.floats(0.0, 0.6), iou=st.floats(0.2, 0.8), seed=st.integers(0, 2**16))
def test_detection_post_process(MF, k, c, maxd, per, thr, iou, seed):
    rng = np.random.default_rng(seed)
    per = min(per, c)
    anchors = np.concatenate([rng.uniform(0.2, 0.8, (k, 2)), rng.uniform(0.1, 0.4, (k, 2))], 1).astype(np.float32)
    enc = rng.standard_normal((1, k, 4)).astype(np.float32)
    n = k * (c + 1)
    cls = (rng.permutation(n).reshape(1, k, c + 1).astype(np.float32) + 0.5) / n  # distinct, never == thr
    from expr_oracle import values
    import mnnjit.expr as JF

    def run(F):
        return values(F, F.detection_post_process(
            F.const(enc, [1, k, 4]), F.const(cls, [1, k, c + 1]), F.const(anchors, [k, 4]), c, maxd, per, 100, thr,
            iou, False, [10.0, 10.0, 5.0, 5.0]))
    mine, ref = run(JF), run(MF)
    num = int(ref[3][0])
    assert int(mine[3][0]) == num
    # real MNN leaves the slots after num uninitialised (and garbles its outputs when
    # max_class_per_detection > 1, so only 1 is compared)
    for a, b in zip(mine[:3], ref[:3]):
        np.testing.assert_allclose(a[0, :num], b[0, :num], atol=1e-5)


def test_detection_post_process_drops_a_score_equal_to_the_threshold(MF):
    """Real MNN keeps only scores above nms_score_threshold (found by the property test above:
    a class score of exactly 0.5 with threshold 0.5)."""
    from expr_oracle import values
    import mnnjit.expr as JF
    enc = np.zeros((1, 1, 4), np.float32)
    anchors = np.array([[0.5, 0.5, 0.2, 0.2]], np.float32)
    for cls, want in (([0.1, 0.2, 0.5], 0), ([0.1, 0.2, 0.50001], 1)):
        c = np.array(cls, np.float32).reshape(1, 1, 3)
        outs = [values(F, F.detection_post_process(F.const(enc, [1, 1, 4]), F.const(c, [1, 1, 3]),
                                                  F.const(anchors, [1, 4]), 2, 1, 1, 100, 0.5, 0.5, False,
                                                  [10.0, 10.0, 5.0, 5.0])) for F in (JF, MF)]
        assert int(outs[0][3][0]) == int(outs[1][3][0]) == want
