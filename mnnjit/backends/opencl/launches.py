"""Kernel launches for graph nodes: what each op the backend claims turns into.

A *builder* takes a node, its input device arrays and its output device array and returns the
launches computing it (:class:`Launch`: a kernel with its arguments set, global and local sizes);
:func:`supported` says beforehand whether a node has one. The same builders serve a lowered graph
(buffers planned once, arguments bound once) and a single ``run_op`` call (buffers of the call).

Fusion groups (elementwise chains, reductions) are launched by :func:`group_launch` from their
:class:`~mnnjit.backends.ir.GroupSpec`, with leaves given as (buffer, storage, strides, offset).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from mnnjit.backends.ir import collapse_axes
from mnnjit.ops.conv_info import conv_params
from mnnjit.ops.nn_resize import axis_taps
from mnnjit.ops.elementwise import broadcast_shape
from . import codegen
from .buffers import DeviceArray
from .library import ACT_CODES, COPY_TYPES, GEMM_LOCAL, RM, ROW_LOCAL, TM, TN, kernel_source

I32 = np.int32
F32 = np.float32
MAX_RANK = 6
#: elements above which index arithmetic could overflow a 32-bit int: such nodes stay on the host
MAX_ELEMS = (1 << 31) - 1


class Unsupported(Exception):
    """A node (or shape) this backend has no kernel for; the step runs on the host."""


@dataclass
class Launch:
    """One kernel enqueue: the kernel (arguments set), global size, local size (None: the driver's)."""

    kernel: Any
    gsize: tuple
    lsize: tuple | None
    name: str = ""
    scratch: Any = None   # a buffer only this launch's kernels use (kept alive with the launch)


class Binder:
    """What builders need: the runtime, the kernel library for one activation storage, constants."""

    def __init__(self, rt: Any, half: bool, dummy: Any = None) -> None:
        self.rt = rt
        self.half = half
        self.act_ctype = "half" if half else "float"
        self.dummy = dummy if dummy is not None else rt.buffer(64)
        self._consts: dict[Any, tuple[Any, Any]] = {}

    def kernel(self, name: str) -> Any:
        """A fresh kernel object of library kernel ``name`` (its arguments belong to one launch)."""
        half = self.half and not name.startswith(("copy_", "gather_"))  # copies move bytes
        prg = self.rt.program(name + ("-half" if half else ""), kernel_source(name, half))
        return self.rt.cl.Kernel(prg, name)

    def const(self, key: Any, arr: np.ndarray, dtype: Any = F32) -> Any:
        """A device buffer holding ``arr`` as ``dtype`` (uploaded once per key; the array is kept so
        that an id-based key stays valid)."""
        hit = self._consts.get(key)
        if hit is not None:
            return hit[0]
        host = np.ascontiguousarray(np.asarray(arr), dtype=dtype)
        buf = self.rt.buffer(host.nbytes)
        if host.size:
            self.rt.upload(buf, host, blocking=True)
        self._consts[key] = (buf, arr)
        return buf

    def forget_consts(self) -> None:
        """Drop the uploaded constants (a transient binder after a ``run_op``)."""
        self._consts.clear()

    def local(self, name: str, kernel: Any, gsize: tuple, candidates: Sequence[tuple],
              default: tuple | None) -> tuple | None:
        """The (tuned) local size of a launch whose kernel takes any local size."""
        return self.rt.local_size(name, kernel, gsize, candidates, default)


def _pad_to(g: Sequence[int], l: Sequence[int] | None) -> tuple:
    if l is None:
        return tuple(int(x) for x in g)
    return tuple(-(-int(x) // int(y)) * int(y) for x, y in zip(g, l))


def _set(kernel: Any, args: list) -> Any:
    kernel.set_args(*args)
    return kernel


def _contig(shape: Sequence[int]) -> list[int]:
    st, acc = [0] * len(shape), 1
    for k in range(len(shape) - 1, -1, -1):
        st[k] = acc
        acc *= int(shape[k])
    return st


def _size(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


_3D_CANDIDATES = [(8, 8, 1), (16, 4, 1), (32, 2, 1), (16, 16, 1), (4, 4, 4), (64, 1, 1), (32, 8, 1), (8, 4, 2)]
_1D_CANDIDATES = [(64,), (128,), (256,), (32,), (512,), (16,), (1024,), (8,)]


def _launch3d(b: Binder, name: str, kernel: Any, g: tuple) -> Launch:
    gpu = b.rt.info.is_gpu
    l = b.local(name, kernel, g, _3D_CANDIDATES, (8, 8, 1) if gpu else None)
    return Launch(kernel, _pad_to(g, l), l, name)


def _launch1d(b: Binder, name: str, kernel: Any, n: int) -> Launch:
    gpu = b.rt.info.is_gpu
    l = b.local(name, kernel, (n,), _1D_CANDIDATES, (256,) if gpu else None)
    return Launch(kernel, _pad_to((max(n, 1),), l), l, name)


def _act_code(act: str) -> int:
    try:
        return ACT_CODES[act or ""]
    except KeyError:
        raise Unsupported(f"activation {act!r}") from None


# ---------------------------------------------------------------------------- convolutions
def conv_weights(node: Any) -> tuple[np.ndarray, np.ndarray | None]:
    """(float32 weights [O, C/group, kh, kw], bias or None) of a constant-weight convolution."""
    conv = conv_params(node)
    if conv is None:
        raise Unsupported(f"{node.op} without constant float weights")
    w, bias, _ = conv
    dense = w if isinstance(w, np.ndarray) else w.dense()
    return np.asarray(dense, F32), None if bias is None else np.asarray(bias, F32).reshape(-1)


def conv_launches(b: Binder, node: Any, x: DeviceArray, out: DeviceArray, res: DeviceArray | None = None,
                  act: str | None = None) -> list[Launch]:
    """A convolution (``mnn_conv2d`` or constant-weight ``conv2d``): depthwise direct, 1x1 as a tiled
    GEMM, else an implicit-im2col GEMM (groups as GEMM batches); bias, ``res`` and the activation
    in the epilogue."""
    w, bias = conv_weights(node)
    a = node.attrs
    N, C, H, W = x.shape
    O, Cg, KH, KW = w.shape
    G = int(a.get("group", 1))
    OH, OW = out.shape[2:]
    (SH, SW), (DH, DW), (PT, PB, PL, PR) = a["stride"], a["dilation"], a["pads"]
    code = _act_code(a.get("act", "") if act is None else act)
    wbuf = b.const(("convw", id(node)), w)
    bbuf = b.const(("convb", id(node)), bias) if bias is not None else b.dummy
    rbuf = res.buf if res is not None else b.dummy
    if G == C == O and Cg == 1:
        k = _set(b.kernel("depthwise"), [x.buf, wbuf, bbuf, out.buf, rbuf] + [I32(v) for v in (
            C, H, W, OH, OW, KH, KW, SH, SW, PT, PL, DH, DW, bias is not None, res is not None, code)])
        return [_launch3d(b, "depthwise", k, (OW, OH, N * C))]
    Og = O // G
    M, Nn, K = Og, OH * OW, Cg * KH * KW
    common = [I32(M), I32(Nn), I32(K)]
    zargs = [I32(G), I32(0), I32(Og * K), I32(C * H * W), I32(Cg * H * W), I32(O * OH * OW), I32(Og * OH * OW),
             I32(1 if bias is not None else 0), I32(res is not None), I32(code)]
    if (KH, KW, SH, SW, PT, PB, PL, PR) == (1, 1, 1, 1, 0, 0, 0, 0):
        args = [wbuf, x.buf, out.buf, bbuf, rbuf] + common + [I32(v) for v in (K, 1, H * W, 1, OH * OW, 1)] + zargs
        return [gemm_launch(b, "gemm_w", args, M, Nn, K, N * G)]
    args = [wbuf, x.buf, out.buf, bbuf, rbuf] + common + [I32(v) for v in (K, 1, 0, 0, OH * OW, 1)] + zargs + \
        [I32(v) for v in (Cg, H, W, KH, KW, SH, SW, PT, PL, DH, DW, OW)]
    return [gemm_launch(b, "conv_gemm", args, M, Nn, K, N * G)]


def gemm_launch(b: Binder, kname: str, args: list, M: int, N: int, K: int, Z: int) -> Launch:
    """A GEMM-shaped launch in the variant that suits the device: the local-memory tiled kernel or
    the register-blocked one (``<kname>_r``); with tuning on, both are timed once per shape."""
    def tiled() -> Launch:
        k = _set(b.kernel(kname), args)
        return Launch(k, (-(-N // TN) * GEMM_LOCAL[0], -(-M // TM) * GEMM_LOCAL[1], Z), GEMM_LOCAL + (1,), kname)

    def blocked() -> Launch:
        k = _set(b.kernel(kname + "_r"), args)
        g = (N, -(-M // RM), Z)
        l = b.local(kname + "_r", k, g, [(64, 1, 1), (32, 1, 1), (128, 1, 1), (16, 4, 1), (256, 1, 1), (32, 2, 1)],
                    (64, 1, 1) if b.rt.info.is_gpu else None)
        return Launch(k, _pad_to(g, l), l, kname + "_r")

    def wide() -> Launch:
        k = _set(b.kernel(kname + "_v"), args)
        g = (-(-N // 8), -(-M // RM), Z)
        l = b.local(kname + "_v", k, g, [(16, 1, 1), (32, 1, 1), (64, 1, 1), (8, 4, 1), (16, 4, 1), (128, 1, 1)],
                    (32, 1, 1) if b.rt.info.is_gpu else None)
        return Launch(k, _pad_to(g, l), l, kname + "_v")

    contiguous_n = int(args[11]) == 1 and int(args[13]) == 1 and kname != "conv_gemm"  # sbn, scn
    if contiguous_n:
        return b.rt.variant(f"{kname}|{M},{N},{K},{Z}", [tiled, blocked, wide], 0 if b.rt.info.is_gpu else 2)
    return b.rt.variant(f"{kname}|{M},{N},{K},{Z}", [tiled, blocked], 0 if b.rt.info.is_gpu else 1)


def _conv_ok(node: Any) -> None:
    if conv_params(node) is None:
        raise Unsupported(f"{node.op} without constant float weights")
    if node.inputs[0].dtype != np.float32:
        raise Unsupported("convolution of non-float input")
    _act_code(node.attrs.get("act", ""))


def deconv_launches(b: Binder, node: Any, x: DeviceArray, out: DeviceArray) -> list[Launch]:
    """A transposed convolution with constant weights ([C_in, O/group, kh, kw]) as a gather."""
    a = node.attrs
    w = np.asarray(node.inputs[1].value, F32)
    bias = np.asarray(node.inputs[2].value, F32).reshape(-1) if len(node.inputs) > 2 else None
    N, C, H, W = x.shape
    _, Og, KH, KW = w.shape
    G = int(a.get("group", 1))
    O, OH, OW = out.shape[1:]
    (SH, SW), (DH, DW), (PT, _, PL, _) = a["stride"], a["dilation"], a["pads"]
    wbuf = b.const(("deconvw", id(node)), w)
    bbuf = b.const(("deconvb", id(node)), bias) if bias is not None else b.dummy
    k = _set(b.kernel("deconv"), [x.buf, wbuf, bbuf, out.buf] + [I32(v) for v in (
        C, H, W, O, OH, OW, KH, KW, SH, SW, PT, PL, DH, DW, G, bias is not None, _act_code(a.get("act", "")))])
    return [_launch3d(b, "deconv", k, (OW, OH, N * O))]


def _deconv_ok(node: Any) -> None:
    ins = node.inputs
    if any(i.op != "const" or i.value is None for i in ins[1:]) or ins[0].dtype != np.float32:
        raise Unsupported("transposed convolution without constant weights")
    _act_code(node.attrs.get("act", ""))


# ---------------------------------------------------------------------------- matmul
@dataclass
class _MM:
    M: int
    N: int
    K: int
    sa: tuple      # (sam, sak)
    sb: tuple      # (sbk, sbn)
    sc: tuple      # (scm, scn)
    za: int
    zb: int
    zc: int
    Z: int
    bias_mode: int


def _operand(shape: tuple, trans: bool, is_a: bool) -> tuple[int, int, int, int, tuple, int]:
    """(rows, cols, row stride, col stride, batch dims, batch stride) of a matmul operand as used."""
    if len(shape) == 1:
        if is_a:
            return 1, shape[0], 0, 1, (), 0
        return shape[0], 1, 1, 0, (), 0
    r, c = shape[-2:]
    sr, sc = c, 1
    if trans:
        r, c, sr, sc = c, r, sc, sr
    return r, c, sr, sc, tuple(shape[:-2]), shape[-2] * shape[-1]


def _matmul_geometry(node: Any) -> _MM:
    a, b = node.inputs[0].shape, node.inputs[1].shape
    at = bool(node.attrs.get("transpose_a")) and len(a) >= 2
    bt = bool(node.attrs.get("transpose_b")) and len(b) >= 2
    M, K, sam, sak, abatch, astr = _operand(a, at, True)
    K2, N, sbk, sbn, bbatch, bstr = _operand(b, bt, False)
    if K != K2:
        raise Unsupported("matmul core dimensions differ")
    out_batch = broadcast_shape(abatch, bbatch)
    Z = _size(out_batch)

    def zstride(batch: tuple, stride: int) -> int:
        if _size(batch) == 1:
            return 0
        if tuple(batch) == tuple(out_batch[len(out_batch) - len(batch):]) and _size(batch) == Z:
            return stride
        raise Unsupported("matmul batch broadcasting")

    bias_mode = 0
    if len(node.inputs) > 2:
        bshape = node.inputs[2].shape
        along = N if len(b) >= 2 else M
        if _size(bshape) != along or (bshape and bshape[-1] != along):
            raise Unsupported(f"matmul bias of shape {bshape}")
        bias_mode = 2 if len(b) >= 2 else 1
    return _MM(M, N, K, (sam, sak), (sbk, sbn), (N, 1), zstride(abatch, astr), zstride(bbatch, bstr), M * N, Z,
               bias_mode)


def matmul_launches(b: Binder, node: Any, ins: list[DeviceArray | None], out: DeviceArray) -> list[Launch]:
    """``matmul`` / ``matmul_ex``: a constant operand becomes the float ``A`` of a tiled GEMM (or of a
    GEMV when the other side is one column); two activations use the storage-typed GEMM."""
    g = _matmul_geometry(node)
    act = _act_code(node.attrs.get("act", "")) if node.op == "matmul_ex" else 0
    xa, xb = node.inputs[0], node.inputs[1]
    a_const = xa.op == "const" and isinstance(xa.value, np.ndarray)
    b_const = xb.op == "const" and isinstance(xb.value, np.ndarray)
    M, N, K = g.M, g.N, g.K
    (sam, sak), (sbk, sbn), (scm, scn) = g.sa, g.sb, g.sc
    za, zb, zc, bias_mode = g.za, g.zb, g.zc, g.bias_mode
    first, second = 0, 1
    if b_const and not a_const:  # C^T = B^T A^T: the constant becomes A
        M, N = N, M
        sam, sak, sbk, sbn = sbn, sbk, sak, sam
        scm, scn = scn, scm
        za, zb = zb, za
        bias_mode = {0: 0, 1: 2, 2: 1}[bias_mode]
        first, second = 1, 0
        a_const = True
    src_a = node.inputs[first]
    if a_const:
        abuf = b.const(("mm", id(src_a)), src_a.value)
    else:
        abuf = ins[first].buf
    xbuf = ins[second].buf if ins[second] is not None else b.const(
        ("mmx", id(node.inputs[second]), b.act_ctype), node.inputs[second].value,
        np.float16 if b.half else F32)
    if len(node.inputs) > 2:
        bias = node.inputs[2]
        if bias.op != "const" or bias.value is None:
            raise Unsupported("matmul with a computed bias")
        bbuf = b.const(("mmb", id(bias)), np.asarray(bias.value, F32).reshape(-1))
    else:
        bbuf = b.dummy
    if a_const and N == 1:
        k = _set(b.kernel("gemv_w"), [abuf, xbuf, out.buf, bbuf] + [I32(v) for v in (
            M, K, sam, sak, sbk, scm, za, zb, zc, 1 if bias_mode else 0, act)])
        return [Launch(k, (M * ROW_LOCAL, g.Z), (ROW_LOCAL, 1), "gemv_w")]
    kname = "gemm_w" if a_const else "gemm_x"
    args = [abuf, xbuf, out.buf, bbuf, b.dummy] + [I32(v) for v in (
        M, N, K, sam, sak, sbk, sbn, scm, scn, 1, za, 0, zb, 0, zc, 0, bias_mode, 0, act)]
    return [gemm_launch(b, kname, args, M, N, K, g.Z)]


def _matmul_ok(node: Any) -> None:
    if any(i.dtype != np.float32 for i in node.inputs):
        raise Unsupported("matmul of non-float operands")
    _matmul_geometry(node)
    if node.op == "matmul_ex":
        _act_code(node.attrs.get("act", ""))
    if len(node.inputs) > 2 and (node.inputs[2].op != "const" or node.inputs[2].value is None):
        raise Unsupported("matmul with a computed bias")


# ---------------------------------------------------------------------------- pooling
def _is_global(node: Any) -> bool:
    a = node.attrs
    x = node.inputs[0]
    return tuple(a["out"]) == (1, 1) and tuple(a["kernel"]) == tuple(x.shape[2:]) and not any(a["pads"])


def pool_launches(b: Binder, node: Any, x: DeviceArray, out: DeviceArray) -> list[Launch]:
    """Max / average pooling (a global one as one work-group per plane)."""
    a = node.attrs
    N, C, H, W = x.shape
    is_max = a["kind"] == "max"
    if _is_global(node):
        k = _set(b.kernel("global_pool"), [x.buf, out.buf, I32(H * W), I32(is_max)])
        return [Launch(k, (N * C * ROW_LOCAL,), (ROW_LOCAL,), "global_pool")]
    (KH, KW), (SH, SW), (PT, PB, PL, PR), (OH, OW) = a["kernel"], a["stride"], a["pads"], a["out"]
    k = _set(b.kernel("pool"), [x.buf, out.buf] + [I32(v) for v in (
        H, W, OH, OW, KH, KW, SH, SW, PT, PB, PL, PR, is_max, bool(a.get("count_include_pad", True)))])
    return [_launch3d(b, "pool", k, (OW, OH, N * C))]


def _pool_ok(node: Any) -> None:
    if node.attrs["kind"] not in ("max", "avg") or node.inputs[0].dtype != np.float32 or len(node.shape) != 4:
        raise Unsupported("pooling of this kind or dtype")


# ---------------------------------------------------------------------------- rows
def softmax_launches(b: Binder, node: Any, x: DeviceArray, out: DeviceArray) -> list[Launch]:
    """softmax / log_softmax along ``axis``: one work-group per row."""
    shape = x.shape
    ax = int(node.attrs["axis"]) % max(len(shape), 1)
    L = shape[ax] if shape else 1
    inner = _size(shape[ax + 1:])
    rows = _size(shape) // max(L, 1)
    k = _set(b.kernel("softmax"), [x.buf, out.buf, I32(L), I32(inner), I32(node.op == "log_softmax")])
    return [Launch(k, (rows * ROW_LOCAL,), (ROW_LOCAL,), "softmax")]


def _softmax_ok(node: Any) -> None:
    if node.inputs[0].dtype != np.float32 or not node.shape or 0 in node.shape:
        raise Unsupported("softmax of this dtype or shape")


def _norm_layout(node: Any) -> tuple[int, int, int]:
    """(rows, row length L, C for per-row affine) of a layer / instance norm."""
    shape = node.inputs[0].shape
    if node.op == "instance_norm":
        if len(shape) < 3:
            raise Unsupported("instance norm of fewer than 3 dimensions")
        L = _size(shape[2:])
        return _size(shape[:2]), L, shape[1]
    axes = sorted(int(a) % len(shape) for a in node.attrs["axes"])
    if node.attrs.get("group", 1) != 1 or axes != list(range(len(shape) - len(axes), len(shape))):
        raise Unsupported("layer norm over non-trailing axes or in groups")
    L = _size(shape[len(shape) - len(axes):])
    return _size(shape) // max(L, 1), L, 1


def norm_launches(b: Binder, node: Any, x: DeviceArray, out: DeviceArray) -> list[Launch]:
    """layer_norm (trailing axes, optional rms) and instance_norm, gamma/beta constant."""
    rows, L, C = _norm_layout(node)
    eps = float(node.attrs.get("eps", 1e-5))
    ins = node.inputs
    gamma = np.asarray(ins[1].value, F32).reshape(-1) if len(ins) > 1 else None
    beta = np.asarray(ins[2].value, F32).reshape(-1) if len(ins) > 2 else None
    affine = 0 if gamma is None else (2 if node.op == "instance_norm" else 1)
    gbuf = b.const(("ng", id(ins[1])), gamma) if gamma is not None else b.dummy
    bbuf = b.const(("nb", id(ins[2])), beta) if beta is not None else b.dummy
    k = _set(b.kernel("norm_rows"), [x.buf, out.buf, gbuf, bbuf, I32(L), I32(C), F32(eps),
                                     I32(bool(node.attrs.get("rms", False)) and node.op == "layer_norm"),
                                     I32(affine), I32(beta is not None)])
    return [Launch(k, (rows * ROW_LOCAL,), (ROW_LOCAL,), "norm_rows")]


def _norm_ok(node: Any) -> None:
    if node.inputs[0].dtype != np.float32 or 0 in node.shape:
        raise Unsupported("normalisation of this dtype or shape")
    rows, L, C = _norm_layout(node)
    for i, want in ((1, L if node.op == "layer_norm" else C), (2, L if node.op == "layer_norm" else C)):
        if len(node.inputs) > i:
            g = node.inputs[i]
            if g.op != "const" or g.value is None or _size(g.shape) != want:
                raise Unsupported("normalisation with computed or broadcast gamma/beta")


# ---------------------------------------------------------------------------- resize
def resize_launches(b: Binder, node: Any, x: DeviceArray, out: DeviceArray) -> list[Launch]:
    """Separable resize from host-computed taps (any method the reference implements)."""
    H, W = x.shape[-2:]
    OH, OW = node.attrs["size"]
    iy, wy = axis_taps(H, OH, node.attrs, 0)
    ix, wx = axis_taps(W, OW, node.attrs, 1)
    key = ("rs", id(node))
    bufs = [b.const(key + ("iy",), iy, I32), b.const(key + ("wy",), wy, F32),
            b.const(key + ("ix",), ix, I32), b.const(key + ("wx",), wx, F32)]
    k = _set(b.kernel("resize"), [x.buf, out.buf] + bufs + [I32(v) for v in (
        H, W, OH, OW, iy.shape[1], ix.shape[1])])
    return [_launch3d(b, "resize", k, (OW, OH, _size(x.shape[:-2])))]


def _resize_ok(node: Any) -> None:
    if node.inputs[0].dtype != np.float32 or len(node.shape) < 2 or 0 in node.shape:
        raise Unsupported("resize of non-float data")
    if node.attrs.get("method") not in ("nearest", "nearest_round", "nearest_floor", "nearest_ceil", "bilinear",
                                        "cubic"):
        raise Unsupported("resize method")


# ---------------------------------------------------------------------------- copies
def _width(ctype: str) -> int:
    return {"float": 4, "int": 4, "half": 2, "uchar": 1, "char": 1}[ctype]


def copy_launch(b: Binder, src: DeviceArray, dst: DeviceArray, shape: Sequence[int], soff: int,
                sst: Sequence[int], doff: int, dst_st: Sequence[int]) -> Launch:
    """dst[doff + i . dst_st] = src[soff + i . sst] over ``shape`` (at most 6 axes)."""
    if len(shape) > MAX_RANK:
        raise Unsupported("copy of more than 6 axes")
    pad = MAX_RANK - len(shape)
    shape = [1] * pad + [int(s) for s in shape]
    sst = [0] * pad + [int(s) for s in sst]
    dst_st = [0] * pad + [int(s) for s in dst_st]
    n = _size(shape)
    w = _width(src.ctype)
    k = _set(b.kernel(f"copy_{w}"), [src.buf, dst.buf, I32(n)] + [I32(d) for d in shape[1:]] +
             [I32(soff)] + [I32(s) for s in sst] + [I32(doff)] + [I32(s) for s in dst_st])
    return _launch1d(b, f"copy_{w}", k, n)


def gather_launch(b: Binder, key: Any, src: DeviceArray, dst: DeviceArray, maps: list[np.ndarray],
                  sst: Sequence[int], fill: float = 0.0) -> Launch:
    """dst[i] = src[sum_d maps_d[i_d] * sst_d], or ``fill`` where a map holds -1 (at most 6 axes)."""
    if len(maps) > MAX_RANK:
        raise Unsupported("gather over more than 6 axes")
    pad = MAX_RANK - len(maps)
    maps = [np.zeros(1, np.int64)] * pad + list(maps)
    sst = [0] * pad + [int(s) for s in sst]
    offs, acc = [], 0
    for m in maps:
        offs.append(acc)
        acc += len(m)
    table = np.concatenate([np.asarray(m, np.int64) for m in maps]).astype(np.int32)
    mbuf = b.const(key, table, I32)
    shape = [len(m) for m in maps]
    n = _size(shape)
    w = _width(src.ctype)
    bits = {4: np.uint32, 2: np.uint16, 1: np.uint8}[w]
    store = {"float": F32, "half": np.float16, "int": np.int32, "uchar": np.uint8, "char": np.int8}[src.ctype]
    fill_bits = np.asarray(fill).astype(store).reshape(1).view(bits)[0]
    k = _set(b.kernel(f"gather_{w}"), [src.buf, dst.buf, mbuf, I32(n)] + [I32(d) for d in shape[1:]] +
             [I32(o) for o in offs] + [I32(s) for s in sst] + [fill_bits])
    return _launch1d(b, f"gather_{w}", k, n)


def movement_launches(b: Binder, node: Any, ins: list[DeviceArray], out: DeviceArray) -> list[Launch]:
    """transpose, slice, broadcast_to, convert (NCHW <-> NHWC), concat, pad, constant-index take,
    reshape: strided copies or index-map gathers."""
    op, a = node.op, node.attrs
    x = ins[0]
    st = _contig(x.shape)
    if op == "reshape" or (op == "convert" and x.shape == out.shape and _perm_of_convert(node) is None):
        return [copy_launch(b, x, out, [x.size], 0, [1], 0, [1])] if x.size else []
    if op in ("transpose", "convert"):
        perm = a["perm"] if op == "transpose" else _perm_of_convert(node)
        return [copy_launch(b, x, out, out.shape, 0, [st[p] for p in perm], 0, _contig(out.shape))]
    if op == "slice":
        soff = sum(int(bg) * s for bg, s in zip(a["begin"], st))
        return [copy_launch(b, x, out, out.shape, soff, [s * int(k) for s, k in zip(st, a["step"])], 0,
                            _contig(out.shape))]
    if op == "broadcast_to":
        pad = len(out.shape) - len(x.shape)
        sst = [0] * pad + [0 if d == 1 else s for d, s in zip(x.shape, st)]
        return [copy_launch(b, x, out, out.shape, 0, sst, 0, _contig(out.shape))]
    if op == "concat":
        axis = int(a["axis"]) % len(out.shape)
        ost = _contig(out.shape)
        launches, off = [], 0
        for v in ins:
            if v.size:
                launches.append(copy_launch(b, v, out, v.shape, 0, _contig(v.shape), off * ost[axis], ost))
            off += v.shape[axis]
        return launches
    if op == "pad":
        mode = a.get("mode", "constant")
        maps = []
        for n_in, (bf, af) in zip(x.shape, a["pads"]):
            idx = np.arange(n_in)
            if mode == "constant":
                maps.append(np.pad(idx, (bf, af), mode="constant", constant_values=-1))
            else:
                maps.append(np.pad(idx, (bf, af), mode=mode))
        return [gather_launch(b, ("pad", id(node)), x, out, maps, st, a.get("value", 0) if mode == "constant" else 0)]
    if op == "take":
        axis = int(a["axis"])
        idx = np.asarray(node.inputs[1].value).reshape(-1).astype(np.int64)
        n = x.shape[axis]
        idx = np.where(idx < 0, idx + n, idx)
        maps = [np.arange(d) for d in x.shape]
        maps[axis] = idx
        return [gather_launch(b, ("take", id(node)), x, out, maps, st)]
    raise Unsupported(op)


def _perm_of_convert(node: Any) -> tuple | None:
    src, dst = node.attrs["src"], node.attrs["dst"]
    if len(node.inputs[0].shape) == 4:
        if src != "NHWC" and dst == "NHWC":
            return (0, 2, 3, 1)
        if src == "NHWC" and dst != "NHWC":
            return (0, 3, 1, 2)
    return None


def _movement_ok(node: Any) -> None:
    op = node.op
    if len(node.shape) > MAX_RANK or any(len(i.shape) > MAX_RANK for i in node.inputs[:1]):
        raise Unsupported("more than 6 axes")
    if op == "pad":
        if node.attrs.get("mode", "constant") not in ("constant", "reflect", "symmetric", "edge", "wrap"):
            raise Unsupported("pad mode")
        if node.attrs.get("mode", "constant") != "constant" and 0 in node.inputs[0].shape:
            raise Unsupported("pad of an empty array")
    if op == "take":
        idx = node.inputs[1]
        if idx.op != "const" or idx.value is None:
            raise Unsupported("take with computed indices")
        v = np.asarray(idx.value)
        n = node.inputs[0].shape[int(node.attrs["axis"])]
        if v.size and (v.min() < -n or v.max() >= n):
            raise Unsupported("take with out-of-range indices (the reference raises)")
    if op == "concat" and len({i.dtype for i in node.inputs}) != 1:
        raise Unsupported("concat of mixed dtypes")


# ---------------------------------------------------------------------------- fusion groups
_collapse = collapse_axes


@dataclass
class Leaf:
    """A fusion-group operand on the device: buffer, storage type, element strides over the
    group's iteration shape (0: broadcast), element offset, and whether it is one element."""

    buf: Any
    ctype: str
    strides: list
    offset: int = 0
    scalar: bool = False


def leaf_of(arr: DeviceArray, shape: Sequence[int]) -> Leaf:
    """A contiguous device array as a leaf broadcast to ``shape``."""
    st = _contig(arr.shape)
    pad = len(shape) - len(arr.shape)
    strides = [0] * pad + [0 if d == 1 else s for d, s in zip(arr.shape, st)]
    return Leaf(arr.buf, arr.ctype, strides, 0, arr.size == 1)


def _group_kernel(b: Binder, name: str, src: str) -> Any:
    return b.rt.cl.Kernel(b.rt.program(name, src), "group")


def group_launch(b: Binder, spec: Any, params: Sequence, shape: Sequence[int], axes: Sequence[int] | None,
                 leaves: list[Leaf], out: DeviceArray) -> list[Launch]:
    """One fusion group (elementwise chain, optionally reduced over ``axes``) as kernel launches: one,
    or two for a long reduction into few outputs (partials over the whole device, then their sum)."""
    shape = [int(d) for d in shape]
    if _size(shape) > MAX_ELEMS:
        raise Unsupported("group too large for 32-bit indices")
    ctypes = tuple(lf.ctype for lf in leaves)
    pargs = [I32(v) if k == "i" else F32(v) for v, k in zip(params, spec.param_kinds)]
    try:
        codegen.check_spec(spec)
    except codegen.Untranslatable as exc:
        raise Unsupported(f"group: {exc}") from None
    if spec.reduce is None:
        n = _size(shape)
        sts = [_contig(shape)] + [lf.strides for lf in leaves]
        shp, csts = _collapse(shape, sts)
        if not shp:
            shp, csts = [1], [[1] for _ in csts]
        modes = []
        for lf, cs in zip(leaves, csts[1:]):
            modes.append("s" if lf.scalar else ("c" if cs == csts[0] and lf.offset == 0 else "g"))
        nd = len(shp)
        src = codegen.elementwise_source(spec, tuple(modes), nd, ctypes, out.ctype)
        args: list = [lf.buf for lf in leaves] + [out.buf, I32(n)] + [I32(d) for d in shp[1:]]
        for lf, cs, m in zip(leaves, csts[1:], modes):
            if m == "g":
                args += [I32(lf.offset)] + [I32(s) for s in cs]
        k = _set(_group_kernel(b, "group", src), args + pargs)
        return [_launch1d(b, "group:" + spec.key()[:200] + str(modes), k, n)]
    axes = sorted(set(int(a) for a in axes))
    kept = [d for d in range(len(shape)) if d not in axes]
    walk = [lf for lf in leaves if not lf.scalar]
    kshape = [shape[d] for d in kept]
    kshp, kst = _collapse(kshape, [_contig(kshape)] + [[lf.strides[d] for d in kept] for lf in walk])
    rshape = [shape[d] for d in axes]
    rshp, rst = _collapse(rshape, [[lf.strides[d] for d in axes] for lf in walk] or [[0] * len(rshape)])
    if not rshp:
        rshp, rst = [1], [[0] for _ in rst]
    K = _size(kshp)
    R = _size(rshp)
    modes = tuple("s" if lf.scalar else "g" for lf in leaves)
    cus = max(b.rt.info.compute_units, 1)
    local = ROW_LOCAL if (R >= 256 and K <= 32 * cus) else 0
    fp64 = b.rt.info.fp64
    # few outputs, long reductions: P work-groups per output so that every compute unit has work
    P = min(-(-R // (ROW_LOCAL * 16)), -(-4 * cus // K)) if local else 1
    split = P > 1
    src = codegen.reduce_source(spec, modes, len(kshp), len(rshp), ctypes, out.ctype, fp64, local, split)
    part = None
    if split:
        acc_t = codegen.reduce_acc_type(spec, fp64)
        part = b.rt.buffer(K * P * {"double": 8, "long": 8}.get(acc_t, 4))
    args = [lf.buf for lf in leaves] + [part if split else out.buf, I32(K)]
    if split:
        args += [I32(P), I32(-(-R // P))]
    args += [I32(d) for d in kshp[1:]] + [I32(d) for d in rshp]
    j = 0
    for lf in leaves:
        if lf.scalar:
            continue
        args += [I32(s) for s in kst[j + 1]] + [I32(s) for s in rst[j] if rst]
        j += 1
    args.append(F32(R))
    k = _set(_group_kernel(b, "reduce", src), args + pargs)
    if split:
        fin = b.rt.cl.Kernel(b.rt.program("reduce-final", codegen.reduce_final_source(spec, out.ctype, fp64)),
                             "final")
        _set(fin, [part, out.buf, I32(K), I32(P), F32(R)])
        first = Launch(k, (K * P * local,), (local,), "reduce")
        first.scratch = part  # the partials live as long as the launches
        return [first, _launch1d(b, "reduce-final", fin, K)]
    if local:
        return [Launch(k, (K * local,), (local,), "reduce")]
    return [_launch1d(b, "reduce:" + spec.key()[:200], k, K)]


# ---------------------------------------------------------------------------- registry
#: op -> (check raising Unsupported, builder(b, node, ins, out) -> launches)
BUILDERS: dict[str, tuple[Callable, Callable]] = {}


def _reg(ops: Sequence[str], check: Callable, build: Callable) -> None:
    for op in ops:
        BUILDERS[op] = (check, build)


_reg(("mnn_conv2d", "conv2d"), _conv_ok, lambda b, n, ins, out: conv_launches(b, n, ins[0], out))
_reg(("conv2d_transpose",), _deconv_ok, lambda b, n, ins, out: deconv_launches(b, n, ins[0], out))
_reg(("matmul", "matmul_ex"), _matmul_ok, matmul_launches)
_reg(("pool2d",), _pool_ok, lambda b, n, ins, out: pool_launches(b, n, ins[0], out))
_reg(("softmax", "log_softmax"), _softmax_ok, lambda b, n, ins, out: softmax_launches(b, n, ins[0], out))
_reg(("layer_norm", "instance_norm"), _norm_ok, lambda b, n, ins, out: norm_launches(b, n, ins[0], out))
_reg(("resize",), _resize_ok, lambda b, n, ins, out: resize_launches(b, n, ins[0], out))
_reg(("reshape", "transpose", "slice", "broadcast_to", "convert", "concat", "pad", "take"), _movement_ok,
     movement_launches)

#: inputs a builder reads from device buffers (the others are constants it uploads itself)
DEVICE_INPUTS = {"mnn_conv2d": 1, "conv2d": 1, "conv2d_transpose": 1, "pool2d": 1, "softmax": 1, "log_softmax": 1,
                 "layer_norm": 1, "instance_norm": 1, "resize": 1, "reshape": 1, "transpose": 1, "slice": 1,
                 "broadcast_to": 1, "convert": 1, "pad": 1, "take": 1}


def device_inputs(node: Any) -> list[int]:
    """Indices of ``node``'s inputs its kernel reads as device arrays."""
    n = DEVICE_INPUTS.get(node.op)
    if n is not None:
        return list(range(n))
    if node.op in ("matmul", "matmul_ex"):
        return [i for i in (0, 1) if not (node.inputs[i].op == "const" and isinstance(node.inputs[i].value, np.ndarray))]
    return list(range(len(node.inputs)))


def supported(node: Any) -> str | None:
    """None when ``node`` has a kernel here, else why not."""
    ent = BUILDERS.get(node.op)
    if ent is None:
        return f"no OpenCL kernel for {node.op}"
    if node.dtype is None:
        return f"{node.op} has several outputs"
    if _size(node.shape) > MAX_ELEMS or any(_size(i.shape) > MAX_ELEMS for i in node.inputs):
        return "too large for 32-bit indices"
    if any(i.dtype is None or i.dtype.name not in ("float32", "int32", "uint8", "int8", "float16")
           for i in (node.inputs[j] for j in device_inputs(node))):
        return "an input of a dtype the device does not hold"
    try:
        ent[0](node)
    except Unsupported as exc:
        return str(exc)
    return None


def build(b: Binder, node: Any, ins: list[DeviceArray | None], out: DeviceArray) -> list[Launch]:
    """The launches computing ``node`` (see :func:`supported`)."""
    return BUILDERS[node.op][1](b, node, ins, out)


#: kernel names of the copy kernels (by element width), for ``explain``
COPY_KERNELS = tuple(f"copy_{w}" for w in COPY_TYPES)
