"""A register-blocked GEMM micro-kernel written in LLVM IR (llvmlite), callable from Numba.

One call computes a ``6 x 16`` (or ``6 x 8``: the ``tile8_*`` variants; the first 4 or 2 rows of a
panel: ``tile16r4_*``, ``tile16r2_*``) block of ``C = act(A @ B + bias)``:

* ``A`` - a packed float32 weight panel: ``K`` groups of 6 consecutive values (``A[k*6 + r]`` is
  row ``r``, column ``k``);
* ``B`` - ``K`` rows of 16 values, row ``k`` at ``b + k*ldb`` elements (an NCHW activation read in
  place: a 1x1 convolution's input needs no packing), float32 or float16 storage;
* ``C`` - 6 rows of 16 values, row ``r`` at ``c + r*ldc`` elements, float32 or float16 storage;
* ``bias`` - 6 float32 values; ``act`` 0 none, 1 relu, 2 relu6 (applied on the registers before
  the single store: the epilogue costs no extra pass over memory);
* ``res`` - 0, or a residual block laid out like ``C`` with row stride ``ldr``: the tiles then store
  ``act(A @ B + bias + res)`` (a residual connection's add in the registers; the one-column
  kernels take no residual).

The 12 accumulators are ``<8 x float>`` values carried by phi nodes through the ``K`` loop, each
step one broadcast of 6 weights, two vector loads of B, 12 ``llvm.fma`` calls and one
``llvm.prefetch`` of the weights :data:`PREFETCH_BYTES` ahead (the ``tile_pfb_*`` variants also
prefetch the B row's next 16 columns: the next column block of an input coming from L3); LLVM keeps
them in the 16 ymm registers of AVX2 (Zen 3 here: 2 FMA units, measured ~85-90 % of peak).
float16 storage loads ``<8 x half>`` and widens with ``fpext`` (F16C ``vcvtph2ps``), stores
with ``fptrunc``. Pointers and strides are int64 (byte addresses ``a.ctypes.data``; strides in
elements). The caller guarantees that every addressed element exists (partial blocks go through
a scratch tile).

This module imports numba: import it lazily.
"""
from __future__ import annotations

from llvmlite import ir
from mnnjit.backends.cpu.runtime import numba_setup  # noqa: F401  (first: OpenMP policy, cross-process compile lock)
from numba import types
from numba.extending import intrinsic

__all__ = ["MR", "NR", "tile_f32", "tile_f16", "tile_pfb_f32", "tile_pfb_f16", "tile8_f32", "tile8_f16", "tile16r4_f32",
           "tile16r4_f16", "tile16r2_f32", "tile16r2_f16", "tile_hf", "tile_fh", "col_f32",
           "col_f16"]

#: rows (output channels) and columns (pixels) of one micro-kernel block
MR, NR = 6, 16

_F32 = ir.FloatType()
_F16 = ir.HalfType()
_I64 = ir.IntType(64)
_I32 = ir.IntType(32)
_V8 = ir.VectorType(_F32, 8)
_V8H = ir.VectorType(_F16, 8)


def _const(v: int) -> ir.Constant:
    return ir.Constant(_I64, v)


def _vec_intrinsic(module: ir.Module, name: str, nargs: int) -> ir.Function:
    """Declare (once per module) an LLVM vector intrinsic on ``<8 x float>``."""
    full = f"llvm.{name}.v8f32"
    fn = module.globals.get(full)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(_V8, [_V8] * nargs), name=full)
    return fn


#: software prefetch distance along the weight panel A (bytes ahead of the current k-step).
#: The panels stream from L3/DRAM when the weights are large (Winograd 512 -> 512 on 7x7: 16 MB
#: per convolution, each weight used by one 16-column block): prefetching ~170 k-steps ahead
#: measured 2.2-2.4 -> 1.75-1.8 ms there, neutral on cache-resident weights.
PREFETCH_BYTES = 4096


def _prefetch_fn(module: ir.Module) -> ir.Function:
    """Declare (once per module) ``llvm.prefetch``."""
    fn = module.globals.get("llvm.prefetch.p0i8")
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ir.IntType(8).as_pointer(), _I32, _I32, _I32]),
                         name="llvm.prefetch.p0i8")
    return fn


def _splat(builder: ir.IRBuilder, s: ir.Value) -> ir.Value:
    one = builder.insert_element(ir.Constant(_V8, ir.Undefined), s, ir.Constant(_I32, 0))
    return builder.shuffle_vector(one, ir.Constant(_V8, ir.Undefined),
                                  ir.Constant(ir.VectorType(_I32, 8), [0] * 8))


def _load_vec(builder: ir.IRBuilder, ptr: ir.Value, half: bool) -> ir.Value:
    if half:
        v = builder.load(builder.bitcast(ptr, _V8H.as_pointer()), align=2)
        return builder.fpext(v, _V8)
    return builder.load(builder.bitcast(ptr, _V8.as_pointer()), align=4)


def _store_vec(builder: ir.IRBuilder, v: ir.Value, ptr: ir.Value, half: bool) -> None:
    if half:
        builder.store(builder.fptrunc(v, _V8H), builder.bitcast(ptr, _V8H.as_pointer()), align=2)
    else:
        builder.store(v, builder.bitcast(ptr, _V8.as_pointer()), align=4)


#: the one-column kernels' signature: (a, b, ldb, c, ldc, k, bias, act), addresses and ints as int64
_SIG = types.void(*([types.int64] * 8))
#: the tiles': (a, b, ldb, c, ldc, k, bias, act, res, ldr)
_SIG_TILE = types.void(*([types.int64] * 10))


def _arguments(builder: ir.IRBuilder, args, elem_bc: ir.Type, elem_c: ir.Type = None) -> tuple:
    """A kernel call's arguments with the addresses as typed pointers (A and bias float32, B the
    storage type ``elem_bc``, C ``elem_c``, by default B's)."""
    a_i, b_i, ldb_v, c_i, ldc_v, k_v, bias_i, act_v = args
    elem_c = elem_bc if elem_c is None else elem_c
    return (builder.inttoptr(a_i, _F32.as_pointer()), builder.inttoptr(b_i, elem_bc.as_pointer()),
            ldb_v, builder.inttoptr(c_i, elem_c.as_pointer()), ldc_v, k_v,
            builder.inttoptr(bias_i, _F32.as_pointer()), act_v)


def _make_tile(bc_half: bool, nr: int = 16, mr: int = MR, pf_b: bool = False,
               c_half: bool = None):
    """The ``mr x nr`` kernel (``mr <= MR`` rows of a panel packed for MR); with ``pf_b`` each
    k-step also prefetches the B row's next ``nr`` columns (the next column block's line).
    ``bc_half``: B (and C, unless ``c_half`` says otherwise) float16 storage; C and the residual
    share one storage type (a fused layer reading float16 activations into a float32 scratch, or
    a float32 scratch into float16 activations)."""
    nv = nr // 8  # vectors per row
    c_half = bc_half if c_half is None else bool(c_half)
    elem_bc = _F16 if bc_half else _F32
    elem_c = _F16 if c_half else _F32

    def typer(typingctx, a, b, ldb, c, ldc, k, bias, act, res, ldr):
        sig = _SIG_TILE

        def codegen(context, builder, signature, args):
            a_p, b_p, ldb_v, c_p, ldc_v, k_v, bias_p, act_v = _arguments(builder, args[:8], elem_bc,
                                                                         elem_c)
            res_i, ldr_v = args[8], args[9]
            fma = _vec_intrinsic(builder.module, "fma", 3)
            vmax = _vec_intrinsic(builder.module, "maxnum", 2)
            vmin = _vec_intrinsic(builder.module, "minnum", 2)
            fn = builder.function
            entry = builder.basic_block
            loop = fn.append_basic_block("mk.loop")
            done = fn.append_basic_block("mk.done")
            zero = ir.Constant(_V8, [0.0] * 8)
            builder.cbranch(builder.icmp_signed(">", k_v, _const(0)), loop, done)

            builder.position_at_end(loop)
            kk = builder.phi(_I64)
            accs = [builder.phi(_V8) for _ in range(nv * mr)]
            brow = builder.gep(b_p, [builder.mul(kk, ldb_v)])
            bv = [_load_vec(builder, builder.gep(brow, [_const(8 * h)]), bc_half) for h in range(nv)]
            if pf_b:
                nxt = builder.bitcast(builder.gep(brow, [_const(nr)]), ir.IntType(8).as_pointer())
                builder.call(_prefetch_fn(builder.module),
                             [nxt, ir.Constant(_I32, 0), ir.Constant(_I32, 3), ir.Constant(_I32, 1)])
            arow = builder.gep(a_p, [builder.mul(kk, _const(MR))])
            # prefetch (read, high locality, data cache) a weight line PREFETCH_BYTES ahead;
            # addresses past the array are harmless (prefetches never fault)
            ahead = builder.bitcast(builder.gep(arow, [_const(PREFETCH_BYTES // 4)]),
                                    ir.IntType(8).as_pointer())
            builder.call(_prefetch_fn(builder.module),
                         [ahead, ir.Constant(_I32, 0), ir.Constant(_I32, 3), ir.Constant(_I32, 1)])
            new = []
            for r in range(mr):
                av = builder.load(builder.gep(arow, [_const(r)]))
                s = _splat(builder, av)
                for h in range(nv):
                    new.append(builder.call(fma, [s, bv[h], accs[nv * r + h]]))
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
            for r in range(mr):
                bias_v = _splat(builder, builder.load(builder.gep(bias_p, [_const(r)])))
                for h in range(nv):
                    sums[nv * r + h] = builder.fadd(sums[nv * r + h], bias_v)
            # the residual block, added in the registers when ``res`` is not 0
            with_res = fn.append_basic_block("mk.res")
            epilogue = fn.append_basic_block("mk.epilogue")
            biased = builder.basic_block
            builder.cbranch(builder.icmp_signed("!=", res_i, _const(0)), with_res, epilogue)
            builder.position_at_end(with_res)
            r_p = builder.inttoptr(res_i, elem_c.as_pointer())
            added = []
            for r in range(mr):
                rrow = builder.gep(r_p, [builder.mul(_const(r), ldr_v)])
                for h in range(nv):
                    rv = _load_vec(builder, builder.gep(rrow, [_const(8 * h)]), c_half)
                    added.append(builder.fadd(sums[nv * r + h], rv))
            builder.branch(epilogue)
            builder.position_at_end(epilogue)
            outs = []
            for v, w in zip(sums, added):
                phi = builder.phi(_V8)
                phi.add_incoming(v, biased)
                phi.add_incoming(w, with_res)
                outs.append(phi)
            use_relu = builder.icmp_signed(">=", act_v, _const(1))
            use_six = builder.icmp_signed("==", act_v, _const(2))
            six = ir.Constant(_V8, [6.0] * 8)
            for r in range(mr):
                crow = builder.gep(c_p, [builder.mul(_const(r), ldc_v)])
                for h in range(nv):
                    v = outs[nv * r + h]
                    v = builder.select(use_relu, builder.call(vmax, [v, zero]), v)
                    v = builder.select(use_six, builder.call(vmin, [v, six]), v)
                    _store_vec(builder, v, builder.gep(crow, [_const(8 * h)]), c_half)
            return context.get_dummy_value()

        return sig, codegen

    mixed = "" if c_half == bc_half else ("_to_h" if c_half else "_to_f")
    typer.__name__ = typer.__qualname__ = \
        f"tile_{'h' if bc_half else 'f'}{nr}_{mr}{'_pfb' if pf_b else ''}{mixed}"
    return typer


#: float32 weights, float32 activations
tile_f32 = intrinsic(_make_tile(False))
#: float32 weights, float16 activations (B and C)
tile_f16 = intrinsic(_make_tile(True))
#: the two 16-column tiles prefetching the next column block of B
tile_pfb_f32 = intrinsic(_make_tile(False, pf_b=True))
tile_pfb_f16 = intrinsic(_make_tile(True, pf_b=True))
#: the same two, 8 columns wide (a row's last columns)
tile8_f32 = intrinsic(_make_tile(False, 8))
tile8_f16 = intrinsic(_make_tile(True, 8))
#: 16 columns of the first 4 or 2 rows of a panel (a convolution's last, partial panel: a
#: 6-row kernel there computes 2-4 rows of zeros; 16 or 32 output channels waste 11-12 %)
tile16r4_f32 = intrinsic(_make_tile(False, 16, 4))
tile16r4_f16 = intrinsic(_make_tile(True, 16, 4))
tile16r2_f32 = intrinsic(_make_tile(False, 16, 2))
tile16r2_f16 = intrinsic(_make_tile(True, 16, 2))
#: mixed storage, 16 columns: float16 B into a float32 C (``tile_hf``: a fused kernel's float32
#: scratch computed from float16 activations) and float32 B into a float16 C and residual
#: (``tile_fh``: float32 scratch into float16 activations)
tile_hf = intrinsic(_make_tile(True, c_half=False))
tile_fh = intrinsic(_make_tile(False, c_half=True))


_V4 = ir.VectorType(_F32, 4)
_V2 = ir.VectorType(_F32, 2)
_UNROLL = 4   # independent accumulator pairs of the column kernel (hides the FMA latency)


def _fma_decl(module: ir.Module, vt: ir.VectorType) -> ir.Function:
    name = f"llvm.fma.v{vt.count}f32"
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(vt, [vt] * 3), name=name)
    return fn


def _splat_n(builder: ir.IRBuilder, s: ir.Value, vt: ir.VectorType) -> ir.Value:
    one = builder.insert_element(ir.Constant(vt, ir.Undefined), s, ir.Constant(_I32, 0))
    return builder.shuffle_vector(one, ir.Constant(vt, ir.Undefined),
                                  ir.Constant(ir.VectorType(_I32, vt.count), [0] * vt.count))


def _scalar_intrinsic(module: ir.Module, name: str) -> ir.Function:
    full = f"llvm.{name}.f32"
    fn = module.globals.get(full)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(_F32, [_F32, _F32]), name=full)
    return fn


def _make_col(bc_half: bool):
    """One column of 6 rows: ``c[r*ldc] = act(bias[r] + sum_k A[k*6 + r] * b[k*ldb])``. Each k
    step is a ``<4 x float>`` and a ``<2 x float>`` FMA on the panel's 6 weights (a 6x8 tile
    spends 6 full FMAs per k however few of its 8 columns are real); :data:`_UNROLL` accumulator
    pairs keep the FMA units busy, a remainder loop takes the last ``K % _UNROLL`` steps."""
    elem_bc = _F16 if bc_half else _F32

    def typer(typingctx, a, b, ldb, c, ldc, k, bias, act):
        sig = _SIG

        def codegen(context, builder, signature, args):
            a_p, b_p, ldb_v, c_p, ldc_v, k_v, bias_p, act_v = _arguments(builder, args, elem_bc)
            f4, f2 = _fma_decl(builder.module, _V4), _fma_decl(builder.module, _V2)
            z4, z2 = ir.Constant(_V4, [0.0] * 4), ir.Constant(_V2, [0.0] * 2)
            fn = builder.function

            def step(kk, acc4, acc2):
                bval = builder.load(builder.gep(b_p, [builder.mul(kk, ldb_v)]))
                if bc_half:
                    bval = builder.fpext(bval, _F32)
                arow = builder.gep(a_p, [builder.mul(kk, _const(MR))])
                a4 = builder.load(builder.bitcast(arow, _V4.as_pointer()), align=4)
                a2 = builder.load(builder.bitcast(builder.gep(arow, [_const(4)]), _V2.as_pointer()), align=4)
                return (builder.call(f4, [a4, _splat_n(builder, bval, _V4), acc4]),
                        builder.call(f2, [a2, _splat_n(builder, bval, _V2), acc2]))

            # main loop: _UNROLL steps per iteration, each into its own accumulator pair
            entry = builder.basic_block
            main = fn.append_basic_block("col.main")
            mid = fn.append_basic_block("col.mid")
            kmain = builder.mul(builder.sdiv(k_v, _const(_UNROLL)), _const(_UNROLL))
            builder.cbranch(builder.icmp_signed(">", kmain, _const(0)), main, mid)
            builder.position_at_end(main)
            kk = builder.phi(_I64)
            p4 = [builder.phi(_V4) for _ in range(_UNROLL)]
            p2 = [builder.phi(_V2) for _ in range(_UNROLL)]
            n4, n2 = [], []
            for u in range(_UNROLL):
                x4, x2 = step(builder.add(kk, _const(u)), p4[u], p2[u])
                n4.append(x4)
                n2.append(x2)
            knext = builder.add(kk, _const(_UNROLL))
            kk.add_incoming(_const(0), entry)
            kk.add_incoming(knext, main)
            for u in range(_UNROLL):
                p4[u].add_incoming(z4, entry)
                p4[u].add_incoming(n4[u], main)
                p2[u].add_incoming(z2, entry)
                p2[u].add_incoming(n2[u], main)
            builder.cbranch(builder.icmp_signed("<", knext, kmain), main, mid)
            # sum the pairs, then the remainder loop
            builder.position_at_end(mid)
            q4s, q2s = [], []
            for u in range(_UNROLL):        # phis first: LLVM wants them at the block's top
                q4 = builder.phi(_V4)
                q4.add_incoming(z4, entry)
                q4.add_incoming(n4[u], main)
                q2 = builder.phi(_V2)
                q2.add_incoming(z2, entry)
                q2.add_incoming(n2[u], main)
                q4s.append(q4)
                q2s.append(q2)
            s4, s2 = q4s[0], q2s[0]
            for u in range(1, _UNROLL):
                s4, s2 = builder.fadd(s4, q4s[u]), builder.fadd(s2, q2s[u])
            rest = fn.append_basic_block("col.rest")
            done = fn.append_basic_block("col.done")
            builder.cbranch(builder.icmp_signed("<", kmain, k_v), rest, done)
            builder.position_at_end(rest)
            kr = builder.phi(_I64)
            r4 = builder.phi(_V4)
            r2 = builder.phi(_V2)
            x4, x2 = step(kr, r4, r2)
            krn = builder.add(kr, _const(1))
            kr.add_incoming(kmain, mid)
            kr.add_incoming(krn, rest)
            r4.add_incoming(s4, mid)
            r4.add_incoming(x4, rest)
            r2.add_incoming(s2, mid)
            r2.add_incoming(x2, rest)
            builder.cbranch(builder.icmp_signed("<", krn, k_v), rest, done)
            builder.position_at_end(done)
            t4 = builder.phi(_V4)
            t4.add_incoming(s4, mid)
            t4.add_incoming(x4, rest)
            t2 = builder.phi(_V2)
            t2.add_incoming(s2, mid)
            t2.add_incoming(x2, rest)
            use_relu = builder.icmp_signed(">=", act_v, _const(1))
            use_six = builder.icmp_signed("==", act_v, _const(2))
            fz, f6 = ir.Constant(_F32, 0.0), ir.Constant(_F32, 6.0)
            smax, smin = _scalar_intrinsic(builder.module, "maxnum"), _scalar_intrinsic(builder.module, "minnum")
            for r in range(MR):
                v = builder.extract_element(t4 if r < 4 else t2, ir.Constant(_I32, r if r < 4 else r - 4))
                v = builder.fadd(v, builder.load(builder.gep(bias_p, [_const(r)])))
                # maxnum / minnum as in the tiles (a NaN becomes 0 / 6 there too)
                v = builder.select(use_relu, builder.call(smax, [v, fz]), v)
                v = builder.select(use_six, builder.call(smin, [v, f6]), v)
                if bc_half:
                    v = builder.fptrunc(v, _F16)
                builder.store(v, builder.gep(c_p, [builder.mul(_const(r), ldc_v)]))
            return context.get_dummy_value()

        return sig, codegen

    typer.__name__ = typer.__qualname__ = f"col_{'h' if bc_half else 'f'}"
    return typer


#: one column of a 6-row block (a row's last one or two columns), float32 / float16 storage
col_f32 = intrinsic(_make_col(False))
col_f16 = intrinsic(_make_col(True))
