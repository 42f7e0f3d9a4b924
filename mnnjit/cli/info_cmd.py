"""``mnnjit info``: what a .mnn file holds (mnnconvert ``--info``, plus op counts, weights, external data)."""
from __future__ import annotations

import json
import os
from typing import Any

import numpy as np


def register(sub: Any) -> None:
    """Add the subcommand's parser."""
    p = sub.add_parser("info", help="inputs, outputs, ops, version, bizCode, weights of a .mnn file",
                       description="Print what a .mnn model holds: its inputs and outputs as mnnconvert --info "
                                   "prints them, then op counts, version, bizCode, weight storage and the "
                                   "external-data layout.")
    p.add_argument("model", help="a .mnn file")
    p.add_argument("--json", action="store_true", help="one JSON object (for tools)")
    p.set_defaults(run=lambda a: print_info(a.model, a.json))


def _weights(net: Any) -> dict:
    """Counts of convolution weight storage kinds."""
    from ..converter.quantize import conv_ops
    kinds: dict = {}
    for op in conv_ops(net):
        q = op.main.get("quanParameter")
        if q is None:
            key = "float32"
        elif int(q.get("type") or 0) == 3:
            key = "float16"
        else:
            bits = int(q.get("aMaxOrBits") or 0)
            asym = bool(q.get("readType")) or int(q.get("type") or 0) == 4
            key = f"int{bits} {'asymmetric' if asym else 'symmetric'}"
        kinds[key] = kinds.get(key, 0) + 1
    return kinds


def _external(net: Any, path: str) -> dict | None:
    """The external weight file's layout (None when the model keeps its weights inline)."""
    rows = []
    end = 0
    for sub_name, ops in [("", net.oplists)] + [(s.name, s.nodes) for s in net.subgraphs or []]:
        for op in ops:
            ext = (op.main or {}).get("external") if isinstance(op.main, dict) else None
            if ext is not None and len(ext):
                e = [int(v) for v in ext]
                rows.append({"op": op.name, "type": str(op.type), "subgraph": sub_name or None, "offset": e[0],
                             "bytes": sum(e[1:])})
                end = max(end, e[0] + sum(e[1:]))
    if not rows:
        return None
    wpath = path + ".weight"
    return {"file": wpath, "exists": os.path.exists(wpath),
            "file_bytes": os.path.getsize(wpath) if os.path.exists(wpath) else None,
            "bytes_used": end, "ops": len(rows), "entries": rows}


def model_summary(path: str) -> dict:
    """Everything ``info`` reports, as a dict."""
    from ..format import model_info, read_net
    net = read_net(path, load_external=False)
    info = model_info(net)
    counts: dict = {}
    for op in net.oplists:
        counts[str(op.type)] = counts.get(str(op.type), 0) + 1
    subs = [{"name": s.name, "ops": len(s.nodes), "inputs": [s.tensors[i] for i in s.inputs or []],
             "outputs": [s.tensors[i] for i in s.outputs or []]} for s in net.subgraphs or []]
    info.update({
        "file": path, "file_bytes": os.path.getsize(path), "source": str(net.sourceType),
        "uuid": net.mnn_uuid, "ops": len(net.oplists),
        "op_counts": dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))),
        "tensors": len(net.tensorName or []), "subgraphs": subs, "weights": _weights(net),
        "external": _external(net, path),
    })
    return info


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    return v


def print_info(path: str, as_json: bool = False) -> int:
    """Print the summary of ``path`` (text like mnnconvert --info, or JSON)."""
    from ..format import describe, read_net
    info = model_summary(path)
    if as_json:
        print(json.dumps(_jsonable(info), indent=1))
        return 0
    print(describe(read_net(path, load_external=False)))
    print(f"bizCode: {info['bizCode']}")
    print(f"Source: {info['source']}, {info['ops']} ops, {info['tensors']} tensors, {info['file_bytes']} bytes")
    print("Op counts: " + ", ".join(f"{k} {v}" for k, v in info["op_counts"].items()))
    for s in info["subgraphs"]:
        print(f"Subgraph {s['name']}: {s['ops']} ops, inputs {s['inputs']}, outputs {s['outputs']}")
    if info["weights"]:
        print("Convolution weights: " + ", ".join(f"{k} x{v}" for k, v in info["weights"].items()))
    ext = info["external"]
    if ext is None:
        print("External data: none (weights inline)")
    else:
        state = f"{ext['file_bytes']} bytes" if ext["exists"] else "MISSING"
        print(f"External data: {ext['file']} ({state}), {ext['ops']} ops, {ext['bytes_used']} bytes used")
    return 0
