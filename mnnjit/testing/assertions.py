"""Assertions on Vars: numpy.testing's, reading Vars first, and a comparison with real MNN.

A Var is compared by its logical value (``Var.read_view``): an NC4HW4 Var as its NCHW data, not
MNN's packed order, so a Var and the numpy array it stands for compare equal whatever its format.
"""
from __future__ import annotations

import importlib
import types
from typing import Any, Callable

import numpy as np

from ..var import Var

#: mnnjit's front-end modules and the real MNN module each mirrors.
_FRONT_ENDS = ("numpy", "numpy.linalg", "numpy.random", "expr", "cv", "nn")


def to_numpy(x: Any) -> Any:
    """``x`` as numpy data: a Var's logical value (a copy), lists and tuples element by element;
    anything else through ``numpy.asarray``."""
    if isinstance(x, Var):
        return np.array(x.read_view(), copy=True)
    if isinstance(x, (list, tuple)) and any(isinstance(e, Var) for e in x):
        return [to_numpy(e) for e in x]
    return np.asarray(x)


def _check_dtype(actual: Any, desired: Any, err_msg: str) -> None:
    a, d = np.asarray(actual).dtype, np.asarray(desired).dtype
    if a != d:
        raise AssertionError(f"dtypes differ: {a} != {d}" + (f"\n{err_msg}" if err_msg else ""))


def assert_allclose(actual: Any, desired: Any, rtol: float = 1e-7, atol: float = 0.0, equal_nan: bool = True,
                    err_msg: str = "", verbose: bool = True, *, check_dtype: bool = False) -> None:
    """``numpy.testing.assert_allclose`` on Vars (read in their logical layout), arrays or numbers;
    ``check_dtype`` also requires equal dtypes."""
    a, d = to_numpy(actual), to_numpy(desired)
    if check_dtype:
        _check_dtype(a, d, err_msg)
    np.testing.assert_allclose(a, d, rtol=rtol, atol=atol, equal_nan=equal_nan, err_msg=err_msg, verbose=verbose)


def assert_array_equal(actual: Any, desired: Any, err_msg: str = "", verbose: bool = True, *,
                       check_dtype: bool = False) -> None:
    """``numpy.testing.assert_array_equal`` on Vars (read in their logical layout), arrays or numbers;
    ``check_dtype`` also requires equal dtypes."""
    a, d = to_numpy(actual), to_numpy(desired)
    if check_dtype:
        _check_dtype(a, d, err_msg)
    np.testing.assert_array_equal(a, d, err_msg=err_msg, verbose=verbose)


# ---------------------------------------------------------------------------------------- real MNN
def _skip(reason: str) -> None:
    """Skip the running test (pytest's skip under pytest, unittest's SkipTest otherwise)."""
    try:
        import pytest
    except ImportError:  # pragma: no cover - outside pytest
        import unittest
        raise unittest.SkipTest(reason) from None
    pytest.skip(reason)


def _real_mnn() -> types.ModuleType:
    """Real MNN with its front ends imported (``MNN.numpy`` ... as attributes), or a skip."""
    try:
        mnn = importlib.import_module("MNN")
        for sub in _FRONT_ENDS:
            importlib.import_module(f"MNN.{sub}")
    except ImportError as exc:
        _skip(f"real MNN is not installed (pip install MNN): cannot compare with it ({exc})")
    return mnn


def _public_name(fn: Any) -> tuple[str, str] | None:
    """(front-end module, attribute) under which mnnjit exposes ``fn`` (``("numpy", "exp")``), or None."""
    for sub in ("",) + _FRONT_ENDS:
        try:
            mod = importlib.import_module("mnnjit" + (f".{sub}" if sub else ""))
        except ImportError:
            continue
        for name, value in list(vars(mod).items()):
            if value is fn and not name.startswith("_"):
                return sub, name
    return None


def _to_real(x: Any, mnn: types.ModuleType) -> Any:
    """An argument for the real-MNN call: mnnjit Vars become real Vars of the same value, dtype and format."""
    if isinstance(x, Var):
        F = mnn.expr
        fmt = x.data_format.name
        value = np.ascontiguousarray(x.read_view())
        dtype = getattr(F, x.dtype.name)
        if fmt == "NC4HW4":
            return F.convert(F.const(value, list(value.shape), F.NCHW, dtype), F.NC4HW4)
        return F.const(value, list(value.shape), getattr(F, fmt), dtype)
    if isinstance(x, list):
        return [_to_real(e, mnn) for e in x]
    if isinstance(x, tuple):
        return tuple(_to_real(e, mnn) for e in x)
    if isinstance(x, dict):
        return {k: _to_real(v, mnn) for k, v in x.items()}
    return x


def _is_real_var(x: Any, mnn: types.ModuleType) -> bool:
    return isinstance(x, mnn.expr.Var)


def _check_valid(x: Any, mnn: types.ModuleType) -> Any:
    """``x``; a RuntimeError when it holds a Var real MNN could not compute (MNN prints its error
    and returns an invalid Var instead of raising)."""
    if _is_real_var(x, mnn):
        if not x.valid:
            raise RuntimeError("real MNN returned an invalid Var (its own message is on stdout)")
    elif isinstance(x, (list, tuple)):
        for e in x:
            _check_valid(e, mnn)
    elif isinstance(x, dict):
        for e in x.values():
            _check_valid(e, mnn)
    return x


def _summary(x: Any, mnn: types.ModuleType | None) -> Any:
    """A result as comparable pieces: a Var -> ("Var", logical value, dtype name, format name)."""
    if isinstance(x, Var):
        return ("Var", to_numpy(x), x.dtype.name, x.data_format.name)
    if mnn is not None and _is_real_var(x, mnn):
        fmt = str(x.data_format).split(".")[-1]
        value = mnn.expr.convert(x, mnn.expr.NCHW).read() if fmt == "NC4HW4" else x.read()
        return ("Var", np.asarray(value), str(x.dtype).split(".")[-1], fmt)
    if isinstance(x, (list, tuple)):
        return [_summary(e, mnn) for e in x]
    if isinstance(x, dict):
        return {k: _summary(v, mnn) for k, v in x.items()}
    return x


def _compare(ours: Any, theirs: Any, where: str, rtol: float, atol: float, check_dtype: bool,
             check_format: bool) -> None:
    if isinstance(ours, tuple) and ours[:1] == ("Var",) or isinstance(theirs, tuple) and theirs[:1] == ("Var",):
        if not (isinstance(ours, tuple) and isinstance(theirs, tuple) and ours[:1] == theirs[:1] == ("Var",)):
            raise AssertionError(f"{where}: mnnjit gives {type(ours).__name__}, real MNN {type(theirs).__name__}")
        _, a, adt, afmt = ours
        _, b, bdt, bfmt = theirs
        if list(a.shape) != list(b.shape):
            raise AssertionError(f"{where}: shapes differ: mnnjit {list(a.shape)}, real MNN {list(b.shape)}")
        if check_dtype and adt != bdt:
            raise AssertionError(f"{where}: dtypes differ: mnnjit dtype.{adt}, real MNN dtype.{bdt}")
        if check_format and afmt != bfmt:
            raise AssertionError(f"{where}: data formats differ: mnnjit {afmt}, real MNN {bfmt}")
        np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), rtol=rtol, atol=atol,
                                   err_msg=f"{where}: values differ (mnnjit vs real MNN)")
        return
    if isinstance(ours, (list, tuple)) or isinstance(theirs, (list, tuple)):
        if not isinstance(ours, (list, tuple)) or not isinstance(theirs, (list, tuple)) or len(ours) != len(theirs):
            raise AssertionError(f"{where}: mnnjit gives {ours!r}, real MNN {theirs!r}")
        for i, (a, b) in enumerate(zip(ours, theirs)):
            _compare(a, b, f"{where}[{i}]", rtol, atol, check_dtype, check_format)
        return
    if isinstance(ours, dict) or isinstance(theirs, dict):
        if not isinstance(ours, dict) or not isinstance(theirs, dict) or set(ours) != set(theirs):
            raise AssertionError(f"{where}: mnnjit gives {ours!r}, real MNN {theirs!r}")
        for k in ours:
            _compare(ours[k], theirs[k], f"{where}[{k!r}]", rtol, atol, check_dtype, check_format)
        return
    if isinstance(ours, (str, bytes)) or isinstance(theirs, (str, bytes)) or ours is None or theirs is None:
        if ours != theirs:
            raise AssertionError(f"{where}: mnnjit gives {ours!r}, real MNN {theirs!r}")
        return
    np.testing.assert_allclose(np.asarray(ours, np.float64), np.asarray(theirs, np.float64), rtol=rtol, atol=atol,
                               err_msg=f"{where}: values differ (mnnjit vs real MNN)")


def assert_matches_mnn(fn: Callable[..., Any], *args: Any, rtol: float = 1e-5, atol: float = 1e-6,
                       check_dtype: bool = True, check_format: bool = True, both_raise_ok: bool = False) -> Any:
    """Run the same call on mnnjit and on real MNN and assert the results agree; returns mnnjit's.

    ``fn`` is either a public mnnjit function (``mnnjit.numpy.exp``, ``mnnjit.cv.resize``...), run
    as the real MNN function of the same name, or a function taking the MNN package first, written
    as a pymnn script would (``lambda MNN, x: MNN.numpy.exp(x) + 1``): it gets ``mnnjit`` and then
    real ``MNN``. Var arguments are handed to real MNN as Vars of the same value, dtype and format.
    Results compare by shape, dtype and data format (``check_dtype`` / ``check_format``) and value
    (``rtol``/``atol``), through lists, tuples and dicts. When both raise, the call fails unless
    ``both_raise_ok`` (a test that bad input is refused by both).
    Without real MNN installed (``pip install MNN``), the test is skipped with that reason.
    """
    mnn = _real_mnn()
    public = _public_name(fn)
    if public is not None:
        sub, name = public
        theirs_fn = getattr(importlib.import_module("MNN" + (f".{sub}" if sub else "")), name, None)
        if theirs_fn is None:
            raise AssertionError(f"real MNN has no {'MNN.' + sub + '.' if sub else 'MNN.'}{name}")

        def ours_call() -> Any:
            return fn(*args)

        def theirs_call() -> Any:
            return _check_valid(theirs_fn(*_to_real(args, mnn)), mnn)
        label = f"{'mnnjit.' + sub if sub else 'mnnjit'}.{name}"
    else:
        import mnnjit

        def ours_call() -> Any:
            return fn(mnnjit, *args)

        def theirs_call() -> Any:
            return _check_valid(fn(mnn, *_to_real(args, mnn)), mnn)
        label = getattr(fn, "__qualname__", repr(fn))

    ours_exc = theirs_exc = None
    try:
        ours = ours_call()
    except Exception as exc:  # compared with real MNN's outcome below
        ours, ours_exc = None, exc
    try:
        theirs = theirs_call()
    except Exception as exc:
        theirs, theirs_exc = None, exc
    if ours_exc is not None and theirs_exc is not None:
        if both_raise_ok:
            return None
        raise AssertionError(f"{label}: both raised: mnnjit {ours_exc!r}, real MNN {theirs_exc!r}") from ours_exc
    if ours_exc is not None:
        raise AssertionError(f"{label}: mnnjit raised {ours_exc!r}, real MNN returned "
                             f"{_summary(theirs, mnn)!r}") from ours_exc
    if theirs_exc is not None:
        raise AssertionError(f"{label}: real MNN raised {theirs_exc!r}, mnnjit returned {ours!r}") from theirs_exc
    _compare(_summary(ours, None), _summary(theirs, mnn), label, rtol, atol, check_dtype, check_format)
    return ours
