"""The active backend: ``using`` blocks, the process default and ``MNNJIT_BACKEND``."""
from __future__ import annotations

from mnnjit.backends import registry


def test_environment_backend_is_read_again_by_set_default_none(monkeypatch):
    monkeypatch.setenv("MNNJIT_BACKEND", "reference")
    registry.set_default(None)
    try:
        assert registry.current_name() == "reference"
        with registry.using("cpu"):
            assert registry.current_name() == "cpu"
        registry.set_default("cpu")
        assert registry.current_name() == "cpu"
    finally:
        monkeypatch.delenv("MNNJIT_BACKEND")
        registry.set_default(None)
    assert registry.current_name() == "cpu"
