"""The backend conformance suite: every backend computes what the ops' numpy references compute.

Parametrised by backend name (:data:`BACKENDS`): a new backend joins by adding its name. Three parts:

* every elementwise op with a scalar template, as a fused step plan on the backend;
* every op instance the shared models use (each distinct op, attributes and shapes, with the
  values it sees in the model), as a one-node graph on the backend with compiling forced;
* every model in ``../shared/models`` on the backend (``RuntimeManager`` backend name), against
  real MNN's stored outputs.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import mnnjit as MNN
from mnnjit import compiler
from mnnjit.backends import registry
from mnnjit.graph import Node, const_node, topo_order
from mnnjit.ops import all_ops
from mnnjit.ops.evaluate import compute_node

from shared_paths import MODELS  # noqa: E402

#: Backends the suite runs on (a new backend adds its name here once it passes; one not available
#: here, such as OpenCL without a device or the NPU bridge without an SDK, is skipped).
BACKENDS = ["reference", "cpu", "opencl", "npu"]

HAVE_MODELS = os.path.isdir(MODELS)
ENTRIES = json.load(open(os.path.join(MODELS, "MANIFEST.json")))["entries"] if HAVE_MODELS else {}


@pytest.fixture(params=BACKENDS)
def backend(request):
    name = request.param
    if not registry.is_available(name):
        pytest.skip(f"backend {name} is not available here")
    prev = compiler.set_threshold(0)
    try:
        with registry.using(name):
            yield name
    finally:
        compiler.set_threshold(prev)


def _close(got, exp, rtol=1e-5, atol=1e-6) -> None:
    got, exp = np.asarray(got), np.asarray(exp)
    assert got.shape == exp.shape and got.dtype == exp.dtype, (got.shape, got.dtype, exp.shape, exp.dtype)
    if exp.dtype.kind in "iub":
        np.testing.assert_array_equal(got, exp)
    else:
        np.testing.assert_allclose(got.astype(np.float64), exp.astype(np.float64), rtol=rtol, atol=atol,
                                   equal_nan=True)


# ------------------------------------------------------------------ elementwise ops as fused groups
def _elementwise_ops() -> list[str]:
    return sorted(n for n, od in all_ops().items() if od.kind == "elementwise" and od.scalar)


def _probe_inputs(op: str, rng) -> list[np.ndarray] | None:
    """Inputs (float32, a few thousand values, arity found by probing the reference) or None."""
    from mnnjit.ops.build import make_node
    attrs = _EW_ATTRS.get(op, {})
    for arity in (1, 2, 3):
        xs = [(rng.standard_normal(4099) * 2).astype(np.float32) for _ in range(arity)]
        if op == "select" and arity == 3:
            xs[0] = rng.integers(0, 2, 4099).astype(np.int32)
        if op == "ldexp" and arity == 2:
            xs[1] = rng.integers(-4, 4, 4099).astype(np.int32)
        try:
            compute_node(make_node(op, [const_node(a) for a in xs], attrs), xs)
            return xs
        except Exception:  # noqa: BLE001 - probing the op's arity and dtypes
            continue
    return None


_EW_ATTRS = {"cast": {"dtype": np.dtype(np.int32)}, "clip": {"lo": -0.5, "hi": 0.75},
             "leaky_relu": {"alpha": 0.1}, "elu": {"alpha": 1.3}, "selu": {"scale": 1.05, "alpha": 1.67},
             "hard_sigmoid": {"alpha": 0.2, "beta": 0.5}}


def _chain(op: str, xs: list[np.ndarray]) -> Node:
    """``op(*xs) * 2 + 1`` for float results (a group of three ops), ``op(*xs)`` otherwise."""
    from mnnjit.ops.build import make_node
    node = make_node(op, [const_node(a) for a in xs], _EW_ATTRS.get(op, {}))
    if node.dtype is None or node.dtype.kind != "f":
        return node
    two, one = const_node(np.array(2, np.float32)), const_node(np.array(1, np.float32))
    return make_node("add", (make_node("mul", (node, two), {}), one), {})


def test_every_elementwise_op_in_a_fused_chain(backend: str) -> None:
    """The group the compiler fuses from each chain runs on the backend and matches the references."""
    from mnnjit.ops.evaluate import evaluate as reference_evaluate
    rng = np.random.default_rng(7)
    checked = 0
    for op in _elementwise_ops():
        xs = _probe_inputs(op, rng)
        if xs is None:
            continue
        expected, got = _chain(op, xs), _chain(op, xs)
        reference_evaluate([expected])
        MNN.compiler.evaluate([got])
        _close(got.value, expected.value, rtol=2e-5, atol=2e-6)
        checked += 1
    assert checked >= 40


# ------------------------------------------------------------------ every op the shared models use
def _model_op_cases() -> list[tuple[str, Node, list]]:
    """(model, node, input values) for each distinct (op, attrs, input dtypes) of the shared models' graphs,
    input values from a reference run of case 0."""
    from mnnjit.compiler.plan import attrs_key
    cases, seen = [], set()
    for name, e in sorted(ENTRIES.items()):
        prog = MNN.nn.load_module_from_file(os.path.join(MODELS, e["files"]["mnn"]),
                                            [i["name"] for i in e["inputs"]],
                                            [o["name"] for o in e["outputs"]])._program
        data = np.load(os.path.join(MODELS, f"{name}.npz"))
        case = e["cases"][0]
        arrays = [data[case["inputs"][i["name"]]["key"]] for i in e["inputs"]]
        sig = tuple((a.shape, a.dtype, spec.fmt) for a, spec in zip(arrays, prog.inputs))
        plan = prog.plan(sig)
        if getattr(plan, "dynamic", False):
            continue
        vals: dict[int, object] = {}
        for p, a in zip(plan.placeholders, arrays):
            vals[id(p)] = a
        for n in topo_order(plan.outputs, stop_at_values=False):
            if id(n) in vals:
                continue
            if n.op == "const":
                vals[id(n)] = n.value
                continue
            ins = [vals[id(i)] for i in n.inputs]
            vals[id(n)] = compute_node(n, ins)
            # one case per op and attributes (shapes vary little within a model and each new
            # input rank or dtype costs a kernel compile)
            attrs = {k: (v.shape if k == "weights" else v) for k, v in n.attrs.items()}
            key = (n.op, attrs_key(attrs), tuple(i.dtype.str if i.dtype is not None else None for i in n.inputs))
            if key not in seen:
                seen.add(key)
                cases.append((name, n, ins))
    return cases


_MODEL_OPS = _model_op_cases() if HAVE_MODELS else []


@pytest.mark.skipif(not HAVE_MODELS, reason="shared models not available")
def test_every_model_op_matches_its_reference(backend: str) -> None:
    assert len({n.op for _, n, _ in _MODEL_OPS}) >= 20
    for model, n, ins in _MODEL_OPS:
        leaves = [const_node(np.ascontiguousarray(a)) if isinstance(a, np.ndarray) else const_node(np.asarray(a))
                  for a in ins]
        node = Node(n.op, tuple(leaves), n.attrs, n.shape, n.dtype, n.fmt)
        MNN.compiler.evaluate([node])
        exp = compute_node(n, ins)
        if n.dtype is None:
            for g, x in zip(node.value, exp):
                _close(g, x, rtol=1e-4, atol=1e-5)
        else:
            _close(node.value, exp, rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------ every shared model
@pytest.mark.skipif(not HAVE_MODELS, reason="shared models not available")
@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_every_shared_model(backend: str, name: str) -> None:
    e = ENTRIES[name]
    data = np.load(os.path.join(MODELS, f"{name}.npz"))
    ins = [i["name"] for i in e["inputs"]]
    outs = [o["name"] for o in e["outputs"]]
    rt = MNN.nn.create_runtime_manager(({"backend": backend},))
    m = MNN.nn.load_module_from_file(os.path.join(MODELS, e["files"]["mnn"]), ins, outs, runtime_manager=rt)
    F = MNN.expr
    for case in e["cases"]:
        xs = [F.const(data[case["inputs"][n]["key"]], case["inputs"][n]["shape"], F.NCHW,
                      F.int if case["inputs"][n]["dtype"] == "int32" else F.float) for n in ins]
        got = m.forward(xs)
        for n, g in zip(outs, got):
            exp = data[case["outputs"][n]["key"]]
            tol = 1e-3 * max(1.0, float(np.abs(exp).max()))
            assert g.read().shape == exp.shape
            assert float(np.abs(g.read().astype(np.float64) - exp).max()) <= tol, (name, backend, n)
