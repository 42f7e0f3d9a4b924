"""Micro-benchmark: bfloat16 dot products (``vdpbf16ps``) against float32 FMA in a GEMM micro-kernel.

Issue 29 asks whether ``precision=low`` can run 1.2x faster than float32. float16 *storage* cannot
(every convolution is bound by float32 FMA throughput); this script measures the arithmetic route:
AVX-512 BF16's ``vdpbf16ps`` does two bfloat16 multiply-adds per float32 lane per instruction.

Each kernel computes one ``MR x NR`` block of ``A @ B`` with register accumulators over ``K``,
re-run on L1-resident operands, so the number is the core's arithmetic throughput:

* ``f32-ymm 6x16`` - the shipped tile (:func:`mnnjit.backends.cpu.gemm.tile.tile_f32`);
* ``f32-zmm MRxNR`` - the same scheme on ``<16 x float>`` (AVX-512 FMA);
* ``bf16 MRxNR`` - ``llvm.x86.avx512bf16.dpbf16ps.512``: A as K/2 groups of MR bf16 pairs
  (one 32-bit broadcast per row), B as K/2 rows of NR column pairs (k, k+1 interleaved).

Then whole GEMMs of layer shapes (:data:`GEMMS`): the shipped float32 path
(:func:`mnnjit.backends.cpu.gemm.conv.gemm_panels`) against a bf16 GEMM converting each 32-column
block of B to bf16 pairs (RNE) before its panels, and the same with B pre-converted (the ceiling of
a producer that writes bf16 pairs itself), with each result's error against float64.

Run: ``python benchmarks/bf16_microkernel.py`` (1 thread). Needs a CPU with avx512_bf16.
"""
from __future__ import annotations

import time

import numpy as np
from llvmlite import ir

from mnnjit.backends.cpu.runtime import numba_setup  # noqa: F401
from numba import njit, types
from numba.extending import intrinsic

from mnnjit.backends.cpu.gemm.conv import PackedWeights, gemm_panels
from mnnjit.backends.cpu.gemm.tile import tile_f32

_F32 = ir.FloatType()
_I32 = ir.IntType(32)
_I64 = ir.IntType(64)


class _BFloat(ir.Type):
    """LLVM's ``bfloat`` (llvmlite's IR builder has no such type)."""

    def __str__(self) -> str:
        return "bfloat"

    def __eq__(self, other) -> bool:
        return isinstance(other, _BFloat)

    def __hash__(self) -> int:
        return hash("bfloat")


_V16 = ir.VectorType(_F32, 16)
_V16I = ir.VectorType(_I32, 16)
_V32B = ir.VectorType(_BFloat(), 32)


def _make(kind: str, mr: int, nv: int):
    """A kernel ``(a, b, k) -> c``: ``kind`` 'bf16' or 'f32z'; ``nv`` zmm vectors per row."""

    def typer(typingctx, a, b, c, k):
        sig = types.void(types.int64, types.int64, types.int64, types.int64)

        def codegen(context, builder, signature, args):
            a_i, b_i, c_i, k_v = args
            mod = builder.module
            if kind == "bf16":
                fname = "llvm.x86.avx512bf16.dpbf16ps.512"
                fn = mod.globals.get(fname) or ir.Function(mod, ir.FunctionType(_V16, [_V16, _V32B, _V32B]), fname)
                a_p = builder.inttoptr(a_i, _I32.as_pointer())   # pairs of bf16 as i32
                b_p = builder.inttoptr(b_i, _V16I.as_pointer())  # 16 pairs per vector
                steps = builder.sdiv(k_v, ir.Constant(_I64, 2))
            else:
                fname = "llvm.fma.v16f32"
                fn = mod.globals.get(fname) or ir.Function(mod, ir.FunctionType(_V16, [_V16] * 3), fname)
                a_p = builder.inttoptr(a_i, _F32.as_pointer())
                b_p = builder.inttoptr(b_i, _V16.as_pointer())
                steps = k_v
            c_p = builder.inttoptr(c_i, _V16.as_pointer())
            entry = builder.basic_block
            loop = builder.function.append_basic_block("l")
            done = builder.function.append_basic_block("d")
            builder.branch(loop)
            builder.position_at_end(loop)
            kk = builder.phi(_I64)
            accs = [builder.phi(_V16) for _ in range(mr * nv)]
            bv = [builder.load(builder.gep(b_p, [builder.add(builder.mul(kk, ir.Constant(_I64, nv)),
                                                               ir.Constant(_I64, h))]), align=4)
                  for h in range(nv)]
            if kind == "bf16":
                bv = [builder.bitcast(v, _V32B) for v in bv]
            new = []
            for r in range(mr):
                s = builder.load(builder.gep(a_p, [builder.add(builder.mul(kk, ir.Constant(_I64, mr)),
                                                                ir.Constant(_I64, r))]))
                vt = _V16I if kind == "bf16" else _V16
                one = builder.insert_element(ir.Constant(vt, ir.Undefined), s, ir.Constant(_I32, 0))
                sp = builder.shuffle_vector(one, ir.Constant(vt, ir.Undefined),
                                            ir.Constant(ir.VectorType(_I32, 16), [0] * 16))
                for h in range(nv):
                    if kind == "bf16":
                        new.append(builder.call(fn, [accs[r * nv + h], builder.bitcast(sp, _V32B), bv[h]]))
                    else:
                        new.append(builder.call(fn, [sp, bv[h], accs[r * nv + h]]))
            kn = builder.add(kk, ir.Constant(_I64, 1))
            kk.add_incoming(ir.Constant(_I64, 0), entry)
            kk.add_incoming(kn, loop)
            zero = ir.Constant(_V16, [0.0] * 16)
            for p, v in zip(accs, new):
                p.add_incoming(zero, entry)
                p.add_incoming(v, loop)
            builder.cbranch(builder.icmp_signed("<", kn, steps), loop, done)
            builder.position_at_end(done)
            for i, v in enumerate(new):
                builder.store(v, builder.gep(c_p, [ir.Constant(_I64, i)]), align=4)
            return context.get_dummy_value()

        return sig, codegen

    typer.__name__ = f"mk_{kind}_{mr}_{nv}"
    return intrinsic(typer)


def _make_gemm_tile():
    """The bf16 GEMM block: ``c[r*ldc + j] = sum_kp A[kp*6 + r] . B[kp*32 + j]`` (pairs), 6 x 32."""

    def typer(typingctx, a, b, c, ldc, kp):
        sig = types.void(types.int64, types.int64, types.int64, types.int64, types.int64)

        def codegen(context, builder, signature, args):
            a_i, b_i, c_i, ldc_v, k_v = args
            mod = builder.module
            fname = "llvm.x86.avx512bf16.dpbf16ps.512"
            fn = mod.globals.get(fname) or ir.Function(mod, ir.FunctionType(_V16, [_V16, _V32B, _V32B]), fname)
            a_p = builder.inttoptr(a_i, _I32.as_pointer())
            b_p = builder.inttoptr(b_i, _V16I.as_pointer())
            c_p = builder.inttoptr(c_i, _F32.as_pointer())
            entry = builder.basic_block
            loop = builder.function.append_basic_block("l")
            done = builder.function.append_basic_block("d")
            zero = ir.Constant(_V16, [0.0] * 16)
            builder.cbranch(builder.icmp_signed(">", k_v, ir.Constant(_I64, 0)), loop, done)
            builder.position_at_end(loop)
            kk = builder.phi(_I64)
            accs = [builder.phi(_V16) for _ in range(12)]
            bv = [builder.bitcast(builder.load(builder.gep(b_p, [builder.add(builder.mul(kk, ir.Constant(_I64, 2)),
                                                                              ir.Constant(_I64, h))]), align=4), _V32B)
                  for h in range(2)]
            new = []
            for r in range(6):
                s = builder.load(builder.gep(a_p, [builder.add(builder.mul(kk, ir.Constant(_I64, 6)),
                                                                ir.Constant(_I64, r))]))
                one = builder.insert_element(ir.Constant(_V16I, ir.Undefined), s, ir.Constant(_I32, 0))
                sp = builder.bitcast(builder.shuffle_vector(one, ir.Constant(_V16I, ir.Undefined),
                                                            ir.Constant(ir.VectorType(_I32, 16), [0] * 16)), _V32B)
                for h in range(2):
                    new.append(builder.call(fn, [accs[2 * r + h], sp, bv[h]]))
            kn = builder.add(kk, ir.Constant(_I64, 1))
            kk.add_incoming(ir.Constant(_I64, 0), entry)
            kk.add_incoming(kn, loop)
            for p, v in zip(accs, new):
                p.add_incoming(zero, entry)
                p.add_incoming(v, loop)
            builder.cbranch(builder.icmp_signed("<", kn, k_v), loop, done)
            builder.position_at_end(done)
            phis = []
            for v in new:                     # phis first: LLVM wants them at the block's top
                phi = builder.phi(_V16)
                phi.add_incoming(zero, entry)
                phi.add_incoming(v, loop)
                phis.append(phi)
            for i, phi in enumerate(phis):
                row = builder.gep(c_p, [builder.add(builder.mul(ir.Constant(_I64, i // 2), ldc_v),
                                                     ir.Constant(_I64, 16 * (i % 2)))])
                builder.store(phi, builder.bitcast(row, _V16.as_pointer()), align=4)
            return context.get_dummy_value()

        return sig, codegen

    typer.__name__ = "mk_bf16_gemm_6x32"
    return intrinsic(typer)


_tile_bf16 = _make_gemm_tile()


@njit(cache=False)
def _bf16_bits(u):
    """float32 bits -> bfloat16 bits, round to nearest even (as ``vcvtneps2bf16``)."""
    return (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)


def pack_a_bf16(w: np.ndarray) -> np.ndarray:
    """``[M, K]`` float32 -> panels of 6 rows, K/2 bf16 pairs per row (uint32), zero padded."""
    m, k = w.shape
    mp, kp = -(-m // 6) * 6, -(-k // 2)
    pad = np.zeros((mp, 2 * kp), np.float32)
    pad[:m, :k] = w
    u = pad.view(np.uint32)
    bits = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint32)
    pairs = bits[:, 0::2] | (bits[:, 1::2] << 16)                # [mp, kp]
    return np.ascontiguousarray(pairs.reshape(mp // 6, 6, kp).transpose(0, 2, 1)).reshape(-1)


@njit(cache=False)
def gemm_bf16(ap, M, K, b, N, c, btile, ctile):
    """``c[M, N] = A @ b`` (b float32 ``[K, N]`` read as bits, uint32 view): per 32-column block
    B is converted to bf16 pairs once (``btile`` [K/2 * 32] uint32), then every 6-row panel runs
    the 6 x 32 bf16 kernel (a partial block through ``ctile`` [6 * 32])."""
    kp = (K + 1) // 2
    npanel = (M + 5) // 6
    for j0 in range(0, N, 32):
        nc = min(32, N - j0)
        for p in range(kp):
            k0 = 2 * p
            for j in range(32):
                lo = np.uint32(0)
                hi = np.uint32(0)
                if j < nc:
                    lo = _bf16_bits(b[k0, j0 + j])
                    if k0 + 1 < K:
                        hi = _bf16_bits(b[k0 + 1, j0 + j])
                btile[p * 32 + j] = lo | (hi << np.uint32(16))
        for q in range(npanel):
            a = ap[q * kp * 6:]
            if nc == 32 and q * 6 + 6 <= M:
                _tile_bf16(a.ctypes.data, btile.ctypes.data, c.ctypes.data + 4 * (q * 6 * N + j0), N, kp)
            else:
                _tile_bf16(a.ctypes.data, btile.ctypes.data, ctile.ctypes.data, 32, kp)
                for r in range(min(6, M - q * 6)):
                    for j in range(nc):
                        c[(q * 6 + r) * N + j0 + j] = ctile[r * 32 + j]


@njit(cache=False)
def _gemm_bf16_prepacked(ap, M, K, bpk, N, c, ctile, reps):
    """The bf16 GEMM with B already in pair layout (``bpk`` [N/32 blocks, K/2 * 32]): the ceiling
    of a variant whose producer (e.g. a Winograd input transform) writes bf16 pairs itself."""
    kp = (K + 1) // 2
    npanel = (M + 5) // 6
    for _ in range(reps):
        for jb in range(bpk.shape[0]):
            j0 = jb * 32
            bt = bpk[jb]
            for q in range(npanel):
                a = ap[q * kp * 6:]
                if j0 + 32 <= N and q * 6 + 6 <= M:
                    _tile_bf16(a.ctypes.data, bt.ctypes.data, c.ctypes.data + 4 * (q * 6 * N + j0), N, kp)
                else:
                    _tile_bf16(a.ctypes.data, bt.ctypes.data, ctile.ctypes.data, 32, kp)


@njit(cache=False)
def _gemm_f32_loop(ap, M, K, b, N, c, zbias, btile, ctile, reps):
    for _ in range(reps):
        gemm_panels(ap, M, K, b, N, c, N, zbias, btile, ctile)


@njit(cache=False)
def _gemm_bf16_loop(ap, M, K, bu, N, c, btile, ctile, reps):
    for _ in range(reps):
        gemm_bf16(ap, M, K, bu, N, c, btile, ctile)


#: (name, M, K, N): layers' GEMMs - ResNet-18 Winograd positions (C x C x tiles), an im2col GEMM,
#: MobileNetV2 1x1 expansions / projections
GEMMS = (("wino 64@56", 64, 64, 196), ("wino 256@14", 256, 256, 16), ("im2col 256@14", 256, 1152, 196),
         ("1x1 64->384@14", 384, 64, 196), ("1x1 160->960@7", 960, 160, 49), ("1x1 960->160@7", 160, 960, 49))


def gemm_table() -> None:
    """Whole GEMMs (B converted to bf16 per 32-column block inside the timing) against the
    shipped float32 path (:func:`mnnjit.backends.cpu.gemm.conv.gemm_panels`); checks accuracy."""
    rng = np.random.default_rng(0)
    for name, m, k, n in GEMMS:
        w = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        ref = w.astype(np.float64) @ b
        c32 = np.zeros(m * n, np.float32)
        c16 = np.zeros(m * n, np.float32)
        reps = max(1, int(2e8 / (m * k * n)))
        ap32 = PackedWeights.from_dense(w).panels
        args32 = (ap32, m, k, b, n, c32, np.zeros(6, np.float32), np.empty((k, 16), np.float32),
                  np.empty(96, np.float32), reps)
        ap16 = pack_a_bf16(w)
        args16 = (ap16, m, k, b.view(np.uint32), n, c16, np.empty(((k + 1) // 2) * 32, np.uint32),
                  np.empty(192, np.float32), reps)
        g32 = _gflops(_gemm_f32_loop, 2.0 * m * k * n * reps, *args32)
        g16 = _gflops(_gemm_bf16_loop, 2.0 * m * k * n * reps, *args16)
        nb, kp = -(-n // 32), (k + 1) // 2
        bpk = np.zeros((nb, kp * 32), np.uint32)
        bpad = np.zeros((2 * kp, nb * 32), np.float32)
        bpad[:k, :n] = b
        u = bpad.view(np.uint32)
        bits = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint32)
        pairs = bits[0::2] | (bits[1::2] << 16)                  # [kp, nb*32]
        bpk[:] = pairs.reshape(kp, nb, 32).transpose(1, 0, 2).reshape(nb, kp * 32)
        gpk = _gflops(_gemm_bf16_prepacked, 2.0 * m * k * n * reps, ap16, m, k, bpk, n,
                      np.zeros(m * n, np.float32), np.empty(192, np.float32), reps)
        e32 = np.abs(c32.reshape(m, n) - ref).max() / np.abs(ref).max()
        e16 = np.abs(c16.reshape(m, n) - ref).max() / np.abs(ref).max()
        print(f"{name:16s} M{m:4d} K{k:5d} N{n:4d}  f32 {g32:6.1f}  bf16 {g16:6.1f} GFLOP/s  "
              f"{g16 / g32:4.2f}x  prepacked B {gpk:6.1f} {gpk / g32:4.2f}x  rel err f32 {e32:.1e} bf16 {e16:.1e}")


def _runner(kern):
    @njit(cache=False)
    def run(a, b, c, k, reps):
        for _ in range(reps):
            kern(a.ctypes.data, b.ctypes.data, c.ctypes.data, k)
    return run


@njit(cache=False)
def _run_ymm(a, b, c, bias, k, reps):
    for _ in range(reps):
        tile_f32(a.ctypes.data, b.ctypes.data, 16, c.ctypes.data, 16, k, bias.ctypes.data, 0, 0, 0)


def _gflops(fn, flops: float, *args) -> float:
    fn(*args[:-1], 2)
    best = 1e9
    for _ in range(5):
        t = time.perf_counter()
        fn(*args)
        best = min(best, time.perf_counter() - t)
    return flops / best / 1e9


def main() -> None:
    """Print GFLOP/s per kernel and bf16's speed-up over the best float32 kernel."""
    import llvmlite.binding as ll
    if not ll.get_host_cpu_features().get("avx512bf16", False):
        raise SystemExit("bf16_microkernel: this CPU has no avx512_bf16 (vdpbf16ps would fault)")
    k, reps = 256, 20000
    a = np.ones(6 * 16 * k, np.float32)
    b = np.ones(64 * k, np.float32)
    c = np.zeros(16 * 16 * 8, np.float32)
    bias = np.zeros(16, np.float32)
    res = {"f32-ymm 6x16": _gflops(_run_ymm, 2.0 * 6 * 16 * k * reps, a, b, c, bias, k, reps)}
    for mr, nv in ((6, 2), (12, 1), (8, 2)):
        res[f"f32-zmm {mr}x{16 * nv}"] = _gflops(_runner(_make("f32z", mr, nv)), 2.0 * mr * 16 * nv * k * reps,
                                                 a, b, c, k, reps)
        res[f"bf16 {mr}x{16 * nv}"] = _gflops(_runner(_make("bf16", mr, nv)), 2.0 * mr * 16 * nv * k * reps,
                                              a, b, c, k, reps)
    for name, g in res.items():
        print(f"{name:16s} {g:7.1f} GFLOP/s")
    f32 = max(v for n, v in res.items() if n.startswith("f32"))
    bf = max(v for n, v in res.items() if n.startswith("bf16"))
    print(f"bf16 / best f32: {bf / f32:.2f}x")
    gemm_table()


if __name__ == "__main__":
    main()
