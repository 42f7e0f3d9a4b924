"""The whole-plan kernel's products, on Numba's worker threads from a kernel still cached on disk.

A plan kernel (:mod:`.whole_plan`) is one cached Numba function per model. A ``parallel=True``
callee inside it made the kernel uncacheable (its parallel launch is linked by address) and its
compile slow; and every kernel linking the GEMM's code compiled that code again (Numba links a
callee's IR into each caller: seconds of LLVM per kernel). So the products are compiled once, here,
as C functions registered with LLVM's symbol table when this module is imported, and a kernel
calls them by name (resolved when the kernel is linked, compiled or loaded from the disk cache:
its cache entry holds neither the GEMM's code nor an address):

* :data:`SYMBOL` - :func:`.plan_gemm.gemm_cols` (the serial GEMM, any column range; A read in
  place, a partial last panel on each block of B with the whole ones, constant B's next block
  prefetched, bias and activation on the last pass's registers)
  on arrays given by address and size;
* :data:`PAR_SYMBOL` - a ``parallel=True`` C function splitting a product over the calling
  thread's Numba team: a 2-D product by blocks of :data:`~.plan_gemm.NR` columns (each thread packs
  the same rows of A and runs a column range of B: a transformer's projections have few rows and
  many columns), a batched one (attention) by batches; each part calls :data:`SYMBOL`;
* :data:`SOFTMAX_SYMBOL` - :func:`.plan_rows.softmax_rows` with the rows split over the team
  (attention's softmax: heads x queries rows);
* :func:`gemm`, :func:`gemm_batched` and :func:`softmax_rows`, inlined into the generated kernels, choose at run time:
  on more than one thread (Numba's count for the calling thread, which the model sets before each
  forward of a ``threaded`` plan) and at least :data:`~.plan_gemm_steps.PAR_MACS` multiply-adds,
  the parallel function; else the serial one on the calling thread.

The workers wait as every Numba kernel's do (``mnnjit.threads.configure_openmp_waiting``): they
spin a short while between a forward's products, then sleep.

This module imports numba: import it lazily.
"""
from __future__ import annotations

from mnnjit.backends.cpu.runtime import numba_setup  # noqa: F401  (first: OpenMP policy, cross-process compile lock)
import numba
import numpy as np
from llvmlite import binding as llvm
from llvmlite import ir
from numba import carray, cfunc, njit, prange, types
from numba.extending import intrinsic

from mnnjit.backends.cpu.codegen.plan_gemm import MR, NR, ROW_BLOCK, gemm_cols
from mnnjit.backends.cpu.codegen.plan_gemm_steps import PAR_MACS, SOFTMAX_WORK
from mnnjit.backends.cpu.codegen.plan_rows import softmax_rows as softmax_serial

__all__ = ["gemm", "gemm_batched", "softmax_rows", "PAR_MACS", "SYMBOL", "PAR_SYMBOL", "SOFTMAX_SYMBOL"]


#: The parallel product's symbol (a version suffix: a kernel cached against an older signature
#: must fail to link, not call the new one with the wrong arguments).
SYMBOL = "mnnjit_plan_gemm_v1"
PAR_SYMBOL = "mnnjit_plan_gemm_par_v1"
SOFTMAX_SYMBOL = "mnnjit_plan_softmax_par_v1"


@intrinsic
def _f32_at(typingctx, addr):
    """A float32 pointer from an integer address (for :func:`numba.carray`)."""
    sig = types.CPointer(types.float32)(types.int64)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], ir.PointerType(ir.FloatType()))
    return sig, codegen


@njit(inline="always")
def _scratch_size(m, k):
    """:func:`.plan_gemm.scratch_size` in compiled code, rounded up to 64-byte lines (one thread's
    piece of a shared scratch)."""
    rows = min(m, ROW_BLOCK)
    return (((rows + MR - 1) // MR) * MR * k + k * NR + MR * NR + MR + 64 + 15) // 16 * 16


# the threading layer's functions (the team's size, the parallel launch) are symbols registered
# when its workers start: before the wrapper below or any kernel calling them is linked (a cached
# parallel function loaded first fails to link)
numba.get_num_threads()

_threads = types.ExternalFunction("get_num_threads", types.intp())  # (declared as Numba declares it)

_I64 = types.int64
#: (a, a size, ta, m, k, b, b size, bpk, ldn, jc, n, c, c size, bias, bias size, bmode, act,
#: scratch, scratch size): :func:`.plan_gemm.gemm_cols` on arrays at these addresses
_SIG = _I64(*([_I64] * 19))
#: (a, a size, ta, m, k, b, b size, bpk, n, c, c size, bias, bias size, bmode, act, batches, threads)
_PAR_SIG = _I64(*([_I64] * 17))


@cfunc(_SIG, cache=True, nopython=True, error_model="numpy", boundscheck=False)
def _gemm_c(ap, asz, ta, m, k, bp, bsz, bpk, ldn, jc, n, cp, csz, biasp, biasz, bmode, act, sp, ssz):
    gemm_cols(carray(_f32_at(ap), (asz,)), ta, m, k, carray(_f32_at(bp), (bsz,)), bpk != 0, ldn, jc, n,
              carray(_f32_at(cp), (csz,)), carray(_f32_at(biasp), (biasz,)), bmode, act, carray(_f32_at(sp), (ssz,)))
    return 0


llvm.add_symbol(SYMBOL, _gemm_c.address)
_gemm = types.ExternalFunction(SYMBOL, _SIG)


@cfunc(_PAR_SIG, cache=True, nopython=True, parallel=True, error_model="numpy", boundscheck=False)
def _gemm_par_c(ap, asz, ta, m, k, bp, bsz, bpk, n, cp, csz, biasp, biasz, bmode, act, nb, nt):
    """``nb`` 0: :func:`.plan_gemm.gemm` on arrays at these addresses (sizes in elements), split
    by column blocks over ``nt`` threads; else :func:`.plan_gemm.gemm_batched` of ``nb`` products,
    the batches split over the threads. Each task calls the serial GEMM through its symbol (the
    parallel function holds no copy of the GEMM's code: Numba's parallel passes over it took ~20 s
    when the cache was empty)."""
    nblk = n // NR
    # (never more parts than the team has threads: the team's own count, read here, bounds ``nt``)
    team = max(min(nt, _threads()), 1)
    parts = min(team, nb) if nb else min(team, max(nblk, 1))
    ss = _scratch_size(m, k)
    scratch = np.empty(parts * ss, np.float32)
    sp0 = scratch.ctypes.data
    for t in prange(parts):
        if nb:
            q0, q1, j0, j1 = t * nb // parts, (t + 1) * nb // parts, 0, n
            sa, sb, sc = m * k, k * n, m * n
        else:
            q0, q1, sa, sb, sc = 0, 1, asz, bsz, csz
            j0 = (t * nblk // parts) * NR
            j1 = ((t + 1) * nblk // parts) * NR if t < parts - 1 else n
        for q in range(q0, q1):
            _gemm(ap + 4 * q * sa, sa, ta, m, k, bp + 4 * q * sb, sb, bpk, n, j0, j1 - j0, cp + 4 * q * sc, sc,
                  biasp, biasz, bmode, act, sp0 + 4 * t * ss, ss)
    # a use of the scratch after the loop: Numba frees an array after its last use, and the loop
    # only has its address (freed before the tasks wrote into it: heap corruption, a crash under
    # glibc's malloc checks); this is 0
    return scratch.shape[0] - parts * ss


llvm.add_symbol(PAR_SYMBOL, _gemm_par_c.address)
_par = types.ExternalFunction(PAR_SYMBOL, _PAR_SIG)

#: (x, o, rows, n, threads)
_ROWS_SIG = _I64(*([_I64] * 5))


@cfunc(_ROWS_SIG, cache=True, nopython=True, parallel=True, error_model="numpy", boundscheck=False)
def _softmax_par_c(xp, op, rows, n, nt):
    """:func:`.plan_rows.softmax_rows` on arrays at these addresses, the rows split over ``nt``
    threads (at most the team's)."""
    x = carray(_f32_at(xp), (rows * n,))
    o = carray(_f32_at(op), (rows * n,))
    parts = min(max(min(nt, _threads()), 1), rows)
    for t in prange(parts):
        r0, r1 = t * rows // parts, (t + 1) * rows // parts
        softmax_serial(x[r0 * n:r1 * n], o[r0 * n:r1 * n], r1 - r0, n)
    return 0


llvm.add_symbol(SOFTMAX_SYMBOL, _softmax_par_c.address)
_softmax_par = types.ExternalFunction(SOFTMAX_SYMBOL, _ROWS_SIG)


@njit(inline="always")
def gemm(a, ta, m, k, b, bpk, n, c, bias, bmode, act, scratch):
    """:func:`.plan_gemm.gemm`, on the calling thread's Numba team when it has more than one
    thread and the product at least :data:`PAR_MACS` multiply-adds and two column blocks."""
    # (the size first: a small product reads no thread count)
    nt = _threads() if n >= 2 * NR and m * n * k >= PAR_MACS else 1
    if nt > 1:
        _par(a.ctypes.data, a.size, ta, m, k, b.ctypes.data, b.size, 1 if bpk else 0, n,
             c.ctypes.data, c.size, bias.ctypes.data, bias.size, bmode, act, 0, nt)
    else:
        _gemm(a.ctypes.data, a.size, ta, m, k, b.ctypes.data, b.size, 1 if bpk else 0, n, 0, n,
              c.ctypes.data, c.size, bias.ctypes.data, bias.size, bmode, act, scratch.ctypes.data, scratch.size)
    return 0


@njit(inline="always")
def gemm_batched(a, m, k, b, n, c, nb, scratch):
    """:func:`.plan_gemm.gemm_batched`, its batches over the calling thread's Numba team when it
    has more than one thread and the batches at least :data:`PAR_MACS` multiply-adds."""
    nt = _threads() if nb > 1 and nb * m * n * k >= PAR_MACS else 1
    ap, bp, cp, sp = a.ctypes.data, b.ctypes.data, c.ctypes.data, scratch.ctypes.data
    if nt > 1:
        _par(ap, a.size, 0, m, k, bp, b.size, 0, n, cp, c.size, sp, scratch.size, 0, 0, nb, nt)
    else:
        for q in range(nb):
            _gemm(ap + 4 * q * m * k, m * k, 0, m, k, bp + 4 * q * k * n, k * n, 0, n, 0, n, cp + 4 * q * m * n,
                  m * n, sp, scratch.size, 0, 0, sp, scratch.size)
    return 0


@njit(inline="always")
def softmax_rows(x, o, rows, n):
    """:func:`.plan_rows.softmax_rows`, its rows over the calling thread's Numba team when it has
    more than one thread and the rows at least :data:`PAR_MACS` / :data:`SOFTMAX_WORK` elements."""
    nt = _threads() if rows > 1 and rows * n * SOFTMAX_WORK >= PAR_MACS else 1
    if nt > 1:
        _softmax_par(x.ctypes.data, o.ctypes.data, rows, n, nt)
    else:
        softmax_serial(x, o, rows, n)
    return 0

