"""mnnjit.testing: test helpers for code that uses mnnjit, as ``numpy.testing`` and
``hypothesis.extra.numpy`` serve numpy users.

* assertions (this package): :func:`assert_allclose`, :func:`assert_array_equal` (they read Vars in
  their logical layout) and :func:`assert_matches_mnn` (the same call on real MNN, when installed);
* :mod:`mnnjit.testing.strategies`: Hypothesis strategies for Vars, images, shapes and small .mnn
  models (imports hypothesis, an optional dependency: ``import mnnjit.testing`` does not);
* :mod:`mnnjit.testing.plugin`: a pytest plugin (registered as the ``mnnjit`` entry point) with the
  fixtures ``mnnjit_compiled``, ``mnnjit_kernel_cache`` and ``mnnjit_backend``.
"""
from __future__ import annotations

from .assertions import assert_allclose, assert_array_equal, assert_matches_mnn, to_numpy

__all__ = ["assert_allclose", "assert_array_equal", "assert_matches_mnn", "to_numpy"]
