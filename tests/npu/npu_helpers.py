"""Helpers of the NPU delegate tests: the shared models, their inputs, and bridges installed here."""
from __future__ import annotations

import importlib.util
import json
import os
from typing import Any

import numpy as np

import mnnjit as MNN
from shared_paths import MODELS

F = MNN.expr
BRIDGES = [b for b in ("openvino", "onnxruntime") if importlib.util.find_spec(b) is not None]


def entries() -> dict:
    """MANIFEST.json's model entries (empty without ../shared)."""
    path = os.path.join(MODELS, "MANIFEST.json")
    if not os.path.exists(path):
        return {}
    with open(path) as fh:
        return json.load(fh)["entries"]


def model_path(name: str) -> str:
    """The .mnn file of shared model ``name``."""
    return os.path.join(MODELS, entries()[name]["files"]["mnn"])


def io_names(name: str) -> tuple[list[str], list[str]]:
    """(input names, output names) of shared model ``name``."""
    e = entries()[name]
    return [i["name"] for i in e["inputs"]], [o["name"] for o in e["outputs"]]


def cases(name: str) -> list[list[Any]]:
    """Each stored case's input Vars of shared model ``name``."""
    e = entries()[name]
    data = np.load(os.path.join(MODELS, f"{name}.npz"))
    out = []
    for case in e["cases"]:
        xs = []
        for n in io_names(name)[0]:
            c = case["inputs"][n]
            xs.append(F.const(data[c["key"]], c["shape"], F.NCHW, F.int if c["dtype"] == "int32" else F.float))
        out.append(xs)
    return out


def load(name: str, config: dict | None = None, **kw: Any) -> Any:
    """Shared model ``name`` loaded with a runtime manager of ``config`` (None: the default CPU)."""
    ins, outs = io_names(name)
    rt = MNN.nn.create_runtime_manager(config) if config is not None else None
    kw.setdefault("shape_mutable", False)
    return MNN.nn.load_module_from_file(model_path(name), ins, outs, runtime_manager=rt, **kw)


def forward(module: Any, xs: list) -> list[np.ndarray]:
    """The module's outputs for ``xs`` as arrays."""
    return [np.array(v.read(), copy=True) for v in module.forward(xs)]


def rel_err(got: np.ndarray, exp: np.ndarray) -> float:
    """max|got - exp| relative to max|exp|."""
    assert got.shape == exp.shape, (got.shape, exp.shape)
    if exp.size == 0:
        return 0.0
    diff = float(np.abs(got.astype(np.float64) - exp.astype(np.float64)).max())
    return diff / max(float(np.abs(exp).max()), 1e-30)


def partitions(module: Any) -> list:
    """The delegated partitions of the module's last plan ([] when it stayed on the CPU)."""
    plan = module._last_plan
    inner = getattr(plan, "plan", plan)
    return list(getattr(inner, "partitions", []))
