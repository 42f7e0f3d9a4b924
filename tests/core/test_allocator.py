"""The allocator policy (``mnnjit/allocator.py``): applied at import on glibc, the user's settings win."""
from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CODE = "import mnnjit, mnnjit.allocator as a; print(a.configure())"


def _run(**env: str) -> str:
    base = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "MNNJIT_MALLOC"}
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=60,
                         cwd=ROOT, env={**base, "PYTHONPATH": ROOT, **env})
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip()


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_applied_at_import_on_glibc():
    assert _run() == "True"


@pytest.mark.parametrize("env", [{"MNNJIT_MALLOC": "default"}, {"MALLOC_TRIM_THRESHOLD_": "131072"},
                                 {"MALLOC_MMAP_THRESHOLD_": "65536"}])
def test_the_users_choice_wins(env):
    assert _run(**env) == "False"


def test_configure_is_idempotent():
    from mnnjit import allocator
    first = allocator.configure()
    assert allocator.configure() is first
