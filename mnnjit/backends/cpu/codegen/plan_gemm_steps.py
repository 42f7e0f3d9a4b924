"""Whole-plan kernel steps (:mod:`.whole_plan`) that call the packed GEMM of :mod:`.plan_gemm`.

Each writer takes the plan kernel's writer, the step's node, its input slots and output slot, and
either writes the step as one call of ``gemm_f32`` (and returns True) or returns False, leaving the
step to the loops :mod:`.whole_plan` writes out itself (small products, shapes outside these cases).

* :func:`matmul_ex` - a 2-D ``matmul_ex`` (a linear layer): constant weights are laid out once by
  :func:`.plan_gemm.pack_b` in the plan's blob, the bias (one value per output column) and
  relu / relu6 applied on each finished block of rows;
* :func:`batched_matmul` - ``matmul`` over batch axes (attention's ``Q @ K^T`` and ``P @ V``): one
  GEMM per batch, both operands read in place;
* :func:`patch_conv` - ``mnn_conv2d`` whose stride equals its kernel, no padding, no dilation,
  one group (a ViT's patch embedding): the image laid out as ``[C*kh*kw, OH*OW]`` per call and one
  GEMM with the weights ``[O, C*kh*kw]`` on the left, straight into the NCHW output.

Every float32 GEMM scratch is one argument ``gs`` of the kernel (allocated per call, sized for
the largest step: :data:`SCRATCH_ATTR` on the writer).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

F32 = np.dtype(np.float32)

#: The writer attribute holding the float32 elements the kernel's ``gs`` scratch needs.
SCRATCH_ATTR = "gemm_scratch"

#: Products smaller than this (m * n * k) stay on the kernel's own loops: a call, the packing of
#: the left operand and the tails cost more than they save there.
MIN_MACS = 1 << 13

#: The same bound per batch of a batched product: the kernel's own loop over a batch's
#: [17, 12] @ [12, 17] (a tiny ViT's attention) ran at ~2 GFLOP/s, the GEMM call several times that.
MIN_BATCH_MACS = 1 << 9

#: A 2-D ``matmul_ex`` of at most this many rows and fewer than :data:`FEW_ROWS_MACS`
#: multiply-adds stays on the kernel's own row loops, which load each weight once for all the rows
#: (the GEMM's partial panels cost more there: a 4-token transformer layer 41 -> 34 us; from 2M
#: multiply-adds, weights streamed from L3, the GEMM is faster again).
FEW_ROWS = 8
FEW_ROWS_MACS = 1 << 19

#: Products (m * n * k, all batches together) from this size call the C functions of
#: :mod:`.plan_gemm_par` by symbol, which run them on the calling thread's Numba team when it has
#: more than one thread (below it, waking the team and packing A once per thread cost more than
#: the second core saves). Smaller ones call the GEMM's code linked into the kernel, which LLVM
#: specialises to the step's sizes (an 8-token transformer layer's twelve products ran 1.4 us
#: slower per forward through the shared C function). A kernel whose products are all this large
#: compiles without a copy of the GEMM (a 2-layer transformer: 51 -> 12 s on an empty cache).
PAR_MACS = 1 << 17

#: The writer attribute holding the largest product (multiply-adds) of the kernel's GEMM steps: a
#: kernel with one of at least :data:`PAR_MACS` uses threads (its runner says so: ``threaded``).
MACS_ATTR = "gemm_macs"


#: Multiply-adds one element of a row softmax counts as against :data:`PAR_MACS` (its exp, max,
#: sum and scaling: attention's softmax over [heads, 128, 128] runs on the team too).
SOFTMAX_WORK = 4

_ACT = {"": 0, "relu": 1, "relu6": 2}


def note_work(w: Any, macs: int) -> None:
    """Record a step of ``macs`` multiply-adds (or their equivalent) that may run on the team."""
    setattr(w, MACS_ATTR, max(getattr(w, MACS_ATTR, 0), macs))


def _need(w: Any, m: int, k: int, macs: int = 0) -> None:
    from mnnjit.backends.cpu.codegen.plan_gemm_layout import scratch_size
    setattr(w, SCRATCH_ATTR, max(getattr(w, SCRATCH_ATTR, 0), scratch_size(m, k)))
    setattr(w, MACS_ATTR, max(getattr(w, MACS_ATTR, 0), macs))


def matmul_ex(w: Any, node: Any, ins: tuple, out: int) -> bool:
    """``matmul_ex`` on 2-D float32 operands as one GEMM call (see the module docstring)."""
    a, b = node.inputs[0], node.inputs[1]
    if not (len(a.shape) == len(b.shape) == len(node.shape) == 2):
        return False
    attrs = node.attrs
    act = _ACT.get(attrs.get("act", ""))
    if act is None:
        return False
    m, n = (int(d) for d in node.shape)
    ta, tb = bool(attrs.get("transpose_a")), bool(attrs.get("transpose_b"))
    k = int(a.shape[0] if ta else a.shape[1])
    if m < 4 or n < 16 or k < 8 or m * n * k < MIN_MACS or (m <= FEW_ROWS and m * n * k < FEW_ROWS_MACS):
        return False
    weights = w.init[ins[1]]
    if weights is None and tb:
        return False  # a computed B^T: the kernel's own loops read it transposed
    bmode, bias = 0, "gs"
    if len(node.inputs) > 2:
        bn = node.inputs[2]
        if bn.dtype != F32 or int(bn.size) != n or (len(bn.shape) and int(bn.shape[-1]) != n):
            return False
        bmode, bias = 1, w.value(ins[2])
    _emit_gemm(w, ins, out, ta, m, k, n, weights, tb, bias, bmode, act)
    return True


def matmul_rows(w: Any, node: Any, ins: tuple, out: int) -> bool:
    """``matmul`` of an operand of 2 or more axes and a 2-D one (a linear layer on every row of a
    batch, as MNN's converter writes small layers: ``[1, 8, 64] @ [64, 32]``) as one GEMM over
    all the rows (the batched writer's loops ran these at ~7 GFLOP/s)."""
    a, b = node.inputs[0], node.inputs[1]
    if len(b.shape) != 2 or len(a.shape) < 2:
        return False
    k, n = int(a.shape[-1]), int(b.shape[-1])
    if int(b.shape[0]) != k or tuple(node.shape) != tuple(a.shape[:-1]) + (n,):
        return False
    m = math.prod(int(d) for d in a.shape[:-1])
    if m < 4 or n < 16 or k < 8 or m * n * k < MIN_MACS:
        return False
    _emit_gemm(w, ins, out, False, m, k, n, w.init[ins[1]], False, "gs", 0, 0)
    return True


def _emit_gemm(w: Any, ins: tuple, out: int, ta: bool, m: int, k: int, n: int, weights: Any, tb: bool,
               bias: str, bmode: int, act: int) -> None:
    """One GEMM call writing ``out`` (``m x n``) from input ``ins[0]`` (``m x k``, or ``k x m``
    with ``ta``) and ``ins[1]``: constant ``weights`` (``[k, n]``, or ``[n, k]`` with ``tb``)
    packed once into the blob, else the computed ``[k, n]`` value in place."""
    an = w.value(ins[0])
    if weights is not None:
        from mnnjit.backends.cpu.codegen.plan_gemm_layout import pack_b
        wt = np.asarray(weights, F32)
        bname, bpk = w.const(pack_b(wt.T if tb else wt)), True
    else:
        bname, bpk = w.value(ins[1]), False
    o = w.fresh(out, m * n)
    _need(w, m, k, m * n * k)
    fn = "gemm_linked" if m * n * k < PAR_MACS else "gemm_f32"
    w.emit(f"{fn}({an}, {int(ta)}, {m}, {k}, {bname}, {bpk}, {n}, {o}, {bias}, {bmode}, {act}, gs)")


def batched_matmul(w: Any, node: Any, ins: tuple, out: int) -> bool:
    """``matmul`` of two float32 operands of 3 or more axes as one GEMM per batch (operands of the
    batch's shape on both sides: no broadcasting between them)."""
    a, b = node.inputs[0], node.inputs[1]
    if len(a.shape) < 3 or tuple(a.shape[:-2]) != tuple(b.shape[:-2]) != () or len(b.shape) != len(a.shape):
        return False
    m, k = int(a.shape[-2]), int(a.shape[-1])
    n = int(b.shape[-1])
    if int(b.shape[-2]) != k or tuple(node.shape) != tuple(a.shape[:-2]) + (m, n):
        return False
    nb = math.prod(int(d) for d in node.shape[:-2])
    if nb == 0 or m < 4 or n < 8 or k < 8 or m * n * k < MIN_BATCH_MACS:
        return False
    an, bn = w.value(ins[0]), w.value(ins[1])
    o = w.fresh(out, int(node.size))
    _need(w, m, k, nb * m * n * k)
    fn = "gemm_batched_linked" if nb * m * n * k < PAR_MACS else "gemm_batched"
    w.emit(f"{fn}({an}, {m}, {k}, {bn}, {n}, {o}, {nb}, gs)")
    return True


def patch_conv(w: Any, node: Any, ins: tuple, out: int) -> bool:
    """``mnn_conv2d`` with stride = kernel, no padding or dilation, one group and float weights
    (a ViT's patch embedding) as an im2col copy and one GEMM per image."""
    attrs = node.attrs
    cw = attrs["weights"]
    x = node.inputs[0]
    if len(node.inputs) != 1 or x.dtype != F32 or len(x.shape) != 4 or getattr(cw, "quantized", True):
        return False
    act = _ACT.get(attrs.get("act", ""))
    o_ch, ci, kh, kw = (int(d) for d in cw.shape)
    if (act is None or int(attrs.get("group", 1)) != 1 or tuple(attrs["stride"]) != (kh, kw)
            or tuple(attrs["dilation"]) != (1, 1) or any(int(p) for p in attrs["pads"])):
        return False
    nimg, c, h, wd = (int(d) for d in x.shape)
    oh, ow = h // kh, wd // kw
    if c != ci or tuple(node.shape) != (nimg, o_ch, oh, ow):
        return False
    kk, npix = c * kh * kw, oh * ow
    if npix < 4 or o_ch * npix * kk < MIN_MACS:
        return False
    xn = w.value(ins[0])
    from mnnjit.backends.cpu.codegen.plan_gemm_layout import pack_a
    wn = w.const(pack_a(np.asarray(cw.dense(), F32).reshape(o_ch, kk)))
    bias, bmode = "gs", 0
    if cw.bias is not None:
        bias, bmode = w.const(np.asarray(cw.bias, F32).reshape(-1)), 2
    o = w.fresh(out, int(node.size))
    # the image's [C*kh*kw, OH*OW] layout: a piece of the workspace (a name the outlining keeps
    # in the kernel body, as it does every step's value)
    col = f"v{100000 + out}"
    off = w.ws_size
    w.ws_size = off + (kk * npix + 15) // 16 * 16
    w.emit(f"{col} = ws[{off}:{off + kk * npix}]")
    _need(w, o_ch, kk, o_ch * npix * kk)
    t = w.idx()
    w.emit(f"for {t} in range({nimg}):")
    w.emit(f"patch_im2col({xn}[{t} * {c * h * wd}:({t} + 1) * {c * h * wd}], {c}, {h}, {wd}, {kh}, {kw}, {col})", 1)
    fn = "gemm_linked" if o_ch * npix * kk < PAR_MACS else "gemm_f32"
    w.emit(f"{fn}({wn}, 2, {o_ch}, {kk}, {col}, False, {npix}, "
           f"{o}[{t} * {o_ch * npix}:({t} + 1) * {o_ch * npix}], {bias}, {bmode}, {act}, gs)", 1)
    return True
