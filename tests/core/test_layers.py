"""The layer contracts of ``.importlinter`` hold (ops know only shapes and references, the compiler sees
only the backend interface, backends import neither models nor front ends, format imports nothing
else from mnnjit, and the layers import one way), function-level imports included."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_import_contracts_hold() -> None:
    exe = shutil.which("lint-imports", path=os.path.dirname(sys.executable)) or shutil.which("lint-imports")
    if exe is None:
        pytest.skip("import-linter is not installed (it is in the test extras)")
    out = subprocess.run([exe, "--config", os.path.join(ROOT, ".importlinter")], cwd=ROOT,
                         capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PYTHONPATH=ROOT))
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout


def test_contracts_cover_every_backend_package() -> None:
    """A new backend package joins the compiler's contract (the compiler never imports it)."""
    text = open(os.path.join(ROOT, ".importlinter")).read()
    backends = os.path.join(ROOT, "mnnjit", "backends")
    for name in sorted(os.listdir(backends)):
        if os.path.isfile(os.path.join(backends, name, "__init__.py")):
            assert f"mnnjit.backends.{name}\n" in text, f"backend package {name} missing from .importlinter"
