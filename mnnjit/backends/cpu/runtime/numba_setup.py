"""Numba as mnnjit's kernels use it. Every kernel module imports this before numba:

* the OpenMP waiting policy is set before libgomp starts (:mod:`.omp_env`);
* mnnjit's kernels cache under the one cache directory, checked and healing (:mod:`.cache`); this
  must precede the kernel modules' decorators, which choose where a function caches;
* processes sharing a kernel cache compile each kernel once, one at a time (:mod:`.compile_lock`);
* cheaper compiles of large kernels: faster IR analyses, no machine code for link-only libraries
  (:mod:`.numba_speedups`).

Importing this module imports numba: import it lazily (never from ``import mnnjit``).
"""
from __future__ import annotations

from mnnjit.backends.cpu.runtime.omp_env import configure_openmp_waiting

configure_openmp_waiting()

from mnnjit.backends.cpu.runtime import cache as _cache  # noqa: E402
from mnnjit.backends.cpu.runtime.compile_lock import install as _install_compile_lock  # noqa: E402

from mnnjit.backends.cpu.runtime.numba_speedups import install as _install_speedups  # noqa: E402

_cache.install()
_install_compile_lock()
_install_speedups()
