"""The OpenCL runtime: one context and queue per process, programs built once (memory, then the
disk cache, then the compiler), kernel launches with tuned work-group sizes.

Programs are built from source only on a cache miss; the counters ``opencl_programs_built``,
``opencl_program_disk_hits`` and ``opencl_program_memory_hits`` (``mnnjit.settings.counters``) tell
which. A build error raises :class:`OpenCLBuildError` naming the program and carrying the
compiler's log.

Work-group tuning: a launch of a tunable kernel asks :meth:`Runtime.local_size` for its local
size; the first time a (kernel, global size) pair is seen, the candidates the tuning mode allows
are timed and the fastest is kept in the device's cache (``tuning.json``). Tuning modes follow
MNN's GPU modes (``MNN_GPU_TUNING_NONE/FAST/NORMAL/WIDE/HEAVY``, bits of the runtime config's
``numThread``, or ``MNNJIT_OPENCL_TUNING=none|fast|normal|wide|heavy``).
"""
from __future__ import annotations

import os
import threading
import time
from typing import Any, Sequence

from ... import settings
from .cache import DiskCache, device_key, program_key
from .device import DeviceInfo, import_cl, select_device

#: MNN's GPU mode bits in ``numThread`` (MNNForwardType.h): tuning
GPU_TUNING_BITS = {1: "none", 2: "heavy", 4: "wide", 8: "normal", 16: "fast"}
#: local-size candidates timed per tuning mode (besides the driver's own choice, ``None``)
TUNING_CANDIDATES = {"none": 0, "fast": 2, "normal": 4, "wide": 8, "heavy": 16}
ENV_TUNING = "MNNJIT_OPENCL_TUNING"


class OpenCLBuildError(RuntimeError):
    """An OpenCL program failed to compile: the message names it and holds the build log."""

    def __init__(self, name: str, device: str, log: str, detail: str = "") -> None:
        self.name, self.device, self.log = name, device, log
        super().__init__(f"OpenCL program {name!r} failed to build on {device}"
                         f"{': ' + detail if detail else ''}\n--- build log ---\n{log.strip() or '(empty)'}")


def tuning_mode_from_threads(num_thread: int) -> str | None:
    """MNN's GPU tuning mode encoded in a runtime config's ``numThread``, or None when it holds none."""
    for bit, mode in sorted(GPU_TUNING_BITS.items()):
        if num_thread & bit:
            return mode
    return None


class Runtime:
    """The process's OpenCL context, queue, program cache and tuner (see the module docstring)."""

    def __init__(self, spec: str | None = None) -> None:
        cl = self.cl = import_cl()
        self.info, self.device = select_device(spec)
        self.ctx = cl.Context([self.device])
        self.queue = cl.CommandQueue(self.ctx)
        info = self.info
        self.cache = DiskCache(device_key(info.platform, info.name, info.driver_version, info.opencl_version))
        self._programs: dict[str, Any] = {}
        self._kernels: dict[tuple[str, str], Any] = {}
        self.lock = threading.RLock()
        self.tuning = os.environ.get(ENV_TUNING, "").strip().lower() or ("fast" if info.is_gpu else "none")
        if self.tuning not in TUNING_CANDIDATES:
            raise ValueError(f"{ENV_TUNING}={self.tuning!r}: expected one of {sorted(TUNING_CANDIDATES)}")
        self.max_wg = int(info.max_work_group_size)

    # ------------------------------------------------------------------ programs
    def program(self, name: str, source: str, options: str = "") -> Any:
        """The built program for ``source`` (memory, disk cache, else compiled and cached)."""
        key = program_key(source, options)
        prg = self._programs.get(key)
        if prg is not None:
            settings.counters["opencl_program_memory_hits"] += 1
            return prg
        with self.lock:
            prg = self._programs.get(key)
            if prg is None:
                prg = self._load_or_build(name, key, source, options)
                self._programs[key] = prg
        return prg

    def _load_or_build(self, name: str, key: str, source: str, options: str) -> Any:
        cl = self.cl
        binary = self.cache.load_binary(key)
        if binary is not None:
            try:
                prg = cl.Program(self.ctx, [self.device], [binary]).build(options=options)
                settings.counters["opencl_program_disk_hits"] += 1
                return prg
            except cl.Error:  # a stale or corrupt binary: rebuild from source
                self.cache.drop_binary(key)
        raw = cl._cl._Program(self.ctx, source)
        try:
            raw.build(options.encode(), [self.device])
        except cl.Error as exc:
            try:
                log = raw.get_build_info(self.device, cl.program_build_info.LOG)
            except cl.Error:
                log = ""
            raise OpenCLBuildError(name, self.info.name, log, str(exc).splitlines()[0] if str(exc) else "") from None
        prg = cl.Program(raw)
        settings.counters["opencl_programs_built"] += 1
        if settings.debug():
            import sys
            print(f"[mnnjit] opencl: built program {name} ({len(source)} chars)", file=sys.stderr)
        try:
            binaries = prg.get_info(cl.program_info.BINARIES)
            if binaries and binaries[0]:
                self.cache.store_binary(key, bytes(binaries[0]))
        except cl.Error:
            pass
        return prg

    def kernel(self, name: str, source: str, kernel: str, options: str = "") -> Any:
        """A new kernel object ``kernel`` of program ``source`` (each caller sets its own arguments)."""
        prg = self.program(name, source, options)
        return self.cl.Kernel(prg, kernel)

    # ------------------------------------------------------------------ buffers
    def buffer(self, nbytes: int) -> Any:
        """A new device buffer of ``nbytes`` (at least 1)."""
        return self.cl.Buffer(self.ctx, self.cl.mem_flags.READ_WRITE, max(int(nbytes), 4))

    def upload(self, buf: Any, arr: Any, blocking: bool = False) -> None:
        """Copy a C-contiguous host array into ``buf``."""
        self.cl.enqueue_copy(self.queue, buf, arr, is_blocking=blocking)

    def download(self, arr: Any, buf: Any, blocking: bool = True) -> None:
        """Copy ``buf`` into the C-contiguous host array ``arr``."""
        self.cl.enqueue_copy(self.queue, arr, buf, is_blocking=blocking)

    def finish(self) -> None:
        """Wait for everything queued."""
        self.queue.finish()

    def finish_quietly(self) -> None:
        """Wait for everything queued, ignoring errors of failed launches (before a retry)."""
        try:
            self.queue.finish()
        except self.cl.Error:
            pass

    # ------------------------------------------------------------------ launches and tuning
    def launch(self, kernel: Any, gsize: Sequence[int], lsize: Sequence[int] | None) -> None:
        """Enqueue one kernel launch (``gsize`` already a multiple of ``lsize``)."""
        self.cl.enqueue_nd_range_kernel(self.queue, kernel, tuple(gsize), None if lsize is None else tuple(lsize))

    def local_size(self, kname: str, kernel: Any, gsize: Sequence[int], candidates: Sequence[Sequence[int]],
                   default: Sequence[int] | None) -> tuple[int, ...] | None:
        """The local size to launch ``kernel`` with over ``gsize``: tuned once per device, kernel and
        global size (the kernel's arguments must be set), else ``default``.

        ``candidates`` are local sizes the kernel accepts; each must divide the padded global size
        the caller launches with (the caller pads the global size to the chosen local size)."""
        mode = self.tuning
        n = TUNING_CANDIDATES.get(mode, 0)
        key = f"{kname}|{','.join(map(str, gsize))}"
        table = self.cache.tuning()
        if key in table:
            got = table[key]
            return None if got is None else tuple(got)
        if n == 0 or not candidates:
            return None if default is None else tuple(default)
        limit = min(self.max_wg, _kernel_wg_limit(self.cl, kernel, self.device))
        cands = [tuple(c) for c in candidates if _prod(c) <= limit][:n]
        if default is not None and tuple(default) not in cands and _prod(default) <= limit:
            cands.insert(0, tuple(default))
        if len(cands) <= 1:
            return cands[0] if cands else None
        best, best_t = None, float("inf")
        for c in cands:
            g = tuple(-(-gs // ls) * ls for gs, ls in zip(gsize, c))
            try:
                self.launch(kernel, g, c)  # warm-up (and a check the size is accepted)
                self.finish()
                t0 = time.perf_counter()
                for _ in range(3):
                    self.launch(kernel, g, c)
                self.finish()
                t = time.perf_counter() - t0
            except self.cl.Error:
                continue
            if t < best_t:
                best, best_t = c, t
        settings.counters["opencl_tuned"] += 1
        self.cache.set_tuning(key, None if best is None else list(best))
        return best

    def variant(self, key: str, builders: Sequence[Any], default: int) -> Any:
        """The launch of the fastest of several kernel variants computing the same thing (each
        builder returns a ready launch): timed once per device and key when tuning is on and kept
        in the tuning table, else ``default``."""
        table = self.cache.tuning()
        vkey = "variant|" + key
        if vkey in table and 0 <= int(table[vkey]) < len(builders):
            return builders[int(table[vkey])]()
        if TUNING_CANDIDATES.get(self.tuning, 0) == 0:
            return builders[default]()
        best, best_t, launches = default, float("inf"), {}
        for i, make in enumerate(builders):
            try:
                launch = launches[i] = make()
                self.launch(launch.kernel, launch.gsize, launch.lsize)
                self.finish()
                t0 = time.perf_counter()
                for _ in range(3):
                    self.launch(launch.kernel, launch.gsize, launch.lsize)
                self.finish()
                t = time.perf_counter() - t0
            except self.cl.Error:
                self.finish_quietly()
                continue
            if t < best_t:
                best, best_t = i, t
        self.cache.set_tuning(vkey, best)
        return launches.get(best) or builders[best]()

    def describe(self) -> str:
        """One line: device, driver, cache directory, tuning mode."""
        i = self.info
        return (f"opencl ({i.name}, {i.kind}, {i.compute_units} CUs, driver {i.driver_version}, "
                f"fp16 {'yes' if i.fp16 else 'no'}, tuning {self.tuning}, cache {self.cache.dir})")


def _prod(c: Sequence[int]) -> int:
    p = 1
    for v in c:
        p *= int(v)
    return p


def _kernel_wg_limit(cl: Any, kernel: Any, device: Any) -> int:
    try:
        return int(kernel.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, device))
    except cl.Error:
        return 1 << 30


_runtime: Runtime | None = None
_runtime_lock = threading.Lock()


def get_runtime() -> Runtime:
    """The process's runtime (created on first use; NoOpenCL when there is no device)."""
    global _runtime
    if _runtime is None:
        with _runtime_lock:
            if _runtime is None:
                _runtime = Runtime()
    return _runtime


def device_info() -> DeviceInfo:
    """The device the runtime runs on."""
    return get_runtime().info
