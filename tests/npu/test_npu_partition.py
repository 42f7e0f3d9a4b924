"""The partitioner (compiler/partition.py): maximal claimed segments with no cycle between them,
the min_nodes_per_partition / max_partitions knobs, the cut graph's results, and a forced-refusal
predicate splitting a real model into several partitions on a real bridge."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings as hsettings, strategies as st

from mnnjit.backends.base import GraphIR
from mnnjit.compiler.partition import cut, lower_partitioned
from mnnjit.graph import Node, bump_write_counter
from mnnjit.ops import build as B
from mnnjit.ops.evaluate import evaluate

from npu_helpers import BRIDGES, cases, entries, forward, load, partitions, rel_err

import mnnjit.delegates as D

F32 = np.dtype(np.float32)


def _ph(name: str) -> Node:
    return Node("placeholder", (), {}, (4,), F32, name=name)


class FakeDelegate:
    """A delegate backend whose 'SDK' is the ops' references: claims the ops named in ``ops``."""

    lowers_every_graph = True

    def __init__(self, claimed_ids: set[int], min_nodes: int = 1, max_parts: int | None = None) -> None:
        self.claimed_ids, self.limits, self.compiled = claimed_ids, (min_nodes, max_parts), []

    def claimer(self, graph):
        return lambda n: None if id(n) in self.claimed_ids else "not claimed by the test"

    def partition_limits(self):
        return self.limits

    def describe(self) -> str:
        return "fake"

    def lower_graph(self, graph, modes=None):
        self.compiled.append(graph)

        class Run:
            placeholders, out_fmts = graph.placeholders, graph.out_fmts

            @staticmethod
            def run(arrays):
                for p, a in zip(graph.placeholders, arrays):
                    p.value = a
                bump_write_counter()
                evaluate(list(graph.outputs))
                return [o.value for o in graph.outputs]
        return Run()


def _reference(graph: GraphIR, arrays: list) -> list:
    for p, a in zip(graph.placeholders, arrays):
        p.value = a
    bump_write_counter()
    evaluate(list(graph.outputs))
    return [np.array(o.value, copy=True) for o in graph.outputs]


@st.composite
def graphs(draw):
    """A random DAG of elementwise ops on two inputs, a random claimed subset, and its outputs."""
    nodes = [_ph("a"), _ph("b")]
    n = draw(st.integers(2, 14))
    for _ in range(n):
        op = draw(st.sampled_from(["add", "mul", "sub", "maximum", "neg", "exp", "abs"]))
        k = 1 if op in ("neg", "exp", "abs") else 2
        ins = [nodes[draw(st.integers(0, len(nodes) - 1))] for _ in range(k)]
        if op == "exp":
            ins = [B.make_node("minimum", (ins[0], B.as_node(np.float32(5))))]  # keep values finite
        nodes.append(B.make_node(op, ins))
    compute = nodes[2:]
    claimed = {id(c) for c in compute if draw(st.booleans())}
    outs = [compute[-1]] + [c for c in compute[:-1] if draw(st.integers(0, 4)) == 0]
    return GraphIR(nodes[:2], outs, ["NCHW"] * len(outs)), claimed


@hsettings(max_examples=25, deadline=None, derandomize=True)
@given(graphs(), st.integers(1, 3), st.sampled_from([None, 1, 2]))
def test_cut_is_acyclic_complete_and_runs(case, min_nodes, max_parts) -> None:
    graph, claimed = case
    fake = FakeDelegate(claimed, min_nodes, max_parts)
    c = cut(graph, fake.claimer(graph), min_nodes, max_parts)
    seen: dict[int, int] = {}
    for seg in c.segments:
        assert seg.nodes
        kinds = {id(n) in claimed for n in seg.nodes}
        if seg.delegated:
            assert kinds == {True} and len(seg.nodes) >= min_nodes
        for n in seg.nodes:
            assert id(n) not in seen
            seen[id(n)] = seg.index
        for i in seg.inputs:  # read from a placeholder or an earlier segment only: no cycle
            assert i.op == "placeholder" or seen.get(id(i), seg.index) < seg.index
    assert max_parts is None or len(c.partitions) <= max_parts
    refused = {id(n) for n, _ in c.refusals}
    for seg in c.segments:  # an op on the CPU has its reason, a delegated one none
        assert all((id(n) in refused) != seg.delegated for n in seg.nodes)
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(4).astype(np.float32) for _ in graph.placeholders]
    exp = _reference(graph, arrays)
    compiled = lower_partitioned(graph, fake)
    if not c.partitions:
        assert compiled is None
        return
    got = compiled.run(arrays)
    for g, e in zip(got, exp):
        np.testing.assert_allclose(g, e, rtol=1e-6)


def test_diamond_is_cut_into_three_segments() -> None:
    """A claimed, B refused, C claimed, D claimed with D reading B and C: {A, C}, {B}, {D}."""
    x = _ph("x")
    a = B.make_node("exp", (x,))
    b = B.make_node("neg", (a,))
    c = B.make_node("abs", (a,))
    d = B.make_node("add", (b, c))
    c_ = cut(GraphIR([x], [d]), lambda n: "no" if n is b else None)
    assert [(s.delegated, s.ops) for s in c_.segments] == [(True, ["exp", "abs"]), (False, ["neg"]), (True, ["add"])]
    assert [n.op for n, _ in c_.refusals] == ["neg"]


def test_knobs_keep_small_partitions_on_the_cpu() -> None:
    x = _ph("x")
    chain = [x]
    for op in ["exp", "neg", "abs", "neg", "abs", "neg", "exp", "neg", "abs"]:
        chain.append(B.make_node(op if op != "exp" else "abs", (chain[-1],)))
    refused = {id(chain[4]), id(chain[7])}           # islands of 3, 2 and 2 claimed ops
    claim = lambda n: "no" if id(n) in refused else None  # noqa: E731
    g = GraphIR([x], [chain[-1]])
    assert [len(s.nodes) for s in cut(g, claim).partitions] == [3, 2, 2]
    c = cut(g, claim, min_nodes=3)
    assert [len(s.nodes) for s in c.partitions] == [3]
    assert any("min_nodes_per_partition=3" in why for _, why in c.refusals)
    c = cut(g, claim, max_partitions=2)
    assert [len(s.nodes) for s in c.partitions] == [3, 2]
    assert any("max_partitions=2" in why for _, why in c.refusals)
    with pytest.raises(ValueError, match="min_nodes_per_partition"):
        cut(g, claim, min_nodes=0)


needs_model = pytest.mark.skipif("mobilenetv2" not in entries() or not BRIDGES,
                                 reason="needs ../shared models and an NPU SDK")


@needs_model
def test_forced_refusal_splits_mobilenet_and_still_matches() -> None:
    """Refusing the residual adds leaves the convolutions between them in separate partitions."""
    def no_add(node):
        return "test: adds stay on the CPU" if node.op == "add" else None
    (xs,) = cases("mobilenetv2")[:1]
    exp = forward(load("mobilenetv2"), xs)[0]
    m = load("mobilenetv2", {"backend": 5, "npu": {"bridge": BRIDGES[-1], "refuse": no_add}})
    got = forward(m, xs)[0]
    assert rel_err(got, exp) <= 1e-4
    parts = partitions(m)
    assert len(parts) >= 3 and all("add" not in p.ops for p in parts)
    text = D.explain(m)
    assert f"{len(parts)} partition(s) on the delegate" in text
    assert "add [1, 32, 28, 28] float32: refused by the 'refuse' setting: test: adds stay on the CPU" in text
    # max_partitions keeps the biggest ones; min_nodes_per_partition above every partition's size
    # leaves the whole model on the CPU
    m2 = load("mobilenetv2", {"backend": 5, "npu": {"bridge": BRIDGES[-1], "refuse": no_add, "max_partitions": 2}})
    assert rel_err(forward(m2, xs)[0], exp) <= 1e-4 and len(partitions(m2)) == 2
    m3 = load("mlp", {"backend": 5, "npu": {"bridge": BRIDGES[-1], "min_nodes_per_partition": 10}})
    forward(m3, cases("mlp")[0])
    assert partitions(m3) == []
    assert "no partition was delegated" in D.explain(m3)
