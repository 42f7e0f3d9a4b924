"""The generated Python function a lean :class:`~mnnjit.models.program.ExecutionPlan` runs.

A small model (an MLP) is a handful of numpy calls per forward; what costs is Python around them.
:func:`generate` turns the plan's step list into one function with no per-step loop, lookups or
checks. Common ops are written out as direct numpy call chains instead of calls to the op's
reference function:

* ``matmul_ex`` on 2-D float32 operands: ``np.dot`` into a fresh array, the bias added and the
  relu / relu6 applied in place (constant transposed weights are transposed once, here);
* ``softmax`` over float32: ``maximum.reduce`` / ``add.reduce`` directly (no ``np.max`` /
  ``np.sum`` wrappers), the exponentials computed in place; a single row (batch of one) as
  ``exp(x) / sum(exp(x))`` when that sum is in [1, inf) (exact to rounding: see ``_softmax``),
  else the reference's ``exp(x - max) / sum``;
* ``relu`` / ``relu6`` and float32 binary ``add`` / ``sub`` / ``mul`` / ``div`` / ``maximum`` /
  ``minimum``: the ufunc itself.

Every written-out op computes what its reference computes (the same numpy operations, except the
one-row softmax: equal to rounding) into arrays it allocates itself at each call: no buffer is
reused across calls, so an output a caller still holds is never overwritten by a later forward,
and two threads may run one plan. The whole function runs with floating-point warnings off (``np.errstate(all="ignore")``,
entered through numpy's context variable directly when it is there: ~0.2 us instead of ~2 us).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..graph import Node
from ..ops.nn_misc import BLAS_SINGLE_MACS  # GEMMs below it skip the OpenBLAS thread pinning

F32 = np.dtype(np.float32)

try:  # numpy >= 2: errstate is a context variable holding an "extobj"
    from numpy._core.umath import _extobj_contextvar as _FP_VAR
    from numpy._core.umath import _make_extobj
    _FP_IGNORE: Any = _make_extobj(all="ignore")
except (ImportError, AttributeError, TypeError):  # another numpy: use np.errstate
    _FP_VAR = None
    _FP_IGNORE = None

#: 0-d constants: ufuncs take them faster than numpy scalars (read-only: shared by every plan).
_ZERO = np.zeros((), F32)
_SIX = np.full((), 6, F32)
_ZERO.flags.writeable = _SIX.flags.writeable = False

_BINARY_UFUNCS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
                  "maximum": np.maximum, "minimum": np.minimum}


class _Writer:
    """Collects the generated lines and the names they refer to."""

    def __init__(self, init: list) -> None:
        self.init = init
        self.env: dict[str, Any] = {"add": np.add, "subtract": np.subtract, "maximum": np.maximum,
                                    "minimum": np.minimum, "exp": np.exp, "divide": np.true_divide,
                                    "mreduce": np.maximum.reduce, "areduce": np.add.reduce,
                                    "INF": float("inf"), "ZERO": _ZERO, "SIX": _SIX}
        self.lines: list[str] = []
        #: Slots whose array a written-out op allocated and that only the step being written
        #: reads: that step may compute in place.
        self.owned: set[int] = set()

    def name(self, slot: int) -> str:
        """The expression for a slot's value (a constant becomes a global of the function)."""
        if self.init[slot] is not None:
            self.env[f"c{slot}"] = self.init[slot]
            return f"c{slot}"
        return f"v{slot}"

    def const(self, key: str, value: Any) -> str:
        """Bind ``value`` to a global name ``key`` of the function."""
        self.env[key] = value
        return key

    def emit(self, line: str) -> None:
        """Add one line to the function body."""
        self.lines.append("    " + line)


def _is_f32(node: Node) -> bool:
    """Whether the node's dtype is float32."""
    return node.dtype == F32


def _matmul_ex(w: _Writer, i: int, node: Node, ins: tuple, out: int) -> bool:
    a, b = node.inputs[0], node.inputs[1]
    if not (len(a.shape) == len(b.shape) == len(node.shape) == 2 and _is_f32(a) and _is_f32(b)
            and _is_f32(node)):
        return False
    attrs = node.attrs
    if attrs.get("act", "") not in ("", "relu", "relu6"):
        return False
    bias = node.inputs[2] if len(node.inputs) > 2 else None
    if bias is not None and not (_is_f32(bias) and np.broadcast_shapes(node.shape, bias.shape) == node.shape):
        return False
    operands = []
    for k, (src, flag) in enumerate(((a, "transpose_a"), (b, "transpose_b"))):
        expr = w.name(ins[k])
        if attrs.get(flag):
            if w.init[ins[k]] is not None:  # a constant: transpose it once
                expr = w.const(f"t{i}_{k}", np.ascontiguousarray(np.swapaxes(w.init[ins[k]], 0, 1)))
            else:
                expr += ".T"
        operands.append(expr)
    m, n = node.shape
    k_dim = a.shape[0] if attrs.get("transpose_a") else a.shape[1]
    v = f"v{out}"
    if m * n * k_dim < BLAS_SINGLE_MACS:
        w.emit(f"{v} = {operands[0]}.dot({operands[1]})")
    else:  # the reference's thread pinning for mid-sized products
        w.env["blas_threads_for"] = _blas_threads_for()
        w.emit(f"with blas_threads_for({m * n * k_dim}):")
        w.emit(f"    {v} = {operands[0]}.dot({operands[1]})")
    if bias is not None:
        bias_expr = w.name(ins[2])
        if w.init[ins[2]] is not None and len(bias.shape) < 2:  # (n,) -> (1, n): no broadcast setup per call
            bias_expr = w.const(f"b{i}", np.reshape(w.init[ins[2]], (1,) * (2 - len(bias.shape)) + tuple(bias.shape)))
        w.emit(f"add({v}, {bias_expr}, out={v})")
    act = attrs.get("act", "")
    if act:
        w.emit(f"maximum({v}, ZERO, out={v})")
        if act == "relu6":
            w.emit(f"minimum({v}, SIX, out={v})")
    return True


def _blas_threads_for() -> Callable:
    from ..ops.nn_conv import blas_threads_for
    return blas_threads_for


def _softmax(w: _Writer, i: int, node: Node, ins: tuple, out: int) -> bool:
    x = node.inputs[0]
    if not (_is_f32(x) and _is_f32(node) and node.size > 0 and x.shape == node.shape):
        return False
    ax = int(node.attrs["axis"])
    if not -len(x.shape) <= ax < len(x.shape):
        return False
    v = f"v{out}"
    src = w.name(ins[0])
    if node.size != x.shape[ax]:
        for line in _softmax_lines(v, src, ax, ins[0] in w.owned):
            w.emit(line)
        return True
    # one softmax row (an MLP's batch of one): exp(x) / sum(exp(x)) without the max subtraction
    # when the sum is in [1, inf): no exp overflowed, and max(x) >= -log(n), so no term lost more
    # precision than the reference's exp(x - max) does; otherwise (overflow, NaN, all very
    # negative) the reference's formula. Two reductions and a subtraction fewer.
    w.emit(f"{v} = exp({src})")
    w.emit(f"s{out} = areduce({v}, None)")
    w.emit(f"if 1.0 <= s{out} < INF:")
    w.emit(f"    divide({v}, s{out}, out={v})")
    w.emit("else:")
    for line in _softmax_lines(v, src, ax, False):
        w.emit("    " + line)
    return True


def _softmax_lines(v: str, src: str, ax: int, inplace: bool) -> list[str]:
    """The reference's softmax: exp(x - max) / sum, into ``src`` itself when ``inplace``."""
    out = f", out={src}" if inplace else ""
    return [f"{v} = subtract({src}, mreduce({src}, axis={ax}, keepdims=True){out})",
            f"exp({v}, out={v})",
            f"divide({v}, areduce({v}, axis={ax}, keepdims=True), out={v})"]


def _relu(w: _Writer, i: int, node: Node, ins: tuple, out: int) -> bool:
    x = node.inputs[0]
    if not (_is_f32(x) and _is_f32(node) and x.shape == node.shape):
        return False
    v = f"v{out}"
    src = w.name(ins[0])
    w.emit(f"{v} = maximum({src}, ZERO{', out=' + src if ins[0] in w.owned else ''})")
    if node.op == "relu6":
        w.emit(f"minimum({v}, SIX, out={v})")
    return True


def _binary(w: _Writer, i: int, node: Node, ins: tuple, out: int) -> bool:
    a, b = node.inputs[0], node.inputs[1]
    if not (_is_f32(a) and _is_f32(b) and _is_f32(node)):
        return False
    fn = w.const(f"u{i}", _BINARY_UFUNCS[node.op])
    src = w.name(ins[0])
    inplace = ins[0] in w.owned and a.shape == node.shape
    w.emit(f"v{out} = {fn}({src}, {w.name(ins[1])}{', out=' + src if inplace else ''})")
    return True


_WRITERS: dict[str, Callable[[_Writer, int, Node, tuple, int], bool]] = {
    "matmul_ex": _matmul_ex, "softmax": _softmax, "relu": _relu, "relu6": _relu,
    **{op: _binary for op in _BINARY_UFUNCS},
}


def generate(steps: list, init: list, feed_slots: list, out_slots: list, order: list[Node]) -> Callable:
    """One Python function ``run(arrays) -> list of arrays`` for a plan's step list (see the
    module docstring); ``steps`` are ``(ref, attrs, input slots, output slot, dtype, shape)``,
    ``init`` the constant value per slot, ``order`` the node per slot."""
    w = _Writer(init)
    uses: dict[int, int] = {}
    for slot in [s for step in steps for s in step[2]] + list(out_slots):
        uses[slot] = uses.get(slot, 0) + 1
    fresh: set[int] = set()
    for k, slot in enumerate(feed_slots):
        if slot is not None:
            w.emit(f"v{slot} = arrays[{k}]")
    for i, (ref, attrs, ins, out, _, _) in enumerate(steps):
        node = order[out]
        writer = _WRITERS.get(node.op)
        w.owned = {s for s in ins[:1] if s in fresh and uses[s] == 1}
        if writer is not None and writer(w, i, node, ins, out):
            fresh.add(out)
            continue
        w.env[f"r{i}"], w.env[f"a{i}"] = ref, attrs
        w.emit(f"v{out} = r{i}([{', '.join(w.name(s) for s in ins)}], a{i})")
    w.emit(f"return [{', '.join(w.name(s) for s in out_slots)}]")
    if _FP_VAR is not None:
        w.env["FP_VAR"], w.env["FP_IGNORE"] = _FP_VAR, _FP_IGNORE
        head = ["def run(arrays):", "    token = FP_VAR.set(FP_IGNORE)", "    try:"]
        body = ["    " + line for line in w.lines]
        tail = ["    finally:", "        FP_VAR.reset(token)"]
    else:
        w.env["errstate"] = np.errstate
        head = ["def run(arrays):", "    with errstate(all='ignore'):"]
        body = ["    " + line for line in w.lines]
        tail = []
    source = "\n".join(head + body + tail)
    exec(compile(source, "<mnnjit plan>", "exec"), w.env)  # noqa: S102 - generated from the plan
    fn = w.env["run"]
    fn.source = source
    return fn
