"""The NPU backend (MNN forward type 5 "NN", and 8 "HIAI"): a delegate bridge to vendor SDKs.

It is a *delegate backend* (``lowers_every_graph``): the compiler hands it every static graph and
cuts it (``mnnjit/compiler/partition.py``) between the ops the configured bridge claims
(:meth:`NPUBackend.claimer`) and the CPU. Each claimed partition comes back here
(:meth:`NPUBackend.lower_graph`) to be compiled by the SDK once per input signature, with the
result cached on disk (``<cache>/npu/<bridge>/<key>.*``, the cache being the ``cache_dir`` setting,
a RuntimeManager's ``set_cache`` path + ``.npu``, or ``<MNNJIT_CACHE_DIR>/npu``).

Failures never stop a model: a missing SDK or device gives one warning and the CPU; an SDK error
compiling a partition gives a warning naming its ops and that partition runs on the CPU; an SDK
error while running one does the same from then on. The step plans a graph left to the compiler
run on the CPU backend (every step method forwards there).
"""
from __future__ import annotations

import threading
import warnings
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ... import settings
from ..base import Backend, BackendUnavailable
from . import options as O
from .cache import cache_root, graph_key
from .delegate import Delegate, bridge_class, default_bridge


class NPUDelegateWarning(RuntimeWarning):
    """The NPU delegate fell back to the CPU (missing SDK or device, an SDK error on a partition)."""


def _ops_summary(nodes: list) -> str:
    c = Counter(n.op for n in nodes)
    return ", ".join(f"{op} x{k}" if k > 1 else op for op, k in c.most_common())


class _Partition:
    """A compiled partition (the CompiledGraph the compiler runs): the SDK's runner, with the
    outputs checked against the partition's shapes and dtypes, and the reference evaluator as the
    fallback when the SDK fails at run time."""

    def __init__(self, graph: Any, run: Callable, warn: Callable[[str], None], what: str) -> None:
        self.graph = graph
        self.placeholders = graph.placeholders
        self.out_fmts = graph.out_fmts
        self._run = run
        self._warn = warn
        self._what = what
        self._specs = [(o.shape, o.dtype) for o in graph.outputs]
        self._in_shapes = [p.shape for p in graph.placeholders]
        self._lock = threading.Lock()

    def run(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        # SDKs check shapes strictly: a scalar input may arrive as a 1-element array
        arrays = [a if a.shape == s else a.reshape(s) for a, s in zip(arrays, self._in_shapes)]
        if self._run is not None:
            try:
                outs = self._run(arrays)
                return [a if (type(a) is np.ndarray and a.dtype == dt and a.shape == shape)
                        else np.asarray(a, dt).reshape(shape) for a, (shape, dt) in zip(outs, self._specs)]
            except Exception as exc:  # noqa: BLE001 - the SDK failed at run time: never crash the model
                self._run = None
                self._warn(f"{self._what} failed at run time ({type(exc).__name__}: {exc}); "
                           "it runs on the CPU from now on")
        from ...graph import bump_write_counter
        from ...ops.evaluate import evaluate
        with self._lock:
            for p, a in zip(self.graph.placeholders, arrays):
                p.value = a
            bump_write_counter()
            evaluate(list(self.graph.outputs))
            return [o.value for o in self.graph.outputs]


class NPUBackend(Backend):
    """The delegate bridge (module docstring)."""

    name = "npu"
    #: the compiler hands every static graph here, to be cut between claimed partitions and the CPU
    lowers_every_graph = True

    def __init__(self) -> None:
        self._bridges: dict[tuple, Delegate | None] = {}
        self._warned: set[str] = set()
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ availability
    @classmethod
    def unavailable_reason(cls) -> str | None:
        """Why the configured bridge cannot run here (its SDK is not installed), or None."""
        opts = O.current()
        name = opts.get("bridge")
        if name:
            try:
                return bridge_class(name).missing()
            except KeyError as exc:
                return str(exc.args[0])
        if default_bridge() is None:
            return "no NPU SDK is installed (pip install openvino, or onnxruntime)"
        return None

    @classmethod
    def is_available(cls) -> bool:
        """True when the configured bridge's SDK is installed; else BackendUnavailable saying why
        (the registry passes the reason on in MNN's fallback message)."""
        why = cls.unavailable_reason()
        if why is not None:
            raise BackendUnavailable(why)
        return True

    # ------------------------------------------------------------------ settings
    def options(self, **opts: Any) -> Any:
        """A context manager applying delegate settings on this thread (``options.using``)."""
        return O.using(**opts)

    def warn(self, message: str) -> None:
        """Warn once per message and process."""
        with self._lock:
            if message in self._warned:
                return
            self._warned.add(message)
        warnings.warn(message, NPUDelegateWarning, stacklevel=3)

    def delegate(self) -> Delegate | None:
        """The bridge for the settings in force, or None (after one warning) when its SDK or
        device is missing."""
        opts = O.current()
        name = opts.get("bridge") or default_bridge()
        key = (name, tuple(sorted((k, repr(v)) for k, v in opts.items() if k not in ("refuse", "cache_dir"))))
        if key in self._bridges:
            return self._bridges[key]
        d: Delegate | None = None
        if name is None:
            self.warn("NPU backend: no NPU SDK is installed (pip install openvino, or onnxruntime); "
                      "running on the CPU")
        else:
            try:
                cls = bridge_class(name)
            except KeyError as exc:
                cls = None
                self.warn(f"NPU backend: {exc.args[0]}; running on the CPU")
            if cls is not None:
                why = cls.missing()
                if why is None:
                    try:
                        d = cls(opts)
                        why = d.device_missing()
                    except Exception as exc:  # noqa: BLE001 - a broken SDK install
                        why = f"the {name} SDK failed to start ({type(exc).__name__}: {exc})"
                    if why is not None:
                        d = None
                if why is not None:
                    self.warn(f"NPU backend: {why}; running on the CPU")
        self._bridges[key] = d
        return d

    # ------------------------------------------------------------------ the delegate protocol
    def claimer(self, graph: Any = None) -> Callable[[Any], str | None] | None:
        """The per-op claim predicate of the configured bridge (with the ``refuse`` setting
        consulted first), or None when the delegate cannot run."""
        d = self.delegate()
        if d is None:
            return None
        refuse = O.current().get("refuse")

        def claim(node: Any) -> str | None:
            if refuse is not None:
                why = refuse(node)
                if why:
                    return f"refused by the 'refuse' setting: {why}"
            return d.claim(node)
        return claim

    def partition_limits(self) -> tuple[int, int | None]:
        """(min_nodes_per_partition, max_partitions) in force."""
        opts = O.current()
        return int(opts.get("min_nodes_per_partition") or 1), opts.get("max_partitions")

    def lower_graph(self, graph: Any, modes: Any = None) -> Any:
        """A claimed partition compiled by the bridge's SDK (from the disk cache when it is there),
        or None after a warning naming its ops when the SDK fails."""
        d = self.delegate()
        if d is None:
            return None
        from ...graph import topo_order
        nodes = [n for n in topo_order(list(graph.outputs), stop_at_values=False)
                 if n.op not in ("const", "placeholder")]
        what = f"NPU bridge {d.name}: the partition of {len(nodes)} op(s) ({_ops_summary(nodes)})"
        low = bool(modes is not None and getattr(modes, "fp16", False))
        try:
            key = graph_key(graph, d.settings_key() + (low,))
            folder = cache_root(O.current()) / d.name
            folder.mkdir(parents=True, exist_ok=True)
            compiled = d.compile(graph, folder / key, low)
        except Exception as exc:  # noqa: BLE001 - any SDK error: this partition runs on the CPU
            settings.counters["npu_compile_failures"] += 1
            self.warn(f"{what} failed to compile ({type(exc).__name__}: {str(exc).strip()[:300]}); "
                      "it runs on the CPU")
            return None
        settings.counters["npu_partitions_from_cache" if compiled.from_cache else "npu_partitions_compiled"] += 1
        return _Partition(graph, compiled.run, self.warn, what)

    # ------------------------------------------------------------------ everything else: the CPU
    @property
    def cpu(self) -> Backend:
        """The CPU backend the steps left off the delegate run on."""
        from .. import registry
        return registry.get("cpu")

    def supports_group(self, group: Any) -> bool:
        return self.cpu.supports_group(group)

    def supports_op(self, node: Any) -> bool:
        return self.cpu.supports_op(node)

    def run_group(self, group: Any, inputs: Sequence[Any], out: Any) -> Any:
        return self.cpu.run_group(group, inputs, out)

    def run_op(self, node: Any, inputs: Sequence[Any]) -> Any:
        return self.cpu.run_op(node, inputs)

    def compile_step_list(self, steps: list, init: list, feed_slots: list, out_slots: list, order: list,
                          check: Any = None, sample: Any = None) -> Any:
        return self.cpu.compile_step_list(steps, init, feed_slots, out_slots, order, check=check, sample=sample)

    def run_context(self) -> Any:
        return self.cpu.run_context()

    def set_num_threads(self, n: int) -> None:
        self.cpu.set_num_threads(n)

    def plan_key(self) -> tuple:
        opts = O.current()
        d = self.delegate()
        bridge = d.settings_key() if d is not None else ("cpu-fallback",)
        return ("npu", bridge, self.partition_limits(), id(opts.get("refuse")), str(cache_root(opts))) + \
            self.cpu.plan_key()

    def describe(self) -> str:
        d = self.delegate()
        return f"npu ({d.describe() if d is not None else 'no SDK: CPU'})"


def cache_folder_for(cache_path: str) -> Path:
    """The partition cache folder beside a RuntimeManager's ``set_cache`` file."""
    return Path(str(cache_path) + ".npu")
