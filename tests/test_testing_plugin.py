"""mnnjit.testing's pytest plugin (the ``mnnjit`` pytest11 entry point): its fixtures and marker.

The fixtures are used directly here (the entry point makes them available to every test suite in an
environment with mnnjit installed); pytester runs small suites to see what happens around a test
(restoring settings after it, the marker's parametrization).
"""
from __future__ import annotations

import os

import numpy as onp

import mnnjit.numpy as mnp
from mnnjit import compiler
from mnnjit.backends import registry
from mnnjit.testing import assert_allclose
from mnnjit.testing.plugin import available_backends

pytest_plugins = ["pytester"]


def test_plugin_is_registered_by_its_entry_point(pytestconfig):
    assert pytestconfig.pluginmanager.has_plugin("mnnjit")


def test_compiled_fixture_runs_small_arrays_in_kernels(mnnjit_compiled):
    assert compiler.threshold() == 0
    assert os.environ["MNNJIT_COMPILE"] == "sync"  # compiled where called, not in the background
    a = onp.linspace(-2, 2, 7, dtype=onp.float32)
    compiler.reset_counters()
    got = mnp.tanh(mnp.array(a) * 1.5) + 0.25  # 7 elements: the reference path without the fixture
    assert_allclose(got, onp.tanh(a * onp.float32(1.5)) + onp.float32(0.25), rtol=1e-6, atol=1e-7)
    assert compiler.counters["kernel_runs"] >= 1


def test_kernel_cache_fixture_gives_an_empty_cache_that_fills(mnnjit_kernel_cache, mnnjit_compiled):
    assert os.environ["MNNJIT_CACHE_DIR"] == str(mnnjit_kernel_cache)
    assert not any(mnnjit_kernel_cache.iterdir())
    a = onp.arange(11, dtype=onp.float32)
    got = mnp.sqrt(mnp.array(a) * 3.0 + 0.5) - 1.0
    assert_allclose(got, onp.sqrt(a * onp.float32(3.0) + onp.float32(0.5)) - onp.float32(1.0), rtol=1e-6)
    assert list(mnnjit_kernel_cache.rglob("k_*.py")), "the kernel's source was not written to the cache"


def test_backend_fixture_runs_on_each_available_backend(mnnjit_backend):
    assert registry.current_name() == mnnjit_backend
    assert compiler.threshold() == 0
    a = onp.arange(24, dtype=onp.float32).reshape(4, 6) / 7.0
    assert_allclose(mnp.exp(mnp.array(a)).sum(axis=1), onp.exp(a).sum(axis=1), rtol=1e-5)


def test_fixtures_restore_settings_and_marker_parametrizes(pytester):
    pytester.makepyfile(
        """
        import os
        import pytest
        from mnnjit import compiler
        from mnnjit.backends import registry

        SEEN = []

        def test_a_compiled(mnnjit_compiled):
            assert compiler.threshold() == 0

        def test_b_after(request):
            assert compiler.threshold() == request.config.getoption("--thr")

        def test_c_cache(mnnjit_kernel_cache):
            assert os.environ["MNNJIT_CACHE_DIR"] == str(mnnjit_kernel_cache)

        def test_d_after():
            assert os.environ.get("MNNJIT_CACHE_DIR") == "/tmp/outer-cache"

        @pytest.mark.mnnjit_backends
        def test_e_marker(request):
            SEEN.append(registry.current_name())
            assert request.node.callspec.params["mnnjit_backend"] == registry.current_name()

        @pytest.mark.mnnjit_backends("cpu", "no-such-backend")
        def test_f_subset(mnnjit_backend):
            assert mnnjit_backend == "cpu"

        def test_g_seen():
            assert sorted(SEEN) == sorted(registry.available())
        """
    )
    pytester.makeconftest(
        """
        def pytest_addoption(parser):
            parser.addoption("--thr", type=int)
        """
    )
    old = os.environ.get("MNNJIT_CACHE_DIR")
    old_mode = os.environ.get("MNNJIT_COMPILE")
    os.environ["MNNJIT_CACHE_DIR"] = "/tmp/outer-cache"
    try:
        result = pytester.runpytest_inprocess("-p", "no:xdist", "-p", "no:randomly", "-v",
                                              f"--thr={compiler.threshold()}")
    finally:
        if old is None:
            os.environ.pop("MNNJIT_CACHE_DIR", None)
        else:
            os.environ["MNNJIT_CACHE_DIR"] = old
        compiler.clear_caches()
    assert os.environ.get("MNNJIT_COMPILE") == old_mode
    n = len(available_backends())
    result.assert_outcomes(passed=5 + n + 1, skipped=1)
    for name in available_backends():
        result.stdout.fnmatch_lines([f"*test_e_marker?backend={name}? PASSED*"])
    result.stdout.fnmatch_lines(["*test_f_subset?backend=no-such-backend? SKIPPED*"])
