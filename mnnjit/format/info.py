"""Model summary like the converter's ``--info`` (``describe``) and structured ``model_info``."""
from __future__ import annotations

from typing import Any, Dict, List

from .model import Net

__all__ = ["model_info", "describe"]

_TYPE_NAMES = {
    "DT_FLOAT": "float", "DT_DOUBLE": "double", "DT_INT32": "int32", "DT_INT64": "int64",
    "DT_INT16": "int16", "DT_INT8": "int8", "DT_UINT8": "uint8", "DT_UINT16": "uint16",
    "DT_BOOL": "int32", "DT_HALF": "float16", "DT_BFLOAT16": "bfloat16",
}
_FORMATS = ("NCHW", "NHWC", "NC4HW4")


def model_info(net: Net) -> Dict[str, Any]:
    """Inputs (name, dimensionFormat, size, type), output names, default format, version."""
    names = net.tensorName or []
    inputs: List[Dict[str, Any]] = []
    for op in net.oplists:
        if op.type != "Input" or not op.outputIndexes:
            continue
        p = op.main or {}
        idx = op.outputIndexes[0]
        fmt = p.get("dformat", "NC4HW4")
        dims = p.get("dims")
        inputs.append({
            "name": names[idx] if idx < len(names) else str(idx),
            "dimensionFormat": fmt if fmt in _FORMATS else "Unknown",
            "size": [] if dims is None else [int(d) for d in dims],
            "type": _TYPE_NAMES.get(str(p.get("dtype", "DT_FLOAT")), "Unknown"),
        })
    default = "NHWC" if net.sourceType in ("TENSORFLOW", "TFLITE") else "NCHW"
    return {"default_dimension_format": default, "model_version": net.version,
            "inputs": inputs, "outputs": list(net.outputName or []), "bizCode": net.bizCode}


def describe(net: Net) -> str:
    """The text the converter's ``--info`` prints for this model (one line per item)."""
    info = model_info(net)
    lines = [f"Model default dimensionFormat is {info['default_dimension_format']}",
             "Model Inputs:"]
    for i in info["inputs"]:
        size = ",".join(str(d) for d in i["size"])
        size = f"[ {size} ]" if size else "[ ]"
        lines.append(f"[ {i['name']} ]: dimensionFormat: {i['dimensionFormat']}, "
                     f"size: {size}, type is {i['type']}")
    lines.append("Model Outputs:")
    lines.extend(f"[ {o} ]" for o in info["outputs"])
    v = info["model_version"]
    lines.append(f"Model Version: {v} " if v else "Model Version: < 2.0.0")
    return "\n".join(lines)
