"""A whole tiny plan (an MLP's forward) as one Numba kernel: no Python or numpy call per op.

A lean :class:`~mnnjit.models.program.ExecutionPlan` first runs as a generated Python function of
numpy calls (:mod:`mnnjit.models.small_plan`); each numpy call costs ~0.5-1 us of dispatch, which is
most of a small model's forward. Once a plan is hot (see :data:`HOT_CALLS`) the model runner asks
:func:`compile_plan` for this tier: every step written out as loops in one generated function,
compiled through the kernel cache (:func:`.jit.get_kernel`, on disk like every generated kernel).

What it takes (anything else returns None and the plan stays on its numpy function), all float32:

* ``matmul_ex`` on 2-D operands (either transposed; constant or computed), with a broadcast bias and
  relu / relu6; each output element sums its products in ``k`` order;
* ``softmax`` over any axis (``exp(x - max) / sum``, as the reference computes it);
* elementwise ops with a scalar template (``relu``, ``sigmoid``, ``tanh``, ``add``, ``mul``,
  ``maximum``, ``clip``, ...; numpy broadcasting), ``transpose``, ``broadcast_to`` and ``reshape``.

Layout: every value is a flat C-order float32 array inside the kernel (a reshape is the same array);
constants live in one float32 blob passed as the last argument (so the source, and with it the cache
entry, depends only on the plan's structure and shapes, not on the weights). Each output is a fresh
array per call, so outputs a caller holds are never overwritten and two threads may share a plan.
"""
from __future__ import annotations

import hashlib
import math
import re
import subprocess
import sys
from typing import Any, Callable, Sequence

import numpy as np

from mnnjit.backends.cpu.codegen import plan_gemm_steps
from mnnjit.backends.cpu.codegen.groups import CODEGEN_VERSION, _FAST, instantiate
from mnnjit.backends.cpu.codegen import plan_matvec
from mnnjit.backends.cpu.codegen import plan_views
from mnnjit.backends.cpu.codegen.plan_loops import count_calls, fold_loops
from mnnjit.backends.cpu.runtime.launch import entry_point
from mnnjit import settings as config
from mnnjit.ops import registry

F32 = np.dtype(np.float32)

#: Forwards a lean plan runs on its numpy function before this tier compiles it (a serving loop pays
#: the compile, ~0.3 s from a warm cache, once; a one-off forward never does).
HOT_CALLS = 32

#: Largest product (m * n * k) a matmul step may have: bigger ones are faster in OpenBLAS.
MAX_MACS = 1 << 21

#: Kernels calling more step functions (after :func:`.plan_loops.fold_loops` wrote each unrolled
#: loop as a loop) stay on their numpy function. Numba's compile time grew faster than the
#: step count when the kernel was one function (zoo RNNs, their While loops unrolled: 192 steps
#: ~2 min, 771 steps over 10 min on a loaded 2-core machine); with steps outlined into shared
#: functions (``_outline``) 192 steps take ~10 s.
MAX_STEPS = 1000

#: Plans with more steps are not even written out (generating and folding the source of a
#: 20,000-step plan takes seconds of Python).
MAX_PLAN_STEPS = 20000

#: Matmuls with fewer outputs per row than this (and constant weights) sum each output as one dot
#: product over k: a vector loop over 10 outputs would be mostly remainder.
NARROW = 16

#: Part of every generated source: bump it when the generated code or the helpers it calls change.
PLAN_KERNEL_VERSION = 22

#: Constants in the blob start at multiples of this many elements (64-byte lines).
_ALIGN = 16

_ELEMENTWISE_SKIP = {"copy", "cast"}

#: relu / relu6 as the reference computes them (``np.maximum`` / ``np.clip``: NaN stays NaN).
_NAN_SAFE = {
    "relu": "{0} if not ({0} < np.float32(0)) else np.float32(0)",
    "relu6": "({0} if not ({0} < np.float32(0)) else np.float32(0)) if not ({0} > np.float32(6)) else np.float32(6)",
}


#: Vectorisable forms of templates that call libm, defined in the kernel's module (``_HEADER``).
_VECTOR = {
    "tanh": "tanhf({0})",
    # x / (1 + exp(-2y)), y = sqrt(2/pi) (x + 0.044715 x^3): the reference's form (no cancellation
    # for negative x), in float32 on the vectorisable exp (a libm tanh per element kept a ViT's
    # feed-forward GELU scalar: 10 ns an element)
    "gelu_tanh": "{0} / (np.float32(1) + fast_expf(np.float32(-1.5957691216057308) * ({0} + np.float32(0.044715) * {0} * {0} * {0})))",
}


class _Unsupported(Exception):
    """A step this tier does not write out."""


def _c_strides(shape: Sequence[int]) -> list[int]:
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= int(d)
    return strides[::-1]


def _bcast_index(in_shape: Sequence[int], out_shape: Sequence[int], idx: Sequence[str]) -> str:
    """The flat index into a C-order array of ``in_shape`` broadcast against ``out_shape`` at the
    output position whose per-axis indices are ``idx``."""
    pad = len(out_shape) - len(in_shape)
    if pad < 0:
        raise _Unsupported("input has more axes than output")
    shape = [1] * pad + [int(d) for d in in_shape]
    terms = []
    for ax, (d, st) in enumerate(zip(shape, _c_strides(shape))):
        if d == 1:
            continue
        if d != out_shape[ax]:
            raise _Unsupported("not broadcastable")
        terms.append(idx[ax] if st == 1 else f"{idx[ax]} * {st}")
    return " + ".join(terms) if terms else "0"


class _Writer:
    """Collects the kernel body, its constants and the flat array name of every slot."""

    def __init__(self, init: list, order: list) -> None:
        self.init = init
        self.order = order
        self.lines: list[str] = []
        #: Lines before the body: the blob slices of the constants.
        self.head: list[str] = []
        self.consts: list[np.ndarray] = []
        #: Lines where the step being written splits into separately outlined pieces (``cut``).
        self.cuts: list[int] = []
        self.pieces = 0
        self.const_keys: dict[tuple, str] = {}
        self.blob_size = 0
        self.names: dict[int, str] = {}
        #: Output slot -> the caller's array argument it is computed in (``o{k}``).
        self.out_args: dict[int, str] = {}
        #: Output slots computed straight in their argument (no copy at the end).
        self.in_place: set[int] = set()
        self.loop = 0
        #: Elements of the per-call workspace holding every step's value that is not an output.
        self.ws_size = 0
        #: Slots whose value is a strided view of another array, not yet copied (:mod:`.plan_views`).
        self.virtual: dict[int, plan_views.View] = {}

    def emit(self, line: str, depth: int = 0) -> None:
        """Add a line to the kernel body at loop depth ``depth``."""
        self.lines.append("    " * (depth + 1) + line)

    def const(self, value: np.ndarray, key: tuple | None = None) -> str:
        """A blob slice holding ``value`` (float32, flattened); with ``key``, one slice for every
        call with that key (a recurrent cell's weights, laid out once for all its time steps)."""
        if key is not None and key in self.const_keys:
            return self.const_keys[key]
        flat = np.ascontiguousarray(value, dtype=F32).ravel()
        off = self.blob_size
        name = f"c{len(self.consts)}"
        self.consts.append(flat)
        self.blob_size = off + (flat.size + _ALIGN - 1) // _ALIGN * _ALIGN
        self.head.append(f"    {name} = blob[{off}:{off + flat.size}]")
        if key is not None:
            self.const_keys[key] = name
        return name

    def value(self, slot: int) -> str:
        """The flat array name of a slot's value (a constant goes into the blob on first use)."""
        name = self.names.get(slot)
        if name is None and slot in self.virtual:
            # a view read as an array: copied once, here (the first step needing it)
            return plan_views.materialize(self, slot, self.based(self.virtual.pop(slot)))
        if name is None:
            v = self.init[slot]
            if v is None:
                raise _Unsupported("a value computed outside the kernel")
            if np.asarray(v).dtype != F32:
                raise _Unsupported("a constant that is not float32")
            name = self.names[slot] = self.const(v)
        return name

    def fresh(self, slot: int, size: int) -> str:
        """Allocate the output array of a step."""
        name = self.names[slot] = f"v{slot}"
        arg = self.out_args.get(slot)
        if arg is not None:
            self.in_place.add(slot)
            self.emit(f"{name} = {arg}.reshape({size})")
        else:
            # a piece of the one workspace allocated per call (see ``plan_source``)
            off = self.ws_size
            self.ws_size = off + (size + _ALIGN - 1) // _ALIGN * _ALIGN
            self.emit(f"{name} = ws[{off}:{off + size}]")
        return name

    def view(self, slot: int, src: str, start: int, size: int, whole: bool) -> str:
        """Name ``slot``'s value as elements ``[start, start + size)`` of the flat array ``src``
        (``whole``: all of it): a contiguous slice or reshape, no copy (an output that is a view
        is copied into its argument at the end)."""
        if whole:
            self.names[slot] = src
            return src
        name = self.names[slot] = f"w{slot}"
        self.emit(f"{name} = {src}[{start}:{start + size}]")
        return name

    def strided(self, slot: int) -> plan_views.View:
        """``slot``'s value as a strided view (no copy of a view not yet copied)."""
        v = self.virtual.get(slot)
        if v is not None:
            return v
        return plan_views.of_flat(self.value(slot), self.order[slot].shape)

    def set_view(self, slot: int, v: plan_views.View) -> None:
        """Make ``slot``'s value the view ``v``: a named slice when its elements are one
        contiguous run, else a view read through its strides by the steps that use it."""
        start = plan_views.contiguous_start(v)
        size = math.prod(v[3])
        if start is not None:
            self.view(slot, v[0], start, size, start == 0 and size == v[1])
        else:
            self.virtual[slot] = v

    def based(self, v: plan_views.View) -> plan_views.View:
        """``v`` on a named slice starting at its first element: the step code reading it holds
        no offset (so the steps of an unrolled loop reading shifted views stay one function, and
        their calls fold into a loop: :mod:`.plan_loops`)."""
        name, size, off, shape, strides = v
        if off == 0 or any(st < 0 for st in strides):
            return v
        extent = 1 + sum((d - 1) * st for d, st in zip(shape, strides))
        return self.piece(name, off, extent), extent, 0, shape, strides

    def cut(self) -> None:
        """End the current step's outlined function here: the lines after this go into another
        (a concat's copy of each of many pieces, all calls of one shared function)."""
        self.cuts.append(len(self.lines))

    def piece(self, src: str, start: int, size: int) -> str:
        """A named view of elements ``[start, start + size)`` of the flat array ``src`` (no slot's
        value: named past the slots)."""
        self.pieces += 1
        name = f"w{len(self.order) + self.pieces}"
        self.emit(f"{name} = {src}[{start}:{start + size}]")
        return name

    def idx(self) -> str:
        """A new loop variable name."""
        self.loop += 1
        return f"i{self.loop}"

    def nest(self, shape: Sequence[int]) -> tuple[list[str], int]:
        """Open loops over ``shape`` (C order); returns the per-axis index names and the depth."""
        names = []
        for depth, d in enumerate(shape):
            name = self.idx()
            self.emit(f"for {name} in range({int(d)}):", depth)
            names.append(name)
        return names, len(shape)


def _f32(node: Any) -> bool:
    return node.dtype == F32


#: Rows of a matmul computed together: each weight row loaded once serves this many output rows.
ROW_BLOCK = 4


def _matmul(w: _Writer, node: Any, ins: tuple, out: int) -> None:
    if plan_gemm_steps.matmul_ex(w, node, ins, out):
        return  # one call of the packed GEMM
    if plan_matvec.matvec(w, node, ins, out):
        return  # a matrix and a vector (a recurrent cell's W @ h)
    a, b = node.inputs[0], node.inputs[1]
    if not (len(a.shape) == len(b.shape) == len(node.shape) == 2):
        raise _Unsupported("matmul on more than 2 axes")
    attrs = node.attrs
    if attrs.get("act", "") not in ("", "relu", "relu6"):
        raise _Unsupported("activation")
    m, n = (int(d) for d in node.shape)
    ta, tb = bool(attrs.get("transpose_a")), bool(attrs.get("transpose_b"))
    k = int(a.shape[0] if ta else a.shape[1])
    if m * n * k > MAX_MACS:
        raise _Unsupported("large matmul")
    an = w.value(ins[0])
    i, kk, j = w.idx(), w.idx(), w.idx()

    def a_at(row: str, kx: str) -> str:
        return f"{an}[({kx}) * {m} + {row}]" if ta else f"{an}[({row}) * {k} + {kx}]"
    bias_name = None
    if len(node.inputs) > 2:
        if not _f32(node.inputs[2]):
            raise _Unsupported("bias dtype")
        bias_name = w.value(ins[2])

    def bias_at(row: str) -> str | None:
        if bias_name is None:
            return None
        return f"{bias_name}[{_bcast_index(node.inputs[2].shape, (m, n), (row, j))}]"
    o = w.fresh(out, m * n)
    weights = w.init[ins[1]]
    act = attrs.get("act", "")
    if weights is not None and n < NARROW and not ta:
        # few outputs (a classifier's last layer): one dot product per output over the weights
        # laid out [n, k]; the vector loop runs over k
        w.emit(f"for {i} in range({m}):")
        w.emit(f"row = {i} * {n}", 1)
        wn = w.const(np.asarray(weights) if tb else np.asarray(weights).T, key=("nk", ins[1], tb))
        w.emit(f"arow = {an}[{i} * {k}:{i} * {k} + {k}]", 1)
        w.emit(f"for {j} in range({n}):", 1)
        total = f"dot_f32(arow, {wn}[{j} * {k}:{j} * {k} + {k}])"
        bias = bias_at(i)
        w.emit(f"{o}[row + {j}] = {total}" + (f" + {bias}" if bias else ""), 2)
        if act:
            w.emit(f"for {j} in range({n}):", 1)
            w.emit(f"t = {o}[row + {j}]", 2)
            w.emit(f"{o}[row + {j}] = {_NAN_SAFE[act].format('t')}", 2)
        return
    if weights is not None:  # constant weights: laid out [k, n] once, in the blob
        bn, tb = w.const(np.asarray(weights).T if tb else weights, key=("kn", ins[1], tb)), False
    else:
        bn = w.value(ins[1])

    def b_at(kx: str) -> str:
        return f"{bn}[{j} * {k} + {kx}]" if tb else f"{bn}[({kx}) * {n} + {j}]"

    def rows(first: str, count: int, depth: int) -> None:
        """Output rows ``first .. first + count - 1``: each output sums bias and products in
        ``k`` order, four products per pass; a pass loads each weight once for all the rows."""
        names = [f"({first} + {r})" if r else first for r in range(count)]
        for r, row in enumerate(names):
            w.emit(f"row{r} = {row} * {n}", depth)
        w.emit(f"for {j} in range({n}):", depth)
        for r, row in enumerate(names):
            w.emit(f"{o}[row{r} + {j}] = {bias_at(row) or 'np.float32(0)'}", depth + 1)
        k4 = k - k % 4
        if k4:
            w.emit(f"for {kk} in range(0, {k4}, 4):", depth)
            for r, row in enumerate(names):
                for u in range(4):
                    w.emit(f"s{r}{u} = {a_at(row, f'{kk} + {u}')}", depth + 1)
            w.emit(f"for {j} in range({n}):", depth + 1)
            # the weights are read before any store, so one load serves every row
            for u in range(4):
                w.emit(f"b{u} = {b_at(f'{kk} + {u}')}", depth + 2)
            for r in range(count):
                terms = " + ".join(f"s{r}{u} * b{u}" for u in range(4))
                w.emit(f"{o}[row{r} + {j}] = {o}[row{r} + {j}] + {terms}", depth + 2)
        if k4 < k:
            w.emit(f"for {kk} in range({k4}, {k}):", depth)
            for r, row in enumerate(names):
                w.emit(f"s{r}0 = {a_at(row, kk)}", depth + 1)
            w.emit(f"for {j} in range({n}):", depth + 1)
            w.emit(f"b0 = {b_at(kk)}", depth + 2)
            for r in range(count):
                w.emit(f"{o}[row{r} + {j}] += s{r}0 * b0", depth + 2)
        if act:
            w.emit(f"for {j} in range({n}):", depth)
            for r in range(count):
                w.emit(f"t = {o}[row{r} + {j}]", depth + 1)
                w.emit(f"{o}[row{r} + {j}] = {_NAN_SAFE[act].format('t')}", depth + 1)

    blocks, rest = divmod(m, ROW_BLOCK)
    if blocks:
        w.emit(f"for {i} in range(0, {blocks * ROW_BLOCK}, {ROW_BLOCK}):")
        rows(i, ROW_BLOCK, 1)
    if rest:
        rows(str(blocks * ROW_BLOCK), rest, 0)


def _softmax(w: _Writer, node: Any, ins: tuple, out: int) -> None:
    x = node.inputs[0]
    if x.shape != node.shape or node.size == 0:
        raise _Unsupported("softmax shape")
    shape = [int(d) for d in node.shape]
    ax = int(node.attrs["axis"])
    if not -len(shape) <= ax < len(shape):
        raise _Unsupported("axis")
    ax %= len(shape)
    outer, n, inner = math.prod(shape[:ax]), shape[ax], math.prod(shape[ax + 1:])
    xn = w.value(ins[0])
    o = w.fresh(out, node.size)
    if inner == 1:  # over the last axis (attention's): rows on the compiled helper
        plan_gemm_steps.note_work(w, outer * n * plan_gemm_steps.SOFTMAX_WORK)
        w.emit(f"softmax_rows({xn}, {o}, {outer}, {n})")
        return
    p, r, t = w.idx(), w.idx(), w.idx()
    w.emit(f"for {p} in range({outer}):")
    w.emit(f"for {r} in range({inner}):", 1)
    w.emit(f"base = {p} * {n * inner} + {r}", 2)
    w.emit(f"mx = {xn}[base]", 2)
    w.emit(f"for {t} in range(1, {n}):", 2)
    w.emit(f"v = {xn}[base + {t} * {inner}]", 3)
    w.emit("mx = v if (v > mx) | (v != v) else mx", 3)  # NaN propagates, as np.max
    w.emit("tot = np.float32(0)", 2)
    w.emit(f"for {t} in range({n}):", 2)
    w.emit(f"e = fast_expf({xn}[base + {t} * {inner}] - mx)", 3)
    w.emit(f"{o}[base + {t} * {inner}] = e", 3)
    w.emit("tot += e", 3)
    w.emit(f"for {t} in range({n}):", 2)
    w.emit(f"{o}[base + {t} * {inner}] /= tot", 3)


def _literal(value: Any) -> str:
    if isinstance(value, (bool, np.bool_)):
        return repr(bool(value))
    if isinstance(value, (int, np.integer)):
        return repr(int(value))
    if isinstance(value, (float, np.floating)):
        v = float(value)
        if math.isnan(v):
            return "math.nan"
        if math.isinf(v):
            return "math.inf" if v > 0 else "-math.inf"
        return repr(v)
    raise _Unsupported("attribute that is not a number")


def _elementwise(w: _Writer, node: Any, ins: tuple, out: int) -> None:
    op = node.op
    opdef = registry.get(op)
    if opdef.scalar is None or op in _ELEMENTWISE_SKIP or not all(_f32(i) for i in node.inputs):
        raise _Unsupported(op)
    from mnnjit.backends.cpu.codegen.groups import template_attrs
    params = {name: _literal(node.attrs[name]) for name in template_attrs(op)}
    shape = [int(d) for d in node.shape]
    views = {k: w.virtual[s] for k, s in enumerate(ins) if s in w.virtual}
    names = [w.value(s) if k not in views else "" for k, s in enumerate(ins)]
    for k, v in views.items():
        # (each input that is a view read where it lies: a transpose, slice or broadcast and
        # this step are one loop)
        bv = plan_views.broadcast(v, shape)
        if bv is None:
            raise _Unsupported("not broadcastable")
        views[k] = w.based(bv)
    o = w.fresh(out, node.size)
    # one-element operands (a scale, a bias) read once before the loops: read in the loop, each
    # store to the result might have changed them (LLVM cannot rule out the alias), which kept
    # the loop scalar
    hoisted = {k for k, i in enumerate(node.inputs) if i.size == 1 and k not in views}
    for k in sorted(hoisted):
        w.emit(f"a{k} = {names[k]}[0]")
    if views:
        idx, depth = plan_views.nest(w, shape, plan_views.loop_order(shape, list(views.values())))
        loads = [f"{views[k][0]}[{plan_views.index(views[k], idx)}]" if k in views
                 else f"{nm}[{_bcast_index(i.shape, shape, idx)}]" for k, (nm, i) in enumerate(zip(names, node.inputs))]
        at = _bcast_index(shape, shape, idx)
    elif all(tuple(i.shape) == tuple(node.shape) or i.size == 1 for i in node.inputs):
        t = w.idx()
        w.emit(f"for {t} in range({node.size}):")
        loads = [f"{nm}[{t}]" if i.size != 1 else f"{nm}[0]" for nm, i in zip(names, node.inputs)]
        at, depth = t, 1
    else:
        idx, depth = plan_views.nest(w, shape, range(len(shape)))
        loads = [f"{nm}[{_bcast_index(i.shape, shape, idx)}]" for nm, i in zip(names, node.inputs)]
        at = _bcast_index(shape, shape, idx)
    args = [f"a{k}" for k in range(len(loads))]
    for k, (a, load) in enumerate(zip(args, loads)):
        if k not in hoisted:
            w.emit(f"{a} = {load}", depth)
    fast = _NAN_SAFE.get(op) or _VECTOR.get(op) or _FAST.get((op, "float32"))
    expr = fast.format(*args) if fast is not None else instantiate(op, args, params)
    w.emit(f"{o}[{at}] = np.float32({expr})", depth)


def _transpose(w: _Writer, node: Any, ins: tuple, out: int) -> None:
    x = node.inputs[0]
    perm = [int(p) % len(x.shape) for p in node.attrs["perm"]]
    if sorted(perm) != list(range(len(x.shape))):
        raise _Unsupported("transpose permutation")
    # a view: copied only where a step needs it as an array (:mod:`.plan_views`)
    w.set_view(out, plan_views.transpose(w.strided(ins[0]), perm))


def _broadcast_to(w: _Writer, node: Any, ins: tuple, out: int) -> None:
    v = plan_views.broadcast(w.strided(ins[0]), node.shape)
    if v is None:
        raise _Unsupported("not broadcastable")
    w.set_view(out, v)


def _reshape(w: _Writer, node: Any, ins: tuple, out: int) -> None:
    if node.inputs[0].size != node.size:
        raise _Unsupported("reshape size")
    if ins[0] in w.virtual:
        v = plan_views.reshape(w.virtual[ins[0]], node.shape)
        if v is not None:
            w.set_view(out, v)
            return
    w.names[out] = w.value(ins[0])


def _contiguous_run(shape: Sequence[int], starts: Sequence[int], counts: Sequence[int],
                    steps: Sequence[int]) -> int | None:
    """The flat start of a box (per-axis start, count, step) of a C-order array of ``shape`` when
    the box is one contiguous run of it, else None."""
    n = len(shape)
    # axes after the first one with more than one element must be taken whole
    k = 0
    while k < n and counts[k] == 1:
        k += 1
    for ax in range(k + 1, n):
        if counts[ax] != shape[ax] or (counts[ax] > 1 and steps[ax] != 1):
            return None
    if k < n and counts[k] > 1 and steps[k] != 1:
        return None
    strides = _c_strides(shape)
    return sum(int(st) * int(b) for st, b in zip(strides, starts))


def _slice(w: _Writer, node: Any, ins: tuple, out: int) -> None:
    x = node.inputs[0]
    shape = [int(d) for d in x.shape]
    attrs = node.attrs
    if not (len(attrs["begin"]) == len(attrs["end"]) == len(attrs["step"]) == len(shape)):
        raise _Unsupported("slice rank")
    starts, steps, counts = [], [], []
    for d, b, e, st in zip(shape, attrs["begin"], attrs["end"], attrs["step"]):
        r = range(*slice(int(b), None if int(e) < 0 else int(e), int(st)).indices(d))
        starts.append(r.start)
        steps.append(r.step)
        counts.append(len(r))
    if tuple(counts) != tuple(int(d) for d in node.shape):
        raise _Unsupported("slice extent")
    if node.size == 0:
        raise _Unsupported("empty slice")
    run = _contiguous_run(shape, starts, counts, steps)
    if run is not None and ins[0] not in w.virtual:
        w.view(out, w.value(ins[0]), run, int(node.size), node.size == x.size)
        return
    # a strided box, or a box of a view: a view itself (read in place by its consumer)
    w.set_view(out, plan_views.box(w.strided(ins[0]), starts, counts, steps))


#: Concats of this many inputs or more copy each one in a call of its own (see ``_concat``).
CONCAT_PIECES = 4


def _concat(w: _Writer, node: Any, ins: tuple, out: int) -> None:
    shape = [int(d) for d in node.shape]
    ax = int(node.attrs["axis"]) % len(shape)
    outer = math.prod(shape[:ax])
    row = math.prod(shape[ax:])
    names = [w.value(s) for s in ins]
    o = w.fresh(out, node.size)
    off = 0
    for nm, x in zip(names, node.inputs):
        inner = math.prod(int(d) for d in x.shape[ax:]) if len(x.shape) == len(shape) else None
        if inner is None:
            raise _Unsupported("concat rank")
        if inner == 0:
            continue
        p, r = w.idx(), w.idx()
        if outer == 1 and len(names) >= CONCAT_PIECES:
            # each piece copied by a call of its own, of one function shared by the pieces of
            # one size (a recurrent net's output gathers one piece per time step: its calls
            # fold into a loop; one function with a loop per piece took 8 s to compile for 100)
            w.cut()
            dst = w.piece(o, off, inner)
            w.emit(f"for {r} in range({inner}):")
            w.emit(f"{dst}[{r}] = {nm}[{r}]", 1)
        elif outer == 1:
            w.emit(f"for {r} in range({inner}):")
            w.emit(f"{o}[{off} + {r}] = {nm}[{r}]", 1)
        else:
            w.emit(f"for {p} in range({outer}):")
            w.emit(f"for {r} in range({inner}):", 1)
            w.emit(f"{o}[{p} * {row} + {off} + {r}] = {nm}[{p} * {inner} + {r}]", 2)
        off += inner


def _take(w: _Writer, node: Any, ins: tuple, out: int) -> None:
    x, ind = node.inputs
    idx = w.init[ins[1]]
    if idx is None or np.asarray(idx).dtype.kind not in "iu" or np.asarray(idx).size > 64:
        raise _Unsupported("gather with computed or many indices")
    shape = [int(d) for d in x.shape]
    ax = int(node.attrs["axis"]) % len(shape)
    n = shape[ax]
    picks = [int(i) for i in np.asarray(idx).reshape(-1)]
    if any(not -n <= i < n for i in picks):
        raise _Unsupported("index out of range (the reference raises)")
    picks = [i % n for i in picks]
    outer, inner = math.prod(shape[:ax]), math.prod(shape[ax + 1:])
    if len(picks) == 1 and (ins[0] in w.virtual or outer > 1):
        # one index of a view, or one strided block: a view
        v = plan_views.box(w.strided(ins[0]), [picks[0] if a == ax else 0 for a in range(len(shape))],
                           [1 if a == ax else d for a, d in enumerate(shape)], [1] * len(shape))
        v = plan_views.reshape(v, node.shape)
        if v is not None:
            w.set_view(out, v)
            return
    xn = w.value(ins[0])
    if outer == 1 and len(picks) == 1:
        w.view(out, xn, picks[0] * inner, inner, n == 1)
        return
    o = w.fresh(out, node.size)
    p, r = w.idx(), w.idx()
    for k, pick in enumerate(picks):
        w.emit(f"for {p} in range({outer}):")
        w.emit(f"for {r} in range({inner}):", 1)
        w.emit(f"{o}[({p} * {len(picks)} + {k}) * {inner} + {r}] = {xn}[({p} * {n} + {pick}) * {inner} + {r}]", 2)


def _layer_norm(w: _Writer, node: Any, ins: tuple, out: int) -> None:
    x = node.inputs[0]
    attrs = node.attrs
    shape = [int(d) for d in x.shape]
    axes = sorted(int(a) % len(shape) for a in attrs["axes"])
    if attrs.get("group", 1) != 1 or axes != list(range(len(shape) - len(axes), len(shape))) or not axes:
        raise _Unsupported("layer norm over other than the trailing axes")
    inner = math.prod(shape[len(shape) - len(axes):])
    outer = math.prod(shape[:len(shape) - len(axes)])
    if inner == 0 or outer == 0:
        raise _Unsupported("empty layer norm")
    tail = tuple(shape[len(shape) - len(axes):])
    params = []
    for k in (1, 2):
        if len(node.inputs) > k:
            pnode = node.inputs[k]
            if np.broadcast_shapes(tuple(pnode.shape), tail) != tail or len(pnode.shape) > len(tail):
                raise _Unsupported("layer norm parameter shape")
            val = w.init[ins[k]]
            if val is None:
                raise _Unsupported("computed layer norm parameter")
            params.append(w.const(np.broadcast_to(np.asarray(val, F32), tail)))
        else:
            params.append(None)
    eps = _literal(float(np.float32(attrs.get("eps", 1e-5))))
    xn = w.value(ins[0])
    o = w.fresh(out, node.size)
    p, r = w.idx(), w.idx()
    rms = bool(attrs.get("rms", False))
    # rows on the compiled helper (its sums reassociated, the rest the reference's arithmetic)
    w.emit(f"layer_norm_rows({xn}, {o}, {outer}, {inner}, {params[0] or xn}, {params[0] is not None}, "
           f"{params[1] or xn}, {params[1] is not None}, np.float32({eps}), {rms})")
    return
    # the reference's float32 arithmetic: mean, then the mean square of the deviations (or of x)
    w.emit(f"for {p} in range({outer}):")
    w.emit(f"base = {p} * {inner}", 1)
    if not rms:
        w.emit("acc = np.float32(0)", 1)
        w.emit(f"for {r} in range({inner}):", 1)
        w.emit(f"acc += {xn}[base + {r}]", 2)
        w.emit(f"mean = np.float32(acc / np.float32({inner}))", 1)
    else:
        w.emit("mean = np.float32(0)", 1)
    w.emit("acc = np.float32(0)", 1)
    w.emit(f"for {r} in range({inner}):", 1)
    w.emit(f"d = {xn}[base + {r}] - mean", 2)
    w.emit("acc += d * d", 2)
    w.emit(f"inv = np.float32(1) / np.float32(math.sqrt(np.float32(acc / np.float32({inner})) + np.float32({eps})))", 1)
    w.emit(f"for {r} in range({inner}):", 1)
    y = f"({xn}[base + {r}] - mean) * inv"
    if params[0] is not None:
        y = f"{y} * {params[0]}[{r}]"
    if params[1] is not None:
        y = f"{y} + {params[1]}[{r}]"
    w.emit(f"{o}[base + {r}] = {y}", 2)


def _batched_matmul(w: _Writer, node: Any, ins: tuple, out: int) -> None:
    """``np.matmul`` of two float32 operands of 2 or more axes (batch axes broadcast)."""
    if plan_gemm_steps.batched_matmul(w, node, ins, out) or plan_gemm_steps.matmul_rows(w, node, ins, out):
        return  # one packed GEMM per batch, or one over every row times a 2-D right operand
    a, b = node.inputs[0], node.inputs[1]
    if len(a.shape) < 2 or len(b.shape) < 2:
        raise _Unsupported("matmul of vectors")
    m, k = int(a.shape[-2]), int(a.shape[-1])
    n = int(b.shape[-1])
    if int(b.shape[-2]) != k or tuple(node.shape[-2:]) != (m, n):
        raise _Unsupported("matmul shapes")
    batch = [int(d) for d in node.shape[:-2]]
    nb = math.prod(batch)
    if nb * m * n * k > MAX_MACS or nb == 0:
        raise _Unsupported("large matmul")
    an, bn = w.value(ins[0]), w.value(ins[1])
    o = w.fresh(out, node.size)
    bi = w.idx()
    idx = []
    # per-axis batch indices from the flat batch index (unrolled divisions by constants)
    w.emit(f"for {bi} in range({nb}):")
    rest = bi
    for ax, d in enumerate(batch):
        inner = math.prod(batch[ax + 1:])
        name = w.idx()
        w.emit(f"{name} = ({rest} // {inner}) % {d}", 1)
        idx.append(name)
    a_off = _bcast_index(tuple(a.shape[:-2]), tuple(batch), idx) if batch else "0"
    b_off = _bcast_index(tuple(b.shape[:-2]), tuple(batch), idx) if batch else "0"
    w.emit(f"ao = ({a_off}) * {m * k}", 1)
    w.emit(f"bo = ({b_off}) * {k * n}", 1)
    w.emit(f"oo = {bi} * {m * n}", 1)
    i, kk, j = w.idx(), w.idx(), w.idx()
    w.emit(f"for {i} in range({m}):", 1)
    w.emit(f"row = oo + {i} * {n}", 2)
    w.emit(f"for {j} in range({n}):", 2)
    w.emit(f"{o}[row + {j}] = np.float32(0)", 3)
    w.emit(f"for {kk} in range({k}):", 2)
    w.emit(f"s0 = {an}[ao + {i} * {k} + {kk}]", 3)
    w.emit(f"for {j} in range({n}):", 3)
    w.emit(f"{o}[row + {j}] += s0 * {bn}[bo + {kk} * {n} + {j}]", 4)


def _patch_conv(w: _Writer, node: Any, ins: tuple, out: int) -> None:
    """A convolution this tier takes: a ViT's patch embedding (:func:`.plan_gemm_steps.patch_conv`)."""
    if not plan_gemm_steps.patch_conv(w, node, ins, out):
        raise _Unsupported("convolution")


_WRITERS: dict[str, Callable[[_Writer, Any, tuple, int], None]] = {
    "mnn_conv2d": _patch_conv,
    "matmul_ex": _matmul, "softmax": _softmax, "transpose": _transpose,
    "broadcast_to": _broadcast_to, "reshape": _reshape, "slice": _slice, "concat": _concat,
    "take": _take, "layer_norm": _layer_norm, "matmul": _batched_matmul,
}

_HEADER = '''# mnnjit generated plan kernel (codegen v{version}, plan kernel v{plan_version})
import math
import numpy as np
import numba
from mnnjit.backends.cpu.runtime.intrinsics import borrow, dot_f32, fast_expf
from mnnjit.backends.cpu.codegen.plan_rows import layer_norm_rows, opaque, softmax_rows


@numba.njit(inline="always", cache=True)
def tanhf(x):
    # float32 tanh without a libm call (which keeps a loop scalar): an odd polynomial near 0, where
    # (1 - e) / (1 + e) with e = exp(-2|x|) cancels; within a few float32 ulps of np.tanh
    a = abs(np.float32(x))
    z = a * a
    p = a + a * z * (np.float32(-1.0 / 3.0) + z * (np.float32(2.0 / 15.0) + z * (np.float32(-17.0 / 315.0)
                                                                                  + z * np.float32(62.0 / 2835.0))))
    e = fast_expf(np.float32(-2.0) * a)
    r = (np.float32(1.0) - e) / (np.float32(1.0) + e)
    t = p if a < np.float32(0.125) else r
    t = t if a == a else a
    return -t if x < np.float32(0) else t

{functions}

@numba.njit(cache=True, error_model="numpy", nogil=True, boundscheck=False)
def kernel({args}):
'''


#: What a kernel with GEMM steps imports (only those: the GEMM module loads the micro-kernels).
_GEMM_IMPORT = ("from mnnjit.backends.cpu.codegen.plan_gemm import patch_im2col, gemm as gemm_linked, "
                "gemm_batched as gemm_batched_linked\n"
                "from mnnjit.backends.cpu.codegen.plan_gemm_par import gemm as gemm_f32, gemm_batched, softmax_rows")

#: A line of a step that stays in the kernel: its value's workspace piece, output argument or view.
_SETUP = re.compile(r"^    [vw]\d+ = (ws\[\d+:\d+\]|o\d+\.reshape\(\d+\)|\w+\[\d+:\d+\])$")
_ARRAY = re.compile(r"\b(?:[vwc]\d+|x\d+f|o\d+|gs)\b")
_LOOP_VAR = re.compile(r"\bi\d+\b")

_STEP_DECORATOR = '@numba.njit(cache=True, error_model="numpy", nogil=True, boundscheck=False, inline="never")'


def _outline(lines: list[str], bounds: list[tuple[int, int]]) -> tuple[list[str], str]:
    """The kernel body with each step's loops moved into a function of its own, called with the
    step's arrays, and the source of those functions. Steps with the same code on other arrays
    (a recurrent cell's every time step, a transformer's every layer) share one function: Numba's
    and LLVM's time grows faster than linearly with one function's size (a 10-step LSTM written
    out whole took minutes to compile), and the functions are compiled once each."""
    out: list[str] = []
    functions: dict[str, str] = {}
    step_of = {}
    for first, end in bounds:
        if end > first:  # (a reshape writes no line)
            step_of[first] = end
    k = 0
    while k < len(lines):
        end = step_of.get(k)
        if end is None:
            out.append(lines[k])
            k += 1
            continue
        block = lines[k:end]
        k = end
        setup = [ln for ln in block if _SETUP.match(ln)]
        rest = [ln for ln in block if not _SETUP.match(ln)]
        out.extend(setup)
        if not rest:
            continue
        params: dict[str, str] = {}
        loops: dict[str, str] = {}

        def param(m: re.Match) -> str:
            return params.setdefault(m.group(0), f"p{len(params)}")

        def loop(m: re.Match) -> str:
            return loops.setdefault(m.group(0), f"j{len(loops)}")
        body = [_LOOP_VAR.sub(loop, _ARRAY.sub(param, ln)) for ln in rest]
        text = "\n".join(body)
        name = "step_" + hashlib.sha1(text.encode()).hexdigest()[:16]
        if name not in functions:
            functions[name] = (f"{_STEP_DECORATOR}\ndef {name}({', '.join(params.values())}):\n"
                               f"{text}\n    return 0\n")
        out.append(f"    {name}({', '.join(params)})")
    return out, "\n\n".join(functions.values())


def plan_source(steps: list, init: list, feed_slots: list, out_slots: list, order: list,
                sizes: dict | None = None) -> tuple[str, np.ndarray] | None:
    """The kernel source and constant blob for a plan's step list, or None when a step (or an
    input, output or dtype) is outside this tier. ``steps`` are the plan's
    ``(ref, attrs, input slots, output slot, dtype, shape)`` tuples, ``order`` its node per slot.
    The kernel's arguments are the used inputs, the blob, the outputs and the float32 workspace
    ``wsa``, whose size goes into ``sizes["workspace"]``."""
    w = _Writer(init, order)
    w.out_args = {s: f"o{k}" for k, s in enumerate(out_slots)}
    bounds: list[tuple[int, int]] = []
    try:
        feeds = []
        for k, slot in enumerate(feed_slots):
            if slot is None:
                continue
            node = order[slot]
            if not _f32(node):
                return None
            w.names[slot] = f"x{k}f"
            w.emit(f"x{k}f = x{k}.ravel()")
            feeds.append(slot)
        for _, _, ins, out, _, _ in steps:
            node = order[out]
            # (a gather's indices are integers; every other input is float32)
            data = node.inputs[:1] if node.op == "take" else node.inputs
            if not _f32(node) or any(not _f32(i) for i in data):
                return None
            writer = _WRITERS.get(node.op)
            if writer is None:
                if node.op not in _ELEMENTWISE_SKIP and registry.get(node.op).kind == "elementwise":
                    writer = _elementwise
                else:
                    return None
            first = len(w.lines)
            writer(w, node, ins, out)
            cuts = [first] + w.cuts + [len(w.lines)]
            w.cuts = []
            bounds.extend(zip(cuts, cuts[1:]))
        for s in out_slots:
            if s in w.virtual:  # an output that is a view: copied into its argument
                w.value(s)
        if any(s in feeds or w.init[s] is not None or s not in w.names for s in out_slots):
            return None  # an output that is an input or a constant: the numpy function returns it as is
        if len(set(out_slots)) != len(out_slots):
            return None  # one value as two outputs: the numpy function returns one array twice
    except _Unsupported:
        return None
    # outputs are computed in the caller's fresh arrays ``o{k}`` (returning a new array from the
    # kernel costs ~0.6 us of boxing per call; passing one in ~0.1); one that is another step's
    # array under a new name (a reshape) is copied there
    for k, s in enumerate(out_slots):
        if s in w.in_place and w.names[s] == f"v{s}":
            continue
        size = int(order[s].size)
        w.emit(f"o{k}f = o{k}.reshape({size})")
        w.emit(f"for i in range({size}):")
        w.emit(f"o{k}f[i] = {w.names[s]}[i]", 1)
    # (a use of the workspace argument after its borrowed view ``ws``'s last one: the caller
    # holds it anyway, this keeps the kernel's reference to it live through every step)
    w.emit("return wsa.shape[0]")
    names = ([f"x{k}" for k, s in enumerate(feed_slots) if s is not None] + ["blob"]
             + [f"o{k}" for k in range(len(out_slots))])
    # the inputs and the blob as borrowed views (intrinsics.borrow: no atomic reference counts on
    # their slices; the caller holds them, and no output is a view of them: checked above)
    borrowed = [f"    {a} = borrow({a})" for a in names]
    # every intermediate value in one workspace (its pieces are borrowed slices: no allocation or
    # reference counting per step), an argument: the runner keeps a pool of them, one per call
    # running at once (a fresh multi-megabyte array per call was page faults: mmap'ed anew)
    borrowed += ["    ws = borrow(wsa)"]
    names.append("wsa")
    ws_size = w.ws_size
    gemm_scratch = getattr(w, plan_gemm_steps.SCRATCH_ATTR, 0)
    if gemm_scratch:
        # the packed GEMM's scratch (its A panels and tail tiles), shared by every GEMM step
        borrowed += [f"    gs = ws[{ws_size}:{ws_size + gemm_scratch}]"]
        ws_size += gemm_scratch
    # a product (or softmax) large enough for the team's threads
    threaded = getattr(w, plan_gemm_steps.MACS_ATTR, 0) >= plan_gemm_steps.PAR_MACS
    if sizes is not None:
        sizes["workspace"] = max(ws_size, 1)
        sizes["threaded"] = threaded
        sizes["gemm_module"] = bool(gemm_scratch or threaded)
    body, functions = _outline(w.lines, bounds)
    body = fold_loops(w.head, body)
    if count_calls(body) > MAX_STEPS:
        return None  # the body still this long after folding its loops: too slow to compile
    header = _HEADER
    if gemm_scratch or threaded:
        header = header.replace("\n\n\n", "\n" + _GEMM_IMPORT + "\n\n\n", 1)
    source = (header.format(version=CODEGEN_VERSION, plan_version=PLAN_KERNEL_VERSION, functions=functions,
                            args=", ".join(names)) + "\n".join(borrowed + w.head + body) + "\n")
    blob = np.zeros(max(w.blob_size, 1), F32)
    off = 0
    for c in w.consts:
        blob[off:off + c.size] = c
        off += (c.size + _ALIGN - 1) // _ALIGN * _ALIGN
    return source, blob


def compile_plan(steps: list, init: list, feed_slots: list, out_slots: list, order: list,
                 check: Callable[[list[np.ndarray]], list[np.ndarray]] | None = None,
                 sample: list[np.ndarray] | None = None) -> Callable[[list[np.ndarray]], list[np.ndarray]] | None | bool:
    """``run(arrays) -> list of arrays`` computing the plan in one compiled kernel, or None when the
    plan is outside this tier or its kernel does not compile (the caller keeps its own function),
    or False while the kernel compiles in the background (the caller asks again later).
    With ``check`` and ``sample``, the kernel's first result on ``sample`` must match ``check``'s
    (a self-test against the numpy function; a mismatch keeps the numpy function)."""
    if len(steps) > MAX_PLAN_STEPS:
        return None
    sizes: dict = {}
    made = plan_source(steps, init, feed_slots, out_slots, order, sizes)
    if made is None:
        return None
    source, blob = made
    wsn = sizes["workspace"]
    used = [k for k, s in enumerate(feed_slots) if s is not None]
    shapes = [tuple(int(d) for d in order[s].shape) for s in out_slots]
    from mnnjit.backends.cpu.runtime import jit
    try:
        if _compiling_in_background():
            # the kernel module loads on a thread of its own: Numba's import and the GEMM
            # module's C functions (compiled by a helper process into the cache first) stalled
            # the model's forward that asked, for 0.3 s warm and many seconds cold
            first_call = None
            if sample is not None:
                # (the caller's own input arrays, only read: their types are the signature the
                # foreground's calls will have, read-only flags included)
                args = [sample[k] for k in used] + [blob] + [np.empty(s, F32) for s in shapes] + [np.empty(wsn, F32)]

                def first_call(k: Any) -> None:
                    k(*args)
            kernel = jit.get_kernel_soon("plan " + source, lambda: source,
                                         _prepare_gemm_module if sizes["gemm_module"] else None, first_call)
            if kernel is None:
                return False
        else:
            kernel = jit.get_kernel("plan " + source, lambda: source)
    except Exception:  # noqa: BLE001 - a kernel that cannot be built leaves the plan on numpy
        return None
    if sample is not None:
        outs = [np.empty(shape, F32) for shape in shapes]
        wsa = np.empty(wsn, F32)
        if kernel(*[sample[k] for k in used], blob, *outs, wsa) is jit.BROKEN:
            # compiling in the background (MNNJIT_COMPILE=background): False asks the caller
            # to come back later; None (it cannot be compiled) keeps the numpy function for good
            return False if kernel.disp is not None else None
        if check is not None:
            want = check(sample)
            for g, e in zip(outs, want):
                # relative to the output's scale as well as each value: sums over a deep product
                # (a 2048-wide feed-forward layer) in another order than BLAS's differ by a few
                # ulps of their terms, not of a result that cancels to near zero
                fin = np.abs(np.asarray(e, np.float64))
                scale = float(fin[np.isfinite(fin)].max(initial=0.0))
                if g.shape != np.shape(e) or not np.allclose(g, e, rtol=1e-4, atol=max(1e-6, 1e-5 * scale),
                                                             equal_nan=True):
                    return None
    disp = kernel.disp if kernel.seen else kernel
    entry = entry_point(disp, [sample[k] for k in used] + [blob] + outs + [wsa]) if sample is not None else None
    run = _runner(entry or disp, disp, used, blob, shapes, wsn)
    # (a kernel with a product large enough for the GEMM's threads: its caller sets the thread
    # count it wants before each call; a kernel without one runs on the calling thread alone)
    run.threaded = sizes["threaded"]  # type: ignore[attr-defined]
    return run


def _compiling_in_background() -> bool:
    """Whether kernels compile in the background on this thread (tiering's mode where it is
    loaded, which imports Numba: else the setting)."""
    tiering = sys.modules.get("mnnjit.backends.cpu.runtime.tiering")
    if tiering is not None:
        return tiering.mode() == "background"
    return config.compile_in_background()


#: The module whose C functions a plan kernel with GEMM calls by symbol (imported before the
#: kernel's code is linked).
GEMM_MODULE = "mnnjit.backends.cpu.codegen.plan_gemm_par"


def _prepare_gemm_module() -> None:
    """Compile the GEMM module's C functions into the kernel cache in a helper process (where they
    are not cached yet: ~15 CPU-s), so that this process's import only loads them. Waits without
    holding the GIL; errors leave the compiling to the import."""
    if GEMM_MODULE in sys.modules:
        return
    from mnnjit.backends.cpu.runtime.jit import worker_env
    subprocess.run([sys.executable, "-c", f"import {GEMM_MODULE}"], env=worker_env(), stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=1800, check=False)


def _runner(entry: Callable, disp: Callable, used: list[int], blob: np.ndarray,
            shapes: list[tuple[int, ...]], wsn: int) -> Callable[[list[np.ndarray]], list[np.ndarray]]:
    """The plan's ``run``: fresh output arrays of ``shapes`` filled by the kernel from the used
    inputs and the blob (through the dispatcher when the entry refuses the arrays: another layout
    or dtype than the first call's), on a workspace of ``wsn`` float32 values from a pool (one
    per call running at once: threads may share the plan). With one input and one output,
    ``run.one(x)`` returns that output array alone."""
    empty = np.empty
    pool: list[np.ndarray] = []
    if used == [0] and len(shapes) == 1:
        shape = shapes[0]

        def one(x: np.ndarray) -> np.ndarray:
            out = empty(shape, F32)
            try:
                ws = pool.pop()     # (list.pop / append are atomic: no lock)
            except IndexError:
                ws = empty(wsn, F32)
            try:
                entry(x, blob, out, ws)
            except (TypeError, ValueError, NotImplementedError):
                disp(x, blob, out, ws)
            pool.append(ws)
            return out

        def run(arrays: list[np.ndarray]) -> list[np.ndarray]:
            return [one(arrays[0])]
        # a one-input, one-output model's forward calls ``one`` itself: no lists, and the output
        # is known fresh (nothing else holds it), so no holder count before handing it out
        run.one = one  # type: ignore[attr-defined]
        return run

    def run_any(arrays: list[np.ndarray]) -> list[np.ndarray]:
        args = [arrays[k] for k in used]
        outs = [empty(shape, F32) for shape in shapes]
        try:
            ws = pool.pop()
        except IndexError:
            ws = empty(wsn, F32)
        try:
            entry(*args, blob, *outs, ws)
        except (TypeError, ValueError, NotImplementedError):
            disp(*args, blob, *outs, ws)
        pool.append(ws)
        return outs
    return run_any
