"""Compiling generated kernels with Numba, cached in memory and on disk.

Each kernel's source is written once to ``<cache dir>/kernels-v<N>/k_<hash>.py`` and imported as a
module whose function carries ``cache=True``, so Numba keeps the machine code next to it
(``__pycache__``) and a new process with a warm cache compiles nothing. The source file is never
rewritten when present (Numba's cache is keyed by the file's path and timestamp).

Failures never crash evaluation: an unwritable cache directory falls back to a private temporary
directory (caching only for this process); a corrupt source file or Numba cache entry is deleted and
rebuilt once; if that fails too the caller runs the reference path (``counters['cache_errors']``).
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from typing import Callable

from mnnjit import settings as config
from mnnjit.backends.cpu.codegen.groups import CODEGEN_VERSION

_lock = threading.RLock()
_memory: dict[str, Callable] = {}
_kernel_dir: Path | None = None
_numba = None
_pending_threads: int | None = None


def numba_module():
    """Import numba (once) and apply the thread settings."""
    global _numba
    if _numba is None:
        from mnnjit.backends.cpu.runtime import numba_setup  # noqa: F401  (first: OpenMP policy, cross-process compile lock)
        import numba
        _numba = numba
        n = _pending_threads or config.env_threads()
        if n:
            _apply_threads(n)
    return _numba


def _apply_threads(n: int) -> None:
    nb = _numba
    n = max(1, min(int(n), nb.config.NUMBA_NUM_THREADS))
    nb.set_num_threads(n)


def set_num_threads(n: int) -> None:
    """Use ``n`` Numba threads (applied now if numba is loaded, else when it is)."""
    global _pending_threads
    _pending_threads = int(n)
    if _numba is not None:
        _apply_threads(n)


def get_num_threads() -> int:
    """Numba's current thread count (loads numba)."""
    return numba_module().get_num_threads()


def _writable(d: Path) -> bool:
    try:
        d.mkdir(parents=True, exist_ok=True)
        probe = d / f".probe-{os.getpid()}"
        probe.write_text("ok")
        probe.unlink()
        return True
    except OSError:
        return False


def kernel_dir() -> Path:
    """The directory holding generated kernel sources (created; a temp dir when unwritable)."""
    global _kernel_dir
    if _kernel_dir is None:
        d = config.cache_dir() / f"kernels-v{CODEGEN_VERSION}"
        if not _writable(d):
            config.counters["cache_errors"] += 1
            d = Path(tempfile.mkdtemp(prefix="mnnjit-kernels-"))
        _kernel_dir = d
    return _kernel_dir


def reset() -> None:
    """Forget the in-memory kernels and the cache directory choice (tests switch MNNJIT_CACHE_DIR)."""
    global _kernel_dir
    with _lock:
        _memory.clear()
        _kernel_dir = None


def _write_source(path: Path, source: str) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(source)
    os.replace(tmp, path)


def _load_module(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # Numba's cache rebuilds a kernel's environment by module name
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def _purge_numba_cache(path: Path, disp=None) -> None:
    """Delete Numba's cached index and data of the kernel module at ``path``: in the directory
    the dispatcher ``disp`` caches to (NUMBA_CACHE_DIR when set), else ``__pycache__`` beside it."""
    cache_path = getattr(getattr(disp, "_cache", None), "_cache_path", None)
    pyc = Path(cache_path) if cache_path else path.parent / "__pycache__"
    if pyc.is_dir():
        for f in pyc.glob(f"{path.stem}.*"):
            try:
                f.unlink()
            except OSError:
                pass


class Kernel:
    """A compiled kernel: calls the Numba dispatcher and counts compiles and cache hits on first use."""

    __slots__ = ("name", "path", "disp", "seen", "source")

    def __init__(self, name: str, path: Path, disp, source: str):
        self.name, self.path, self.disp, self.source = name, path, disp, source
        self.seen = False

    def __call__(self, *args):
        if self.seen:
            return self.disp(*args)
        return self._first_call(args)

    def _first_call(self, args):
        with _lock:
            if self.disp is None:
                return BROKEN
            try:
                res = self.disp(*args)
            except Exception:
                # Maybe a corrupt on-disk Numba cache entry: drop it and compile from the source again.
                _purge_numba_cache(self.path, self.disp)
                try:
                    module = _load_module(f"mnnjit_kernel_{self.name}_r", self.path)
                    self.disp = module.kernel
                    res = self.disp(*args)
                except Exception as exc:  # the kernel cannot be compiled: the caller uses the reference path
                    config.counters["compile_errors"] += 1
                    if config.debug():
                        print(f"[mnnjit] kernel {self.name} failed to compile, using the reference path: "
                              f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                              file=sys.stderr)
                    self.disp = None
                    return BROKEN
                config.counters["cache_errors"] += 1
            stats = self.disp.stats
            config.counters["kernels_compiled"] += sum(stats.cache_misses.values())
            config.counters["kernel_disk_hits"] += sum(stats.cache_hits.values())
            self.seen = True
            return res


#: Returned by a kernel that could not be compiled (the group then runs on the reference path).
BROKEN = object()


def get_kernel(key: str, make_source: Callable[[], str]) -> Kernel:
    """The kernel for ``key`` (a codegen key): from memory, else from disk, else generated."""
    k = _memory.get(key)
    if k is not None:
        config.counters["kernel_memory_hits"] += 1
        return k
    with _lock:
        k = _memory.get(key)
        if k is not None:
            return k
        numba_module()
        name = "k_" + hashlib.sha1(key.encode()).hexdigest()[:24]
        d = kernel_dir()
        path = d / f"{name}.py"
        source = make_source()
        try:
            if not path.exists() or path.read_text() != source:
                _write_source(path, source)
        except OSError:
            config.counters["cache_errors"] += 1
            path = Path(tempfile.mkdtemp(prefix="mnnjit-kernels-")) / f"{name}.py"
            _write_source(path, source)
        modname = f"mnnjit_kernel_{name}"
        try:
            module = _load_module(modname, path)
        except Exception:
            config.counters["cache_errors"] += 1
            _purge_numba_cache(path)
            _write_source(path, source)
            module = _load_module(modname, path)
        k = Kernel(name, path, module.kernel, source)
        _memory[key] = k
        return k


def clear_disk_cache() -> None:
    """Delete the generated kernels and their Numba cache (the directory is rebuilt on demand)."""
    reset()
    d = config.cache_dir()
    if d.is_dir():
        shutil.rmtree(d, ignore_errors=True)
