"""Shared test configuration: hypothesis profiles, paths to ../shared, and per-worker kernel
caches when the suite runs on several pytest-xdist workers."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("MNNJIT_SHARED", ROOT.parent / "shared"))


def _per_worker_caches() -> None:
    """Under pytest-xdist, give each worker its own mnnjit and Numba cache directories.

    Numba's on-disk cache numbers the data files of a function's overloads by their count in the
    index, so two processes compiling overloads of one function at the same moment can write the
    same file name; workers sharing a cache saw a generated kernel fail on its first call. Runs
    before any test module imports numba (Numba reads NUMBA_CACHE_DIR at import)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return
    base = Path(os.environ.get("MNNJIT_CACHE_DIR") or Path(tempfile.gettempdir()) / "mnnjit-test-cache")
    os.environ["MNNJIT_CACHE_DIR"] = str(base / worker)
    os.environ["NUMBA_CACHE_DIR"] = str(base / worker / "numba")


_per_worker_caches()

settings.register_profile("default", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("ci", max_examples=40, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile("ci" if os.environ.get("CI") else "default")


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The ../shared directory beside the project (models, reference docs, tools)."""
    if not SHARED.is_dir():
        pytest.skip(f"../shared not found at {SHARED}")
    return SHARED
