"""The Numba CPU backend: runs fusion groups as generated parallel kernels, single ops as hand-written kernels.

At run time each group's leaf arrays are examined (shapes, strides, broadcasting), the iteration
space is collapsed (adjacent axes merged when every operand allows it, size-1 axes dropped), and a
kernel variant is chosen: the flat variant when every leaf is contiguous with the output or a
scalar, else the strided variant for the collapsed rank. Kernels are looked up in memory, then on
disk, and generated and compiled only when missing (see jit.py).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from numpy.lib.stride_tricks import as_strided

from mnnjit.backends.ir import collapse_axes
from mnnjit.backends.base import Backend
from mnnjit.backends.cpu.codegen import groups as codegen
from mnnjit.backends.cpu.runtime import jit
from mnnjit.backends.cpu.handwritten import registry as kernels


def _readonly_flat(arr: np.ndarray) -> tuple[np.ndarray, int]:
    """A read-only 1-d view of the memory an array spans (float16 as uint16 bits), from its lowest address,
    and the element offset of ``arr[0, ..., 0]`` in that view (non-zero when some stride is negative)."""
    if arr.dtype == np.float16:
        arr = arr.view(np.uint16)
    off = 0
    if arr.flags.c_contiguous:
        v = arr.reshape(-1)
    else:
        isz = arr.itemsize
        lo = sum((d - 1) * s for d, s in zip(arr.shape, arr.strides) if s < 0 and d > 1)
        if lo:  # reversing the reversed axes starts the view at the lowest address
            off = -lo // isz
            arr = arr[tuple(slice(None, None, -1) if s < 0 and d > 1 else slice(None)
                            for d, s in zip(arr.shape, arr.strides))]
        span = 1 + sum((d - 1) * abs(s) for d, s in zip(arr.shape, arr.strides)) // isz
        v = as_strided(arr, shape=(span,), strides=(isz,), writeable=False)
    if v.flags.writeable:
        v = v.view()
        v.flags.writeable = False
    return v, off


def _flat(arr: np.ndarray) -> np.ndarray:
    """The flat view of a leaf whose strides are all non-negative (flat kernels, reductions)."""
    return _readonly_flat(arr)[0]


def _elem_strides(arr: np.ndarray, shape: tuple[int, ...], negative: bool = True) -> list[int] | None:
    """Element strides of ``arr`` broadcast to ``shape`` (None: misaligned strides, or negative ones
    when not ``negative``)."""
    nd = len(shape)
    off = nd - arr.ndim
    st = [0] * nd
    isz = arr.itemsize
    for k in range(arr.ndim):
        if arr.shape[k] != 1:
            s = arr.strides[k]
            if s % isz or (s < 0 and not negative):
                return None
            st[off + k] = s // isz
    return st


def _contig(shape: list[int]) -> list[int]:
    st = [0] * len(shape)
    acc = 1
    for k in range(len(shape) - 1, -1, -1):
        st[k] = acc
        acc *= shape[k]
    return st


_collapse = collapse_axes


def _blocks(outer: int, inner: int, threads: int) -> tuple[int, int]:
    """Split the innermost axis so there are enough parallel tasks: (number of blocks, block size)."""
    if outer >= 4 * threads or inner <= 2048:
        return 1, max(inner, 1)
    nb = min(-(-inner // 1024), -(-8 * threads // outer))
    bs = -(-inner // nb)
    return -(-inner // bs), bs


class CPUBackend(Backend):
    """Numba CPU backend (module docstring)."""

    name = "cpu"

    def __init__(self) -> None:
        self._threads: int | None = None

    # ------------------------------------------------------------ interface
    def supports_group(self, group: Any) -> bool:
        return True

    def supports_op(self, node: Any) -> bool:
        return kernels.lookup(node) is not None

    def run_op(self, node: Any, inputs: Sequence[Any]) -> Any:
        fn = kernels.lookup(node)
        if fn is None:
            return None
        from mnnjit.backends.cpu.runtime.tiering import run_or_none
        # None while its kernels compile in the background: the caller runs the op's reference
        return run_or_none(fn, list(inputs), node.attrs)

    def fusion_rules(self, modes: Any = None) -> Any:
        """The convolutions prepared for one lowering, deciding which blocks fuse
        (:class:`.conv_kernels.ConvKernels`)."""
        from mnnjit.backends.cpu.conv_kernels import ConvKernels
        return ConvKernels(modes, jit.get_num_threads())

    def lower_graph(self, graph: Any, modes: Any = None) -> Any:
        """The graph as kernel steps on a buffer arena (:class:`.kernel_steps.NetPlan`)."""
        from mnnjit.backends.cpu.kernel_steps import NetPlan
        return NetPlan(graph, modes)

    def compile_step_list(self, steps: list, init: list, feed_slots: list, out_slots: list, order: list,
                          check: Any = None, sample: Any = None) -> Any:
        from mnnjit.backends.cpu.codegen.whole_plan import compile_plan
        return compile_plan(steps, init, feed_slots, out_slots, order, check=check, sample=sample)

    def run_context(self) -> Any:
        """OpenBLAS's own threads fight the Numba workers: BLAS runs on one thread during a graph run."""
        from mnnjit.backends.cpu.runtime.blas import single_threaded_blas
        return single_threaded_blas()

    def plan_key(self) -> tuple:
        return ("cpu", jit.get_num_threads())

    def set_num_threads(self, n: int) -> None:
        jit.set_num_threads(n)

    def num_threads(self) -> int:
        return jit.get_num_threads()

    def clear_caches(self, disk: bool = False) -> None:
        if disk:
            jit.clear_disk_cache()
        else:
            jit.reset()

    def describe(self) -> str:
        return f"cpu (numba, {jit.get_num_threads()} threads, cache {jit.kernel_dir()})"

    def run_group(self, group: Any, inputs: Sequence[np.ndarray], out: np.ndarray) -> np.ndarray:
        from mnnjit.backends.cpu.runtime.tiering import run_or_none
        # None while its kernels compile in the background: the caller runs the group's reference
        return run_or_none(self._run_group, group, inputs, out)

    def _run_group(self, group: Any, inputs: Sequence[np.ndarray], out: np.ndarray) -> np.ndarray:
        if group.producer is not None:  # a fused resize (compiler/producers.py)
            from mnnjit.backends.cpu.codegen.resize_groups import resize_leaf, run_resize_group
            res = run_resize_group(group, list(inputs), out)
            if res is not None:
                return res
            inputs = list(inputs)
            inputs[group.producer.leaf] = resize_leaf(group, inputs[group.producer.leaf])
        if group.spec.reduce is not None:
            return self._run_reduce(group, list(inputs), out)
        return self._run_elementwise(group, list(inputs), out)

    # ------------------------------------------------------------ elementwise
    def _run_elementwise(self, g, inputs: list[np.ndarray], out: np.ndarray) -> np.ndarray:
        shape = g.shape
        parallel = not getattr(g, "serial", False)
        flat = True
        modes = []
        for k, a in enumerate(inputs):
            if a.size == 1:
                modes.append("s")
            elif a.shape == shape and a.flags.c_contiguous:
                modes.append("c")
            else:
                modes.append("g")
                flat = False
        spec = g.spec
        outf = out.reshape(-1)
        if outf.dtype == np.float16:
            outf = outf.view(np.uint16)
        if flat:
            modes_t = tuple(modes)
            kern = jit.get_kernel(spec.key() + f"|flat{modes_t}{'' if parallel else '|serial'}",
                                  lambda: codegen.gen_flat(spec, modes_t, parallel=parallel))
            if kern(*[_flat(a) for a in inputs], outf, out.size, *g.params) is jit.BROKEN:
                return None
            return out
        # strided: the layout (kernel, collapsed shape, strides, offsets) depends only on the leaves' shapes,
        # strides and dtypes, so it is computed once per layout and group
        lkey = (tuple((a.shape, a.strides, a.dtype.char) for a in inputs),
                jit.get_num_threads() if parallel else 0)
        launch = g.__dict__.setdefault("_launch", {})
        hit = launch.get(lkey)
        if hit is not None:
            kern, shp_a, st_arr, off_a, nb, bs = hit
            if kern(*[_readonly_flat(a)[0] for a in inputs], outf, shp_a, st_arr, off_a, nb, bs,
                    *g.params) is jit.BROKEN:
                return None
            return out
        copied = False
        arrs = []
        sts = []
        for a, m in zip(inputs, modes):
            if m == "g":
                st = _elem_strides(a, shape)
                if st is None:
                    a = np.ascontiguousarray(a)
                    st = _elem_strides(a, shape)
                    copied = True
                sts.append(st)
            arrs.append(a)
        gidx = [k for k, m in enumerate(modes) if m == "g"]
        shp, csts = _collapse(list(shape), [_contig(list(shape))] + sts)
        if not shp:
            shp, csts = [1], [[1] for _ in csts]
        out_st = csts[0]
        for k, st in zip(gidx, csts[1:]):
            if st == out_st:
                modes[k] = "c"
            elif st[-1] == 0:
                modes[k] = "r"
        ndim = len(shp)
        st_arr = np.zeros((len(inputs), ndim), np.int64)
        for k, st in zip(gidx, csts[1:]):
            st_arr[k] = st
        outer = 1
        for d in shp[:-1]:
            outer *= d
        inner = shp[-1] if ndim > 1 and shp[-1] <= codegen.SMALL_INNER else 0
        if inner or not parallel:
            nb, bs = 1, shp[-1]
        else:
            nb, bs = _blocks(outer, shp[-1], lkey[1])
        flats, offs = zip(*[_readonly_flat(a) for a in arrs])
        if inner:  # channel-reversed and per-channel leaves get their own access modes
            rev = out_st[:-1] + [-1]
            for k, st in zip(gidx, csts[1:]):
                if modes[k] != "g":
                    continue
                if st == rev and offs[k] == inner - 1:
                    modes[k] = "v"
                elif st[-1] == 1 and not any(st[:-1]) and offs[k] == 0:
                    modes[k] = "j"
        modes_t = tuple(modes)
        kern = jit.get_kernel(spec.key() + f"|nd{ndim}{modes_t}{'' if parallel else '|serial'}|i{inner}",
                              lambda: codegen.gen_strided(spec, modes_t, ndim, parallel=parallel, inner=inner))
        shp_a, off_a = np.array(shp, np.int64), np.array(offs, np.int64)
        if not copied:
            if len(launch) >= 8:
                launch.clear()
            launch[lkey] = (kern, shp_a, st_arr, off_a, nb, bs)
        if kern(*flats, outf, shp_a, st_arr, off_a, nb, bs, *g.params) is jit.BROKEN:
            return None
        return out

    # ------------------------------------------------------------ reductions
    def _run_reduce(self, g, inputs: list[np.ndarray], out: np.ndarray) -> np.ndarray:
        shape = g.shape
        axes = set(g.axes)
        kept = [d for d in range(len(shape)) if d not in axes]
        red = [d for d in range(len(shape)) if d in axes]
        arrs, modes, full = [], [], []
        for a in inputs:
            if a.size == 1:
                modes.append("s")
                arrs.append(a)
                full.append(None)
                continue
            st = _elem_strides(a, shape, negative=False)
            if st is None:
                a = np.ascontiguousarray(a)
                st = _elem_strides(a, shape, negative=False)
            arrs.append(a)
            modes.append("g")
            full.append(st)
        gidx = [k for k, m in enumerate(modes) if m != "s"]
        kshape = [shape[d] for d in kept]
        kst = [_contig(kshape)] + [[full[k][d] for d in kept] for k in gidx]
        kshp, kcst = _collapse(kshape, kst)
        rshape = [shape[d] for d in red]
        rst = [[full[k][d] for d in red] for k in gidx]
        rshp, rcst = _collapse(rshape, rst) if gidx else ([d for d in rshape if d != 1], [])
        if not rshp:
            rshp = [1]
            rcst = [[0] for _ in gidx]
        nk, nr = len(kshp), len(rshp)
        if nk and gidx and all(rcst[j][-1] != 1 for j in range(len(gidx))) and any(
                kcst[j + 1][-1] == 1 for j in range(len(gidx))):
            return None  # reducing outer axes of contiguous data: numpy's row-wise accumulation is faster
        stk = np.zeros((len(inputs), max(nk, 1)), np.int64)
        str_ = np.zeros((len(inputs), nr), np.int64)
        for j, k in enumerate(gidx):
            if nk:
                stk[k, :nk] = kcst[j + 1]
            str_[k] = rcst[j] if rcst else 0
            if not str_[k].any():
                modes[k] = "k"
            elif str_[k, nr - 1] == 1:
                modes[k] = "u"
        K = 1
        for d in kshp:
            K *= d
        P = 1 if K >= 16 else max(1, min(rshp[0], -(-64 // K)))
        count = 1
        for d in rshape:
            count *= d
        spec = g.spec
        modes_t = tuple(modes)
        kern = jit.get_kernel(spec.key() + f"|r{nk}.{nr}{modes_t}",
                              lambda: codegen.gen_reduce(spec, modes_t, nk, nr))
        if kern(*[_flat(a) for a in arrs], out.reshape(-1), np.array(kshp or [1], np.int64),
                np.array(rshp, np.int64), stk, str_, P, float(count), *g.params) is jit.BROKEN:
            return None
        return out
