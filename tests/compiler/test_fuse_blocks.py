"""The compiler's fusion pass (``compiler/fuse_blocks.py``): every rewrite is checked against the
unfused graph on the reference evaluator (the fused op's reference runs its body, so the values are
identical), and the CPU's lowering of the fused graph against both."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings as hsettings, strategies as st

import mnnjit as MNN
from mnnjit.backends import registry
from mnnjit.backends.base import GraphIR
from mnnjit.compiler.fuse_blocks import fuse
from mnnjit.compiler.lower import lower
from mnnjit.graph import Node, const_node, topo_order
from mnnjit.ops import nn_conv, nn_fused
from mnnjit.ops import build as B
from mnnjit.ops.evaluate import compute_node
from shared_paths import SHARED

MODELS = SHARED / "models"


class AcceptAll:
    """Rules that take every candidate: each pattern's reference is exercised, whatever a backend's limits."""

    def accepts(self, pattern, body):
        return True


def ref_run(graph: GraphIR, arrays: list) -> list:
    """The graph's outputs by the ops' numpy references."""
    vals: dict[int, np.ndarray] = {id(p): a for p, a in zip(graph.placeholders, arrays)}
    for n in topo_order(graph.outputs, stop_at_values=False):
        if id(n) in vals:
            continue
        vals[id(n)] = n.value if n.op == "const" else compute_node(n, [vals[id(i)] for i in n.inputs])
    return [vals[id(o)] for o in graph.outputs]


def patterns(graph: GraphIR) -> Counter:
    return Counter(n.attrs["pattern"] for n in topo_order(graph.outputs, stop_at_values=False)
                   if n.op == "fused_block")


def model_graph(name: str) -> tuple[GraphIR, list]:
    data = np.load(MODELS / f"{name}.npz")
    keys = sorted(k for k in data if k.startswith("in0_"))
    names = [k[4:] for k in keys]
    module = MNN.nn.load_module_from_file(str(MODELS / f"{name}.mnn"), names, [])
    arrays = [data[k] for k in keys]
    sig = tuple((a.shape, a.dtype, "NCHW") for a in arrays)
    plan = module._program.plan(sig)
    return GraphIR(plan.placeholders, plan.outputs, list(plan.out_fmts)), arrays


@pytest.mark.skipif(not (MODELS / "mobilenetv2.mnn").exists(), reason="../shared/models missing")
def test_mobilenetv2_blocks_fuse_and_compute_the_same() -> None:
    graph, arrays = model_graph("mobilenetv2")
    cpu = registry.get("cpu")
    fused = fuse(graph, cpu.fusion_rules(None))
    found = patterns(fused)
    # inverted residual blocks: expansion + depthwise, depthwise + projection (a whole block on the
    # 56x56 planes), projections with their residual add
    assert found["expand_dw"] and found["conv_residual"], found
    assert found["dw_pointwise"] + found["expand_dw_pointwise"], found
    want = ref_run(graph, arrays)
    got = ref_run(fused, arrays)
    for a, b in zip(want, got):
        np.testing.assert_array_equal(a, b)
    every = fuse(graph, AcceptAll())
    for a, b in zip(want, ref_run(every, arrays)):
        np.testing.assert_array_equal(a, b)
    out = cpu.lower_graph(fused, None).run(arrays)
    for a, b in zip(want, out):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-4)


def _w(rng, shape):
    return const_node((rng.standard_normal(shape) * (2.0 / np.prod(shape[1:])) ** 0.5).astype(np.float32))


def _conv(x: Node, rng, out_c: int, k: int, stride: int = 1, group: int = 1, act: str = "") -> Node:
    c = x.shape[1]
    w = _w(rng, (out_c, c // group, k, k))
    b = const_node(rng.standard_normal(out_c).astype(np.float32))
    p = k // 2
    return nn_conv.conv2d(x, w, b, (stride, stride), (1, 1), (p, p, p, p), group, act)._node


@st.composite
def blocks(draw):
    """A graph of inverted residual and basic residual blocks on one input (shapes, strides,
    activations and residual adds drawn)."""
    c = draw(st.sampled_from([4, 8, 12]))
    h = draw(st.integers(6, 20))
    w = draw(st.integers(6, 20))
    seed = draw(st.integers(0, 2 ** 16))
    kinds = draw(st.lists(st.sampled_from(["inverted", "inverted_noskip", "basic", "plain"]), min_size=1, max_size=3))
    return c, h, w, seed, kinds, draw(st.sampled_from(["relu", "relu6"]))


def build_blocks(c, h, w, seed, kinds, act) -> tuple[GraphIR, list]:
    rng = np.random.default_rng(seed)
    x = Node("placeholder", (), {}, (1, c, h, w), np.dtype(np.float32), name="x")
    y = x
    for kind in kinds:
        if kind in ("inverted", "inverted_noskip"):
            e = _conv(y, rng, 4 * c, 1, act="relu6")
            d = _conv(e, rng, 4 * c, 3, group=4 * c, act="relu6")
            p = _conv(d, rng, c, 1)
            y = B.make_node("add", [p, y]) if kind == "inverted" else p
        elif kind == "basic":
            a = _conv(y, rng, c, 3, act="relu")
            b = _conv(a, rng, c, 3)
            y = B.make_node(act, [B.make_node("add", [b, y])])
        else:
            y = _conv(y, rng, c, 3, act="relu")
            y = _conv(y, rng, c, 3, group=c)
            y = _conv(y, rng, c, 1)
    arr = rng.standard_normal((1, c, h, w)).astype(np.float32)
    return GraphIR([x], [y], ["NCHW"]), [arr]


class AcceptOnly:
    """Rules that take the candidates of some patterns only."""

    def __init__(self, *names: str) -> None:
        self.names = set(names)

    def accepts(self, pattern, body):
        return pattern in self.names


RULE_SETS = [AcceptAll(), AcceptOnly("expand_dw"), AcceptOnly("dw_pointwise"),
             AcceptOnly("expand_dw", "expand_dw_pointwise"), AcceptOnly("conv_residual", "add_act"),
             AcceptOnly("dw_pointwise", "conv_residual")]


@hsettings(max_examples=25, deadline=None, derandomize=True)
@given(blocks())
def test_fusion_rewrites_compute_what_the_graph_computes(case) -> None:
    """On the references, a fused graph computes exactly what the graph computes, whichever
    candidates the rules take (the CPU's rules included)."""
    graph, arrays = build_blocks(*case)
    want = ref_run(graph, arrays)[0]
    for rules in RULE_SETS + [registry.get("cpu").fusion_rules(None)]:
        fused = fuse(graph, rules)
        np.testing.assert_array_equal(ref_run(fused, arrays)[0], want)


def test_cpu_lowering_of_fused_blocks_matches_the_references() -> None:
    """The CPU's kernels for every block kind it fuses (an inverted residual block whose expanded
    tensor is large, a small one, a basic residual block, a plain chain) against the references."""
    graph, arrays = build_blocks(24, 56, 56, 5, ["inverted_noskip", "plain", "basic"], "relu")
    small, small_arrays = build_blocks(16, 14, 14, 6, ["inverted", "inverted"], "relu6")
    for g, a, must in ((graph, arrays, {"expand_dw_pointwise", "dw_pointwise", "conv_residual"}),
                       (small, small_arrays, {"expand_dw", "conv_residual"})):
        assert must <= set(patterns(fuse(g, registry.get("cpu").fusion_rules(None)))), \
            patterns(fuse(g, registry.get("cpu").fusion_rules(None)))
        compiled = lower(g, None, backend=registry.get("cpu"))
        assert compiled is not None
        np.testing.assert_allclose(compiled.run(a)[0], ref_run(g, a)[0], rtol=1e-4, atol=1e-4)


def test_every_pattern_is_rewritten_by_some_rules() -> None:
    """Each pattern the pass knows appears under some rule set (and then computes the same)."""
    graph, arrays = build_blocks(8, 12, 12, 3, ["plain", "inverted", "basic"], "relu")
    want = ref_run(graph, arrays)[0]
    seen: Counter = Counter()
    for rules in RULE_SETS:
        fused = fuse(graph, rules)
        seen.update(patterns(fused))
        np.testing.assert_array_equal(ref_run(fused, arrays)[0], want)
    x = Node("placeholder", (), {}, (1, 4, 5, 5), np.dtype(np.float32))
    z = Node("placeholder", (), {}, (1, 4, 5, 5), np.dtype(np.float32))
    g = GraphIR([x, z], [B.make_node("relu", [B.make_node("add", [x, z])])], ["NCHW"])
    seen.update(patterns(fuse(g, AcceptAll())))
    assert set(seen) == set(nn_fused.PATTERNS), seen


def test_outputs_and_shared_values_are_never_fused_away() -> None:
    """A node read twice, or a graph output, stays a node of the rewritten graph."""
    rng = np.random.default_rng(1)
    x = Node("placeholder", (), {}, (1, 8, 9, 9), np.dtype(np.float32))
    e = _conv(x, rng, 16, 1)
    d = _conv(e, rng, 16, 3, group=16)
    side = B.make_node("relu", [e])                 # e read twice: no expand_dw
    g = GraphIR([x], [d, side], ["NCHW", "NCHW"])
    assert not patterns(fuse(g, AcceptAll()))
    g2 = GraphIR([x], [d, e], ["NCHW", "NCHW"])     # e an output
    assert not patterns(fuse(g2, AcceptAll()))


def test_fused_node_names_its_pattern_and_inputs() -> None:
    rng = np.random.default_rng(2)
    x = Node("placeholder", (), {}, (1, 4, 6, 6), np.dtype(np.float32))
    e = _conv(x, rng, 8, 1)
    d = _conv(e, rng, 8, 3, group=8)
    fused = fuse(GraphIR([x], [d], ["NCHW"]), AcceptAll()).outputs[0]
    assert fused.op == "fused_block" and fused.attrs["pattern"] == "expand_dw"
    assert nn_fused.input_of(fused, x) is x and fused.shape == d.shape
    with pytest.raises(ValueError, match="unknown fusion pattern"):
        nn_fused.fused_attrs("nope", [e])
