"""The .mnn model file format: verified reading, writing, quantized and external weights.

    from mnnjit.format import read_net, write_net, describe, conv_weight
    net = read_net("model.mnn")            # Net dataclass tree (verified)
    op = net.oplists[3]                    # Op: type, name, inputIndexes, main_type, main, ...
    w = conv_weight(op.main)               # float32 conv weights (decoded if quantized)
    write_net(net, "copy.mnn")             # loads in real MNN with the same results
"""
from .errors import MNNFormatError
from .external import ExternalData, has_external, load_external_data
from .info import describe, model_info
from .model import Net, Op, SubGraph, validate_net
from .quant import QuantizedWeight, conv_weight, decode_quantized_weight, quantized_weight
from .reader import read_net
from .writer import net_to_bytes, write_net

__all__ = [
    "MNNFormatError", "Net", "Op", "SubGraph", "read_net", "write_net", "net_to_bytes",
    "validate_net", "describe", "model_info", "QuantizedWeight", "quantized_weight",
    "decode_quantized_weight", "conv_weight", "ExternalData", "has_external",
    "load_external_data",
]
