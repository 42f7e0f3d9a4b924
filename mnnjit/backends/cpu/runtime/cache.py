"""The one on-disk kernel cache: where every compiled artifact of mnnjit lives, and how it heals.

Layout, under ``MNNJIT_CACHE_DIR`` (default ``$XDG_CACHE_HOME/mnnjit`` or ``~/.cache/mnnjit``)::

    <cache dir>/<version tag>/               one tree per mnnjit, Numba, llvmlite, Python and CPU
        numba/<package sub-directory>/       Numba's index (.nbi) and machine code (.nbc) of the
                                             hand-written kernels (mnnjit/**.py)
        kernels-v<N>/k_<hash>.py             generated kernel sources (:mod:`.jit`)
        kernels-v<N>/__pycache__/            their Numba index and machine code

The version tag (:func:`version_tag`) names mnnjit's version, Numba's, llvmlite's, Python's and the
host CPU with a hash of its features, so an upgrade or another machine starts a fresh tree instead
of loading code it cannot run. Clearing the cache is deleting the directory.

Numba is pointed there by a cache locator (:class:`PackageLocator`), consulted before Numba's own,
for every jitted function in the mnnjit package and in the generated-kernel directories; nothing
is written next to the installed package (a read-only install works) and ``NUMBA_CACHE_DIR``,
which applies to the user's own Numba functions, does not move mnnjit's.

Entries are checked and heal (:func:`install` patches ``numba.core.caching.Cache``):

* every index and data file carries a SHA-256 digest of its contents: a truncated, emptied or
  overwritten file, or bit rot that would reach LLVM ("Invalid record") or run wrong code, is
  detected before it is unpickled;
* an entry that fails to load is dropped (the data file and its index entry; a whole damaged
  index with its data files) and rebuilt, with one :class:`KernelCacheWarning` naming the file;
* writes go to a temporary file renamed into place, data before the index that names it, under
  the cross-process lock of :mod:`.compile_lock`;
* a read-only cache is used as it is; where a compiled kernel cannot be saved (nothing writable)
  it stays in memory for the process, after one warning.

Importing this module imports numba.
"""
from __future__ import annotations

import hashlib
import io
import itertools
import os
import pickle
import sys
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Optional

from numba.core import caching

from mnnjit import settings as config

__all__ = ["KernelCacheWarning", "DamagedEntry", "version_tag", "root", "package_cache_dir", "writable",
           "register_generated_dir", "memory_only_filename", "install", "reset", "warn_once", "warn_unwritable"]

#: the file header of every index and data file mnnjit's cache writes (then a SHA-256 digest)
MAGIC = b"mnnjit-cache\x01\n"
_DIGEST = 32
#: generated kernels compiled without a file (nowhere writable) carry this filename prefix
MEMORY_PREFIX = "<mnnjit-kernel "

_PKG_DIR = Path(__file__).resolve().parents[3]          # .../mnnjit
_lock = threading.RLock()
_root: Optional[Path] = None
_writable: dict[Path, bool] = {}
_generated_dirs: set[str] = set()
_warned: set[str] = set()
_installed = False


class KernelCacheWarning(RuntimeWarning):
    """A kernel cache entry was damaged and rebuilt, or the cache directory cannot be written."""


class DamagedEntry(Exception):
    """A cache file whose contents fail their check (``path`` names it)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason


def warn_once(key: str, message: str) -> None:
    """One :class:`KernelCacheWarning` per ``key`` per process (also counted as a cache error)."""
    config.counters["cache_errors"] += 1
    with _lock:
        if key in _warned:
            return
        _warned.add(key)
    warnings.warn(message, KernelCacheWarning, stacklevel=3)


def warn_unwritable(where: str, why: str) -> None:
    """The one warning of a process whose compiled kernels cannot be saved (read-only or missing
    cache directory): they are kept in memory."""
    warn_once("unwritable", f"mnnjit: cannot write the kernel cache at {where} ({why}): kernels compiled "
                            "now are kept in memory for this process only (set MNNJIT_CACHE_DIR to a "
                            "writable directory to keep them)")


# ---------------------------------------------------------------------------------------- layout
def _cpu_tag() -> str:
    import llvmlite.binding as ll
    from numba.core import config as nb_config
    name = nb_config.CPU_NAME or ll.get_host_cpu_name()
    feats = nb_config.CPU_FEATURES or ll.get_host_cpu_features().flatten()
    return f"{name}-{hashlib.sha256(feats.encode()).hexdigest()[:10]}"


def version_tag() -> str:
    """The name of this installation's cache tree: mnnjit, Numba, llvmlite, Python and CPU."""
    import llvmlite
    import numba
    from mnnjit import __version__
    py = f"py{sys.version_info[0]}{sys.version_info[1]}"
    return f"mnnjit{__version__}-numba{numba.__version__}-llvmlite{llvmlite.__version__}-{py}-{_cpu_tag()}"


def root() -> Path:
    """This installation's cache tree (see the module docstring; not created here)."""
    global _root
    with _lock:
        if _root is None:
            _root = (config.cache_dir() / version_tag()).absolute()
        return _root


def package_cache_dir() -> Path:
    """Where Numba's cache of the hand-written kernels lives."""
    return root() / "numba"


def writable(d: Path) -> bool:
    """Whether directory ``d`` exists (created if possible) and a file can be created in it
    (probed once per process and directory)."""
    d = Path(d)
    with _lock:
        ok = _writable.get(d)
        if ok is None:
            try:
                d.mkdir(parents=True, exist_ok=True)
                fd, probe = tempfile.mkstemp(dir=d, prefix=".probe-")
                os.close(fd)
                os.unlink(probe)
                ok = True
            except OSError:
                ok = False
            _writable[d] = ok
        return ok


def register_generated_dir(d: Path) -> None:
    """Mark ``d`` as a directory of generated kernel sources (Numba caches them in ``d/__pycache__``)."""
    _generated_dirs.add(os.path.abspath(str(d)))


def memory_only_filename(name: str) -> str:
    """The pseudo filename of a generated kernel compiled from a string (no file, no disk cache)."""
    return f"{MEMORY_PREFIX}{name}>"


def reset() -> None:
    """Forget the cache tree choice and the probes (tests switch ``MNNJIT_CACHE_DIR``)."""
    global _root
    with _lock:
        _root = None
        _writable.clear()


# ---------------------------------------------------------------------------------------- locator
class PackageLocator(caching._SourceFileBackedLocatorMixin, caching._CacheLocator):
    """Numba cache locator for mnnjit's kernels: the package's under :func:`package_cache_dir`,
    generated ones beside their source in the cache tree. ``memory_only``: nothing to load or
    save (no writable place and no warm entry)."""

    def __init__(self, py_func, py_file: str, cache_path: Path, memory_only: bool) -> None:
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        self._cache_path = str(cache_path)
        self.memory_only = memory_only
        self._code = py_func.__code__.co_code

    def get_cache_path(self) -> str:
        return self._cache_path

    def get_source_stamp(self):
        if self.memory_only and not os.path.exists(self._py_file):
            return hashlib.sha256(self._code).hexdigest()
        return super().get_source_stamp()

    def ensure_cache_path(self) -> None:
        os.makedirs(self._cache_path, exist_ok=True)
        tempfile.TemporaryFile(dir=self._cache_path).close()

    @classmethod
    def from_function(cls, py_func, py_file: str):
        if py_file.startswith(MEMORY_PREFIX):
            return cls(py_func, py_file, Path(tempfile.gettempdir()), True)
        src = os.path.abspath(py_file)
        d = os.path.dirname(src)
        if d in _generated_dirs:
            cache = Path(d) / "__pycache__"
            top = Path(d)
        else:
            try:
                rel = Path(d).relative_to(_PKG_DIR)
            except ValueError:
                return None                      # not mnnjit's: Numba's own locators decide
            top = root()
            cache = package_cache_dir() / rel
        return cls(py_func, py_file, cache, not (writable(top) or cache.is_dir()))


# ---------------------------------------------------------------------------------------- checked files
def _wrap(payload: bytes) -> bytes:
    return MAGIC + hashlib.sha256(payload).digest() + payload


def _unwrap(raw: bytes, path: str) -> bytes:
    if not raw:
        raise DamagedEntry(path, "empty file")
    head = len(MAGIC) + _DIGEST
    if len(raw) < head or not raw.startswith(MAGIC):
        raise DamagedEntry(path, "not an mnnjit cache file (bad header)")
    payload = raw[head:]
    if hashlib.sha256(payload).digest() != raw[len(MAGIC):head]:
        raise DamagedEntry(path, "contents do not match their checksum (truncated or overwritten)")
    return payload


class CheckedIndexDataCacheFile(caching.IndexDataCacheFile):
    """Numba's index and data files with a checksum, data written before the index naming it."""

    def _load_index(self) -> dict:
        try:
            with open(self._index_path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return {}
        payload = _unwrap(raw, self._index_path)
        try:
            f = io.BytesIO(payload)
            version = pickle.load(f)
            if version != self._version:
                return {}
            stamp, overloads = pickle.loads(f.read())
        except Exception as exc:  # a checksum-valid file that does not unpickle: damaged all the same
            raise DamagedEntry(self._index_path, f"unreadable index ({type(exc).__name__})") from exc
        return overloads if stamp == self._source_stamp else {}

    def _save_index(self, overloads: dict) -> None:
        payload = pickle.dumps(self._version, protocol=-1) + self._dump((self._source_stamp, overloads))
        with self._open_for_write(self._index_path) as f:
            f.write(_wrap(payload))

    def _load_data(self, name: str):
        path = self._data_path(name)
        with open(path, "rb") as f:
            raw = f.read()
        payload = _unwrap(raw, path)
        try:
            return pickle.loads(payload)
        except Exception as exc:
            raise DamagedEntry(path, f"unreadable data ({type(exc).__name__})") from exc

    def _save_data(self, name: str, data) -> None:
        with self._open_for_write(self._data_path(name)) as f:
            f.write(_wrap(self._dump(data)))

    def save(self, key, data) -> None:
        try:
            overloads = self._load_index()
        except DamagedEntry:
            overloads = {}
        name = overloads.get(key)
        if name is None:
            used = set(overloads.values())
            name = next(self._data_name(i) for i in itertools.count(1) if self._data_name(i) not in used)
        self._save_data(name, data)          # a crash between the two leaves the old index valid
        overloads[key] = name
        self._save_index(overloads)

    def data_name_for(self, key) -> Optional[str]:
        """The data file the (readable) index names for ``key``, else None."""
        try:
            return self._load_index().get(key)
        except DamagedEntry:
            return None

    def drop(self, key) -> None:
        """Remove ``key`` from the index and delete its data file."""
        try:
            overloads = self._load_index()
        except DamagedEntry:
            self.drop_all()
            return
        name = overloads.pop(key, None)
        if name is not None:
            _unlink(self._data_path(name))
            self._save_index(overloads)

    def drop_all(self) -> None:
        """Delete the index and every data file of this function."""
        _unlink(self._index_path)
        stem = self._index_name[:-len(".nbi")]
        try:
            names = os.listdir(self._cache_path)
        except OSError:
            return
        for n in names:
            if n.startswith(stem + ".") and n.endswith(".nbc"):
                _unlink(os.path.join(self._cache_path, n))


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


# ---------------------------------------------------------------------------------------- patches
def _ours(cache) -> Optional[PackageLocator]:
    loc = getattr(getattr(cache, "_impl", None), "locator", None)
    return loc if isinstance(loc, PackageLocator) else None


def _heal(cache, sig, target_context, exc: BaseException) -> None:
    """Drop the entry of ``sig`` that failed to load (see the module docstring), with one warning."""
    cf = cache._cache_file
    if isinstance(exc, DamagedEntry):
        path = exc.path
        reason = exc.reason
    else:
        key = cache._index_key(sig, target_context.codegen())
        name = cf.data_name_for(key)
        path = cf._data_path(name) if name else cf._index_path
        reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    try:
        if path == cf._index_path:
            cf.drop_all()
        else:
            cf.drop(cache._index_key(sig, target_context.codegen()))
    except OSError:
        pass                                     # read-only: compiled in memory below
    warn_once(f"damaged:{path}", f"mnnjit: dropped a damaged kernel cache entry {path} ({reason}); "
                                 "it is compiled again")


def install() -> None:
    """Put :class:`PackageLocator` first among Numba's locators, make mnnjit's caches checked and
    healing, and re-home mnnjit functions decorated before this ran (once)."""
    global _installed
    if _installed:
        return
    _installed = True
    caching.CacheImpl._locator_classes.insert(0, PackageLocator)
    Cache = caching.Cache
    plain_init, plain_load, plain_save = Cache.__init__, Cache.load_overload, Cache.save_overload

    def __init__(self, py_func):
        plain_init(self, py_func)
        if _ours(self) is not None:
            self._cache_file.__class__ = CheckedIndexDataCacheFile

    def load_overload(self, sig, target_context):
        loc = _ours(self)
        if loc is None:
            return plain_load(self, sig, target_context)
        if loc.memory_only:
            return None
        try:
            return plain_load(self, sig, target_context)
        except Exception as exc:  # noqa: BLE001  (any failure to load means: compile it again)
            _heal(self, sig, target_context, exc)
            return None

    def save_overload(self, sig, data):
        loc = _ours(self)
        if loc is None:
            return plain_save(self, sig, data)
        if loc.memory_only:
            warn_unwritable(loc.get_cache_path(), "it cannot be created or written")
            return None
        try:
            plain_save(self, sig, data)
        except Exception as exc:  # noqa: BLE001  (a kernel that cannot be saved still runs)
            warn_unwritable(loc.get_cache_path(), f"{type(exc).__name__}: {exc}")
        return None

    Cache.__init__, Cache.load_overload, Cache.save_overload = __init__, load_overload, save_overload
    _rehome()


def _rehome() -> None:
    """Dispatchers of mnnjit modules imported before :func:`install` (a module importing numba
    directly) cache through Numba's default locators: give them a cache located here."""
    from numba.core.dispatcher import Dispatcher
    for name, mod in list(sys.modules.items()):
        if not (name == "mnnjit" or name.startswith("mnnjit.")) or mod is None:
            continue
        for v in list(vars(mod).values()):
            if isinstance(v, Dispatcher) and not isinstance(v._cache, caching.NullCache) and \
                    _ours(v._cache) is None:
                v.enable_caching()
