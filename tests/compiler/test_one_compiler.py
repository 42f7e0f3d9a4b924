"""One compiler for every graph: a model and an expression graph of the same ops get the same lowering,
and the backend a graph runs on is chosen through the registry."""
from __future__ import annotations

import numpy as np
import pytest

import mnnjit.expr as F
import mnnjit.nn as nn
from mnnjit import settings
from mnnjit.backends import registry
from mnnjit.backends.base import Backend

RNG = np.random.default_rng(0)
X = RNG.standard_normal((1, 16, 40, 40)).astype(np.float32)
W1 = (RNG.standard_normal((32, 16, 3, 3)) * 0.2).astype(np.float32)
B1 = RNG.standard_normal(32).astype(np.float32)
W2 = (RNG.standard_normal((24, 32, 1, 1)) * 0.2).astype(np.float32)
B2 = RNG.standard_normal(24).astype(np.float32)


def _net(x):
    y = F.relu(F.conv2d(x, F.const(W1, list(W1.shape)), F.const(B1, [32]), [1, 1], [1, 1],
                        padding_mode=F.SAME))
    return F.conv2d(y, F.const(W2, list(W2.shape)), F.const(B2, [24]), [1, 1], [0, 0])


def _steps() -> dict:
    return {k: v for k, v in settings.counters.items() if k.startswith(("kernel_step:", "launch:"))}


def _numpy_net(x: np.ndarray) -> np.ndarray:
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))  # [1, 16, 40, 40, 3, 3]
    y = np.einsum("nchwij,ocij->nohw", cols.astype(np.float64), W1) + B1[None, :, None, None]
    y = np.maximum(y, 0)
    return (np.einsum("nchw,oc->nohw", y, W2[:, :, 0, 0]) + B2[None, :, None, None]).astype(np.float32)


def test_expr_conv_and_model_conv_run_the_same_kernels(tmp_path) -> None:
    """The expr graph and the saved-and-loaded model lower to the same kernel steps (counters)."""
    settings.reset_counters()
    expr_out = F.convert(_net(F.convert(F.const(X, list(X.shape)), F.NC4HW4)), F.NCHW).read()
    expr_steps = _steps()
    assert settings.counters["graphs_lowered"] == 1
    assert any(k.startswith("kernel_step:") for k in expr_steps), expr_steps

    ph = F.placeholder(list(X.shape), F.NC4HW4)
    path = str(tmp_path / "two_convs.mnn")
    F.save([F.convert(_net(ph), F.NCHW)], path)
    module = nn.load_module_from_file(path, [], [])
    settings.reset_counters()
    model_out = module.forward(F.const(X, list(X.shape))).read()
    assert settings.counters["graphs_lowered"] == 1
    assert _steps() == expr_steps
    np.testing.assert_allclose(expr_out, model_out, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(expr_out, _numpy_net(X), rtol=1e-4, atol=1e-4)


def test_reference_backend_runs_the_same_graph_without_kernels() -> None:
    """The same expression graph on the reference backend: no lowering, no kernel, the same values."""
    settings.reset_counters()
    with registry.using("reference"):
        out = F.convert(_net(F.convert(F.const(X, list(X.shape)), F.NC4HW4)), F.NCHW).read()
    assert settings.counters["graphs_lowered"] == 0
    assert settings.counters["kernel_runs"] == 0 and not _steps()
    np.testing.assert_allclose(out, _numpy_net(X), rtol=1e-4, atol=1e-4)


def test_registry_names_resolve_and_fall_back(capsys) -> None:
    assert registry.resolve(0) == "cpu" and registry.resolve("CPU") == "cpu"
    assert registry.resolve("reference") == "reference"
    assert registry.resolve(99) == "cpu"
    assert "Can't Find type=99 backend" in capsys.readouterr().err
    with pytest.raises(ValueError, match="unknown backend"):
        registry.resolve("TPU9000")
    assert isinstance(registry.get("cpu"), Backend) and registry.get("cpu") is registry.get("cpu")
    assert {"reference", "cpu"} <= set(registry.available())
    with registry.using("reference"):
        assert registry.current_name() == "reference"
    assert registry.current_name() == "cpu"


def test_runtime_manager_backend_selects_the_graph_backend(tmp_path) -> None:
    """A Module loaded with a RuntimeManager on the reference backend runs its plan there."""
    ph = F.placeholder(list(X.shape), F.NC4HW4)
    path = str(tmp_path / "net.mnn")
    F.save([F.convert(_net(ph), F.NCHW)], path)
    rt = nn.create_runtime_manager(({"backend": "reference"},))
    assert rt.backend_name == "reference"
    module = nn.load_module_from_file(path, [], [], runtime_manager=rt)
    settings.reset_counters()
    out = module.forward(F.const(X, list(X.shape))).read()
    assert settings.counters["graphs_lowered"] == 0 and not _steps()
    np.testing.assert_allclose(out, _numpy_net(X), rtol=1e-4, atol=1e-4)
