"""The whole-plan kernel's strided views (backends/cpu/codegen/plan_views.py) and row softmax
(plan_rows.py): view chains index exactly what numpy's transposes, slices, reshapes and broadcasts
select; an attention-shaped plan whose transposes are read in place by their consumers compiles
into one kernel and matches numpy; the blocked softmax matches numpy on any row length."""
from __future__ import annotations

import math
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mnnjit as MNN
from mnnjit.backends.cpu.codegen import plan_views as V
from mnnjit.ops import build as B

nn, F = MNN.nn, MNN.expr


def _values(v: V.View, flat: np.ndarray) -> np.ndarray:
    """The elements view ``v`` of array ``flat`` selects, through its index expression."""
    shape = v[3]
    names = [f"i{k}" for k in range(len(shape))]
    expr = compile(V.index(v, names), "<index>", "eval")
    out = np.empty(shape, flat.dtype)
    for pos in np.ndindex(*shape):
        out[pos] = flat[eval(expr, {}, dict(zip(names, pos)))]
    return out


@st.composite
def _chains(draw):
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=4)))
    ops = []
    cur = shape
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["transpose", "slice", "reshape", "broadcast"]))
        if kind == "transpose":
            perm = tuple(draw(st.permutations(range(len(cur)))))
            ops.append((kind, perm))
            cur = tuple(cur[p] for p in perm)
        elif kind == "slice":
            box = []
            for d in cur:
                step = draw(st.sampled_from([1, 1, 2]))
                start = draw(st.integers(0, d - 1))
                box.append((start, len(range(start, d, step)), step))
            ops.append((kind, tuple(box)))
            cur = tuple(c for _, c, _ in box)
        elif kind == "reshape":
            size = math.prod(cur)
            dims = []
            while size > 1 and len(dims) < 3:
                f = draw(st.sampled_from([d for d in range(1, size + 1) if size % d == 0]))
                dims.append(f)
                size //= f
            dims.append(size)
            new = tuple(draw(st.permutations(dims)))
            if draw(st.booleans()):
                new = (1,) + new
            ops.append((kind, new))
            cur = new
        else:
            new = tuple(draw(st.sampled_from([d, 1])) if d == 1 else d for d in cur)
            new = tuple(3 if d == 1 and draw(st.booleans()) else d for d in new)
            if draw(st.booleans()):
                new = (2,) + new
            ops.append((kind, new))
            cur = new
    return shape, ops


@settings(max_examples=60, deadline=None, derandomize=True)
@given(_chains())
def test_view_chains_select_what_numpy_selects(chain) -> None:
    shape, ops = chain
    base = np.arange(math.prod(shape), dtype=np.float32)
    want = base.reshape(shape)
    v = V.of_flat("a", shape)
    flat = base
    for kind, arg in ops:
        if kind == "transpose":
            want, v = np.transpose(want, arg), V.transpose(v, arg)
        elif kind == "slice":
            want = want[tuple(slice(s, None, step) for s, _, step in arg)]
            v = V.box(v, [s for s, _, _ in arg], [c for _, c, _ in arg], [step for _, _, step in arg])
        elif kind == "reshape":
            want = want.reshape(arg)
            r = V.reshape(v, arg)
            if r is None:  # not expressible as strides: the kernel copies the view first
                flat = _values(v, flat).ravel()
                r = V.reshape(V.of_flat("a", v[3]), arg)
            v = r
        else:
            want = np.broadcast_to(want, arg)
            v = V.broadcast(v, arg)
        assert v[3] == want.shape
        np.testing.assert_array_equal(_values(v, flat), want)
        start = V.contiguous_start(v)
        if start is not None:  # a contiguous run: the kernel names it as a plain slice
            np.testing.assert_array_equal(flat[start:start + want.size].reshape(want.shape), want)


def _compiled(mod) -> bool:
    return getattr(mod._last_plan.run, "__qualname__", "").startswith("_runner")


def _c(a: np.ndarray):
    return F.const(a, list(a.shape))._node


def test_attention_views_compile_into_one_kernel_and_match_numpy(monkeypatch) -> None:
    """A fused QKV output split by transposes and slices (K transposed twice, Q and K scaled),
    a broadcast bias add, one gathered head, and outputs that are views."""
    monkeypatch.setenv("MNNJIT_PLAN_KERNEL_CALLS", "0")
    s, h, dh = 6, 2, 4
    d = h * dh
    scale = np.float32(0.5)
    bias = np.linspace(-1, 1, dh, dtype=np.float32)
    x = F.placeholder([1, s, 3 * d])
    t = B.make_node("reshape", [x._node], {"shape": (s, 3, h, dh)})
    t = B.make_node("transpose", [t], {"perm": (1, 2, 0, 3)})            # [3, h, s, dh]
    q = B.make_node("take", [t, F.const(np.asarray(0, np.int32), [], F.NCHW, F.int)._node], {"axis": 0})
    k = B.make_node("slice", [t], {"begin": (1, 0, 0, 0), "end": (2, h, s, dh), "step": (1, 1, 1, 1)})
    k = B.make_node("reshape", [k], {"shape": (h, s, dh)})
    v = B.make_node("slice", [t], {"begin": (2, 0, 0, 0), "end": (3, h, s, dh), "step": (1, 1, 1, 1)})
    v = B.make_node("reshape", [v], {"shape": (h, s, dh)})
    kt = B.make_node("transpose", [k], {"perm": (0, 2, 1)})                # [h, dh, s]
    qs = B.make_node("mul", [q, _c(scale)])
    ks = B.make_node("mul", [kt, _c(scale)])
    att = B.make_node("softmax", [B.make_node("matmul", [qs, ks])], {"axis": -1})
    vb = B.make_node("add", [v, B.make_node("broadcast_to", [_c(bias), ], {"shape": (h, s, dh)})])
    o = B.make_node("matmul", [att, vb])                                  # [h, s, dh]
    y = B.make_node("transpose", [o], {"perm": (1, 0, 2)})                 # an output that is a view
    kt_out = B.make_node("transpose", [kt], {"perm": (0, 2, 1)})           # a view of a view, contiguous
    mod = nn.load_module([x], [B.wrap(y), B.wrap(kt_out)])

    def ref(a):
        t = a.reshape(s, 3, h, dh).transpose(1, 2, 0, 3)
        q, k, v = t[0], t[1], t[2]
        e = np.matmul(q * scale, k.transpose(0, 2, 1) * scale)
        e = np.exp(e - e.max(-1, keepdims=True))
        att = e / e.sum(-1, keepdims=True)
        return np.matmul(att, v + bias).transpose(1, 0, 2), k
    rng = np.random.default_rng(4)
    for _ in range(3):
        a = rng.standard_normal((1, s, 3 * d)).astype(np.float32)
        got = [g.read() for g in mod.forward([F.const(a, list(a.shape))])]
        for g, e in zip(got, ref(a)):
            assert g.shape == e.shape
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
    assert _compiled(mod), "the plan did not compile into one kernel"


@settings(max_examples=25, deadline=None, derandomize=True)
@given(st.integers(1, 70), st.sampled_from([1, 2, 7, 8, 16, 29, 64, 65, 130, 300]), st.integers(0, 3))
def test_softmax_rows_match_numpy(rows, n, special) -> None:
    from mnnjit.backends.cpu.codegen.plan_rows import softmax_rows
    rng = np.random.default_rng(rows * 1000 + n)
    x = (rng.standard_normal((rows, n)) * 20).astype(np.float32)
    if special == 1:
        x[rows // 2, n // 2] = np.nan
    elif special == 2:
        x[0, -1] = np.inf
        x[-1, 0] = -np.inf
    elif special == 3:
        x[rows // 2] = -1e30
    o = np.empty_like(x)
    softmax_rows(x.ravel(), o.reshape(-1), rows, n)
    with np.errstate(all="ignore"):
        e = np.exp(x - x.max(1, keepdims=True))
        want = e / e.sum(1, keepdims=True)
    np.testing.assert_allclose(o, want, rtol=1e-5, atol=1e-7)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(pytest.main([os.path.abspath(__file__), "-n", "0", "-q"]))
