"""``mnnjit json``: .mnn <-> JSON (MNN2JSON / JSON2MNN), lossless both ways.

The JSON has the layout of MNN's own dumps (schema field names, enums by name, an op's parameter
as ``main_type`` + ``main``), so files from MNN2JSON load too. Floats are written with every digit
a float32 needs (MNN2JSON keeps 6 decimals and loses weights), so .mnn -> JSON -> .mnn gives back
the same model and JSON -> .mnn -> JSON the same text.
"""
from __future__ import annotations

import json
import math
import os
from typing import Any

import numpy as np

from ._common import CliError


def register(sub: Any) -> None:
    """Add the subcommand's parser."""
    p = sub.add_parser("json", help=".mnn -> JSON or JSON -> .mnn (lossless), by the files' extensions",
                       description="Convert a .mnn model to JSON or back (the direction follows the first "
                                   "file's extension). The JSON has MNN2JSON's layout with exact floats.")
    p.add_argument("source", help="a .mnn or .json file")
    p.add_argument("dest", help="the .json or .mnn file to write")
    p.set_defaults(run=run)


def run(args: Any) -> int:
    """Run the subcommand."""
    if args.source.lower().endswith(".json"):
        json_to_mnn(args.source, args.dest)
    else:
        mnn_to_json(args.source, args.dest)
    print(f"wrote {args.dest}")
    return 0


def _plain(v: Any) -> Any:
    """A decoded table value as JSON data (None fields dropped)."""
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items() if x is not None}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, np.ndarray):
        if v.dtype.kind == "f":
            return [_float(x) for x in v.astype(np.float64).tolist()]
        return v.tolist()
    if isinstance(v, np.generic):
        return _plain(v.item())
    if isinstance(v, float):
        return _float(v)
    return v


def _float(x: float) -> Any:
    # JSON has no NaN / Infinity; written as strings, read back by _restore
    if math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


def net_to_json_text(net: Any) -> str:
    """The JSON text of a Net."""
    return json.dumps(_plain(net.to_dict()), indent=1, allow_nan=False)


def mnn_to_json(src: str, dest: str) -> None:
    """Write ``src`` (.mnn, external weights loaded) as JSON to ``dest``."""
    from ..format import read_net
    text = net_to_json_text(read_net(src))
    _write(dest, text.encode("utf-8"))


_SPECIAL = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}


def _restore(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _restore(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_restore(x) for x in v]
    if isinstance(v, str) and v in _SPECIAL:
        return _SPECIAL[v]
    return v


_NET_KEYS = ("oplists", "tensorName", "outputName", "bizCode", "extraTensorDescribe", "extraInfo",
             "preferForwardType", "sourceType", "tensorNumber", "usage", "subgraphs", "mnn_uuid")
_OP_KEYS = ("type", "name", "inputIndexes", "outputIndexes", "main_type", "main", "defaultDimentionFormat",
            "externalPath")
_SUB_KEYS = ("name", "inputs", "outputs", "tensors", "nodes", "extraTensorDescribe")
_DEFAULTS = {"preferForwardType": "CPU", "sourceType": "CAFFE", "tensorNumber": 0, "usage": "INFERENCE",
             "type": "AbsVal", "defaultDimentionFormat": "NHWC"}


def _fill(d: dict, keys: tuple) -> dict:
    return {k: d.get(k, _DEFAULTS.get(k)) for k in keys}


def json_to_net(data: dict) -> Any:
    """A Net from JSON data (ours or MNN2JSON's)."""
    from ..format import Net
    if not isinstance(data, dict) or "oplists" not in data:
        raise CliError("not an MNN model in JSON: no 'oplists'")
    data = _restore(data)
    d = _fill(data, _NET_KEYS)
    d["oplists"] = [_fill(op, _OP_KEYS) for op in d["oplists"] or []]
    if d["subgraphs"] is not None:
        subs = []
        for s in d["subgraphs"]:
            s = _fill(s, _SUB_KEYS)
            s["nodes"] = [_fill(op, _OP_KEYS) for op in s["nodes"] or []]
            subs.append(s)
        d["subgraphs"] = subs
    return Net.from_dict(d)


def json_to_mnn(src: str, dest: str) -> None:
    """Write the JSON model ``src`` as a .mnn file ``dest``."""
    from ..format import net_to_bytes, validate_net
    if not os.path.exists(src):
        raise CliError(f"JSON file not found: {src}")
    with open(src, encoding="utf-8") as fh:
        try:
            data = json.load(fh)
        except json.JSONDecodeError as exc:
            raise CliError(f"{src}: not valid JSON ({exc})") from None
    net = json_to_net(data)
    validate_net(net)
    _write(dest, net_to_bytes(net))


def _write(path: str, data: bytes) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
