"""Compiler tests: a private kernel cache and the compiled path forced on small arrays.

The settings are applied per test module and restored afterwards, so the rest of the suite runs with
the default threshold and cache; the private cache directory is shared by the compiler test modules.
"""
from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def compiler_cache_dir(tmp_path_factory):
    """One temporary MNNJIT_CACHE_DIR for all compiler tests."""
    return tmp_path_factory.mktemp("mnnjit-cache")


@pytest.fixture(scope="module", autouse=True)
def compiled_path(compiler_cache_dir):
    """Use the private cache and compile every group regardless of size (module scope, restored)."""
    from mnnjit import compiler
    from mnnjit.backends.cpu.runtime import jit

    old_env = os.environ.get("MNNJIT_CACHE_DIR")
    os.environ["MNNJIT_CACHE_DIR"] = str(compiler_cache_dir)
    jit.reset()
    compiler.set_threshold(0)
    yield compiler_cache_dir
    compiler.set_threshold(None)
    jit.reset()
    if old_env is None:
        os.environ.pop("MNNJIT_CACHE_DIR", None)
    else:
        os.environ["MNNJIT_CACHE_DIR"] = old_env
