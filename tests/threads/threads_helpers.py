"""Shared pieces of the thread tests: the converted models of ``MANIFEST.json`` with their
inputs, single-threaded references, and a runner starting N threads together."""
from __future__ import annotations

import json
import os
import sys
import threading
from typing import Any, Callable

import numpy as np

import mnnjit as MNN
from shared_paths import MODELS

F = MNN.expr

with open(os.path.join(MODELS, "MANIFEST.json")) as _fh:
    ENTRIES: dict = json.load(_fh)["entries"]
#: every model of the shared corpus
NAMES = sorted(ENTRIES)


def input_names(name: str) -> list[str]:
    """The model's input names, in the order its cases list them."""
    return [i["name"] for i in ENTRIES[name]["onnx_io"]["inputs"]]


def case_arrays(name: str) -> list[list[np.ndarray]]:
    """Per case of the manifest, the input arrays (in ``input_names`` order)."""
    data = np.load(os.path.join(MODELS, name + ".npz"))
    return [[data[c["inputs"][n]["key"]] for n in input_names(name)] for c in ENTRIES[name]["cases"]]


def as_vars(arrays: list[np.ndarray]) -> list[Any]:
    """Fresh const Vars for these input arrays (NCHW, int32 or float32)."""
    return [F.const(a, list(a.shape), F.NCHW, F.int if a.dtype == np.int32 else F.float) for a in arrays]


def load(name: str):
    """A Module for the model (all its inputs, default outputs)."""
    return MNN.nn.load_module_from_file(os.path.join(MODELS, name + ".mnn"), input_names(name), [])


def forward(mod, arrays: list[np.ndarray]) -> list[np.ndarray]:
    """One forward; the outputs as new arrays."""
    return [np.array(o.read()) for o in mod.forward(as_vars(arrays))]


def warm(mod, cases: list[list[np.ndarray]], rounds: int = 3) -> None:
    """Forwards until every plan has reached its last tier (tests set the tier switch to the
    second forward), so later results are bit-for-bit reproducible."""
    for _ in range(rounds):
        for arrays in cases:
            forward(mod, arrays)


def run_together(n: int, work: Callable[[int], Any], timeout: float = 120.0) -> list[Any]:
    """``work(t)`` on ``n`` threads released at once; their results in thread order (an exception
    in a thread is raised here)."""
    barrier = threading.Barrier(n)
    results: list[Any] = [None] * n
    errors: list[BaseException] = []
    # Numba's worker count is per thread: the threads use the caller's (a kernel-step plan is
    # built per count, and the references were computed with the caller's)
    numba = sys.modules.get("numba")
    count = numba.get_num_threads() if numba is not None else None

    def main(t: int) -> None:
        try:
            if count is not None:
                numba.set_num_threads(count)
            barrier.wait()
            results[t] = work(t)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the calling thread
            errors.append(exc)

    threads = [threading.Thread(target=main, args=(t,), daemon=True) for t in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout)
    assert not any(th.is_alive() for th in threads), "a thread did not finish (deadlock?)"
    if errors:
        raise errors[0]
    return results


def assert_same(got: list[np.ndarray], want: list[np.ndarray], what: str) -> None:
    """Bit-for-bit equal outputs (the same plan on the same inputs)."""
    assert len(got) == len(want), what
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape and g.dtype == w.dtype, f"{what}: output {k} {g.shape} vs {w.shape}"
        if not np.array_equal(g, w, equal_nan=True):
            raise AssertionError(f"{what}: output {k} differs by up to {np.nanmax(np.abs(g - w))}")


def assert_close(got: list[np.ndarray], want: list[np.ndarray], what: str) -> None:
    """Outputs equal to float32 rounding (where a graph may run on a kernel or on its numpy
    reference, depending on whether its kernels are compiled yet)."""
    assert len(got) == len(want), what
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape and g.dtype == w.dtype, f"{what}: output {k} {g.shape} vs {w.shape}"
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=f"{what}: output {k}")
