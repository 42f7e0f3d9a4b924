"""Compiling generated kernels with Numba, cached in memory and on disk.

Each kernel's source is written once (atomically) to ``<cache tree>/kernels-v<N>/k_<hash>.py``
(:func:`.cache.root`) and imported as a module whose function carries ``cache=True``, so Numba keeps
the machine code beside it (``__pycache__``, checked and healing: :mod:`.cache`) and a new process
with a warm cache compiles nothing; a read-only warm cache is used as it is.

Failures never crash evaluation: a source file whose bytes are not the kernel's (truncated,
overwritten, not UTF-8) is replaced with one warning naming it; with no writable cache the kernel
is compiled from a string in memory, after one warning; a kernel that cannot compile runs its
reference path (``counters['compile_errors']``). In background mode a kernel not compiled yet
also runs the reference path until it is ready (:mod:`.tiering`).
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
from mnnjit.threads import set_kernel_threads
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
    set_kernel_threads(n)  # (the one place that sizes Numba's team)


def set_num_threads(n: int) -> None:
    """Use ``n`` Numba threads (applied now if numba is loaded, else when it is)."""
    global _pending_threads
    _pending_threads = int(n)
    if _numba is not None:
        _apply_threads(n)


def get_num_threads() -> int:
    """Numba's current thread count (loads numba)."""
    return numba_module().get_num_threads()


def kernel_dir() -> Path:
    """The directory of generated kernel sources: ``kernels-v<N>`` in the cache tree
    (:func:`.cache.root`); it may be read-only or missing (then kernels compile in memory)."""
    global _kernel_dir
    if _kernel_dir is None:
        from mnnjit.backends.cpu.runtime import cache as kcache
        numba_module()
        d = kcache.root() / f"kernels-v{CODEGEN_VERSION}"
        kcache.register_generated_dir(d)
        _kernel_dir = d
    return _kernel_dir


def reset() -> None:
    """Forget the in-memory kernels and the cache directory choice (tests switch MNNJIT_CACHE_DIR)."""
    global _kernel_dir
    with _lock:
        _memory.clear()
        _kernel_dir = None
        if _numba is not None:
            from mnnjit.backends.cpu.runtime import cache as kcache
            kcache.reset()


def _write_source(path: Path, source: str) -> None:
    """Write ``source`` to ``path`` atomically (a temporary file renamed over it)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(source.encode("utf-8"))
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _source_on_disk(path: Path, source: str) -> bool:
    """Make ``path`` hold ``source``: True when it does (found or written), False when it cannot
    (no writable cache: the kernel compiles in memory). A file with other contents (damaged:
    truncated, overwritten, not UTF-8) is replaced, with one warning naming it."""
    from mnnjit.backends.cpu.runtime import cache as kcache
    data = source.encode("utf-8")
    try:
        old: bytes | None = path.read_bytes()
    except OSError:
        old = None
    if old == data:
        return True
    if old is not None:
        kcache.warn_once(f"damaged:{path}", f"mnnjit: dropped a damaged generated kernel source {path} "
                                            "(its contents are not the kernel it names); it is written again")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_source(path, source)
        return True
    except OSError as exc:
        kcache.warn_unwritable(str(path.parent), f"{type(exc).__name__}: {exc}")
        return False


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


def _memory_module(name: str, source: str):
    """The kernel module made from ``source`` without a file (Numba caches nothing of it)."""
    import linecache
    import types
    from mnnjit.backends.cpu.runtime import cache as kcache
    filename = kcache.memory_only_filename(name)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    module = types.ModuleType(name)
    module.__file__ = filename
    sys.modules[name] = module
    exec(compile(source, filename, "exec"), module.__dict__)
    return module


def load_generated(path: str, name: str):
    """Import the generated kernel module at ``path`` as ``name`` (the compile worker's way in)."""
    from mnnjit.backends.cpu.runtime import cache as kcache
    numba_module()
    kcache.register_generated_dir(Path(path).parent)
    return sys.modules.get(name) or _load_module(name, Path(path))


class Kernel:
    """A compiled kernel: calls the Numba dispatcher and counts compiles and cache hits on first use.

    In background mode (:mod:`.tiering`) a first call whose kernel is neither in memory nor in the
    disk cache returns :data:`BROKEN` (the caller runs its reference path) while the kernel
    compiles in the background; a later call runs it once it is ready."""

    __slots__ = ("name", "path", "disp", "seen", "source")

    def __init__(self, name: str, path: Path | None, disp, source: str):
        self.name, self.path, self.disp, self.source = name, path, disp, source
        self.seen = False

    def __call__(self, *args):
        if self.seen:
            return self.disp(*args)
        return self._first_call(args)

    def _first_call(self, args):
        if self.disp is None:
            return BROKEN
        from mnnjit.backends.cpu.runtime import tiering
        m = tiering.mode()
        if m == "reference":
            return BROKEN
        if m == "background":
            try:
                with tiering.deferring():
                    res = self.disp(*args)
            except tiering.CompileDeferred:
                config.counters["deferred_runs"] += 1
                return BROKEN
            except Exception as exc:  # noqa: BLE001
                return self._failed(exc)
            self._count()
            return res
        with _lock:
            try:
                res = self.disp(*args)
            except Exception as exc:  # noqa: BLE001  (the kernel cannot be compiled: reference path)
                return self._failed(exc)
            self._count()
            return res

    def _failed(self, exc: BaseException):
        config.counters["compile_errors"] += 1
        if config.debug():
            print(f"[mnnjit] kernel {self.name} failed to compile, using the reference path: "
                  f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}", file=sys.stderr)
        self.disp = None
        return BROKEN

    def _count(self) -> None:
        stats = self.disp.stats
        config.counters["kernels_compiled"] += sum(stats.cache_misses.values())
        config.counters["kernel_disk_hits"] += sum(stats.cache_hits.values())
        self.seen = True


#: Returned by a kernel that could not be compiled, or is compiling in the background (the group
#: then runs on the reference path).
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
        path = kernel_dir() / f"{name}.py"
        source = make_source()
        modname = f"mnnjit_kernel_{name}"
        disp = None
        try:
            if _source_on_disk(path, source):
                module = _load_module(modname, path)
            else:
                path = None
                module = _memory_module(modname, source)
            disp = module.kernel
        except Exception as exc:  # noqa: BLE001  (generated code Python cannot load: reference path)
            config.counters["compile_errors"] += 1
            if config.debug():
                print(f"[mnnjit] kernel {name} failed to load, using the reference path: "
                      f"{type(exc).__name__}: {exc}", file=sys.stderr)
        k = Kernel(name, path, disp, source)
        _memory[key] = k
        return k


_loading: dict[str, threading.Thread] = {}
_loading_lock = threading.Lock()


def get_kernel_soon(key: str, make_source: Callable[[], str], prepare: Callable[[], None] | None = None,
                    first_call: Callable[["Kernel"], None] | None = None) -> Kernel | None:
    """The kernel for ``key`` when it is in memory; else None, and a thread of its own runs
    ``prepare()``, :func:`get_kernel` (Numba's import, the generated module's, and what that
    module imports: up to seconds) and ``first_call(kernel)`` (a first call loads the compiled
    code from the disk cache, or queues its compile) once. For a caller that must not stall on
    them (a model's forward while compiling in the background): it runs its reference path and
    asks again later."""
    k = _memory.get(key)
    if k is not None:
        return k
    with _loading_lock:
        if key not in _loading:
            def load() -> None:
                try:
                    if prepare is not None:
                        prepare()
                except Exception:  # noqa: BLE001 - preparing only saves time; loading goes on
                    pass
                try:
                    k = get_kernel(key, make_source)
                    if first_call is not None and k.disp is not None:
                        first_call(k)
                except Exception:  # noqa: BLE001 - the caller's next ask meets the same error
                    pass
                finally:
                    with _loading_lock:
                        _loading.pop(key, None)
            t = _loading[key] = threading.Thread(target=load, name="mnnjit-kernel-load", daemon=True)
            t.start()
    return None


def worker_env() -> dict:
    """The environment of a helper process compiling into this process's kernel cache (compiling
    where called, the same cache directory, this mnnjit importable)."""
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(__import__("mnnjit").__file__)))
    return dict(os.environ, MNNJIT_COMPILE="sync", MNNJIT_CACHE_DIR=str(config.cache_dir().absolute()),
                PYTHONPATH=os.pathsep.join([pkg_parent] + [p for p in os.environ.get("PYTHONPATH", "").split(
                    os.pathsep) if p]))


def clear_disk_cache() -> None:
    """Delete the whole cache directory (every version's tree: generated kernels and Numba's cache of
    all kernels); it is rebuilt on demand."""
    reset()
    d = config.cache_dir()
    if d.is_dir():
        shutil.rmtree(d, ignore_errors=True)
