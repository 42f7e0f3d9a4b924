"""Compiling ahead of time: :func:`warmup` fills the kernel cache for a model, so that later
processes (a container's, a CI job's, a pool's workers) start warm.

``mnnjit.warmup(...)`` calls :func:`warmup` (this module is callable).

A process that finds a kernel missing runs its reference path and compiles it in the background
(``MNNJIT_COMPILE``, see :mod:`mnnjit.backends.cpu.runtime.tiering`); ``warmup`` instead waits for
every kernel a model's forward needs, at the given input shapes, precisions and backend, printing
one line per kernel. Typical use, at image build time::

    RUN python -c "import mnnjit; mnnjit.warmup('model.mnn', {'x': [1, 3, 224, 224]})"
    # or: RUN mnnjit warmup model.mnn --input x:1x3x224x224

Without a model at hand, :func:`prewarm` compiles the kernels of the common CNN building blocks
(MobileNet inverted residual blocks, ResNet 3x3 blocks, pooling, a classifier): the CPU kernels
take shapes as arguments, so most convolutional models then start with little or nothing left to
compile.

The cache lives in ``MNNJIT_CACHE_DIR`` (default ``~/.cache/mnnjit``); set the same directory
(it may be read-only) where the model runs. Kernels are keyed by mnnjit, Numba and CPU, so warm
up on the kind of machine that will run the model (``NUMBA_CPU_NAME=generic`` makes a cache any
x86-64 machine can use, at some speed cost).
"""
from __future__ import annotations

import os
import sys
import time
import types
from typing import Any, Mapping, Optional, Sequence, Union

import numpy as np

__all__ = ["warmup", "prewarm", "compile_status"]

Shapes = Union[None, Mapping[str, Sequence[int]], Sequence[Sequence[int]]]


def compile_status() -> dict:
    """What background compiling is doing now (pending / done / failed kernels, the worker, the
    cache directory): see :func:`mnnjit.backends.cpu.runtime.tiering.compile_status`."""
    from mnnjit.backends.cpu.runtime import tiering
    return tiering.compile_status()


def warmup(model: Any, input_shapes: Shapes = None, *, precision: Union[str, Sequence[str]] = "normal",
           backend: Any = "CPU", threads: Optional[int] = None, progress: bool = True) -> dict:
    """Compile every kernel ``model`` needs into the kernel cache, waiting for each.

    Args:
        model: a .mnn file path, or a Module loaded by ``nn.load_module_from_file`` (then
            ``precision``/``backend``/``threads`` are the module's own and are ignored).
        input_shapes: ``{input name: shape}``, or shapes in input order, or None for the shapes
            the model declares (an input with unknown sizes must be given).
        precision: ``"normal"``, ``"high"``, ``"low"`` or ``"lowBF"``, or a list of them (each
            is compiled: low precision has kernels of its own).
        backend: an MNN backend name or number (as ``create_runtime_manager`` takes).
        threads: worker threads (default: the runtime's default).
        progress: print one line per kernel (and a summary) on stderr.

    Returns:
        ``{"kernels": compiled or loaded kernel signatures, "compiled": compiled now,
        "seconds": wall time, "cache": the cache tree}``.

    Raises:
        FileNotFoundError: no such model file. ValueError: an input shape is missing or has the
        wrong rank. RuntimeError: a kernel failed to compile (the message names it).
    """
    from mnnjit.backends.cpu.runtime import tiering
    t0 = time.perf_counter()
    precisions = [precision] if isinstance(precision, str) else list(precision)
    if not precisions:
        raise ValueError("warmup: no precision given")
    modules = []
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"warmup: model file not found: {path}")
        for p in precisions:
            modules.append((p, _load(path, p, backend, threads)))
    elif hasattr(model, "forward") and getattr(model, "_program", None) is not None:
        modules.append(("module", model))
    else:
        raise TypeError(f"warmup: expected a .mnn path or a loaded Module, got {type(model).__name__}")
    total, compiled = 0, 0
    tiering.quiet += 1          # (its own progress lines instead of the background notice)
    try:
        for label, module in modules:
            t, c = _warm_one(tiering, label, module, input_shapes, progress)
            total, compiled = total + t, compiled + c
    finally:
        tiering.quiet -= 1
    seconds = time.perf_counter() - t0
    cache = tiering.compile_status()["cache"]
    if progress:
        print(f"mnnjit warmup: {compiled} kernel(s) compiled in {seconds:.1f} s; cache {cache}",
              file=sys.stderr, flush=True)
    return {"kernels": total, "compiled": compiled, "seconds": seconds, "cache": cache}


def _warm_one(tiering: Any, label: str, module: Any, input_shapes: Shapes, progress: bool) -> tuple:
    """Warm one module up: (kernels done, kernels compiled)."""
    feeds = _inputs(module, input_shapes)
    before = tiering.compile_status()
    # pass 1: a forward that queues every missing kernel (and loads the cached ones) ...
    with tiering.forced("background"):
        _forward(module, feeds)
    queued = tiering.compile_status()["pending_kernels"]
    if progress and queued:
        print(f"mnnjit warmup: compiling {len(queued)} kernel(s) for precision {label} "
              f"into {tiering.compile_status()['cache']}", file=sys.stderr, flush=True)
    _wait(tiering, queued, progress)
    after = tiering.compile_status()
    if after["failed"] > before["failed"]:
        raise RuntimeError(f"warmup: kernels failed to compile: {after['failed_kernels']}")
    # ... pass 2: a forward waiting for anything the first could not reach
    with tiering.forced("sync"):
        _forward(module, feeds)
    return after["done"] - before["done"], len(queued)


def _load(path: str, precision: str, backend: Any, threads: Optional[int]) -> Any:
    import mnnjit.nn as nn
    from mnnjit.format import read_net
    config: dict = {"precision": precision, "backend": backend}
    if threads:
        config["numThread"] = int(threads)
    rt = nn.create_runtime_manager((config,))
    net = read_net(path, load_external=False)
    outputs = list(net.outputName or [])
    inputs = [net.tensorName[op.outputIndexes[0]] for op in net.oplists
              if op.type == "Input" and op.outputIndexes]
    return nn.load_module_from_file(path, inputs, outputs, runtime_manager=rt)


def _inputs(module: Any, shapes: Shapes) -> list:
    """Seeded input arrays for the module's inputs, of the given or declared shapes."""
    specs = module._program.inputs
    given: dict = {}
    if isinstance(shapes, Mapping):
        unknown = set(shapes) - {s.name for s in specs}
        if unknown:
            raise ValueError(f"warmup: the model has no input(s) {sorted(unknown)} "
                             f"(inputs: {[s.name for s in specs]})")
        given = {k: list(v) for k, v in shapes.items()}
    elif shapes is not None:
        shapes = list(shapes)
        if len(shapes) != len(specs):
            raise ValueError(f"warmup: {len(shapes)} shape(s) given for {len(specs)} input(s) "
                             f"{[s.name for s in specs]}")
        given = {s.name: list(v) for s, v in zip(specs, shapes)}
    rng = np.random.default_rng(0)
    feeds = []
    for s in specs:
        dims = given.get(s.name, None if s.dims is None else list(s.dims))
        if dims is None or any(int(d) < 0 for d in dims):
            raise ValueError(f"warmup: input {s.name!r} has unknown sizes {dims}: give its shape")
        dims = [int(d) for d in dims]
        if s.dims is not None and len(s.dims) and len(dims) != len(s.dims):
            raise ValueError(f"warmup: input {s.name!r} takes {len(s.dims)} dimensions, got {dims}")
        if s.dtype.kind == "f":
            feeds.append(rng.standard_normal(dims).astype(s.dtype))
        else:
            feeds.append(rng.integers(0, 4, dims).astype(s.dtype))
    return feeds


def _forward(module: Any, feeds: list) -> None:
    import mnnjit.expr as F
    vs = [F.const(a, list(a.shape), F.NCHW) for a in feeds]
    outs = module.forward(vs if len(vs) != 1 else vs[0])
    for o in outs if isinstance(outs, (list, tuple)) else [outs]:
        o.read()


def _wait(tiering: Any, queued: list, progress: bool) -> None:
    """Wait for the queued kernels, one progress line per kernel done."""
    reported: set = set()
    start = time.perf_counter()
    n = len(queued)
    while True:
        done = tiering.wait(timeout=0.25)
        st = tiering.compile_status()
        if progress:
            pending = set(st["pending_kernels"])
            for name in queued:
                if name not in pending and name not in reported:
                    reported.add(name)
                    print(f"mnnjit warmup: [{len(reported)}/{n}] {_short(name)} "
                          f"({time.perf_counter() - start:.1f} s)", file=sys.stderr, flush=True)
        if done:
            return


def _short(name: str) -> str:
    return name.split("(", 1)[0]


def prewarm(precision: Union[str, Sequence[str]] = "normal", progress: bool = True) -> dict:
    """Compile the kernels of common CNN building blocks into the kernel cache (no model needed).

    A synthetic network of random weights, built with ``mnnjit.expr``, runs once per precision:
    a strided 3x3 stem, MobileNetV2 inverted residual blocks at the sizes where each fused
    depthwise kernel is chosen (stride 1 and 2, with and without residual), ResNet-style 3x3
    blocks (GEMM and Winograd), max/average/global pooling and a fully connected classifier.
    The kernels take shapes at run time, so models made of these layers find them compiled.

    Args:
        precision: ``"normal"`` and/or ``"low"`` (float16 activations have kernels of their own).
        progress: one line per kernel on stderr.

    Returns:
        as :func:`warmup`.
    """
    from mnnjit.backends.cpu.runtime import tiering
    from mnnjit.precision import parse_modes
    precisions = [precision] if isinstance(precision, str) else list(precision)
    bad = [p for p in precisions if p not in ("normal", "high", "low")]
    if bad or not precisions:
        raise ValueError(f"prewarm: precision must be 'normal', 'high' or 'low', got {precision!r}")
    t0 = time.perf_counter()
    total = compiled = 0
    tiering.quiet += 1
    try:
        for p in precisions:
            modes = parse_modes({"precision": p})
            before = tiering.compile_status()
            with tiering.forced("background"):
                _zoo(modes)
            queued = tiering.compile_status()["pending_kernels"]
            if progress and queued:
                print(f"mnnjit prewarm: compiling {len(queued)} kernel(s) for precision {p} into "
                      f"{tiering.compile_status()['cache']}", file=sys.stderr, flush=True)
            _wait(tiering, queued, progress)
            after = tiering.compile_status()
            if after["failed"] > before["failed"]:
                raise RuntimeError(f"prewarm: kernels failed to compile: {after['failed_kernels']}")
            with tiering.forced("sync"):
                _zoo(modes)
            total += after["done"] - before["done"]
            compiled += len(queued)
    finally:
        tiering.quiet -= 1
    seconds = time.perf_counter() - t0
    cache = tiering.compile_status()["cache"]
    if progress:
        print(f"mnnjit prewarm: {compiled} kernel(s) compiled in {seconds:.1f} s; cache {cache}",
              file=sys.stderr, flush=True)
    return {"kernels": total, "compiled": compiled, "seconds": seconds, "cache": cache}


def _zoo(modes: Any) -> None:
    """The synthetic network of :func:`prewarm`, lowered with ``modes`` like a model's forward and
    run once (random weights, seeded). Its convolutions carry their activation, as converted
    models' do (that is what fuses)."""
    from mnnjit.backends.base import GraphIR
    from mnnjit.compiler.lower import lower
    from mnnjit.graph import Node
    from mnnjit.ops import build as B
    from mnnjit.ops.nn_conv import conv2d
    from mnnjit.ops.nn_pool import pool2d
    rng = np.random.default_rng(0)

    def conv(x: Any, cin: int, cout: int, k: int = 1, stride: int = 1, group: int = 1, act: str = "relu6") -> Any:
        w = rng.standard_normal((cout, cin // group, k, k)) * (2.0 / (k * k * cin / group)) ** 0.5
        b = rng.standard_normal(cout) * 0.01
        p = k // 2
        return conv2d(x, w.astype(np.float32), b.astype(np.float32), (stride, stride), (1, 1), (p, p, p, p),
                      group, act)

    def inverted(x: Any, cin: int, cout: int, stride: int, t: int = 6) -> Any:
        h = conv(x, cin, cin * t) if t != 1 else x
        h = conv(h, cin * t, cin * t, 3, stride, group=cin * t)
        h = conv(h, cin * t, cout, act="")
        return B.binary("add", h, x) if stride == 1 and cin == cout else h

    img = Node("placeholder", (), {}, (1, 3, 224, 224), np.dtype(np.float32), "NCHW", name="image")
    x = conv(img, 3, 32, 3, 2)                                  # MobileNetV2-style: stem at 112
    x = inverted(x, 32, 16, 1, t=1)
    x = inverted(x, 16, 24, 2)                                  # to 56
    x = inverted(x, 24, 24, 1)                                  # large expansion: one fused block
    x = inverted(x, 24, 32, 2)                                  # to 28
    x = inverted(x, 32, 32, 1)
    x = inverted(x, 32, 64, 2)                                  # to 14
    x = inverted(x, 64, 64, 1)
    x = inverted(x, 64, 96, 1)
    x = inverted(x, 96, 160, 2)                                 # to 7
    x = inverted(x, 160, 160, 1)
    pooled = B.reshape(pool2d(conv(x, 160, 1280), "avg", (7, 7)), (1280,))
    w = (rng.standard_normal((1000, 1280)) * 0.03).astype(np.float32)
    bias = (rng.standard_normal(1000) * 0.01).astype(np.float32)
    logits = B.make_node("matmul_ex", (B.as_node(w), B.as_node(pooled), B.as_node(bias)),
                         {"transpose_a": False, "transpose_b": False, "act": ""})
    r = conv(img, 3, 64, 7, 2, act="relu")                      # ResNet-style: 7x7 stem, max pooling,
    r = pool2d(r, "max", (3, 3), (2, 2), (1, 1, 1, 1))          # 3x3 blocks with residuals
    for c_in, c_out, stride in ((64, 64, 1), (64, 128, 2), (128, 128, 1)):
        h = conv(r, c_in, c_out, 3, stride, act="relu")
        h = conv(h, c_out, c_out, 3, 1, act="")
        skip = r if stride == 1 and c_in == c_out else conv(r, c_in, c_out, 1, stride, act="")
        r = B.make_node("relu", (B.as_node(B.binary("add", h, skip)),))
    outputs = [logits, B.as_node(pool2d(r, "avg", (2, 2), (2, 2)))]
    plan = lower(GraphIR([img], outputs, ["NCHW", "NCHW"]), modes)
    if plan is None:
        raise RuntimeError("prewarm: the backend did not lower the synthetic network")
    image = rng.standard_normal((1, 3, 224, 224)).astype(np.float32)
    image.flags.writeable = False          # as a model's input Var is (its own kernel signatures)
    plan.run([image])


class _CallableModule(types.ModuleType):
    """``mnnjit.warmup(model, ...)``: the package attribute is this module, and calling it warms up."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict:
        return warmup(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
