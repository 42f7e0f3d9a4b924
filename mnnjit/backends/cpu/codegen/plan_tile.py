"""The whole-plan GEMM's 6x16 micro-kernel with a prefetch of B at a run-time distance.

:mod:`.plan_gemm` reads constant weights as the right operand ``B``, laid out in 16-column blocks
(``[n // 16][k][16]``). A transformer's weights rarely fit this CPU's 1 MB L2 (a ViT layer's are
1.2 MB), so each block of B arrives from L3 while the first panel of A runs over it: that panel
waits on every line. :func:`tile_pf_f32` is the ``6 x 16`` tile of
:mod:`mnnjit.backends.cpu.gemm.tile` (12 ``<8 x float>`` accumulators, one broadcast of 6 values
of A and two vector loads of B per k-step, the residual added in the registers) with one more
``llvm.prefetch`` per k-step: of the B row ``pfd`` bytes ahead, i.e. (with ``pfd`` the distance to
the next block) the same row of the next column block, fetched while this block is computed.
``pfd`` 0 prefetches the row being read (a line already in L1: a no-op's cost).

A is read where it lies, element ``(r, k)`` of the 6 rows at ``a + r*sr + k*sk``: a packed panel
(``sr`` 1, ``sk`` 6), or the rows of a row-major ``[m, K]`` activation (``sr`` K, ``sk`` 1: no
copy per call; a copy of A cost as much as the product when B has 16-32 columns, attention's
``P @ V``) or a ``[K, m]`` one (``sr`` 1, ``sk`` m). The broadcast loads of six rows cost what
those of one panel do.

Signature (int64 addresses, strides in elements): ``(a, sr, sk, b, ldb, c, ldc, k, res, ldr,
pfd, bias, act)``; ``c = act(A @ B (+ res) (+ bias))``, B rows at ``b + k*ldb``, C and the
residual rows at ``ldc`` / ``ldr``; ``res`` 0: none; ``bias`` 0 or 16 values, one per column (a
linear layer's, added on the last pass over K: no pass over C afterwards); ``act`` 0 none, 1
relu, 2 relu6 (NaN stays NaN, as the reference's ``maximum`` / ``clip``).

This module imports numba: import it lazily.
"""
from __future__ import annotations

from llvmlite import ir
from mnnjit.backends.cpu.runtime import numba_setup  # noqa: F401  (first: OpenMP policy, cross-process compile lock)
from numba import types
from numba.extending import intrinsic

from mnnjit.backends.cpu.gemm.tile import (MR, _I32, _I64, _V8, _const, _load_vec, _prefetch_fn,
                                           _splat, _store_vec, _vec_intrinsic)

__all__ = ["tile_pf_f32"]

_F32 = ir.FloatType()
_SIG = types.void(*([types.int64] * 13))


def _prefetch(builder: ir.IRBuilder, ptr: ir.Value) -> None:
    builder.call(_prefetch_fn(builder.module),
                 [builder.bitcast(ptr, ir.IntType(8).as_pointer()), ir.Constant(_I32, 0), ir.Constant(_I32, 3),
                  ir.Constant(_I32, 1)])


def _typer(typingctx, a, sr, sk, b, ldb, c, ldc, k, res, ldr, pfd, bias, act):
    def codegen(context, builder, signature, args):
        a_i, sr_v, sk_v, b_i, ldb_v, c_i, ldc_v, k_v, res_i, ldr_v, pfd_v, bias_i, act_v = args
        a_p = builder.inttoptr(a_i, _F32.as_pointer())
        a_rows = [builder.gep(a_p, [builder.mul(_const(r), sr_v)]) for r in range(MR)]
        b_p = builder.inttoptr(b_i, _F32.as_pointer())
        c_p = builder.inttoptr(c_i, _F32.as_pointer())
        # the prefetch stream: B's rows moved by pfd bytes
        pf_p = builder.inttoptr(builder.add(b_i, pfd_v), _F32.as_pointer())
        fma = _vec_intrinsic(builder.module, "fma", 3)
        fn = builder.function
        entry = builder.basic_block
        loop = fn.append_basic_block("pf.loop")
        done = fn.append_basic_block("pf.done")
        zero = ir.Constant(_V8, [0.0] * 8)
        builder.cbranch(builder.icmp_signed(">", k_v, _const(0)), loop, done)

        builder.position_at_end(loop)
        kk = builder.phi(_I64)
        accs = [builder.phi(_V8) for _ in range(2 * MR)]
        off = builder.mul(kk, ldb_v)
        brow = builder.gep(b_p, [off])
        bv = [_load_vec(builder, builder.gep(brow, [_const(8 * h)]), False) for h in range(2)]
        _prefetch(builder, builder.gep(pf_p, [off]))
        ka = builder.mul(kk, sk_v)
        new = []
        for r in range(MR):
            s = _splat(builder, builder.load(builder.gep(a_rows[r], [ka])))
            for h in range(2):
                new.append(builder.call(fma, [s, bv[h], accs[2 * r + h]]))
        knext = builder.add(kk, _const(1))
        kk.add_incoming(_const(0), entry)
        kk.add_incoming(knext, loop)
        for phi, v in zip(accs, new):
            phi.add_incoming(zero, entry)
            phi.add_incoming(v, loop)
        builder.cbranch(builder.icmp_signed("<", knext, k_v), loop, done)

        builder.position_at_end(done)
        sums = []
        for v in new:
            phi = builder.phi(_V8)
            phi.add_incoming(zero, entry)
            phi.add_incoming(v, loop)
            sums.append(phi)
        with_res = fn.append_basic_block("pf.res")
        store = fn.append_basic_block("pf.store")
        plain = builder.basic_block
        builder.cbranch(builder.icmp_signed("!=", res_i, _const(0)), with_res, store)
        builder.position_at_end(with_res)
        r_p = builder.inttoptr(res_i, _F32.as_pointer())
        added = []
        for r in range(MR):
            rrow = builder.gep(r_p, [builder.mul(_const(r), ldr_v)])
            for h in range(2):
                added.append(builder.fadd(sums[2 * r + h], _load_vec(builder, builder.gep(rrow, [_const(8 * h)]), False)))
        builder.branch(store)
        builder.position_at_end(store)
        outs = []
        for v, w in zip(sums, added):  # (the phis first: LLVM wants them at the block's top)
            phi = builder.phi(_V8)
            phi.add_incoming(v, plain)
            phi.add_incoming(w, with_res)
            outs.append(phi)
        # a bias per column (16 values at ``bias``, when not 0), then relu / relu6 as the
        # reference computes them: ``v < 0 ? 0 : v`` keeps NaN (maxnum would not)
        with_bias = fn.append_basic_block("pf.bias")
        store2 = fn.append_basic_block("pf.act")
        unbiased = builder.basic_block
        builder.cbranch(builder.icmp_signed("!=", bias_i, _const(0)), with_bias, store2)
        builder.position_at_end(with_bias)
        bias_p = builder.inttoptr(bias_i, _F32.as_pointer())
        bvec = [_load_vec(builder, builder.gep(bias_p, [_const(8 * h)]), False) for h in range(2)]
        biased = [builder.fadd(v, bvec[i % 2]) for i, v in enumerate(outs)]
        builder.branch(store2)
        builder.position_at_end(store2)
        vals = []
        for v, w in zip(outs, biased):
            phi = builder.phi(_V8)
            phi.add_incoming(v, unbiased)
            phi.add_incoming(w, with_bias)
            vals.append(phi)
        zero_v = ir.Constant(_V8, [0.0] * 8)
        six = ir.Constant(_V8, [6.0] * 8)
        use_relu = builder.icmp_signed(">=", act_v, _const(1))
        use_six = builder.icmp_signed("==", act_v, _const(2))
        for i, v in enumerate(vals):
            r = builder.select(builder.fcmp_ordered("<", v, zero_v), zero_v, v)
            v = builder.select(use_relu, r, v)
            r6 = builder.select(builder.fcmp_ordered(">", v, six), six, v)
            vals[i] = builder.select(use_six, r6, v)
        outs = vals
        for r in range(MR):
            crow = builder.gep(c_p, [builder.mul(_const(r), ldc_v)])
            for h in range(2):
                _store_vec(builder, outs[2 * r + h], builder.gep(crow, [_const(8 * h)]), False)
        return context.get_dummy_value()
    return _SIG, codegen


_typer.__name__ = _typer.__qualname__ = "tile_pf_f32"
#: the 6x16 float32 tile prefetching B ``pfd`` bytes ahead of each row it reads
tile_pf_f32 = intrinsic(_typer)
