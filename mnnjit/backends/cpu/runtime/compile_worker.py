"""The background compile worker: ``python -m mnnjit.backends.cpu.runtime.compile_worker <cache tree>``.

Started by :mod:`.tiering` (one per process that needs it). It reads jobs from stdin, each a
4-byte little-endian length and a pickle of ``(id, module, file or None, qualname, signature)``,
compiles them one at a time into the shared disk cache (Numba's cache with mnnjit's locator and
cross-process lock: a kernel another process compiles meanwhile is loaded, not compiled twice)
and answers ``ok <id> <seconds> <CPU seconds>`` or ``err <id> <message>`` on stdout.

When its parent exits (stdin closes) it finishes the jobs already received, so the next process
starts warm, then exits; it stops early if the cache tree disappears (a deleted temporary cache).
It runs at a lower priority than the foreground (:data:`.tiering.WORKER_NICE`).
"""
from __future__ import annotations

import importlib
import os
import pickle
import queue
import struct
import sys
import threading
import time
from typing import Any, BinaryIO, Optional

_NICE = 5       # the same value as tiering.WORKER_NICE (not imported: this process starts lean)


def _read_jobs(stream: BinaryIO, out: "queue.Queue[Optional[tuple]]") -> None:
    """Drain stdin at once (the parent never blocks on a full pipe); None at its end."""
    try:
        while True:
            head = stream.read(4)
            if len(head) < 4:
                break
            (n,) = struct.unpack("<I", head)
            body = stream.read(n)
            if len(body) < n:
                break
            out.put(pickle.loads(body))
    except Exception:  # noqa: BLE001  (a broken parent pipe ends the stream)
        pass
    out.put(None)


def _dispatcher(module: str, path: Optional[str], qualname: str) -> Any:
    if path is None:
        obj: Any = importlib.import_module(module)
    else:
        from mnnjit.backends.cpu.runtime import jit
        obj = jit.load_generated(path, module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _reply(line: str) -> None:
    try:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
    except (OSError, ValueError):
        pass                        # the parent is gone: keep compiling for the cache


def main(argv: list[str]) -> int:
    """Run the worker (see the module docstring)."""
    tree = argv[0] if argv else None
    try:
        os.nice(_NICE)
    except OSError:
        pass
    from mnnjit.backends.cpu.runtime import numba_setup  # noqa: F401  (locator, compile lock)
    jobs: "queue.Queue[Optional[tuple]]" = queue.Queue()
    threading.Thread(target=_read_jobs, args=(sys.stdin.buffer, jobs), daemon=True).start()
    while True:
        job = jobs.get()
        if job is None:
            return 0
        if tree is not None and not os.path.isdir(tree):
            return 0
        jid, module, path, qualname, sig = job
        t, c = time.perf_counter(), time.process_time()
        try:
            disp = _dispatcher(module, path, qualname)
            disp.compile(sig)
        except Exception as exc:  # noqa: BLE001  (reported; the parent compiles it itself)
            msg = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            _reply(f"err {jid} {msg}")
            continue
        _reply(f"ok {jid} {time.perf_counter() - t:.3f} {time.process_time() - c:.3f}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
