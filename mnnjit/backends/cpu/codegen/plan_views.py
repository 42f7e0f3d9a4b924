"""Strided views in the whole-plan kernel (:mod:`.whole_plan`): data movement that is not copied.

A transformer's attention moves data between its products: the fused QKV projection's output is
split by a transpose and slices, each head's rows are transposed again (K twice), and Q and K are
scaled. Written one step at a time that is a copy per transpose plus a pass per scaling: six
copies and two multiplications over the activations per layer.

Here a transpose, a slice, a broadcast, a gather of one block and a reshape of such a value
produce a :data:`View` - the flat array it reads, an offset and per-axis strides - and no code.
A view is read through its index expression by the step that consumes it: an elementwise step
reads its inputs through their views (a scaling of a transposed head is one loop over the
projection's output), a chain of views composes into one view, and any other step (a product,
softmax, layer norm, an output) gets the view copied once, as a strided gather, where it first
asks for the value (:func:`materialize`). Views whose elements are one contiguous run stay what
they were before: a named slice of the flat array.

Nothing here imports numba.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

#: A strided view: (flat array name, that array's size, first element, shape, strides in elements).
View = tuple[str, int, int, tuple[int, ...], tuple[int, ...]]

__all__ = ["View", "of_flat", "transpose", "box", "reshape", "broadcast", "index", "contiguous_start",
           "loop_order", "nest", "materialize"]


def c_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """C-order strides (in elements) of ``shape``."""
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= int(d)
    return tuple(strides[::-1])


def of_flat(name: str, shape: Sequence[int]) -> View:
    """The view of a whole flat C-order array ``name`` holding a value of ``shape``."""
    shape = tuple(int(d) for d in shape)
    return name, math.prod(shape), 0, shape, c_strides(shape)


def transpose(v: View, perm: Sequence[int]) -> View:
    """``np.transpose(v, perm)``."""
    name, size, off, shape, strides = v
    return name, size, off, tuple(shape[p] for p in perm), tuple(strides[p] for p in perm)


def box(v: View, starts: Sequence[int], counts: Sequence[int], steps: Sequence[int]) -> View:
    """The box of ``v`` with per-axis ``starts``, element ``counts`` and ``steps`` (a slice)."""
    name, size, off, _, strides = v
    off += sum(int(s) * st for s, st in zip(starts, strides))
    return name, size, off, tuple(int(c) for c in counts), tuple(st * int(s) for st, s in zip(strides, steps))


def reshape(v: View, new_shape: Sequence[int]) -> View | None:
    """``v`` reshaped to ``new_shape`` without a copy, or None where the strides cannot express it
    (numpy's rule: each run of old axes merged or split must be contiguous in itself)."""
    name, size, off, shape, strides = v
    new_shape = tuple(int(d) for d in new_shape)
    if math.prod(shape) != math.prod(new_shape):
        return None
    if math.prod(new_shape) == 0:
        return None
    old = [(d, st) for d, st in zip(shape, strides) if d != 1]
    new_strides: list[int] = []
    oi = 0
    ni = 0
    dims = [d for d in new_shape]
    while ni < len(dims):
        if dims[ni] == 1:
            new_strides.append(0)
            ni += 1
            continue
        # one group: old axes oi..oj-1 and new axes ni..nj-1 of one product
        po, pn = old[oi][0], dims[ni]
        oj, nj = oi + 1, ni + 1
        while po != pn:
            if po < pn:
                po *= old[oj][0]
                oj += 1
            else:
                while dims[nj] == 1:
                    nj += 1
                pn *= dims[nj]
                nj += 1
        for k in range(oi, oj - 1):  # the old axes of the group must be contiguous in each other
            if old[k][1] != old[k + 1][1] * old[k + 1][0]:
                return None
        st = old[oj - 1][1]
        group: list[int] = []
        for k in range(nj - 1, ni - 1, -1):
            group.append(st if dims[k] != 1 else 0)
            if dims[k] != 1:
                st *= dims[k]
        new_strides.extend(reversed(group))
        oi, ni = oj, nj
    return name, size, off, new_shape, tuple(new_strides)


def broadcast(v: View, shape: Sequence[int]) -> View | None:
    """``np.broadcast_to(v, shape)`` (stride 0 on broadcast axes), or None when not broadcastable."""
    name, size, off, vshape, strides = v
    shape = tuple(int(d) for d in shape)
    pad = len(shape) - len(vshape)
    if pad < 0:
        return None
    out = []
    for ax, d in enumerate(shape):
        if ax < pad:
            out.append(0)
            continue
        vd, st = vshape[ax - pad], strides[ax - pad]
        if vd == d:
            out.append(st if d != 1 else 0)
        elif vd == 1:
            out.append(0)
        else:
            return None
    return name, size, off, shape, tuple(out)


def index(v: View, idx: Sequence[str]) -> str:
    """The flat index into ``v``'s array of the element at per-axis indices ``idx``."""
    _, _, off, shape, strides = v
    terms = [str(off)] if off else []
    for i, d, st in zip(idx, shape, strides):
        if d != 1 and st != 0:
            terms.append(i if st == 1 else f"{i} * {st}")
    return " + ".join(terms) if terms else "0"


def contiguous_start(v: View) -> int | None:
    """The first element of ``v`` when its elements are one contiguous C-order run, else None."""
    _, _, off, shape, strides = v
    want = c_strides(shape)
    for d, st, c in zip(shape, strides, want):
        if d != 1 and st != c:
            return None
    return off


def loop_order(shape: Sequence[int], views: Sequence[View]) -> list[int]:
    """The axes of a loop nest over ``shape`` reading ``views`` and writing a C-order result,
    outermost first: C order, except where the result's last axis is strided in a view (a
    transpose) and another axis is contiguous there - that axis goes innermost, so the reads are
    contiguous and the writes come back to the same few lines (reading K^T across 256 rows of a
    [256, 1536] projection touched a page per element: ~2 ns an element)."""
    axes = list(range(len(shape)))
    big = [ax for ax in axes if shape[ax] > 1]
    if not big:
        return axes
    last = big[-1]
    for v in views:
        st = v[4]
        if st[last] in (0, 1):
            continue
        inner = [ax for ax in big if st[ax] == 1]
        if inner:
            return [ax for ax in axes if ax != inner[-1]] + [inner[-1]]
    return axes


def nest(w: Any, shape: Sequence[int], order: Sequence[int]) -> tuple[list[str], int]:
    """Open loops over ``shape`` in axis ``order`` (outermost first); the per-axis index names
    (in axis order; ``0`` for an axis of one element, which gets no loop) and the depth of the
    body. The innermost loop's trip count is opaque to LLVM (``opaque``, from
    :mod:`.plan_rows`): with every count a constant it unrolled the inner loop whole and
    vectorised the next one out with gathers and scatters (a [4, 32, 32] scaled copy took 4.2 us
    instead of 0.3)."""
    names = ["0"] * len(shape)
    loops = [ax for ax in order if int(shape[ax]) != 1]
    # (only where the inner loop writes the result contiguously: a transpose's inner loop,
    # writing across rows, vectorised with scatters when its count was opaque, ~3x slower)
    last = max((ax for ax in range(len(shape)) if int(shape[ax]) != 1), default=None)
    for depth, ax in enumerate(loops):
        names[ax] = w.idx()
        d = int(shape[ax])
        bound = f"opaque({d})" if depth == len(loops) - 1 and ax == last and d >= 8 else str(d)
        w.emit(f"for {names[ax]} in range({bound}):", depth)
    return names, len(loops)


def materialize(w: Any, slot: int, v: View) -> str:
    """Copy view ``v`` into ``slot``'s own array (a strided gather, at the first step needing the
    value as an array) and return that array's name."""
    shape = v[3]
    o = w.fresh(slot, math.prod(shape))
    idx, depth = nest(w, shape, loop_order(shape, [v]))
    w.emit(f"{o}[{index(of_flat(o, shape), idx)}] = {v[0]}[{index(v, idx)}]", depth)
    return o
