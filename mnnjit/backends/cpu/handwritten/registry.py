"""Hand-written CPU kernels: a registry any engineer can add to.

A hand-written kernel replaces an op's numpy ``ref`` on the compiled path. It has the same calling
convention as ``ref``: ``fn(inputs: list[np.ndarray], attrs: dict) -> np.ndarray`` (a tuple of arrays
for multi-output ops) and must produce the same values (same shape, same dtype) as ``ref``::

    # mnnjit/backends/cpu/handwritten/image_ops.py   (any module named *_ops.py in this package)
    import numba
    import numpy as np
    from mnnjit.backends.cpu.handwritten.registry import cpu_kernel

    @numba.njit(parallel=True, cache=True)
    def _blur_rows(src, out): ...

    @cpu_kernel("gaussian_blur", min_size=65536)
    def gaussian_blur(inputs, attrs):
        out = np.empty_like(inputs[0])
        _blur_rows(inputs[0], out)
        return out

Modules named ``kernels_*.py`` in ``mnnjit/backends/cpu/`` are imported automatically, and only when
the CPU backend is first activated (never by ``import mnnjit``), so they may ``import numba`` at
their top. A kernel registered elsewhere can use :func:`register_cpu_kernel` (also lazily, e.g.
from inside such a module). ``min_size`` is the output element count below which the op's ``ref``
is used instead (measure it: numpy is often faster on small arrays). ``dtypes``, when given,
restricts the kernel to nodes whose first input has one of those numpy dtypes.

This module itself imports neither numba nor any kernel module.
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import Callable, Iterable

import numpy as np

KernelFn = Callable[[list, dict], object]


@dataclass(frozen=True)
class KernelSpec:
    """One hand-written kernel for one op."""

    op: str
    fn: KernelFn
    min_size: int = 0
    dtypes: frozenset | None = None

    def accepts(self, node) -> bool:
        """Whether this kernel should run ``node`` (size and dtype limits)."""
        size = node.size if node.dtype is not None else max((i.size for i in node.inputs), default=0)
        if size < self.min_size:
            return False
        if self.dtypes is not None and node.inputs and node.inputs[0].dtype not in self.dtypes:
            return False
        return True


_KERNELS: dict[str, KernelSpec] = {}
_loaded = False


def register_cpu_kernel(op: str, fn: KernelFn, *, min_size: int = 0,
                        dtypes: Iterable | None = None) -> KernelFn:
    """Attach ``fn`` as the CPU kernel of op ``op`` (replacing an earlier one); returns ``fn``."""
    dts = None if dtypes is None else frozenset(np.dtype(d) for d in dtypes)
    _KERNELS[op] = KernelSpec(op, fn, int(min_size), dts)
    return fn


def cpu_kernel(op: str, *, min_size: int = 0, dtypes: Iterable | None = None) -> Callable[[KernelFn], KernelFn]:
    """Decorator form of :func:`register_cpu_kernel`."""
    def deco(fn: KernelFn) -> KernelFn:
        return register_cpu_kernel(op, fn, min_size=min_size, dtypes=dtypes)
    return deco


def load_kernel_modules() -> None:
    """Import every ``*_ops.py`` module of this package (once)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    from mnnjit.backends.cpu.handwritten import __path__ as pkg_path
    for info in pkgutil.iter_modules(pkg_path):
        if info.name.endswith("_ops"):
            importlib.import_module(f"{__package__}.{info.name}")


#: The ops this package's ``*_ops.py`` modules register (a test keeps it equal to what they do):
#: ``lookup`` answers for any other op without importing them (they import Numba, ~0.25 s of a
#: model's first forward). A module adding a kernel here adds its op to this set.
MODULE_OPS = frozenset({
    "conv2d", "cvt_color", "filter2d", "layer_norm", "mnn_conv2d", "morphology", "pool2d",
    "remap", "resize", "resize_image", "sep_filter", "warp_affine", "warp_perspective",
})


def lookup(node) -> KernelFn | None:
    """The hand-written kernel to run ``node`` with, or None (use the op's ``ref``). Imports the
    kernel modules on the first lookup of an op they register."""
    if not _loaded:
        if node.op not in MODULE_OPS and node.op not in _KERNELS:
            return None
        load_kernel_modules()
    spec = _KERNELS.get(node.op)
    if spec is None or not spec.accepts(node):
        return None
    return spec.fn


def registered() -> dict[str, KernelSpec]:
    """A copy of the kernel registry (loads the kernel modules first)."""
    load_kernel_modules()
    return dict(_KERNELS)
