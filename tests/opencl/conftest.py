"""OpenCL backend tests: they run on whatever device pyopencl finds (PoCL's CPU device from PyPI in CI)
and skip where there is none. One backend instance (one context and queue) serves the session;
programs go to the session's kernel cache (``MNNJIT_CACHE_DIR``), so a warm cache builds nothing."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def ocl():
    """The OpenCL backend (skips the test when no OpenCL device is available)."""
    from mnnjit.backends import registry
    from mnnjit.backends.opencl.backend import OpenCLBackend
    why = OpenCLBackend.unavailable_reason()
    if why is not None:
        pytest.skip(f"no OpenCL device: {why}")
    return registry.get("opencl")
