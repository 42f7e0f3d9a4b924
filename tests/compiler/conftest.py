"""Compiler tests: a private kernel cache and the compiled path forced on small arrays."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session", autouse=True)
def compiled_path(tmp_path_factory):
    """Use a temporary MNNJIT_CACHE_DIR and compile every group regardless of size."""
    import os

    from mnnjit import compiler
    from mnnjit.backends.cpu import jit

    cache = tmp_path_factory.mktemp("mnnjit-cache")
    old_env = os.environ.get("MNNJIT_CACHE_DIR")
    os.environ["MNNJIT_CACHE_DIR"] = str(cache)
    jit.reset()
    prev = compiler.set_threshold(0)
    yield cache
    compiler.set_threshold(None)
    jit.reset()
    if old_env is None:
        os.environ.pop("MNNJIT_CACHE_DIR", None)
    else:
        os.environ["MNNJIT_CACHE_DIR"] = old_env
