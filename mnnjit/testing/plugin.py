"""pytest plugin for code that uses mnnjit (installed with mnnjit as the ``pytest11`` entry point
``mnnjit``, so every pytest run in an environment with mnnjit has it).

Fixtures:

* ``mnnjit_compiled``: the compile threshold at 0 for the test (``mnnjit.compiler.set_threshold(0)``),
  so even small arrays run through compiled kernels, and kernels compile where they are first called
  (``MNNJIT_COMPILE=sync``: no reference-path runs while a kernel compiles in the background); the
  previous settings are restored after.
* ``mnnjit_kernel_cache``: a fresh, empty kernel cache directory for the test (``MNNJIT_CACHE_DIR``
  points at it and the in-memory kernels are dropped, before and after); the fixture's value is the
  directory. Numba's own cache of mnnjit's hand-written kernels (``NUMBA_CACHE_DIR``) is unaffected.
* ``mnnjit_backend``: runs the test once per available backend (``mnnjit.backends.registry.available()``:
  the numpy reference and the CPU, plus OpenCL or an NPU delegate where present), inside
  ``registry.using(name)`` and compiled as ``mnnjit_compiled`` does; the value is the backend's name.

Marker: ``@pytest.mark.mnnjit_backends`` gives a test the ``mnnjit_backend`` fixture without naming
it; ``@pytest.mark.mnnjit_backends("cpu", "opencl")`` keeps only those backends (the ones not
available here are skipped with the reason).

Importing this module imports neither Numba nor Hypothesis.
"""
from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator

import pytest

#: Backends assumed when mnnjit has no backend registry.
_FALLBACK_BACKENDS = ["reference", "cpu"]
_NEVER = 1 << 62


def available_backends() -> list[str]:
    """Names of the backends that can run here (the registry's answer, else reference and cpu)."""
    try:
        from mnnjit.backends import registry
    except ImportError:
        return list(_FALLBACK_BACKENDS)
    return list(registry.available())


@contextlib.contextmanager
def compiled_path() -> Iterator[None]:
    """Inside the block: compile threshold 0 and synchronous compiles (see ``mnnjit_compiled``)."""
    from mnnjit import compiler
    old_mode = os.environ.get("MNNJIT_COMPILE")
    os.environ["MNNJIT_COMPILE"] = "sync"
    prev = compiler.set_threshold(0)
    try:
        yield
    finally:
        # "never" (MNNJIT_JIT_THRESHOLD=off or equivalent) comes back as the environment's setting
        compiler.set_threshold(None if prev >= _NEVER else prev)
        if old_mode is None:
            os.environ.pop("MNNJIT_COMPILE", None)
        else:
            os.environ["MNNJIT_COMPILE"] = old_mode


@pytest.fixture
def mnnjit_compiled() -> Iterator[None]:
    """Run the test on the compiled path: threshold 0, kernels compiled when first called."""
    with compiled_path():
        yield


@pytest.fixture
def mnnjit_kernel_cache(tmp_path: Any) -> Iterator[Any]:
    """A fresh kernel cache directory for the test (see the module docstring); yields its path."""
    from mnnjit import compiler
    d = tmp_path / "mnnjit-kernel-cache"
    d.mkdir()
    old = os.environ.get("MNNJIT_CACHE_DIR")
    os.environ["MNNJIT_CACHE_DIR"] = str(d)
    compiler.clear_caches()  # forget in-memory kernels and the cache directory chosen so far
    try:
        yield d
    finally:
        compiler.clear_caches()
        if old is None:
            os.environ.pop("MNNJIT_CACHE_DIR", None)
        else:
            os.environ["MNNJIT_CACHE_DIR"] = old


@pytest.fixture
def mnnjit_backend(request: Any) -> Iterator[str]:
    """The backend this run of the test uses (parametrized over the available ones)."""
    name = getattr(request, "param", "cpu")
    if name not in available_backends():
        pytest.skip(f"mnnjit backend {name!r} is not available here")
    with compiled_path():
        try:
            from mnnjit.backends import registry
        except ImportError:
            yield name
        else:
            with registry.using(name):
                yield name


@pytest.fixture(autouse=True)
def _mnnjit_backends_marker(request: Any) -> None:
    """Set up ``mnnjit_backend`` for a test that has only the ``mnnjit_backends`` marker."""
    if request.node.get_closest_marker("mnnjit_backends") is not None:
        request.getfixturevalue("mnnjit_backend")  # (a no-op when the test asked for it by name)


def pytest_configure(config: Any) -> None:
    """Register the ``mnnjit_backends`` marker."""
    config.addinivalue_line(
        "markers", "mnnjit_backends(*names): run the test once per available mnnjit backend "
                   "(only those named, when names are given); the mnnjit_backend fixture holds the name")


def pytest_generate_tests(metafunc: Any) -> None:
    """Parametrize ``mnnjit_backend`` over the available backends (or the marker's names)."""
    marker = metafunc.definition.get_closest_marker("mnnjit_backends")
    if "mnnjit_backend" not in metafunc.fixturenames:
        if marker is None:
            return
        # the marker alone asks for the fixture: add it to the test's fixture closure
        metafunc.fixturenames.append("mnnjit_backend")
    names = list(marker.args) if marker is not None and marker.args else available_backends()
    metafunc.parametrize("mnnjit_backend", names, indirect=True, ids=[f"backend={n}" for n in names])
