"""Drop-in details found running real pymnn code, each against its oracle (real MNN 3.6.1, numpy or OpenCV):
``np.ldexp`` with a float exponent, ``cv.merge``/``cv.split`` of 1-D arrays, ``expr.scale`` on NC4HW4,
the Var protocol (iteration, ``randint``, ``expr.shape``, NC4HW4 sizes) and model inputs / runtime config."""
from __future__ import annotations

import numpy as np
import pytest

import mnnjit.cv as jcv
import mnnjit.numpy as jnp

MNN = pytest.importorskip("MNN")
import MNN.numpy as mnp  # noqa: E402

cv2 = pytest.importorskip("cv2")


# ---------------------------------------------------------------- np.ldexp
@pytest.mark.parametrize("exp", [2.0, 2.5, -1.25, [[0.5], [1.5]], 3])
def test_ldexp_float_exponent_matches_real_mnn(exp):
    """MNN documents ``x1 * exp2(x2)`` (``ldexp(2., 3.)`` -> 16.); numpy itself refuses float exponents."""
    x = np.array([[1.0, -2.0, 3.5]], np.float32)
    e_m = mnp.array(exp) if isinstance(exp, list) else exp
    e_j = jnp.array(exp) if isinstance(exp, list) else exp
    want = np.asarray(mnp.ldexp(mnp.array(x), e_m).read())
    got = np.asarray(jnp.ldexp(jnp.array(x), e_j).read())
    assert got.dtype == want.dtype == np.float32
    assert np.allclose(got, want, rtol=1e-6)
    assert float(jnp.ldexp(2.0, 3.0)) == 16.0


# ---------------------------------------------------------------- cv.merge / cv.split of 1-D arrays
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_merge_and_split_of_1d_arrays_as_opencv(dtype):
    a = (np.arange(9) * 7 % 256).astype(dtype)
    got = jcv.merge([jnp.array(a), jnp.array(a + 1), jnp.array(a + 2)])
    want = cv2.merge([a, a + 1, a + 2])
    assert got.shape == list(want.shape) == [9, 3]
    assert np.array_equal(np.asarray(got.read()), want)
    b = np.arange(12).astype(dtype)
    parts = jcv.split(jnp.array(b))
    ref = cv2.split(b)
    assert [p.shape for p in parts] == [list(r.shape) for r in ref] == [[12]]
    assert np.array_equal(np.asarray(parts[0].read()), ref[0])


def test_merge_and_split_of_images_unchanged():
    img = np.random.default_rng(0).integers(0, 256, (5, 4, 3)).astype(np.uint8)
    parts = jcv.split(jnp.array(img))
    assert [np.asarray(p.read()).tolist() for p in parts] == [p.tolist() for p in cv2.split(img)]
    assert np.array_equal(np.asarray(jcv.merge(parts).read()), img)


# ---------------------------------------------------------------- expr.scale
@pytest.mark.parametrize("shape,channels,scale,bias", [
    ([1, 2, 2, 1], 4, [2.0, 1.0], [3.0, 4.0]),      # `channels` disagrees: the lists decide
    ([1, 2, 3, 3], 2, [2.0, 1.0], [3.0, 4.0]),      # MNN's documented example
    ([1, 2, 2, 1], 2, [2.0, 1.0, 5.0], [3.0, 4.0, 6.0]),
    ([1, 4, 1, 1], 2, [2.0, 1.0, 5.0, 6.0], [3.0, 4.0, 6.0, 7.0]),
    ([1, 5, 2, 2], 5, [1.5, -1.0, 0.5, 2.0, 3.0], [0.0, 1.0, 2.0, 3.0, 4.0]),
])
def test_scale_on_nc4hw4_matches_real_mnn(shape, channels, scale, bias):
    import MNN.expr as MF
    import mnnjit.expr as JF
    data = np.arange(int(np.prod(shape)), dtype=np.float32) - 2

    def run(F):
        x = F.convert(F.const(data, shape, F.NCHW), F.NC4HW4)
        return np.asarray(F.convert(F.scale(x, channels, scale, bias), F.NCHW).read())
    got, want = run(JF), run(MF)
    assert got.shape == want.shape and np.array_equal(got, want)


def test_scale_with_too_few_values_raises():
    import mnnjit.expr as JF
    x = JF.convert(JF.const(np.ones(4, np.float32), [1, 2, 2, 1], JF.NCHW), JF.NC4HW4)
    with pytest.raises(ValueError, match="1 scales and 1 biases for 2 channels"):
        JF.scale(x, 2, [2.0], [3.0])


# ---------------------------------------------------------------- the Var protocol
def _both():
    import MNN.expr as MF
    import mnnjit.expr as JF
    return (mnp, MF), (jnp, JF)


def test_iterating_a_1d_var_yields_0d_vars_as_real_mnn():
    for np_, F in _both():
        v = F.const(np.array([1.5, 2.5, -3.0], np.float32), [3], F.NHWC)
        items = list(v)
        assert [type(i).__name__ for i in items] == ["Var"] * 3
        assert [i.shape for i in items] == [[], [], []]
        assert [i.data_format for i in items] == [F.NHWC] * 3
        assert [float(np.asarray(i.read())) for i in items] == [1.5, 2.5, -3.0]
        assert [np.asarray(i.read()).tolist() for i in np_.array([[1, 2], [3, 4]])] == [[1, 2], [3, 4]]
        assert next(np_.array([7, 8])).shape == []
        assert isinstance(np_.array([7, 8])[0], int)  # indexing still gives a Python number


def test_randint_without_size_has_shape_1():
    for np_, _ in _both():
        for args in [(5,), (2, 5)]:
            r = np_.random.randint(*args)
            assert r.shape == [1] and r.dtype == np_.int32
        assert np_.random.randint(2, 5, [3]).shape == [3]


@pytest.mark.parametrize("shape,fmt", [([1, 4, 5, 3], "NHWC"), ([1, 3, 4, 5], "NCHW"), ([1, 3, 4, 5], "NC4HW4"),
                                       ([2, 6, 3, 1], "NC4HW4"), ([2, 3], "NCHW")])
def test_shape_rank_size_are_nhwc_tagged_as_real_mnn(shape, fmt):
    got = []
    for _, F in _both():
        x = F.const(np.zeros(shape, np.float32), shape, F.NHWC if fmt == "NHWC" else F.NCHW)
        if fmt == "NC4HW4":
            x = F.convert(x, F.NC4HW4)
        s, r, n = F.shape(x), F.rank(x), F.size(x)
        got.append((str(s.data_format), np.asarray(s.read()).tolist(), str(r.data_format), int(np.asarray(r.read())),
                    str(n.data_format), int(np.asarray(n.read())), str(s.dtype)))
    assert got[0] == got[1]


@pytest.mark.parametrize("shape", [[1, 5, 2, 2], [2, 5, 2, 2], [1, 3, 2, 1], [1, 8, 1, 1], [1, 9, 1, 1],
                                   [1, 1, 2, 2], [3, 4], [1, 5, 2]])
def test_nc4hw4_size_counts_padded_channels_as_real_mnn(shape):
    sizes = []
    for _, F in _both():
        y = F.convert(F.const(np.arange(int(np.prod(shape)), dtype=np.float32), shape), F.NC4HW4)
        sizes.append((y.size, y.shape, len(y.read_as_tuple())))
    assert sizes[0] == sizes[1]


# ---------------------------------------------------------------- model inputs and runtime config
@pytest.fixture(scope="module")
def mlp_path(shared_dir):
    path = shared_dir / "models" / "mlp.mnn"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    return str(path)


def test_int32_input_for_a_float_model_input_is_converted(mlp_path):
    """Real MNN reads an int32 input's bits as floats (garbage); the oracle is real MNN on the converted data."""
    import MNN.expr as MF
    import MNN.nn as mnn_nn
    import mnnjit.expr as JF
    import mnnjit.nn as jit_nn
    xi = (np.arange(64) % 7 - 3).astype(np.int32).reshape(1, 64)
    want = np.asarray(mnn_nn.load_module_from_file(mlp_path, ["x"], ["prob"])
                      .forward(MF.const(xi.astype(np.float32), [1, 64])).read())
    m = jit_nn.load_module_from_file(mlp_path, ["x"], ["prob"])
    for x in (JF.const(xi, [1, 64], JF.NCHW, JF.int), jnp.array(xi.tolist())):
        assert x.dtype == JF.int
        got = m.forward(x)
        assert got.dtype == JF.float
        assert np.allclose(np.asarray(got.read()), want, rtol=1e-5, atol=1e-7)
    assert np.allclose(np.asarray(m.onForward([JF.const(xi, [1, 64], JF.NCHW, JF.int)])[0].read()), want,
                       rtol=1e-5, atol=1e-7)


def test_unknown_runtime_config_keys_are_ignored_with_a_warning(mlp_path):
    """Real MNN accepts unknown keys in both places (silently); mnnjit accepts them and warns."""
    import MNN.nn as mnn_nn
    import mnnjit
    import mnnjit.nn as jit_nn
    mnn_nn.create_runtime_manager(({"backend": 0, "bogusKey": 3},))
    MNN.Interpreter(mlp_path).createSession({"backend": "CPU", "bogusKey": 3})
    with pytest.warns(RuntimeWarning, match=r"create_runtime_manager: unknown runtime config key\(s\) \['bogusKey'\]"):
        rt = jit_nn.create_runtime_manager(({"backend": 0, "bogusKey": 3, "numThread": 2},))
    assert rt.num_thread == 2
    with pytest.warns(RuntimeWarning, match=r"createSession: unknown runtime config key\(s\) \['bogusKey'\]"):
        mnnjit.Interpreter(mlp_path).createSession({"backend": "CPU", "bogusKey": 3})


def test_unknown_numeric_backend_falls_back_to_cpu_with_mnns_message(mlp_path, capfd):
    import MNN.expr as MF
    import MNN.nn as mnn_nn
    import mnnjit.expr as JF
    import mnnjit.nn as jit_nn
    message = "Can't Find type=99 backend, use 0 instead"
    mrt = mnn_nn.create_runtime_manager(({"backend": 99},))
    real = capfd.readouterr()
    assert message in real.out + real.err
    rt = jit_nn.create_runtime_manager(({"backend": 99},))
    ours = capfd.readouterr()
    assert message in ours.err and rt.backend == 0
    x = np.linspace(-1, 1, 64, dtype=np.float32).reshape(1, 64)
    want = mnn_nn.load_module_from_file(mlp_path, ["x"], ["prob"], runtime_manager=mrt).forward(MF.const(x, [1, 64]))
    got = jit_nn.load_module_from_file(mlp_path, ["x"], ["prob"], runtime_manager=rt).forward(JF.const(x, [1, 64]))
    assert np.allclose(np.asarray(got.read()), np.asarray(want.read()), rtol=1e-5, atol=1e-7)
