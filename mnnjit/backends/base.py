"""The backend interface: the only thing the compiler knows about a backend.

The compiler lowers every graph (a front end's expression graph or a model's forward) in one of two
ways, and a backend takes part in both through this interface:

* **Step plans** (``compiler/plan.py``): the graph becomes a list of steps, each a *fusion group*
  (:class:`mnnjit.backends.ir.Group`: elementwise/broadcast/cast chains, optionally ending in a
  reduction) or a single op. For each step the compiler asks the backend whether it runs it
  (``supports_group`` / ``supports_op``) and then runs it there (``run_group`` / ``run_op``); a step the
  backend refuses runs on the ops' numpy references, with its inputs brought to the host
  (``to_host``) and its result handed back (``from_host``): these are the transfers at partition
  boundaries. A new backend is therefore useful from its first supported op.
* **Graph lowering** (``lower_graph``): a backend may take a whole static graph at once (CPU: the
  kernel-step plan with fused convolution blocks and a buffer arena; a delegate: a vendor-compiled
  partition) and return a :class:`CompiledGraph` that maps input arrays to output arrays. Returning
  None leaves the graph to step plans.

Buffers: a backend's buffers are whatever it computes into (numpy arrays on the CPU, device buffers
on OpenCL). ``run_group`` / ``run_op`` accept numpy arrays as well as the backend's own buffers among
their inputs (the backend uploads what it needs); their results stay the backend's buffers until
the compiler calls ``to_host``.
"""
from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

import numpy as np


class BackendUnavailable(RuntimeError):
    """A backend was asked for that cannot run here (missing package, no device); the message says why."""


@dataclass
class GraphIR:
    """A static graph handed to :meth:`Backend.lower_graph`.

    ``placeholders`` are the graph's inputs (``Node``s with op ``placeholder``, fed per run in this
    order), ``outputs`` the nodes whose values a run returns, ``out_fmts`` their data formats.
    Constant nodes (op ``const``) carry weights; everything else is computed. ``fusion`` is the rules
    object the compiler's fusion pass used on this graph (:meth:`Backend.fusion_rules`; None: the
    graph was not fused): the backend's lowering gets back what the rules prepared while deciding.
    """

    placeholders: list
    outputs: list
    out_fmts: list[str] = field(default_factory=list)
    fusion: Any = None


class CompiledGraph(Protocol):
    """What :meth:`Backend.lower_graph` returns: a graph compiled for one input signature."""

    placeholders: list
    out_fmts: list[str]

    def run(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        """Outputs (host arrays, the graph's output order) for input arrays in placeholder order."""


class Backend(ABC):
    """A compute backend (see the module docstring)."""

    #: Short name used by the registry, ``explain`` and the debug log (``"cpu"``, ``"opencl"``, ...).
    name: str = "?"

    @classmethod
    def is_available(cls) -> bool:
        """Whether this backend can run in this process (its packages import, it finds a device)."""
        return True

    # ------------------------------------------------------------------ capability
    @abstractmethod
    def supports_group(self, group: Any) -> bool:
        """Whether this backend runs fusion group ``group`` as one kernel."""

    @abstractmethod
    def supports_op(self, node: Any) -> bool:
        """Whether this backend has its own kernel for the single (non-fused) op ``node``."""

    # ------------------------------------------------------------------ execution
    @abstractmethod
    def run_group(self, group: Any, inputs: Sequence[Any], out: Any) -> Any:
        """Run fusion group ``group`` on its leaf values ``inputs`` into buffer ``out``; returns the
        result buffer, or None when it cannot after all (the compiler then runs the references)."""

    @abstractmethod
    def run_op(self, node: Any, inputs: Sequence[Any]) -> Any:
        """Run one op with this backend's kernel; returns its value (a tuple for multi-output ops),
        or None when it cannot after all."""

    def fusion_rules(self, modes: Any = None) -> Any:
        """The rules deciding which chains of a graph this backend runs as one kernel (an object with
        ``accepts(pattern, body) -> bool``, see ``compiler/fuse_blocks.py``), or None: no fusion.
        The compiler makes one per graph lowering and hands it back in ``GraphIR.fusion``."""
        return None

    def lower_graph(self, graph: GraphIR, modes: Any = None) -> CompiledGraph | None:
        """Compile a whole static graph for this backend, or None to leave it to step plans."""
        return None

    def compile_step_list(self, steps: list, init: list, feed_slots: list, out_slots: list, order: list,
                          check: Any = None, sample: Any = None) -> Any:
        """A tiny graph's reference step list (``(ref, attrs, input slots, output slot, dtype, shape)``
        tuples over value slots) as one compiled function ``run(arrays) -> outputs``, or None. With
        ``check`` and ``sample`` its first result must match ``check(sample)``."""
        return None

    def run_context(self) -> Any:
        """A context manager around one graph run on this backend (the CPU pins BLAS threads)."""
        return contextlib.nullcontext()

    # ------------------------------------------------------------------ buffers
    def alloc(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        """A new buffer of ``shape``/``dtype`` (uninitialised)."""
        return np.empty(shape, dtype)

    def to_host(self, buf: Any) -> Any:
        """A buffer's contents as a numpy array (tuples of buffers element by element)."""
        if isinstance(buf, tuple):
            return tuple(self.to_host(b) for b in buf)
        return buf if isinstance(buf, np.ndarray) else np.asarray(buf)

    def from_host(self, arr: np.ndarray) -> Any:
        """A buffer holding ``arr``'s contents."""
        return arr

    # ------------------------------------------------------------------ settings
    def set_num_threads(self, n: int) -> None:
        """Use ``n`` worker threads (backends without threads ignore it)."""

    def num_threads(self) -> int:
        """The worker threads this backend uses."""
        return 1

    def clear_caches(self, disk: bool = False) -> None:
        """Forget compiled kernels kept in memory (and on disk when ``disk``)."""

    def plan_key(self) -> tuple:
        """The settings a compiled graph depends on (thread count, device): part of its cache key."""
        return (self.name,)

    def describe(self) -> str:
        """One line for ``explain``: the backend and its settings."""
        return self.name
