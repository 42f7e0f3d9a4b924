"""Helpers of the OpenCL tests: graphs from op nodes, run lowered on a backend or on the ops' numpy
references (the oracle every backend must match)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from mnnjit.compiler.lower import compile_graph
from mnnjit.backends.base import GraphIR
from mnnjit.graph import Node, topo_order
from mnnjit.ops import build as B
from mnnjit.ops import registry


def placeholder(shape: Sequence[int], dtype: Any = np.float32, name: str = "x") -> Node:
    """A graph input node."""
    return Node("placeholder", (), {}, tuple(int(s) for s in shape), np.dtype(dtype), "NCHW", name=name)


def const(value: Any) -> Node:
    """A constant node."""
    return Node.constant(np.asarray(value))


def node(op: str, inputs: Sequence[Node], **attrs: Any) -> Node:
    """A node of registered op ``op`` (shape and dtype inferred)."""
    return B.make_node(op, list(inputs), attrs)


def reference(outputs: Sequence[Node], feeds: dict) -> list[np.ndarray]:
    """The outputs computed by the ops' numpy references."""
    vals: dict[int, Any] = {}
    for n in topo_order(list(outputs), stop_at_values=False):
        if n.op == "const":
            vals[id(n)] = n.value
        elif n.op == "placeholder":
            vals[id(n)] = feeds[n]
        else:
            with np.errstate(all="ignore"):
                vals[id(n)] = registry.get(n.op).ref([vals[id(i)] for i in n.inputs], n.attrs)
    return [np.asarray(vals[id(o)]) for o in outputs]


def lowered(backend: Any, outputs: Sequence[Node], feeds: dict, modes: Any = None) -> Any:
    """``outputs`` compiled by ``backend.lower_graph`` (placeholders in ``feeds`` order)."""
    ph = list(feeds)
    return compile_graph(backend, GraphIR(ph, list(outputs), ["NCHW"] * len(outputs)), modes)


def on_device(backend: Any, outputs: Sequence[Node], feeds: dict, modes: Any = None,
              no_host: bool = True) -> list[np.ndarray]:
    """The outputs computed by ``backend``'s lowering of the graph (``no_host``: assert no step fell
    back to the host)."""
    g = lowered(backend, outputs, feeds, modes)
    if no_host:
        assert not g.fallbacks, g.explain()
    return g.run([feeds[p] for p in feeds])


def assert_close(got: np.ndarray, want: np.ndarray, rtol: float = 1e-4, atol: float = 0.0) -> None:
    """|got - want| <= rtol * max(1, max|want|) + atol everywhere (NaN where want has NaN)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    g, w = got.astype(np.float64), want.astype(np.float64)
    nan = np.isnan(w)
    assert np.array_equal(np.isnan(g), nan), "NaN positions differ"
    fin = ~nan
    if not fin.any():
        return
    scale = max(1.0, float(np.abs(w[fin & np.isfinite(w)]).max(initial=0.0)))
    inf = np.isinf(w) & fin
    assert np.array_equal(g[inf], w[inf]), "infinities differ"
    ok = fin & ~inf
    err = np.abs(g[ok] - w[ok])
    assert err.max(initial=0.0) <= rtol * scale + atol, f"max error {err.max(initial=0.0)} > {rtol * scale + atol}"
