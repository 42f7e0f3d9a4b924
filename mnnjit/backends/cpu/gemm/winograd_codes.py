"""Winograd F(m x m, 3 x 3) on int8 weight codes (memory=low): the float transformed weights
``U = G w G^T`` are never stored, each task computes them from the codes right before its GEMMs.

The weight of output channel ``o`` is ``w = code * scale[o] + offset[o]`` (per-channel 8-bit
quantization). ``G`` is linear, so per position ``p``
``U[p, o, c] = scale[o] * f[p] * Uq[p, o, c] + offset[o] * gsum[p]`` with ``Uq = Gi code Gi^T``
(``G = diag(g) Gi``, ``Gi`` integer: the transform of the codes is exact, adds only),
``f[p] = g[i] g[j]`` and ``gsum[p]`` the transform of an all-ones 3x3 kernel. The
tasks transform codes only (``Uq``), run the Winograd GEMMs ``Mq[p] = Uq[p] @ V[p]`` on the
micro-kernel, then apply
``M[p, o] = scale[o] * f[p] * Mq[p, o] + offset[o] * gsum[p] * sum_c V[p, c]`` before the output
transform: the result equals the float Winograd convolution of the
dequantized weights within float rounding.

Codes are kept tap-major and packed like the micro-kernel's panels (``[9, npanel * Cp * MR]``,
``Cp`` = C rounded up to a multiple of 4: tap ``t = 3*ky + kx`` of channel ``c`` of row ``r`` of
panel ``q`` at ``(q*Cp + c)*MR + r``), so a group of panels transforms eight values at a time in
registers (int8 widening, the separable ``G`` passes: an LLVM intrinsic) into panels the GEMM
reads as they are. A group of panels is transformed into a scratch of about
:data:`_U_BYTES` and its GEMMs run on it while it is in L2; the input transform ``V``, the GEMMs,
the output transform and the scatter are the float kernel's (:mod:`.winograd`).

This module imports numba: import it lazily.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
from mnnjit.backends.cpu.runtime import numba_setup  # noqa: F401  (first: OpenMP policy, cross-process compile lock)
from llvmlite import ir
from numba import get_num_threads, njit, prange, types
from numba.extending import intrinsic

from mnnjit.backends.cpu.cnn_steps import _act_code, _keep_alive, _writable, storage_view
from mnnjit.backends.cpu.gemm.conv import MR, NR, gemm_panels, line_offset
from mnnjit.backends.cpu.gemm.winograd import (_launch_geometry, _layout, _load_tiles, _output_tf,
                                               _padded, _scatter, _task_coords, _task_views,
                                               transform_matrices)

__all__ = ["WinogradCodes", "winograd_codes_weights", "winograd_codes_conv3x3",
           "codes_workspace_floats"]

#: transformed-weight scratch per group of panels (the group's GEMMs read it from L2)
_U_BYTES = 256 * 1024


#: ``G = diag(_G_ROW) @ _G_INT``: the transform passes use the integer rows (exact on integer
#: codes, and cheaper: adds only), the row factors go into the per-position scale of M
_G_INT = {2: [[1, 0, 0], [1, 1, 1], [1, -1, 1], [0, 0, 1]],
          4: [[1, 0, 0], [1, 1, 1], [1, -1, 1], [4, 2, 1], [4, -2, 1], [0, 0, 1]]}
_G_ROW = {2: [1, 1 / 2, 1 / 2, 1], 4: [1, 1 / 6, 1 / 6, 1 / 24, 1 / 24, 1 / 4]}


def _check_g(m: int) -> None:
    """The transform passes below hard-code ``G``'s integer rows (:data:`_G_INT`); check
    ``diag(_G_ROW) @ _G_INT`` against :func:`.winograd.transform_matrices` so a change of
    interpolation points fails loudly."""
    _, g, _ = transform_matrices(m)
    want = np.asarray(_G_ROW[m])[:, None] * np.asarray(_G_INT[m], np.float64)
    if not np.allclose(g, want, rtol=0, atol=1e-12):
        raise RuntimeError(f"winograd_codes: G of F({m},3) changed; update its transform passes")


_check_g(2)
_check_g(4)


_F32 = ir.FloatType()
_V8 = ir.VectorType(_F32, 8)
_V8I8 = ir.VectorType(ir.IntType(8), 8)
_V8I32 = ir.VectorType(ir.IntType(32), 8)
_I64 = ir.IntType(64)


def _g_ir(builder: ir.IRBuilder, x0, x1, x2, m: int) -> list:
    """``h_j = sum_x Gi[j, x] * x_x`` for ``j < m + 2`` on ``<8 x float>`` values, ``Gi`` the
    integer rows :data:`_G_INT` (pairs ``(e, +-f, h)`` sharing ``e*x0 + h*x2``)."""
    s1 = builder.fadd(x0, x2)
    h = [x0, builder.fadd(s1, x1), builder.fsub(s1, x1)]
    if m == 4:
        s2 = builder.fadd(builder.fmul(ir.Constant(_V8, [4.0] * 8), x0), x2)
        t2 = builder.fadd(x1, x1)
        h += [builder.fadd(s2, t2), builder.fsub(s2, t2)]
    return h + [x2]


def _make_gtf(m: int):
    """An intrinsic ``gtf(codes, ldc, u, ldu, n)``: ``u[p*ldu + l] = (Gi code Gi^T)[p]`` for
    ``l < n`` (a multiple of 8), the 9 taps of value ``l`` at ``codes[t*ldc + l]`` (int8). Eight
    values at a time in registers: 9 loads, the two separable passes, ``(m+2)^2`` stores
    (numba loops over rows, writing and re-reading each pass's rows, took ~4x longer)."""
    a = m + 2

    def typer(typingctx, c_i, ldc, u_i, ldu, n):
        sig = types.void(*([types.int64] * 5))

        def codegen(context, builder, signature, args):
            c_a, ldc_v, u_a, ldu_v, n_v = args
            c_p = builder.inttoptr(c_a, ir.IntType(8).as_pointer())
            u_p = builder.inttoptr(u_a, _F32.as_pointer())
            fn = builder.function
            entry = builder.basic_block
            loop = fn.append_basic_block("gtf.loop")
            done = fn.append_basic_block("gtf.done")
            builder.cbranch(builder.icmp_signed(">", n_v, ir.Constant(_I64, 0)), loop, done)
            builder.position_at_end(loop)
            li = builder.phi(_I64)
            xs = []
            for t in range(9):
                ptr = builder.gep(c_p, [builder.add(builder.mul(ir.Constant(_I64, t), ldc_v), li)])
                v = builder.load(builder.bitcast(ptr, _V8I8.as_pointer()), align=1)
                xs.append(builder.sitofp(builder.sext(v, _V8I32), _V8))
            rows = [_g_ir(builder, xs[3 * y], xs[3 * y + 1], xs[3 * y + 2], m) for y in range(3)]
            for j in range(a):
                col = _g_ir(builder, rows[0][j], rows[1][j], rows[2][j], m)
                for i in range(a):
                    off = builder.add(builder.mul(ir.Constant(_I64, i * a + j), ldu_v), li)
                    builder.store(col[i], builder.bitcast(builder.gep(u_p, [off]),
                                                          _V8.as_pointer()), align=4)
            nxt = builder.add(li, ir.Constant(_I64, 8))
            li.add_incoming(ir.Constant(_I64, 0), entry)
            li.add_incoming(nxt, loop)
            builder.cbranch(builder.icmp_signed("<", nxt, n_v), loop, done)
            builder.position_at_end(done)
            return context.get_dummy_value()

        return sig, codegen

    typer.__name__ = typer.__qualname__ = f"winograd_codes_gtf{m}"
    return typer


_gtf2 = intrinsic(_make_gtf(2))
_gtf4 = intrinsic(_make_gtf(4))


@njit(inline="always")
def _transform(codes, l0, l1, m, uscr):
    """uscr[p, l - l0] = (G code G^T)[p] for the packed code values l0 <= l < l1 (``codes``
    [9, *] int8, ``uscr`` [a*a, >= l1 - l0] float32; l1 - l0 a multiple of 8: panels of a
    multiple of 4 channels)."""
    cp = codes.ctypes.data + l0
    if m == 2:
        _gtf2(cp, codes.strides[0], uscr.ctypes.data, uscr.strides[0] // 4, l1 - l0)
    else:
        _gtf4(cp, codes.strides[0], uscr.ctypes.data, uscr.strides[0] // 4, l1 - l0)


@njit(inline="always")
def _u_stride(L):
    """Row stride (floats) of U's scratch for rows of ``L`` values: whole 64-byte lines plus one,
    so the (m+2)^2 rows that each group of eight values is stored to fall in different L1 sets
    (rows a multiple of 4 KB apart all map to one set: 3x slower transform)."""
    return (L + 15) // 16 * 16 + 16


@njit(parallel=True, cache=True, error_model="numpy")
def _k_wino_codes(x, codes, scale, offset, gsum, pscale, has_off, bias, out, m, pt, pl, T, OB,
                  GQ, act, ws, base, res, has_res):
    """:func:`.winograd._k_wino` on codes: per task (image, tile block, block of output
    channels), V as there, then per group of ``GQ`` panels the codes' transform into a scratch
    and the group's GEMMs, then the scale/offset of every channel on M, the output transform and
    the scatter. ``ws`` rows: the float kernel's workspace (``base`` floats) then U's scratch and
    ``gsum[p] * sum_c V[p, c, t]``."""
    N, C, H, W, O, OH, OW, a, P, TW, ntile, ntb, nob, ntask, nchunk, TP = _launch_geometry(
        x, out, m, T, OB, ws)
    KQ = (C + 3) // 4 * 4 * MR      # packed code values per panel and tap (channels padded to 4)
    for ch in prange(nchunk):
        w0 = ws[ch]
        w = w0[line_offset(w0):]
        ux = w0[base:]
        ux = ux[line_offset(ux):]
        LD = _u_stride(GQ * KQ)
        uscr = ux[:P * LD].reshape((P, LD))
        vsum = ux[P * LD:P * LD + P * TP].reshape((P, TP))
        last = -1
        zbias = np.zeros(MR, np.float32)
        btile = np.empty((C, NR), np.float32)
        ctile = np.empty(MR * NR, np.float32)
        for task in range(ch * ntask // nchunk, (ch + 1) * ntask // nchunk):
            n, blk, t0, t1, nb, o0, no = _task_coords(task, nob, ntb, T, ntile, OB, O)
            v, mbuf, mm, dbuf, hb, ybuf, row, plane = _task_views(w, base - 16, P, C, OB, TP, T,
                                                                  no, nb, a, m, TW)
            if blk != last:
                _load_tiles(x, n, C, H, W, m, pt, pl, t0, t1, nb, TW, dbuf, hb, v, row, plane)
                if has_off:
                    for p in range(P):
                        vs = vsum[p]
                        for t in range(nb):
                            vs[t] = np.float32(0.0)
                        for c in range(C):
                            vc = v[p, c]
                            for t in range(nb):
                                vs[t] += vc[t]
                        g = gsum[p]
                        for t in range(nb):
                            vs[t] *= g
                last = blk
            q0 = o0 // MR
            q1 = (o0 + no + MR - 1) // MR
            for qg in range(q0, q1, GQ):
                qe = min(q1, qg + GQ)
                _transform(codes, qg * KQ, qe * KQ, m, uscr)
                for p in range(P):
                    for q in range(qg, qe):
                        r0 = (q - q0) * MR
                        rows = min(MR, no - r0)
                        gemm_panels(uscr[p, (q - qg) * KQ:], rows, C, v[p], nb,
                                    mbuf[(p * no + r0) * TP:(p * no + r0 + rows) * TP], TP,
                                    zbias, btile, ctile)
            for o in range(no):
                s = scale[o0 + o]
                f = offset[o0 + o]
                for p in range(P):
                    mo = mm[p, o]
                    sp = s * pscale[p]
                    if has_off:
                        vs = vsum[p]
                        for t in range(nb):
                            mo[t] = mo[t] * sp + f * vs[t]
                    else:
                        for t in range(nb):
                            mo[t] *= sp
                _output_tf(mm, o, m, nb, hb, ybuf)
                _scatter(ybuf, out, n, o0 + o, bias[o0 + o], act, m, t0, t1, TW, OH, OW, row, res,
                         has_res)
        _keep_alive(w, ws)
        _keep_alive(uscr, vsum)
        _keep_alive(ctile, btile)


class WinogradCodes:
    """A quantized 3x3 convolution's int8 codes packed for :func:`winograd_codes_conv3x3`:
    ``codes`` [9, npanel * Cp * MR] (see the module docstring; ``Cp`` = C rounded up to a multiple
    of 4, so a panel's values are whole 8-value vectors; padding rows and channels are zero codes),
    ``scale``/``offset`` [O] float32, ``m`` the tile size F(m, 3)."""

    def __init__(self, codes: np.ndarray, scale: np.ndarray, offset: np.ndarray, m: int,
                 out_channels: int, in_channels: int) -> None:
        self.codes, self.scale, self.offset = codes, scale, offset
        self.m, self.out_channels, self.in_channels = m, out_channels, in_channels
        self.has_offset = bool(np.any(offset))
        _, g, _ = transform_matrices(m)
        rs = g.sum(axis=1)
        self.gsum = np.outer(rs, rs).reshape(-1).astype(np.float32)
        #: per position: the row factors of G the transform of the codes leaves out
        self.pscale = np.outer(_G_ROW[m], _G_ROW[m]).reshape(-1).astype(np.float32)

    @property
    def nbytes(self) -> int:
        """Bytes held: codes, scales and offsets."""
        return int(self.codes.nbytes + self.scale.nbytes + self.offset.nbytes)

    def __repr__(self) -> str:
        return (f"WinogradCodes(F({self.m}x{self.m},3x3) on int8 codes, O={self.out_channels}, "
                f"C={self.in_channels})")


def winograd_codes_weights(codes: np.ndarray, scale: np.ndarray, offset: np.ndarray,
                           m: int) -> WinogradCodes:
    """Pack int8 ``codes`` [O, C, 3, 3] (any layout reshaping to it: a :class:`.quant.QuantRows`'s
    ``[O, C*9]``) with per-output-channel ``scale``/``offset`` (``O`` values each; weight =
    code * scale + offset) for F(m, 3), ``m`` 2 or 4."""
    if m not in (2, 4):
        raise ValueError(f"winograd_codes_weights: tile size m must be 2 or 4, got {m!r}")
    codes = np.asarray(codes)
    if codes.dtype != np.int8:
        raise ValueError(f"winograd_codes_weights: codes must be int8, got {codes.dtype}")
    O = codes.shape[0]
    if O < 1 or codes.size % (9 * O) or codes.size == 0:
        raise ValueError(f"winograd_codes_weights: codes of shape {codes.shape} are not "
                         f"[O, C, 3, 3]")
    C = codes.size // (9 * O)
    scale = np.ascontiguousarray(scale, np.float32).reshape(-1)
    offset = np.ascontiguousarray(offset, np.float32).reshape(-1)
    if scale.size != O or offset.size != O:
        raise ValueError(f"winograd_codes_weights: need {O} scales and offsets (one per output "
                         f"channel), got {scale.size} / {offset.size}")
    npanel = -(-O // MR)
    cp = -(-C // 4) * 4
    c4 = np.zeros((npanel * MR, cp, 9), np.int8)
    c4[:O, :C] = codes.reshape(O, C, 9)
    packed = np.ascontiguousarray(c4.reshape(npanel, MR, cp, 9).transpose(3, 0, 2, 1))
    return WinogradCodes(packed.reshape(9, npanel * cp * MR), scale, offset, m, O, C)


def _groups(C: int, m: int) -> int:
    """Panels transformed per group: U's scratch near :data:`_U_BYTES`, at least one panel."""
    return max(1, _U_BYTES // (4 * (m + 2) ** 2 * _kq(C)))


def _kq(C: int) -> int:
    """Packed code values per panel and tap: channels padded to a multiple of 4."""
    return -(-C // 4) * 4 * MR


def _extra_floats(C: int, OB: int, T: int, m: int) -> int:
    """Floats per workspace row after the float kernel's: U's scratch, sum_c V (offsets)."""
    a = m + 2
    gq = min(_groups(C, m), -(-OB // MR))
    return a * a * _u_stride.py_func(gq * _kq(C)) + a * a * _padded.py_func(T) + 32


def _plan(N: int, C: int, O: int, OH: int, OW: int, m: int, threads: int):
    """(T, OB, panels per group, workspace rows, float kernel's floats per row, floats per row)."""
    T, OB, nchunk, size = _layout(N, C, O, OH, OW, m, threads)
    gq = min(_groups(C, m), -(-OB // MR))
    return T, OB, gq, nchunk, size, size + _extra_floats(C, OB, T, m)


def codes_workspace_floats(x_shape: Sequence[int], wt: WinogradCodes, pads=(0, 0, 0, 0),
                           threads: Optional[int] = None) -> int:
    """float32 values of the workspace :func:`winograd_codes_conv3x3` uses (as
    :func:`.winograd.workspace_floats`)."""
    N, C, H, W = (int(v) for v in x_shape)
    OH = H + int(pads[0]) + int(pads[1]) - 2
    OW = W + int(pads[2]) + int(pads[3]) - 2
    if OH <= 0 or OW <= 0 or N == 0:
        raise ValueError(f"codes_workspace_floats: no output for input {list(x_shape)}, "
                         f"pads {pads}")
    _, _, _, nchunk, _, full = _plan(N, C, wt.out_channels, OH, OW, wt.m,
                                     threads or get_num_threads())
    return nchunk * full


def winograd_codes_conv3x3(x: np.ndarray, wt: WinogradCodes, bias: Optional[np.ndarray],
                           pads=(0, 0, 0, 0), act: str = "", out: Optional[np.ndarray] = None,
                           res: Optional[np.ndarray] = None, ws: Optional[np.ndarray] = None,
                           launch_only: bool = False):
    """3x3 convolution, stride 1, NCHW, by Winograd F(wt.m, 3) on int8 codes: arguments and
    result as :func:`.winograd.winograd_conv3x3` (``x`` float32 or float16, ``out`` optional,
    ``res`` a residual added before the activation, ``ws`` a workspace of at least
    :func:`codes_workspace_floats` values, ``launch_only``)."""
    if not isinstance(wt, WinogradCodes):
        raise TypeError(f"winograd_codes_conv3x3: wt must come from winograd_codes_weights(), "
                        f"got {type(wt).__name__}")
    if x.ndim != 4 or x.dtype not in (np.float32, np.float16):
        raise ValueError(f"winograd_codes_conv3x3: input must be a 4-D float32/float16 NCHW "
                         f"array, got {x.dtype} {x.shape}")
    N, C, H, W = x.shape
    if C != wt.in_channels:
        raise ValueError(f"winograd_codes_conv3x3: input has {C} channels, weight expects "
                         f"{wt.in_channels}")
    pads = tuple(int(p) for p in pads)
    if len(pads) != 4 or min(pads) < 0:
        raise ValueError(f"winograd_codes_conv3x3: pads must be 4 non-negative ints, got {pads}")
    O = wt.out_channels
    OH = H + pads[0] + pads[1] - 2
    OW = W + pads[2] + pads[3] - 2
    if OH <= 0 or OW <= 0 or N == 0:
        raise ValueError("winograd_codes_conv3x3: 3x3 kernel larger than the padded input "
                         "(or empty batch)")
    b = np.zeros(O, np.float32) if bias is None else \
        _writable(np.ascontiguousarray(bias, np.float32))
    if b.shape != (O,):
        raise ValueError(f"winograd_codes_conv3x3: bias shape {b.shape}, expected ({O},)")
    shape = (N, O, OH, OW)
    if out is None:
        out = np.empty(shape, x.dtype)
    elif out.shape != shape or out.dtype != x.dtype or not out.flags.c_contiguous \
            or not out.flags.writeable or np.may_share_memory(out, x):
        raise ValueError(f"winograd_codes_conv3x3: out must be a writable C-contiguous "
                         f"{x.dtype} array of shape {shape}, not overlapping the input")
    if res is not None and (res.shape != shape or res.dtype != x.dtype):
        raise ValueError(f"winograd_codes_conv3x3: residual must be a {x.dtype} array of shape "
                         f"{shape}, got {res.dtype} {res.shape}")
    T, OB, gq, nchunk, size, full = _plan(N, C, O, OH, OW, wt.m, get_num_threads())
    if ws is not None and ws.dtype == np.float32 and ws.ndim == 1 and ws.flags.c_contiguous \
            and ws.flags.writeable and ws.size >= nchunk * full \
            and not np.may_share_memory(ws, x) and not np.may_share_memory(ws, out) \
            and (res is None or not np.may_share_memory(ws, res)):
        ws = ws[:nchunk * full].reshape(nchunk, full)
    else:
        ws = np.empty((nchunk, full), np.float32)
    so = storage_view(out)
    args = (storage_view(np.ascontiguousarray(x)), wt.codes, wt.scale, wt.offset, wt.gsum, wt.pscale,
            wt.has_offset, b, so, wt.m, pads[0], pads[2], T, OB, gq, _act_code(act), ws, size,
            so if res is None else storage_view(np.ascontiguousarray(res)), res is not None)
    if launch_only:
        return _k_wino_codes, args
    _k_wino_codes(*args)
    return out
