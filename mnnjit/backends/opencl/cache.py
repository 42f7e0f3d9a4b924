"""The OpenCL program cache and the work-group tuning table, on disk.

Both live in one directory per device, under the kernel cache directory
(``MNNJIT_CACHE_DIR``/opencl/<device key>): program binaries as ``<key>.bin`` where the key hashes
the source and build options, and the device key hashes the platform, device name, driver and
OpenCL versions (a driver update starts a fresh directory, as its binaries may not load). Tuned
work-group sizes are ``tuning.json`` there.

MNN keeps its OpenCL cache in one file (``RuntimeManager.set_cache(path)``, written by
``update_cache()``): :func:`export_bundle` writes the device's binaries and tuning table to such a
file and :func:`import_bundle` reads one back into the directory.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

from ... import settings

#: bumped when the kernel library's conventions change (its sources are hashed anyway)
CACHE_VERSION = 1
_BUNDLE_MAGIC = "mnnjit-opencl-cache"


def device_key(platform: str, device: str, driver: str, version: str) -> str:
    """The directory name of one device's cache (driver and OpenCL versions included)."""
    raw = "|".join((platform, device, driver, version, str(CACHE_VERSION)))
    return hashlib.sha256(raw.encode()).hexdigest()[:20]


def program_key(source: str, options: str) -> str:
    """The file stem of a program binary: a hash of its source and build options."""
    return hashlib.sha256((options + "\0" + source).encode()).hexdigest()[:32]


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


class DiskCache:
    """Program binaries and the tuning table of one device (see the module docstring)."""

    def __init__(self, dev_key: str, root: Path | None = None) -> None:
        self.dir = (root if root is not None else settings.cache_dir()) / "opencl" / dev_key
        self._lock = threading.Lock()
        self._tuning: dict[str, Any] | None = None

    # ------------------------------------------------------------------ binaries
    def load_binary(self, key: str) -> bytes | None:
        """The cached binary of program ``key``, or None."""
        try:
            return (self.dir / f"{key}.bin").read_bytes()
        except OSError:
            return None

    def store_binary(self, key: str, binary: bytes) -> None:
        """Keep program ``key``'s binary (a read-only cache directory is not an error)."""
        try:
            _atomic_write(self.dir / f"{key}.bin", binary)
        except OSError:
            settings.counters["cache_errors"] += 1

    def drop_binary(self, key: str) -> None:
        """Forget a binary that failed to load (a stale or corrupt file)."""
        try:
            (self.dir / f"{key}.bin").unlink()
        except OSError:
            pass

    # ------------------------------------------------------------------ tuning
    def _tuning_path(self) -> Path:
        return self.dir / "tuning.json"

    def tuning(self) -> dict[str, Any]:
        """The tuning table (kernel and global size -> local size), read once."""
        with self._lock:
            if self._tuning is None:
                try:
                    self._tuning = json.loads(self._tuning_path().read_text())
                except (OSError, ValueError):
                    self._tuning = {}
            return self._tuning

    def set_tuning(self, key: str, local: Any) -> None:
        """Record one tuned local size and write the table (merged with what another process wrote)."""
        table = self.tuning()
        with self._lock:
            table[key] = local
            try:
                on_disk = json.loads(self._tuning_path().read_text())
            except (OSError, ValueError):
                on_disk = {}
            on_disk.update(table)
            try:
                _atomic_write(self._tuning_path(), json.dumps(on_disk, sort_keys=True).encode())
            except OSError:
                settings.counters["cache_errors"] += 1

    # ------------------------------------------------------------------ one-file bundles
    def export_bundle(self, path: str | os.PathLike) -> int:
        """Write every binary and the tuning table to one file (MNN's cache file); returns the
        number of programs written."""
        binaries = {}
        if self.dir.is_dir():
            for f in sorted(self.dir.glob("*.bin")):
                binaries[f.stem] = base64.b64encode(f.read_bytes()).decode("ascii")
        payload = {"magic": _BUNDLE_MAGIC, "version": CACHE_VERSION, "device": self.dir.name,
                   "binaries": binaries, "tuning": dict(self.tuning())}
        _atomic_write(Path(path), json.dumps(payload).encode())
        return len(binaries)

    def import_bundle(self, path: str | os.PathLike) -> int:
        """Read a file :meth:`export_bundle` wrote into this device's cache; returns the number of
        programs taken (0 for a file of another device or driver, or no such file)."""
        try:
            data = Path(path).read_bytes()
        except OSError:
            return 0
        try:
            payload = json.loads(data)
        except ValueError as exc:
            raise ValueError(f"{os.fspath(path)!r} is not an mnnjit OpenCL cache file: {exc}") from None
        if not isinstance(payload, dict) or payload.get("magic") != _BUNDLE_MAGIC:
            raise ValueError(f"{os.fspath(path)!r} is not an mnnjit OpenCL cache file")
        if payload.get("device") != self.dir.name or payload.get("version") != CACHE_VERSION:
            return 0  # another device or driver: its binaries would not load here
        n = 0
        for key, binary in payload.get("binaries", {}).items():
            if not (self.dir / f"{key}.bin").exists():
                self.store_binary(key, base64.b64decode(binary))
            n += 1
        for key, local in payload.get("tuning", {}).items():
            self.tuning().setdefault(key, local)
        return n
