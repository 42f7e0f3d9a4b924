"""Every elementwise op with a scalar template: the compiled kernel equals the op's numpy reference.

New ops registered anywhere in mnnjit/ops get checked automatically. Integers must match bit for bit;
floats to rtol 1e-5 / atol 1e-6 (Numba's libm and numpy's differ in the last bits), same NaNs and
same signs of infinities.
"""
from __future__ import annotations

import numpy as onp
import pytest

from mnnjit import compiler
from mnnjit.backends.reference import compute_node
from mnnjit.graph import const_node
from mnnjit.ops import all_ops
from mnnjit.ops.build import make_node

#: Attribute values for ops whose template reads attributes.
ATTRS = {"cast": {"dtype": onp.dtype(onp.int32)}, "clip": {"lo": -0.5, "hi": 0.75},
         "leaky_relu": {"alpha": 0.1}, "elu": {"alpha": 1.3}, "selu": {"scale": 1.05, "alpha": 1.67},
         "hard_sigmoid": {"alpha": 0.2, "beta": 0.5}}
INT_ONLY = {"invert", "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift", "gcd", "lcm"}
INT_ALSO = {"add", "sub", "mul", "floordiv", "mod", "neg", "abs", "sign", "square", "maximum", "minimum",
            "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "select", "copy"}
N = 4099  # odd size: exercises loop tails


def _inputs(op: str, dtype, rng) -> list:
    if dtype == onp.int32:
        lo, hi = (0, 8) if op in ("left_shift", "right_shift") else (-50, 50)
        def draw():
            return rng.integers(lo, hi, N).astype(onp.int32)
    else:
        def draw():
            x = (rng.standard_normal(N) * 3).astype(onp.float32)
            x[:8] = [0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.5, -2.5]
            return x
    if op == "ldexp":
        return [draw(), rng.integers(-5, 5, N).astype(onp.int32)]
    if op == "select":
        return [rng.integers(0, 2, N).astype(onp.int32), draw(), draw()]
    for arity in (1, 2, 3):
        try:
            probe = [draw() for _ in range(arity)]
            compute_node(make_node(op, [const_node(a) for a in probe], ATTRS.get(op, {})), probe)
            return probe
        except Exception:  # noqa: BLE001 - probing the op's arity
            continue
    raise AssertionError(f"cannot build op {op}")


def _cases():
    for name, op in sorted(all_ops().items()):
        if op.kind != "elementwise" or not op.scalar:
            continue
        dtypes = [onp.int32] if name in INT_ONLY else ([onp.float32, onp.int32] if name in INT_ALSO else
                                                        [onp.float32])
        for dt in dtypes:
            yield pytest.param(name, dt, id=f"{name}-{onp.dtype(dt).name}")


@pytest.fixture(scope="module", autouse=True)
def _compiled_path():
    prev = compiler.set_threshold(0)
    yield
    compiler.set_threshold(prev)


@pytest.mark.parametrize("op, dtype", list(_cases()))
def test_kernel_matches_reference(op, dtype):
    from mnnjit.runtime import evaluate
    rng = onp.random.default_rng(7)
    arrays = _inputs(op, dtype, rng)
    attrs = ATTRS.get(op, {})
    node = make_node(op, [const_node(a) for a in arrays], attrs)
    want = compute_node(node, [onp.asarray(a) for a in arrays])
    # The op applied to a fresh (non-constant) input so the compiler cannot fold it away.
    leaf = make_node("copy", (const_node(arrays[0]),))
    node2 = make_node(op, [leaf] + [const_node(a) for a in arrays[1:]], attrs)
    compiler.reset_counters()
    evaluate([node2])
    got = node2.value
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype.kind == "f":
        onp.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True)
        onp.testing.assert_array_equal(onp.signbit(got[onp.isinf(got)]), onp.signbit(want[onp.isinf(want)]))
    else:
        onp.testing.assert_array_equal(got, want)
    assert compiler.counters["kernel_runs"] >= 1, "the compiled path did not run"
