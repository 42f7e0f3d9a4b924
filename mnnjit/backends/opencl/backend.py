"""The OpenCL backend (pyopencl): fusion groups, single ops and whole graphs on an OpenCL device.

* **Step plans** (``compiler/plan.py``): ``run_group`` renders a fusion group's spec as OpenCL C
  (:mod:`.codegen`) and runs it on device arrays; host inputs are uploaded (read-only arrays once,
  kept while they live); results stay on the device until the compiler asks ``to_host``.
  ``run_op`` runs the ops of :mod:`.launches` (convolutions, matmul, pooling, softmax, norms,
  resize, ...).
* **Graph lowering**: ``lower_graph`` compiles a whole static graph (:class:`.graph.CLGraph`).

Failure rules: with no OpenCL platform the backend reports itself unavailable (one warning; the
registry runs the CPU); a program that does not compile raises
:class:`~.runtime.OpenCLBuildError` with the build log; a kernel that fails on the device leaves
that step to the CPU with a warning.
"""
from __future__ import annotations

import threading
import warnings
from collections import OrderedDict
from typing import Any, Sequence

import numpy as np
from numpy.lib.stride_tricks import as_strided

from mnnjit.backends.base import Backend, BackendUnavailable
from . import codegen
from .buffers import BufferPool, DeviceArray, download, new_array, storage_of, upload
from .device import probe
from .launches import MAX_ELEMS, Binder, Leaf, Unsupported, build, device_inputs, group_launch, leaf_of, supported
from .runtime import OpenCLBuildError, get_runtime, tuning_mode_from_threads

_warned = False
_reason_cache: list = []

#: host arrays (read-only ones) kept uploaded, most recently used last
UPLOAD_CACHE_ENTRIES = 64
UPLOAD_CACHE_BYTES = 256 << 20


class OpenCLBackend(Backend):
    """Runs groups, ops and graphs through pyopencl on the device :mod:`.device` selects."""

    name = "opencl"
    #: every static model graph is lowered here, convolutions or not: keeping a forward's data on
    #: the device is what pays, and a model that chose OpenCL expects to run there
    lowers_every_model = True

    @classmethod
    def unavailable_reason(cls) -> str | None:
        """Why the backend cannot run here (no pyopencl, no platform, no matching device), or None."""
        if not _reason_cache:
            _reason_cache.append(probe())
        return _reason_cache[0]

    @classmethod
    def is_available(cls) -> bool:
        global _warned
        why = cls.unavailable_reason()
        if why is not None and not _warned:
            _warned = True
            warnings.warn(f"OpenCL backend unavailable ({why}); running on the CPU", RuntimeWarning, stacklevel=3)
        return why is None

    def __init__(self) -> None:
        try:
            self.rt = get_runtime()
        except Exception as exc:  # a driver that fails to start: unavailable, not a crash
            raise BackendUnavailable(f"OpenCL failed to start: {type(exc).__name__}: {exc}") from exc
        self.pool = BufferPool(self.rt)
        self._dummy = self.rt.buffer(64)
        self._group_ok: dict[str, bool] = {}
        self._uploads: "OrderedDict[tuple, tuple]" = OrderedDict()
        self._upload_bytes = 0
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ properties
    @property
    def is_gpu(self) -> bool:
        """Whether the device is a GPU (``backend="AUTO"`` picks OpenCL only then)."""
        return self.rt.info.is_gpu

    @property
    def device(self) -> Any:
        """The :class:`~.device.DeviceInfo` of the device in use."""
        return self.rt.info

    def _binder(self) -> Binder:
        # a binder per call: the constants it uploads die with the call (ids of dead nodes are reused)
        return Binder(self.rt, False, self._dummy)

    # ------------------------------------------------------------------ capability
    def supports_group(self, group: Any) -> bool:
        if group.producer is not None or group.size > MAX_ELEMS:
            return False
        spec = group.spec
        key = spec.key()
        ok = self._group_ok.get(key)
        if ok is None:
            try:
                codegen.check_spec(spec)
                ok = all(storage_of(d) is not None for d in spec.leaf_dtypes) and \
                    storage_of(codegen.out_dtype(spec)) is not None
            except codegen.Untranslatable:
                ok = False
            self._group_ok[key] = ok
        return ok

    def supports_op(self, node: Any) -> bool:
        if node.op in ("reshape", "transpose", "slice", "broadcast_to", "convert"):
            return False  # views: the compiler keeps them on the host
        return supported(node) is None

    # ------------------------------------------------------------------ buffers
    def alloc(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        return new_array(self.pool, tuple(shape), dtype)

    def to_host(self, buf: Any) -> Any:
        if isinstance(buf, tuple):
            return tuple(self.to_host(b) for b in buf)
        if isinstance(buf, DeviceArray):
            with self.rt.lock:
                return download(self.rt, buf)
        return buf if isinstance(buf, np.ndarray) else np.asarray(buf)

    def from_host(self, arr: np.ndarray) -> Any:
        with self.rt.lock:
            return upload(self.rt, self.pool, np.asarray(arr))

    def _device(self, v: Any) -> DeviceArray:
        """``v`` as a contiguous device array (host arrays uploaded; read-only ones cached)."""
        if isinstance(v, DeviceArray):
            return v
        arr = np.ascontiguousarray(v)
        key = self._upload_key(v)
        if key is not None:
            hit = self._uploads.get(key)
            if hit is not None:
                self._uploads.move_to_end(key)
                return hit[0]
        dev = upload(self.rt, self.pool, arr)
        if key is not None:
            self._remember(key, dev, v)
        return dev

    def _upload_key(self, v: Any) -> tuple | None:
        if not isinstance(v, np.ndarray) or v.flags.writeable or v.nbytes > UPLOAD_CACHE_BYTES // 4:
            return None
        return (id(v), v.__array_interface__["data"][0], v.shape, v.strides, v.dtype.str)

    def _remember(self, key: tuple, dev: Any, host: np.ndarray) -> None:
        self._uploads[key] = (dev, host)  # the host array is kept: its id stays its own
        self._upload_bytes += host.nbytes
        while len(self._uploads) > UPLOAD_CACHE_ENTRIES or self._upload_bytes > UPLOAD_CACHE_BYTES:
            _, (_, old) = self._uploads.popitem(last=False)
            self._upload_bytes -= old.nbytes

    def _leaf(self, v: Any, shape: tuple) -> Leaf:
        """A group operand: device arrays as they are, host arrays by their strides (broadcast
        views upload only the memory they span)."""
        if isinstance(v, DeviceArray):
            return leaf_of(v, shape)
        arr = np.asarray(v)
        if arr.size == 1:
            return leaf_of(self._device(arr.reshape(1)), shape)
        isz = arr.itemsize
        if any(s < 0 or s % isz for s in arr.strides) or arr.flags.c_contiguous:
            dev = self._device(arr if arr.flags.c_contiguous else np.ascontiguousarray(arr))
            return leaf_of(dev, shape)
        key = self._upload_key(arr)
        hit = self._uploads.get(key) if key is not None else None
        if hit is not None:
            flat_dev = hit[0]
        else:
            span = 1 + sum((d - 1) * (s // isz) for d, s in zip(arr.shape, arr.strides) if d > 1)
            flat = np.ascontiguousarray(as_strided(arr, shape=(span,), strides=(isz,), writeable=False))
            flat_dev = upload(self.rt, self.pool, flat)
            if key is not None:
                self._remember(key, flat_dev, arr)
        pad = len(shape) - arr.ndim
        strides = [0] * pad + [0 if d == 1 else s // isz for d, s in zip(arr.shape, arr.strides)]
        return Leaf(flat_dev.buf, flat_dev.ctype, strides, 0, False)

    # ------------------------------------------------------------------ execution
    def run_group(self, group: Any, inputs: Sequence[Any], out: Any) -> Any:
        rt = self.rt
        with rt.lock:
            try:
                shape = tuple(group.shape)
                leaves = [self._leaf(v, shape) for v in inputs]
                if not isinstance(out, DeviceArray):
                    out = self.alloc(tuple(group.out_shape), group.out_dtype)
                for launch in group_launch(self._binder(), group.spec, group.params, shape, group.axes, leaves,
                                           out):
                    rt.launch(launch.kernel, launch.gsize, launch.lsize)
            except OpenCLBuildError:
                raise
            except Unsupported:
                return None
            except rt.cl.Error as exc:
                rt.finish_quietly()
                warnings.warn(f"OpenCL: fused kernel {'+'.join(group.ops)} failed on {rt.info.name}; "
                              f"it runs on the CPU: {exc}", RuntimeWarning, stacklevel=2)
                return None
        return out

    def run_op(self, node: Any, inputs: Sequence[Any]) -> Any:
        if supported(node) is not None:
            return None
        rt = self.rt
        with rt.lock:
            try:
                dev = set(device_inputs(node))
                ins = [self._device(v) if k in dev else None for k, v in enumerate(inputs)]
                out = self.alloc(tuple(node.shape), node.dtype)
                b = self._binder()
                for launch in build(b, node, ins, out):
                    rt.launch(launch.kernel, launch.gsize, launch.lsize)
                rt.finish()  # the launches used this call's constants
            except OpenCLBuildError:
                raise
            except Unsupported:
                return None
            except rt.cl.Error as exc:
                rt.finish_quietly()
                warnings.warn(f"OpenCL: {node.op} -> {list(node.shape)} failed on {rt.info.name}; it runs on "
                              f"the CPU: {exc}", RuntimeWarning, stacklevel=2)
                return None
        return out

    def fusion_rules(self, modes: Any = None) -> Any:
        """Convolutions take their residual add as epilogue (:class:`.graph.FusionRules`)."""
        from .graph import FusionRules
        return FusionRules()

    def lower_graph(self, graph: Any, modes: Any = None) -> Any:
        """The whole graph as OpenCL launches (:class:`.graph.CLGraph`)."""
        from .graph import CLGraph
        return CLGraph(self, graph, modes)

    # ------------------------------------------------------------------ settings
    def set_num_threads(self, n: int) -> None:
        """MNN's GPU modes ride on ``numThread``: its tuning bits choose the work-group tuning mode."""
        mode = tuning_mode_from_threads(int(n))
        if mode is not None:
            self.rt.tuning = mode

    def plan_key(self) -> tuple:
        i = self.rt.info
        return ("opencl", i.index, i.name)

    def describe(self) -> str:
        return self.rt.describe()

    # ------------------------------------------------------------------ MNN's cache file
    def save_cache(self, path: str) -> int:
        """Write the device's program binaries and tuning table to one file (MNN's OpenCL cache file);
        returns the number of programs written."""
        return self.rt.cache.export_bundle(path)

    def load_cache(self, path: str) -> int:
        """Read a cache file :meth:`save_cache` wrote (another device's or driver's is ignored);
        returns the number of programs taken."""
        return self.rt.cache.import_bundle(path)


BACKEND = OpenCLBackend
