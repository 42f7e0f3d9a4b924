"""Helpers shared by the subcommands: shapes, model inputs, running a model on each runtime."""
from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np


class CliError(Exception):
    """A problem with the command line or its files (printed without a traceback)."""


def parse_dims(text: str) -> list[int]:
    """``1x3x224x224`` or ``1,3,224,224`` -> [1, 3, 224, 224]."""
    parts = [p for p in re.split(r"[x,\s]+", text.strip()) if p]
    try:
        dims = [int(p) for p in parts]
    except ValueError:
        raise CliError(f"bad shape {text!r}: expected sizes like 1x3x224x224") from None
    if any(d < 0 for d in dims):
        raise CliError(f"bad shape {text!r}: sizes must be >= 0")
    return dims


def parse_input_specs(specs: Sequence[str]) -> dict:
    """``name:1x3x224x224`` (repeatable) -> {name: dims}."""
    out = {}
    for spec in specs or []:
        name, sep, dims = spec.rpartition(":")
        if not sep or not name:
            raise CliError(f"bad --input {spec!r}: expected NAME:DIMS, e.g. x:1x3x224x224")
        out[name] = parse_dims(dims)
    return out


def read_input_config(path: str) -> dict:
    """mnnconvert's ``--inputConfigFile``: ``input_names = a,b`` and ``input_dims = 1x3x8x8,1x4``."""
    if not os.path.exists(path):
        raise CliError(f"input config file not found: {path}")
    fields = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.split("#", 1)[0].strip()
            if "=" in line:
                k, v = line.split("=", 1)
                fields[k.strip()] = v.strip()
    names = [n.strip() for n in fields.get("input_names", "").split(",") if n.strip()]
    dims = [d.strip() for d in fields.get("input_dims", "").split(",") if d.strip()]
    if not names or len(names) != len(dims):
        raise CliError(f"{path}: needs 'input_names = a,b' and as many 'input_dims = 1x3x224x224,...'")
    return {n: parse_dims(d) for n, d in zip(names, dims)}


@dataclass
class InputSpec:
    """One model input: name, dims (-1 unknown), numpy dtype."""
    name: str
    dims: Optional[list]
    dtype: np.dtype


_DT = {"DT_FLOAT": np.float32, "DT_INT32": np.int32, "DT_INT64": np.int32, "DT_UINT8": np.uint8,
       "DT_INT8": np.int8, "DT_BOOL": np.int32, "DT_DOUBLE": np.float32, "DT_HALF": np.float32}


def mnn_inputs(path: str) -> tuple[list[InputSpec], list[str]]:
    """Inputs and output names of a .mnn file (main graph)."""
    from ..format import read_net
    net = read_net(path, load_external=False)
    specs = []
    for op in net.oplists:
        if op.type == "Input" and op.outputIndexes:
            p = op.main or {}
            dims = p.get("dims")
            specs.append(InputSpec(net.tensorName[op.outputIndexes[0]], None if dims is None else [int(d) for d in dims],
                                   np.dtype(_DT.get(str(p.get("dtype", "DT_FLOAT")), np.float32))))
    return specs, list(net.outputName or [])


def onnx_inputs(model: Any) -> tuple[list[InputSpec], list[str]]:
    """Inputs (initializers excluded) and output names of an ONNX model."""
    from onnx import helper
    inits = {i.name for i in model.graph.initializer}
    specs = []
    for i in model.graph.input:
        if i.name in inits:
            continue
        t = i.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in t.shape.dim] if t.HasField("shape") else None
        specs.append(InputSpec(i.name, dims, np.dtype(helper.tensor_dtype_to_np_dtype(t.elem_type))))
    return specs, [o.name for o in model.graph.output]


def make_inputs(specs: list[InputSpec], shapes: dict, data: dict, seed: int) -> dict:
    """Input arrays: given data, else seeded random values of the given or declared shapes."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for s in specs:
        if s.name in data:
            feeds[s.name] = np.asarray(data[s.name])
            continue
        dims = shapes.get(s.name, s.dims)
        if dims is None or any(d < 0 for d in dims):
            raise CliError(f"input {s.name!r} has unknown sizes {dims}; give them with --input {s.name}:DIMS")
        if s.dtype.kind == "f":
            feeds[s.name] = rng.standard_normal(dims).astype(s.dtype)
        elif s.dtype == np.bool_:
            feeds[s.name] = rng.random(dims) > 0.5
        else:
            feeds[s.name] = rng.integers(0, 4, dims).astype(s.dtype)
    return feeds


def load_data(specs: Sequence[str]) -> dict:
    """``--data name=file.npy`` or ``--data file.npz`` (arrays by input name)."""
    out = {}
    for spec in specs or []:
        name, sep, path = spec.partition("=")
        if not sep:
            path, name = spec, ""
        if not os.path.exists(path):
            raise CliError(f"input data file not found: {path}")
        arr = np.load(path)
        if isinstance(arr, np.lib.npyio.NpzFile):
            out.update({k: arr[k] for k in arr.files})
        else:
            if not name:
                raise CliError(f"--data {spec!r}: a .npy file needs NAME=FILE")
            out[name] = arr
    return out


def _const_for(module: Any, arr: np.ndarray) -> Any:
    expr = module.expr
    if arr.dtype.kind in "iub":
        a = arr.astype(np.int32)
        return expr.const(a, list(a.shape), expr.NCHW, expr.int)
    a = arr.astype(np.float32)
    return expr.const(a, list(a.shape), expr.NCHW, expr.float)


def run_module(mnn: Any, path: str, feeds: dict, outputs: Sequence[str], config: Optional[dict] = None) -> list:
    """Forward ``feeds`` through ``path`` with ``mnn`` (``mnnjit`` or real ``MNN``) and read the outputs."""
    rt = mnn.nn.create_runtime_manager((config,)) if config else None
    kwargs = {"runtime_manager": rt} if rt is not None else {}
    m = mnn.nn.load_module_from_file(path, list(feeds), list(outputs), **kwargs)
    outs = m.forward([_const_for(mnn, a) for a in feeds.values()])
    if not isinstance(outs, (list, tuple)):
        outs = [outs]
    res = []
    for o in outs:
        res.append(np.array(mnn.expr.convert(o, mnn.expr.NCHW).read()))
    return res


def real_mnn() -> Any:
    """Real MNN (``import MNN``), or None when it is not installed. Its banner line ("The device
    supports: ..."), which its C++ code prints on stdout, goes to stderr, keeping ``--json`` output clean."""
    if "MNN" in sys.modules:
        return sys.modules["MNN"]
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        try:
            import MNN  # noqa: F401
        except ImportError:
            return None
        finally:
            sys.stdout.flush()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    return sys.modules["MNN"]


def run_onnxruntime(model_path: str, feeds: dict, outputs: Sequence[str]) -> list:
    """ONNX Runtime's outputs (CPU provider, 1 thread)."""
    try:
        import onnxruntime as ort
    except ImportError:
        raise CliError("ONNX Runtime is not installed (pip install onnxruntime)") from None
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    sess = ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])
    return sess.run(list(outputs), feeds)


def errors(got: np.ndarray, ref: np.ndarray) -> dict:
    """max abs / max relative (to the reference's largest magnitude, at least 1) error, shapes."""
    g = np.asarray(got, np.float64)
    r = np.asarray(ref, np.float64)
    if g.shape != r.shape and g.size == r.size:
        g = g.reshape(r.shape)
    if g.shape != r.shape:
        return {"shape": list(g.shape), "ref_shape": list(r.shape), "max_abs": float("inf"), "rel": float("inf")}
    if not r.size:
        return {"shape": list(g.shape), "ref_shape": list(r.shape), "max_abs": 0.0, "rel": 0.0}
    diff = np.abs(g - r)
    both_nan = np.isnan(g) & np.isnan(r)
    diff = np.where(both_nan, 0.0, diff)
    mx = float(np.nanmax(diff)) if not np.isnan(diff).all() else float("inf")
    if np.isnan(diff).any():
        mx = float("inf")
    scale = max(1.0, float(np.nanmax(np.abs(r))) if np.isfinite(r).any() else 1.0)
    return {"shape": list(g.shape), "ref_shape": list(r.shape), "max_abs": mx, "rel": mx / scale}
