"""The CPU's own approximate float32 reciprocal (the x86 ``rcpss`` instruction).

Intel IPP divides with ``rcpps`` (a table-based ~12-bit reciprocal whose exact bits differ between
CPU vendors) in its uint8 RGB->HLS conversion, the one cv2.cvtColor runs for COLOR_BGR2HLS_FULL on
x86. Reproducing it bit for bit needs the instruction itself: :func:`rcp_f32` executes it through a
Numba intrinsic. On other architectures (where cv2 has no IPP) it returns the correctly rounded
reciprocal.

This module imports numba: import it lazily (never from ``import mnnjit``). It sits with the ops because
it defines a reference semantics (the colour op's), not a kernel.
"""
from __future__ import annotations

import platform

import numpy as np  # noqa: E402
from llvmlite import ir  # noqa: E402
from numba import njit, types  # noqa: E402
from numba.core import cgutils  # noqa: E402
from numba.extending import intrinsic  # noqa: E402

#: True where ``rcp_f32`` runs the hardware instruction.
HAVE_RCPSS = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")


@intrinsic
def _rcpss(typingctx, x):
    """Numba intrinsic: ``rcpss`` of one float32 (LLVM's ``llvm.x86.sse.rcp.ss`` on lane 0)."""
    if x != types.float32:
        return None
    vec = ir.VectorType(ir.FloatType(), 4)

    def codegen(context, builder, signature, args):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vec, [vec]), "llvm.x86.sse.rcp.ss")
        v = builder.insert_element(ir.Constant(vec, None), args[0], ir.Constant(ir.IntType(32), 0))
        return builder.extract_element(builder.call(fn, [v]), ir.Constant(ir.IntType(32), 0))
    return types.float32(types.float32), codegen


@njit(cache=True)
def _rcp_array(x, out):
    for i in range(x.size):
        out[i] = _rcpss(x[i])


def rcp_f32(x) -> np.ndarray:
    """The x86 ``rcpss`` approximation of ``1 / x`` for each element of ``x`` (float32, same shape);
    ``np.float32(1) / x`` on CPUs without it."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    if not HAVE_RCPSS:
        with np.errstate(divide="ignore"):
            return np.float32(1) / x
    out = np.empty_like(x)
    _rcp_array(x.reshape(-1), out.reshape(-1))
    return out
