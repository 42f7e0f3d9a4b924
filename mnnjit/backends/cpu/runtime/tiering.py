"""Tiered execution: nothing waits for the compiler unless asked to.

``MNNJIT_COMPILE`` chooses (read on each use):

* ``background`` (the default): code that has a path needing no compiling (a numpy/BLAS
  reference) runs its kernels inside :func:`deferring`. A kernel already in memory or in the disk
  cache runs (loaded from disk in milliseconds); a missing one raises :class:`CompileDeferred`
  before any compiling, the caller takes its reference path, and the kernel is queued for a
  background compile. Once it is compiled and loaded, the same call runs the kernel.
* ``sync``: kernels compile where they are first called, as Numba does (tests, benchmarks).

Background compiling happens in a separate process (:mod:`.compile_worker`, started on the first
missing kernel, one at a time, at a lower priority) that writes the shared disk cache; a thread
of this process then loads each kernel from disk. So compiling runs beside the reference path on
another core, holds neither this process's GIL nor Numba's global compiler lock (a foreground
dispatch of a compiled kernel never waits behind it), and a script that exits first still leaves
a warm cache: the worker finishes its queue and exits (the next process starts warm). Kernels the
worker cannot rebuild by name (a function made at run time, no writable cache) compile in that
thread of this process instead; the foreground still never blocks on them, as :func:`deferring`
refuses to wait for the compiler lock (or for another process's lock on the function: the worker
compiling another signature of it). A process that exits meanwhile waits only for a kernel being
loaded or compiled in that thread at that moment, never for the queue.
``MNNJIT_COMPILE_WORKER=off`` compiles everything in that thread. (Measured on MobileNetV2's
first forwards with an empty cache, 2 busy cores: reference forwards took 0.13-0.15 s beside the
worker process, 0.3-0.8 s beside a compiling thread, which takes the GIL for most of a compile.)

While compiling lasts more than :data:`ANNOUNCE_AFTER` seconds one line goes to stderr; with
``MNNJIT_DEBUG`` each background compile is logged with its time. :func:`compile_status` and
:func:`wait` tell a program what is pending.

Importing this module imports numba.
"""
from __future__ import annotations

import atexit
import collections
import contextlib
import inspect
import os
import pickle
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

from numba.core import event as nb_event
from numba.core.compiler_lock import global_compiler_lock

from mnnjit import settings as config
from mnnjit.backends.cpu.runtime import cache as kcache
from mnnjit.backends.cpu.runtime import compile_lock

__all__ = ["CompileDeferred", "mode", "deferring", "forced", "run_or_none", "carried", "compile_status", "wait",
           "ANNOUNCE_AFTER"]

#: seconds of background compiling after which one line tells the user (stderr)
ANNOUNCE_AFTER = 1.0
#: ``nice`` increment of the compile worker (the foreground's reference path comes first)
WORKER_NICE = 5



class CompileDeferred(Exception):
    """The kernel this call needs is not compiled yet; it is compiling in the background (or
    failed to compile): run the reference path."""

    def __init__(self, job: "Job") -> None:
        super().__init__(f"kernel {job.name} is compiling in the background")
        self.job = job


@dataclass(eq=False)
class Job:
    """One kernel signature to compile: ``state`` is pending, done or failed."""

    disp: Any
    sig: tuple
    name: str
    id: int
    state: str = "pending"
    where: str = "thread"            # "process": sent to the worker process; "thread": compiled here
    seconds: float = 0.0              # wall time of the compile
    cpu_seconds: float = 0.0          # its CPU time (the worker's, or this process's thread's)
    error: str = ""
    submitted: float = field(default_factory=time.perf_counter)


_tls = threading.local()
_cv = threading.Condition(threading.RLock())
_jobs: dict = {}                     # (dispatcher, sig) -> Job
_by_id: dict = {}
_loads: collections.deque = collections.deque()      # jobs compiled by the worker, to load here
_compiles: collections.deque = collections.deque()   # jobs to compile in this process's thread
_ids = iter(range(1, 1 << 62))
_thread: Optional[threading.Thread] = None
_busy: Optional[Job] = None          # the job the thread is loading/compiling now
_proc: Optional[subprocess.Popen] = None
_proc_state = "none"                 # none | running | failed
_write_lock = threading.Lock()
_announced_batch = -1
_batch = 0
_exiting = False
_installed = False


# ------------------------------------------------------------------------------ mode
def mode() -> str:
    """``"sync"`` or ``"background"`` (see the module docstring; :func:`forced` wins, and may
    also say ``"reference"``)."""
    forced_mode = getattr(_tls, "force", None)
    if forced_mode:
        return forced_mode[-1]
    return "background" if config.compile_in_background() else "sync"


@contextlib.contextmanager
def forced(which: str) -> Iterator[None]:
    """Inside the block this thread compiles in mode ``which`` ("sync" or "background"), whatever
    ``MNNJIT_COMPILE`` says; "reference" runs every tiered step and generated kernel not yet
    switched to its kernels on its reference path, compiling nothing (tests, debugging)."""
    if which not in ("sync", "background", "reference"):
        raise ValueError(f"compile mode must be 'sync', 'background' or 'reference', got {which!r}")
    stack = getattr(_tls, "force", None)
    if stack is None:
        stack = _tls.force = []
    stack.append(which)
    try:
        yield
    finally:
        stack.pop()


@contextlib.contextmanager
def deferring() -> Iterator[None]:
    """Inside the block (background mode), a kernel that would need compiling raises
    :class:`CompileDeferred` and is queued instead (see the module docstring)."""
    if mode() != "background":
        yield
        return
    install()
    prev = getattr(_tls, "defer", False)
    _tls.defer = True
    try:
        yield
    finally:
        _tls.defer = prev


def run_or_none(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` inside :func:`deferring`, or None when a kernel it needs is compiling in the
    background (the caller then runs its reference path; also None in "reference" mode)."""
    m = mode()
    if m == "sync":
        return fn(*args)
    if m == "reference":
        return None
    try:
        with deferring():
            return fn(*args)
    except CompileDeferred:
        config.counters["deferred_runs"] += 1
        return None


def carried() -> Any:
    """A context factory putting another thread (a helper running blocks of this thread's work)
    in this thread's compile mode: deferring there too when this thread defers."""
    if not getattr(_tls, "defer", False):
        return contextlib.nullcontext
    return deferring


def deferring_now() -> bool:
    """Whether this thread is inside :func:`deferring` in background mode."""
    return bool(getattr(_tls, "defer", False))


# ------------------------------------------------------------------------------ the gate
def _gate(disp: Any, sig: Any) -> None:
    """Called before every ``Dispatcher.compile`` (:func:`.compile_lock.set_gate`)."""
    if not getattr(_tls, "defer", False):
        return
    key = (disp, tuple(sig))
    job = _jobs.get(key)
    if job is not None:
        if job.state != "done":
            raise CompileDeferred(job)
        return
    if key[1] in disp.overloads:     # already compiled (e.g. the caller typed the arguments differently)
        return
    # a background compile in this process holds the compiler lock: do not queue behind it
    if not global_compiler_lock._lock.acquire(blocking=False):
        raise CompileDeferred(submit(disp, key[1]))
    global_compiler_lock._lock.release()
    # another process (the worker) compiles a signature of this function: loading even a cached
    # overload would wait for its lock
    if compile_lock.busy_elsewhere(disp):
        raise CompileDeferred(submit(disp, key[1]))


class _CompileListener(nb_event.Listener):
    """Numba's ``numba:compile`` event starts a real compile (the overload was neither in memory nor
    in the disk cache): inside :func:`deferring` it becomes a queued job instead."""

    def on_start(self, event) -> None:
        if getattr(_tls, "defer", False):
            data = event.data or {}
            disp, sig = data["dispatcher"], tuple(data["args"])
            if disp._cache_misses.get(sig):
                disp._cache_misses[sig] -= 1     # nothing was compiled here (the stats stay true)
            raise CompileDeferred(submit(disp, sig))

    def on_end(self, event) -> None:
        pass


def install() -> None:
    """Hook the compile gate and the compile event (once)."""
    global _installed
    if _installed:
        return
    _installed = True
    compile_lock.install()
    compile_lock.set_gate(_gate)
    nb_event.register("numba:compile", _CompileListener())
    atexit.register(_at_exit)
    os.register_at_fork(after_in_child=_after_fork)


# ------------------------------------------------------------------------------ jobs
def _name(disp: Any, sig: tuple) -> str:
    f = getattr(disp, "py_func", None)
    mod = getattr(f, "__module__", "?")
    mod = mod.rsplit(".", 1)[-1] if mod.startswith("mnnjit.") else mod
    return f"{mod}.{getattr(f, '__qualname__', '?')}({', '.join(str(t) for t in sig)})"


def _describe(disp: Any) -> Optional[tuple]:
    """(module, file or None, qualname) by which the worker process finds ``disp``, or None when it
    cannot (made at run time, not cached in a writable place)."""
    loc = kcache._ours(getattr(disp, "_cache", None))
    if loc is None or loc.memory_only or not kcache.writable(_cache_top(loc)):
        return None
    f = disp.py_func
    mod, qual = f.__module__, f.__qualname__
    if "<locals>" in qual:
        return None
    obj = sys.modules.get(mod)
    for part in qual.split("."):
        obj = getattr(obj, part, None)
    if obj is not disp:
        return None
    if mod == "mnnjit" or mod.startswith("mnnjit."):
        return mod, None, qual
    return mod, inspect.getfile(f), qual


def _cache_top(loc: Any):
    from pathlib import Path
    p = Path(loc.get_cache_path())
    return p.parent if p.name == "__pycache__" else p


def submit(disp: Any, sig: tuple) -> Job:
    """Queue ``disp`` for ``sig`` (once) and return its job."""
    global _batch
    key = (disp, sig)
    with _cv:
        job = _jobs.get(key)
        if job is not None:
            return job
        if not any(j.state == "pending" for j in _jobs.values()):
            _batch += 1
            _start_announce_timer(_batch)
        job = Job(disp, sig, _name(disp, sig), next(_ids))
        _jobs[key] = job
        _by_id[job.id] = job
        desc = _describe(disp)
        if desc is not None and _send(job, desc):
            job.where = "process"
        else:
            _compiles.append(job)
        _ensure_thread()
        _cv.notify_all()
    return job


def _start_announce_timer(batch: int) -> None:
    t = threading.Timer(ANNOUNCE_AFTER, _announce, args=(batch,))
    t.daemon = True
    t.start()


#: callers that report progress themselves (warmup) silence the stderr line while > 0
quiet = 0


def _announce(batch: int) -> None:
    global _announced_batch
    if quiet:
        return
    with _cv:
        pending = sum(1 for j in _jobs.values() if j.state == "pending")
        if not pending or batch != _batch or _announced_batch == batch:
            return
        _announced_batch = batch
    where = kcache.root()
    kept = "first run only; cached in " + str(where) if kcache.writable(where) else "not cached: no writable cache"
    print(f"mnnjit: compiling {pending} CPU kernel{'s' if pending != 1 else ''} in the background "
          f"({kept})", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------ the worker process
def _spawn() -> Optional[subprocess.Popen]:
    """Start the worker process (once; None when that fails or compiling in a process is off)."""
    global _proc, _proc_state
    if _proc_state == "running" and _proc is not None and _proc.poll() is None:
        return _proc
    if _proc_state != "none":
        return None
    _proc_state = "failed"
    if os.environ.get("MNNJIT_COMPILE_WORKER", "").strip().lower() in ("0", "off", "no", "thread"):
        return None
    from mnnjit.backends.cpu.runtime.jit import worker_env
    env = worker_env()
    try:
        _proc = subprocess.Popen(
            [sys.executable, "-m", "mnnjit.backends.cpu.runtime.compile_worker", str(kcache.root())],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, env=env, close_fds=True,
            start_new_session=True)     # outlives this process to finish the queue; no Ctrl-C from the terminal
    except OSError:
        return None
    _proc_state = "running"
    t = threading.Thread(target=_read_replies, args=(_proc,), name="mnnjit-compile-replies", daemon=True)
    t.start()
    return _proc


def _send(job: Job, desc: tuple) -> bool:
    proc = _spawn()
    if proc is None:
        return False
    msg = pickle.dumps((job.id, desc[0], desc[1], desc[2], job.sig), protocol=4)
    try:
        with _write_lock:
            proc.stdin.write(struct.pack("<I", len(msg)) + msg)
            proc.stdin.flush()
    except (OSError, ValueError, pickle.PicklingError):
        return False
    return True


def _read_replies(proc: subprocess.Popen) -> None:
    """Reader thread: the worker's ``ok <id> <seconds>`` / ``err <id> <message>`` lines."""
    global _proc_state
    for raw in proc.stdout:
        parts = raw.decode("utf-8", "replace").rstrip("\n").split(" ", 2)
        if len(parts) < 2 or not parts[1].isdigit():
            continue
        with _cv:
            job = _by_id.get(int(parts[1]))
            if job is None or job.state != "pending":
                continue
            if parts[0] == "ok":
                nums = parts[2].split() if len(parts) > 2 else []
                job.seconds = float(nums[0]) if nums else 0.0
                job.cpu_seconds = float(nums[1]) if len(nums) > 1 else job.seconds
                _loads.append(job)
            else:
                job.error = parts[2] if len(parts) > 2 else "compile failed"
                _compiles.append(job)        # compiled here: a failure then shows the real error
            _cv.notify_all()
    # the worker is gone: what it still had is compiled here
    with _cv:
        _proc_state = "failed"
        for job in _jobs.values():
            if job.state == "pending" and job.where == "process" and job not in _loads and job not in _compiles:
                job.where = "thread"
                _compiles.append(job)
        _cv.notify_all()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


# ------------------------------------------------------------------------------ the compile thread
def _ensure_thread() -> None:
    global _thread
    if _thread is None or not _thread.is_alive():
        _thread = threading.Thread(target=_work, name="mnnjit-compile", daemon=True)
        _thread.start()


def _work() -> None:
    global _busy
    while True:
        with _cv:
            while not (_loads or _compiles) and not _exiting:
                _cv.wait()
            if _exiting:
                return
            job = _loads.popleft() if _loads else _compiles.popleft()
            _busy = job
        t, c = time.perf_counter(), time.thread_time()
        try:
            job.disp.compile(job.sig)        # from the disk cache after the worker, else compiled here
            state, err = "done", ""
        except Exception as exc:  # noqa: BLE001  (a kernel that cannot compile keeps its reference path)
            state, err = "failed", f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            config.counters["compile_errors"] += 1
        here = time.perf_counter() - t
        with _cv:
            if job.where == "thread":
                job.seconds, job.cpu_seconds = here, time.thread_time() - c
            job.state, job.error = state, err
            _busy = None
            config.counters["background_compiles"] += 1
            _cv.notify_all()
        if config.debug():
            how = "failed" if state == "failed" else ("compiled" if job.where == "thread" else
                                                       f"compiled in the worker process, loaded in {here:.2f} s")
            print(f"[mnnjit] background kernel {job.name}: {how} ({job.seconds:.2f} s){' ' + err if err else ''}",
                  file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------ status
def compile_status() -> dict:
    """What background compiling is doing: ``mode``, ``pending``, ``done`` and ``failed`` job counts,
    ``compile_seconds`` / ``compile_cpu_seconds`` (their compile wall / CPU times), ``pending_kernels`` (names), ``worker``
    ("process", "thread" or None), ``worker_pid`` and ``cache`` (the cache tree)."""
    with _cv:
        jobs = list(_jobs.values())
        worker = "process" if _proc_state == "running" else ("thread" if _thread is not None else None)
    return {
        "mode": mode(),
        "pending": sum(j.state == "pending" for j in jobs),
        "done": sum(j.state == "done" for j in jobs),
        "failed": sum(j.state == "failed" for j in jobs),
        "compile_seconds": round(sum(j.seconds for j in jobs), 3),
        "compile_cpu_seconds": round(sum(j.cpu_seconds for j in jobs), 3),
        "pending_kernels": [j.name for j in jobs if j.state == "pending"],
        "failed_kernels": {j.name: j.error for j in jobs if j.state == "failed"},
        "worker": worker,
        "worker_pid": _proc.pid if _proc is not None else None,
        "cache": str(kcache.root()),
    }


def wait(timeout: Optional[float] = None) -> bool:
    """Block until no background compile is pending (True), or ``timeout`` seconds passed (False)."""
    end = None if timeout is None else time.monotonic() + timeout
    with _cv:
        while any(j.state == "pending" for j in _jobs.values()):
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                return False
            _cv.wait(left if left is not None else 1.0)
    return True


# ------------------------------------------------------------------------------ exit and fork
def _at_exit() -> None:
    """Stop taking jobs; let a kernel being loaded or compiled in the thread finish (LLVM must not be
    torn down under it); leave the worker process to finish its queue (its stdin closes)."""
    global _exiting
    with _cv:
        _exiting = True
        busy = _busy
        _cv.notify_all()
    if busy is not None:
        with _cv:
            while _busy is busy:
                _cv.wait(0.5)
    proc = _proc
    if proc is not None:
        try:
            proc.stdin.close()
        except OSError:
            pass
        proc.returncode = 0       # it outlives this process on purpose (no "still running" warning)


def _after_fork() -> None:
    """A forked child inherits neither the threads nor the worker: start afresh."""
    global _thread, _busy, _proc, _proc_state, _cv, _write_lock
    _cv = threading.Condition(threading.RLock())
    _write_lock = threading.Lock()
    _jobs.clear()
    _by_id.clear()
    _loads.clear()
    _compiles.clear()
    _thread = None
    _busy = None
    _proc = None
    _proc_state = "none"
