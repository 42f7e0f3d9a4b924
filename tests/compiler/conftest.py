"""Compiler tests: a private kernel cache and the compiled path forced on small arrays."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="module", autouse=True)
def compiled_path(tmp_path_factory):
    """Use a temporary MNNJIT_CACHE_DIR and compile every group regardless of size.

    Module scope: a session-scoped autouse fixture here would stay active for every test collected
    after this directory (the whole rest of the suite would then run compiled, in a temp cache).
    """
    import os

    from mnnjit import compiler
    from mnnjit.backends.cpu import jit

    cache = tmp_path_factory.mktemp("mnnjit-cache")
    old_env = os.environ.get("MNNJIT_CACHE_DIR")
    os.environ["MNNJIT_CACHE_DIR"] = str(cache)
    jit.reset()
    prev = compiler.set_threshold(0)
    yield cache
    compiler.set_threshold(None if prev >= 1 << 40 else prev)
    jit.reset()
    if old_env is None:
        os.environ.pop("MNNJIT_CACHE_DIR", None)
    else:
        os.environ["MNNJIT_CACHE_DIR"] = old_env
