"""Unrolled recurrent loops in the whole-plan kernel (backends/cpu/codegen/plan_loops.py): a long
bidirectional LSTM converted by real MNN's converter compiles into one kernel whose time steps run
as loops and matches real MNN; folding keeps every step call of the unrolled kernel, in order, on
the same arrays (checked by expanding the loops again, without compiling); matrix-vector cells
(``W @ h``, plan_matvec.py) match numpy."""
from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest
from mnnjit_models_fixtures import _Builder, convert, real_mnn_forward

import mnnjit as MNN
from mnnjit import settings as config
from mnnjit.backends.cpu.codegen import plan_loops, whole_plan
from mnnjit.models.program import load_program

nn, F = MNN.nn, MNN.expr
ZOO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "zoo")


def bilstm_onnx(path: str, inp: int = 16, hidden: int = 32, seq: int = 64, seed: int = 5) -> str:
    """A one-layer bidirectional LSTM (ONNX LSTM op, both directions' sequences as the output)."""
    b = _Builder(seed)
    w = b.weight((2, 4 * hidden, inp), scale=0.3)
    r = b.weight((2, 4 * hidden, hidden), scale=0.3)
    bias = b.init((b.rng.standard_normal((2, 8 * hidden)) * 0.1).astype(np.float32), "b")
    b.op("LSTM", ["x", w, r, bias], n_out=3, hidden_size=hidden, direction="bidirectional")
    b.nodes[-1].output[:] = ["seq_out", "h_last", "c_last"]
    return b.save(path, [b.io("x", [seq, 1, inp])],
                  [b.io("seq_out", [seq, 2, 1, hidden]), b.io("h_last", [2, 1, hidden]),
                   b.io("c_last", [2, 1, hidden])])


def test_long_bidirectional_lstm_runs_as_loops_and_matches_real_mnn(tmp_path, monkeypatch) -> None:
    """64 time steps in each direction (over 2,000 steps unrolled) compile as one kernel (on the
    second forward here) and give real MNN's outputs."""
    pytest.importorskip("MNN")
    monkeypatch.setenv("MNNJIT_PLAN_KERNEL_CALLS", "0")
    path = convert(bilstm_onnx(str(tmp_path / "bilstm.onnx")), str(tmp_path / "bilstm.mnn"))
    outs = ["seq_out", "h_last", "c_last"]
    mod = nn.load_module_from_file(path, ["x"], outs)
    rng = np.random.default_rng(11)
    before = config.counters["plan_kernels"]
    for _ in range(3):  # the step loop, then the compiled kernel twice
        x = rng.standard_normal((64, 1, 16)).astype(np.float32)
        got = [o.read() for o in mod.forward([F.const(x, list(x.shape))])]
        for g, e in zip(got, real_mnn_forward(path, {"x": x}, outs)):
            assert g.shape == e.shape
            np.testing.assert_allclose(g, e, rtol=0, atol=1e-4 * max(1.0, float(np.abs(e).max())))
    assert config.counters["plan_kernels"] == before + 1
    assert getattr(mod._last_plan.run, "__qualname__", "").startswith("_runner")
    assert len(mod._last_plan.steps) > whole_plan.MAX_STEPS


# ---------------------------------------------------------------- folding without compiling

_SLICE = re.compile(r"^(\w+)\[(.+):(.+)\]$")


def _kernel_lines(source: str) -> list[str]:
    lines = source.split("\n")
    start = next(k for k, ln in enumerate(lines) if ln.startswith("def kernel("))
    return [ln for ln in lines[start + 1:] if ln.strip()]


def _expand(lines: list[str]) -> list[tuple[str, tuple]]:
    """Run a kernel body's name bindings and loops symbolically: every step call with each array
    argument as (root, first, end)."""
    env: dict[str, tuple] = {"ws": ("ws", 0, None), "blob": ("blob", 0, None), "gs": ("gs", 0, None)}
    calls: list[tuple[str, tuple]] = []

    def place(expr: str, scope: dict) -> tuple:
        expr = expr.strip()
        m = _SLICE.match(expr)
        if m is None:
            return env.get(expr, (expr, 0, None))
        root, a, b = env.get(m.group(1), (m.group(1), 0, None))
        lo, hi = eval(m.group(2), {}, scope), eval(m.group(3), {}, scope)
        return (root, a + lo, a + hi)

    k = 0
    while k < len(lines):
        ln = lines[k]
        m = re.match(r"^    for (lp\d+) in range\((\d+)\):$", ln)
        if m:
            body = []
            k += 1
            while k < len(lines) and lines[k].startswith("        "):
                body.append(lines[k].strip())
                k += 1
            for it in range(int(m.group(2))):
                for line in body:
                    if not line.startswith("step_"):  # an iteration's array, named once
                        name, expr = line.split(" = ", 1)
                        env[name] = place(expr, {m.group(1): it})
                        continue
                    fn, args = re.match(r"^(step_\w+)\((.*)\)$", line).groups()
                    calls.append((fn, tuple(place(a, {m.group(1): it}) for a in re.split(r", (?![^\[]*\])", args))))
            continue
        s = ln.strip()
        if s.startswith("step_"):
            fn, args = re.match(r"^(step_\w+)\((.*)\)$", s).groups()
            calls.append((fn, tuple(place(a, {}) for a in args.split(", "))))
        elif " = " in s and not s.startswith(("for ", "o")):
            name, expr = s.split(" = ", 1)
            if _SLICE.match(expr):
                env[name] = place(expr, {})
        k += 1
    return calls


def _zoo_plan(name: str):
    with open(os.path.join(ZOO, "MANIFEST.json")) as fh:
        entry = json.load(fh)["entries"][name]
    prog = load_program(os.path.join(ZOO, entry["files"]["mnn"]), ["x"], ["y"])
    sig = tuple((tuple(i["shape"]), np.dtype(np.float32), prog.inputs[k].fmt)
                for k, i in enumerate(entry["inputs"]))
    return prog.plan(sig)


@pytest.mark.parametrize("name", ["gru_bi_l1_t50_h64", "lstm_bi_l2_t10_h32", "gru_l1_t5_h32", "tf_l1_s8_d64"])
def test_folding_keeps_every_call(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The folded kernel body makes the unrolled body's calls, in order, on the same arrays; the
    recurrent ones call a few dozen step functions instead of thousands."""
    plan = _zoo_plan(name)
    args = (plan.steps, plan.init, plan.feed_slots, plan.out_slots, plan.order)
    folded, _ = whole_plan.plan_source(*args)
    monkeypatch.setattr(whole_plan, "fold_loops", lambda head, body: body)
    monkeypatch.setattr(whole_plan, "MAX_STEPS", 1 << 30)
    unrolled, _ = whole_plan.plan_source(*args)
    want, got = _expand(_kernel_lines(unrolled)), _expand(_kernel_lines(folded))
    assert got == want
    written = plan_loops.count_calls(_kernel_lines(folded))
    if name in ("gru_bi_l1_t50_h64", "lstm_bi_l2_t10_h32"):  # 50 / 10 time steps per loop
        assert written < len(want) / 3, (written, len(want))


def test_fold_loops_leaves_irregular_calls() -> None:
    """Calls whose offsets do not move by one fixed step per repetition, or that repeat fewer
    than MIN_REPS times, stay written out."""
    head = ["    c0 = blob[0:16]"]
    body = []
    for k, off in enumerate([0, 16, 48, 64]):  # offsets 0, 16, 48, 64: no fixed step
        body += [f"    v{k} = ws[{off}:{off + 16}]", f"    step_ab(v{k}, c0)"]
    assert plan_loops.fold_loops(head, body) == body
    regular = []
    for k in range(4):
        regular += [f"    v{k} = ws[{16 * k}:{16 * k + 16}]", f"    step_ab(v{k}, c0)"]
    regular += ["    o0f = o0.reshape(16)", "    for i in range(16):", "        o0f[i] = v3[i]"]
    folded = plan_loops.fold_loops(head, regular)
    assert plan_loops.count_calls(folded) == 1
    assert "    v3 = ws[48:64]" in folded  # read after the loop: bound again
    assert _expand(head + folded) == _expand(head + regular)


# ---------------------------------------------------------------- matrix-vector cells

#: (matrix first?, transpose_a, transpose_b, n outputs, k, bias: "vec" / "one" / None, act)
_MATVEC = [
    (True, False, False, 40, 19, "vec", ""),
    (True, True, False, 24, 16, "one", "relu"),
    (False, False, False, 33, 8, None, "relu6"),
    (False, False, True, 17, 21, "vec", ""),
]


def test_matvec_cells_match_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    """``matmul_ex`` of a constant matrix and a computed vector (either order, either layout; k
    below and above one block of eight) as the plan kernel writes it, against the op's numpy
    reference; every case in one kernel (a declined case would leave the plan on numpy)."""
    from mnnjit.ops import build as B
    from mnnjit.ops import registry
    monkeypatch.setenv("MNNJIT_PLAN_KERNEL_CALLS", "0")
    rng = np.random.default_rng(4)
    xs, outs, refs = [], [], []
    for mat_first, ta, tb, n, k, bias, act in _MATVEC:
        stored_kn = ta if mat_first else not tb
        mat = rng.standard_normal((k, n) if stored_kn else (n, k)).astype(np.float32)
        x = F.placeholder([k])
        h = B.make_node("tanh", [x._node])
        m = F.const(mat, list(mat.shape))._node
        ins = [m, h] if mat_first else [h, m]
        bv = None
        if bias is not None:
            bv = rng.standard_normal(n if bias == "vec" else 1).astype(np.float32)
            ins.append(F.const(bv, list(bv.shape))._node)
        attrs = {"transpose_a": ta, "transpose_b": tb, "act": act}
        xs.append(x)
        outs.append(B.wrap(B.make_node("matmul_ex", ins, attrs)))

        def ref(xv, mat=mat, mat_first=mat_first, bv=bv, attrs=attrs):
            t = np.tanh(xv)
            arrays = ([mat, t] if mat_first else [t, mat]) + ([bv] if bv is not None else [])
            return registry.get("matmul_ex").ref(arrays, attrs)
        refs.append(ref)
    mod = nn.load_module(xs, outs)
    for _ in range(3):
        vals = [rng.standard_normal(c[4]).astype(np.float32) for c in _MATVEC]
        got = [o.read() for o in mod.forward([F.const(v, list(v.shape)) for v in vals])]
        for g, ref, v in zip(got, refs, vals):
            want = ref(v)
            assert g.shape == want.shape
            np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-5)
    assert getattr(mod._last_plan.run, "__qualname__", "").startswith("_runner")
