"""OpenBLAS ``cblas_sgemm`` callable from inside Numba kernels (numpy's bundled OpenBLAS).

Calling BLAS from Numba lets one parallel kernel pack a tile, multiply it and run the epilogue
per thread, instead of a Python loop of small ``np.matmul`` calls (each wakes OpenBLAS's own
threads: measured 10-30x slower here for tiles of ~50k elements, see docs/DECISIONS.md).

The library is loaded into LLVM's symbol table and the function declared as an external symbol,
so kernels that call it can still be cached to disk (``cache=True``; a ctypes pointer could not).
Pointer arguments are declared as 64-bit integers (the same x86-64 ABI), kernels pass
``a.ctypes.data + byte_offset``. :class:`single_threaded_blas` pins OpenBLAS to one thread while
the kernel's own threads call it.
"""
from __future__ import annotations

import ctypes
import glob
import os
from typing import Tuple

import numpy as np
from llvmlite import binding as llb
from mnnjit.backends.cpu.runtime import numba_setup  # noqa: F401  (first: OpenMP policy, cross-process compile lock)
from numba.core import types

from mnnjit.threads import blas_threads

__all__ = ["sgemm", "single_threaded_blas", "SGEMM_SYMBOL"]


def _find() -> Tuple[str, str, str, str, bool]:
    libdir = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
    cands = sorted(glob.glob(os.path.join(libdir, "libscipy_openblas*.so*")))
    for path in cands:
        lib = ctypes.CDLL(path)
        if hasattr(lib, "scipy_cblas_sgemm64_"):
            return (path, "scipy_cblas_sgemm64_", "scipy_openblas_set_num_threads64_",
                    "scipy_openblas_get_num_threads64_", True)
        if hasattr(lib, "cblas_sgemm"):
            return path, "cblas_sgemm", "openblas_set_num_threads", "openblas_get_num_threads", False
    raise ImportError(f"no OpenBLAS with cblas_sgemm in {libdir} (found {cands})")


_PATH, SGEMM_SYMBOL, _SET_NAME, _GET_NAME, _INT64 = _find()
llb.load_library_permanently(_PATH)

_blasint = types.int64 if _INT64 else types.int32
#: ``sgemm(101 row-major, 111 no-trans, 111, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)``
sgemm = types.ExternalFunction(SGEMM_SYMBOL, types.void(
    types.int32, types.int32, types.int32, _blasint, _blasint, _blasint, types.float32,
    types.int64, _blasint, types.int64, _blasint, types.float32, types.int64, _blasint))


#: OpenBLAS on one thread while Numba's workers run a plan's kernels (the one pin, ``mnnjit.threads``)
single_threaded_blas = blas_threads
