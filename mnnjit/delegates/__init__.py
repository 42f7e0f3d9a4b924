"""Delegates: bridges from mnnjit's graphs to vendor NPU SDKs (MNN's forward type 5, ``"NN"``).

Choosing it::

    rt = MNN.nn.create_runtime_manager({"backend": 5,                    # or "NN", "NPU"
                                        "npu": {"bridge": "openvino", "device": "NPU"}})
    net = MNN.nn.load_module_from_file(path, ["x"], ["y"], runtime_manager=rt, shape_mutable=False)
    print(mnnjit.delegates.explain(net, [x]))    # partitions, and why each op stayed on the CPU

or ``MNNJIT_BACKEND=npu`` with ``MNNJIT_NPU_BRIDGE=openvino|onnxruntime``, ``MNNJIT_NPU_DEVICE``
(OpenVINO) / ``MNNJIT_NPU_PROVIDERS`` (ONNX Runtime), see :mod:`mnnjit.backends.npu.options`.

Each static graph is cut into maximal subgraphs of ops the bridge claims (no cycle between them;
``min_nodes_per_partition`` and ``max_partitions`` keep small ones on the CPU); each is compiled by
the SDK once per input signature and cached on disk; the rest runs on the CPU backend.

Adding a vendor SDK is one class (see :class:`Delegate` for the whole contract)::

    class MyNPU(mnnjit.delegates.Delegate):
        name, sdk_module = "mynpu", "mynpu_sdk"
        def claim(self, node):                      # None: claimed; a string: why not
            return mnnjit.delegates.portable_claim(node)
        def compile(self, graph, cache_path, precision_low):
            ...                                     # build graph.placeholders -> graph.outputs
            return mnnjit.delegates.Compiled(run=run, from_cache=False)

    mnnjit.delegates.register(MyNPU)                # then {"npu": {"bridge": "mynpu"}}
"""
from __future__ import annotations

from typing import Any

from ..backends.npu.backend import NPUDelegateWarning  # noqa: F401
from ..backends.npu.delegate import Compiled, Delegate, names  # noqa: F401
from ..backends.npu.delegate import register as _register
from ..backends.npu.options import configure, current, reset  # noqa: F401
from ..backends.npu.options import using as options  # noqa: F401
from ..backends.npu.portable import OPS, portable_claim  # noqa: F401

__all__ = ["Delegate", "Compiled", "register", "names", "portable_claim", "OPS", "configure", "reset", "current",
           "options", "explain", "NPUDelegateWarning"]


def register(cls: type[Delegate], name: str | None = None) -> type[Delegate]:
    """Make bridge class ``cls`` selectable by name (``cls.name`` unless ``name`` is given); usable
    as a class decorator. Then ``MNNJIT_NPU_BRIDGE=<name>`` or the config ``{"npu": {"bridge": <name>}}``."""
    return _register(cls, name)


def _delegated(plan: Any) -> Any:
    inner = getattr(plan, "plan", plan)  # a Module's plan on a backend other than the CPU is wrapped
    return inner if hasattr(inner, "partitions") and hasattr(inner, "explain") else None


def explain(module: Any, inputs: Any = None) -> str:
    """How ``module`` (an ``nn`` Module) runs on the NPU delegate: its partitions, the CPU segments
    between them and the reason each op stayed on the CPU. With ``inputs`` it runs a forward first
    (compiling for their shapes); otherwise it describes the last forward's plan."""
    from ..backends import registry
    from ..backends.base import GraphIR
    from ..compiler.partition import explain_graph
    if inputs is not None:
        module.forward(inputs)
    rt = getattr(module, "_rt", None)
    name = getattr(rt, "backend_name", None) if rt is not None else None
    plan = getattr(module, "_last_plan", None)
    if plan is None:
        return "nothing to explain yet: call explain(module, inputs) or run a forward first"
    d = _delegated(plan)
    if d is not None:
        return d.explain()
    if name != "npu":
        return f"the module runs on the {name or registry.current_name()} backend, not the NPU delegate"
    inner = getattr(plan, "plan", plan)
    if getattr(inner, "dynamic", False):
        return "the model's graph depends on input values (control flow): it runs on the CPU as a dynamic plan"
    from ..nn.module import _backend_settings
    with registry.using("npu"), _backend_settings("npu", rt):
        text = explain_graph(GraphIR(inner.placeholders, inner.outputs, list(inner.out_fmts)), registry.get("npu"))
    return text + "\nno partition was delegated: the whole graph runs on the CPU"
