"""Neural-network ONNX ops: convolutions, pooling, normalizations, Gemm / MatMul, Resize.

Convolutions, pooling, Scale and Interp run in MNN's NC4HW4 layout: each is written between two
ConvertTensor ops (the optimizer drops the pairs that cancel). A MatMul / Gemm with a constant
weight becomes a 1x1 Convolution over ``[-1, K, 1, 1]``, as real MNN's converter writes it, so
weight quantization applies to it. Batch normalization, activations and bias additions that follow
a convolution fold into its weights when nothing else reads the convolution's output.
"""
from __future__ import annotations

import numpy as np

from .builder import GraphBuilder, Val
from .core import GraphConverter, attrs_of, handler


def _name(node) -> str:
    return node.output[0] or node.name


def _s(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _const(cv: GraphConverter, v: Val | None, what: str) -> np.ndarray | None:
    if v is None:
        return None
    if v.const is None:
        raise cv.unsupported(f"{what} computed at run time")
    return v.const.astype(np.float32)


# ------------------------------------------------------------------------------------ convolution
def _spatial_attrs(cv: GraphConverter, node, nsp: int, kshape: tuple, x: Val, transposed: bool = False) -> dict:
    """strides, dilations, pads ([begins..., ends...]) and padMode of a conv / pool node."""
    at = attrs_of(node)
    strides = [int(s) for s in at.get("strides", [1] * nsp)]
    dil = [int(d) for d in at.get("dilations", [1] * nsp)]
    pads = [int(p) for p in at.get("pads", [0] * (2 * nsp))]
    auto = _s(at.get("auto_pad", "NOTSET"))
    mode = "CAFFE"
    if auto == "VALID":
        pads = [0] * (2 * nsp)
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        sizes = [x.dim(2 + k) for k in range(nsp)]
        if None in sizes or transposed:
            if auto == "SAME_UPPER" and not transposed:
                mode = "SAME"
                pads = [0] * (2 * nsp)
            else:
                raise cv.unsupported(f"auto_pad {auto} on inputs of unknown size")
        else:
            begins, ends = [], []
            for n, k, s, d in zip(sizes, kshape, strides, dil):
                out = -(-n // s)
                total = max(0, (out - 1) * s + (k - 1) * d + 1 - n)
                small, big = total // 2, total - total // 2
                begins.append(small if auto == "SAME_UPPER" else big)
                ends.append(big if auto == "SAME_UPPER" else small)
            pads = begins + ends
    return {"strides": strides, "dilations": dil, "pads": pads, "mode": mode}


def _common(kh: int, kw: int, sp: dict, group: int, cout: int, cin: int) -> dict:
    t, l, b, r = sp["pads4"]
    return {"padX": l, "padY": t, "kernelX": kw, "kernelY": kh, "strideX": sp["strides"][1],
            "strideY": sp["strides"][0], "dilateX": sp["dilations"][1], "dilateY": sp["dilations"][0],
            "padMode": sp["mode"], "group": group, "outputCount": cout, "inputCount": cin,
            "pads": np.asarray([t, l, b, r], np.int32)}


def _to_2d(sp: dict, nsp: int) -> dict:
    """Spatial attributes of a 1-D op as those of its [N, C, L, 1] 2-D form."""
    if nsp == 2:
        p = sp["pads"]
        sp["pads4"] = [p[0], p[1], p[2], p[3]]
        return sp
    sp["strides"] = sp["strides"] + [1]
    sp["dilations"] = sp["dilations"] + [1]
    sp["pads4"] = [sp["pads"][0], 0, sp["pads"][1], 0]
    return sp


def _conv_ops(cv: GraphConverter, x4: int, w: np.ndarray, bias: np.ndarray, sp: dict, group: int,
              transposed: bool, name: str, out_pads=None):
    """Write the convolution(s) on NCHW tensor ``x4``; returns (output tensor, the single conv op or None)."""
    kh, kw = w.shape[2], w.shape[3]
    if transposed:
        cin, cout = w.shape[0], w.shape[1] * group
    else:
        cout, cin = w.shape[0], w.shape[1] * group
    extra = {} if out_pads is None else {"outPads": np.asarray(out_pads, np.int32)}
    if group == 1 or (group == cin == cout):
        if transposed:
            kind = "Deconvolution" if group == 1 else "DeconvolutionDepthwise"
        else:
            kind = "Convolution" if group == 1 else "ConvolutionDepthwise"
        common = dict(_common(kh, kw, sp, group, cout, cin), **extra)
        main = {"common": common, "weight": w.reshape(-1).astype(np.float32), "bias": bias.astype(np.float32)}
        xin = cv.b.to_nc4(x4, name)
        y = cv.b.op1(kind, [xin], "Convolution2D", main, f"{name}__nc4")
        return cv.b.to_nchw(y, name), cv.b.producer[y], y
    # grouped: one convolution per group on channel slices, as real MNN's converter writes it
    cin_g, cout_g = cin // group, cout // group
    xin = cv.b.to_nc4(x4, name)
    parts = cv.b.op("Slice", [xin], "Slice", {"axis": 1, "slicePoints": np.asarray(
        [cin_g * k for k in range(1, group)], np.int32), "sourceType": "CAFFE"}, f"{name}__slice", n_out=group)
    outs = []
    for g in range(group):
        if transposed:
            wg = w[g * cin_g:(g + 1) * cin_g]
        else:
            wg = w[g * cout_g:(g + 1) * cout_g]
        common = dict(_common(kh, kw, sp, 1, cout_g, cin_g), **extra)
        main = {"common": common, "weight": wg.reshape(-1).astype(np.float32),
                "bias": bias[g * cout_g:(g + 1) * cout_g].astype(np.float32)}
        outs.append(cv.b.op1("Deconvolution" if transposed else "Convolution", [parts[g]], "Convolution2D", main,
                             f"{name}__g{g}"))
    y = cv.b.concat(outs, 1, f"{name}__nc4")
    return cv.b.to_nchw(y, name), None, y


def _with_rank(cv: GraphConverter, x: Val, what: str) -> int:
    rank = x.rank
    if rank not in (3, 4):
        raise cv.unsupported(f"{what} on a {rank}-D input" if rank else f"{what} on an input of unknown rank")
    return rank - 2


@handler("Conv")
def conv(cv: GraphConverter, node, ins):
    """1-D / 2-D convolution with constant weights (grouped ones split per group)."""
    x = ins[0]
    w = _const(cv, ins[1], "convolution weights")
    nsp = w.ndim - 2
    if nsp not in (1, 2) or (x.rank is not None and x.rank != nsp + 2):
        raise cv.unsupported(f"{nsp}-D convolution")
    group = int(attrs_of(node).get("group", 1))
    b = _const(cv, ins[2] if len(ins) > 2 else None, "convolution bias")
    bias = np.zeros(w.shape[0], np.float32) if b is None else b.reshape(-1)
    sp = _to_2d(_spatial_attrs(cv, node, nsp, w.shape[2:], x), nsp)
    name = _name(node)
    t = cv.idx(x)
    if nsp == 1:
        t = cv.b.unsqueeze(t, [3])
        w = w[..., None]
    y, op, y4 = _conv_ops(cv, t, w, bias, sp, group, False, name + ("__2d" if nsp == 1 else ""))
    if nsp == 1:
        return Val(index=cv.b.squeeze(y, [3], name), dtype=np.dtype(np.float32), conv=op, conv_axis=1)
    return Val(index=y, dtype=np.dtype(np.float32), conv=op, conv_axis=1, nc4=y4)


@handler("ConvTranspose")
def conv_transpose(cv: GraphConverter, node, ins):
    """1-D / 2-D transposed convolution with constant weights."""
    x = ins[0]
    w = _const(cv, ins[1], "transposed convolution weights")
    nsp = w.ndim - 2
    if nsp not in (1, 2) or (x.rank is not None and x.rank != nsp + 2):
        raise cv.unsupported(f"{nsp}-D transposed convolution")
    at = attrs_of(node)
    group = int(at.get("group", 1))
    b = _const(cv, ins[2] if len(ins) > 2 else None, "transposed convolution bias")
    cout = w.shape[1] * group
    bias = np.zeros(cout, np.float32) if b is None else b.reshape(-1)
    sp = _spatial_attrs(cv, node, nsp, w.shape[2:], x, transposed=True)
    out_pad = [int(p) for p in at.get("output_padding", [0] * nsp)]
    if "output_shape" in at:
        sizes = [x.dim(2 + k) for k in range(nsp)]
        if None in sizes:
            raise cv.unsupported("output_shape on inputs of unknown size")
        want = [int(v) for v in at["output_shape"]][-nsp:]
        begins, ends = [], []
        for k in range(nsp):
            full = sp["strides"][k] * (sizes[k] - 1) + out_pad[k] + (w.shape[2 + k] - 1) * sp["dilations"][k] + 1
            total = full - want[k]
            if total < 0:
                out_pad[k] -= total
                total = 0
            upper = _s(at.get("auto_pad", "NOTSET")) == "SAME_UPPER"
            begins.append(total // 2 if upper else total - total // 2)
            ends.append(total - total // 2 if upper else total // 2)
        sp["pads"] = begins + ends
    sp = _to_2d(sp, nsp)
    name = _name(node)
    t = cv.idx(x)
    if nsp == 1:
        t = cv.b.unsqueeze(t, [3])
        w = w[..., None]
        out_pad = out_pad + [0]
    y, _, y4 = _conv_ops(cv, t, w, bias, sp, group, True, name + ("__2d" if nsp == 1 else ""), out_pads=out_pad)
    if nsp == 1:
        return Val(index=cv.b.squeeze(y, [3], name), dtype=np.dtype(np.float32))
    return Val(index=y, dtype=np.dtype(np.float32), nc4=y4)


# ------------------------------------------------------------------------------------ pooling
@handler("MaxPool", "AveragePool")
def pool(cv: GraphConverter, node, ins):
    """1-D / 2-D max or average pooling."""
    x = ins[0]
    at = attrs_of(node)
    if len(node.output) > 1 and node.output[1] and cv.uses.get(node.output[1]):
        raise cv.unsupported("MaxPool's indices output")
    k = [int(v) for v in at["kernel_shape"]]
    nsp = len(k)
    if nsp not in (1, 2):
        raise cv.unsupported(f"{nsp}-D pooling")
    if any(int(d) != 1 for d in at.get("dilations", [1] * nsp)):
        raise cv.unsupported("dilated pooling")
    sp = _to_2d(_spatial_attrs(cv, node, nsp, tuple(k), x), nsp)
    if nsp == 1:
        k = k + [1]
    t, l, b, r = sp["pads4"]
    is_max = node.op_type == "MaxPool"
    main = {"kernelX": k[1], "kernelY": k[0], "strideX": sp["strides"][1], "strideY": sp["strides"][0],
            "padX": l, "padY": t, "pads": np.asarray([t, l, b, r], np.int32),
            "type": "MAXPOOL" if is_max else "AVEPOOL", "padType": "SAME" if sp["mode"] == "SAME" else "CAFFE",
            "ceilModel": bool(at.get("ceil_mode", 0)), "dataType": "DT_FLOAT",
            "countType": "DEFAULT" if is_max else (
                "INCLUDE_PADDING" if int(at.get("count_include_pad", 0)) else "EXCLUDE_PADDING")}
    name = _name(node)
    xi = cv.idx(x)
    if nsp == 1:
        xi = cv.b.unsqueeze(xi, [3])
    y = cv.b.cnn("Pooling", xi, "Pool", main, name + ("__2d" if nsp == 1 else ""))
    if nsp == 1:
        return cv.out(cv.b.squeeze(y, [3], name))
    return Val(index=y, nc4=cv.b.producer[y].inputIndexes[0])


@handler("GlobalAveragePool", "GlobalMaxPool")
def global_pool(cv: GraphConverter, node, ins):
    """Global pooling: Pooling(isGlobal) on 4-D inputs, else a Reduction over the spatial axes."""
    x = ins[0]
    is_max = node.op_type == "GlobalMaxPool"
    if x.rank == 4:
        main = {"isGlobal": True, "type": "MAXPOOL" if is_max else "AVEPOOL", "padType": "CAFFE"}
        y = cv.b.cnn("Pooling", cv.idx(x), "Pool", main, _name(node))
        return Val(index=y, nc4=cv.b.producer[y].inputIndexes[0])
    if x.rank is None or x.rank < 3:
        raise cv.unsupported("global pooling of a tensor of unknown rank")
    axes = list(range(2, x.rank))
    return cv.out(cv.b.op1("Reduction", [cv.idx(x)], "ReductionParam", {
        "operation": "MAXIMUM" if is_max else "MEAN", "dim": np.asarray(axes, np.int32), "keepDims": True,
        "dType": "DT_FLOAT"}, _name(node)))


# ------------------------------------------------------------------------------------ normalization
def _channel_affine(cv: GraphConverter, node, x: Val, scale: np.ndarray, shift: np.ndarray) -> Val:
    """y = x * scale[c] + shift[c] along axis 1: folded into a preceding convolution, a Scale op on
    4-D tensors, else two BinaryOps."""
    name = _name(node)
    if x.conv is not None and x.conv_axis == 1 and cv.only_use(node) and x.conv.type in (
            "Convolution", "ConvolutionDepthwise"):
        main = x.conv.main
        common = main["common"]
        if not common.get("relu") and not common.get("relu6") and main["bias"].size == scale.size:
            o = main["bias"].size
            main["weight"] = (main["weight"].reshape(o, -1) * scale[:, None]).reshape(-1).astype(np.float32)
            main["bias"] = (main["bias"] * scale + shift).astype(np.float32)
            cv.b.rename(x.index, name)
            return Val(index=x.index, shape=x.shape, dtype=x.dtype, conv=x.conv, conv_axis=1, nc4=x.nc4)
    if x.rank == 4:
        main = {"channels": int(scale.size), "scaleData": scale.astype(np.float32),
                "biasData": shift.astype(np.float32)}
        return cv.out(cv.b.cnn("Scale", cv.idx(x), "Scale", main, name))
    rank = x.rank
    if rank is None:
        raise cv.unsupported("normalization of a tensor of unknown rank")
    shp = [scale.size] + [1] * (rank - 2) if rank >= 2 else [scale.size]
    t = cv.b.binary("MUL", cv.idx(x), cv.b.const(scale.reshape(shp)))
    return cv.out(cv.b.binary("ADD", t, cv.b.const(shift.reshape(shp)), name))


@handler("BatchNormalization")
def batch_norm(cv: GraphConverter, node, ins):
    """Inference batch normalization as a per-channel scale and shift."""
    if any(o and cv.uses.get(o) for o in node.output[1:]):
        raise cv.unsupported("training-mode BatchNormalization outputs")
    x = ins[0]
    s, b, m, v = (_const(cv, t, "batch-normalization statistics").reshape(-1) for t in ins[1:5])
    eps = float(attrs_of(node).get("epsilon", 1e-5))
    scale = (s / np.sqrt(v.astype(np.float64) + eps)).astype(np.float32)
    shift = (b - m * scale).astype(np.float32)
    return _channel_affine(cv, node, x, scale, shift)


@handler("InstanceNormalization")
def instance_norm(cv: GraphConverter, node, ins):
    """Normalize each (sample, channel) over its spatial values (a LayerNorm over the flattened
    spatial axes, as real MNN's converter writes it), then scale and shift per channel."""
    x = ins[0]
    s = _const(cv, ins[1], "instance-normalization scale").reshape(-1)
    b = _const(cv, ins[2], "instance-normalization bias").reshape(-1)
    eps = float(attrs_of(node).get("epsilon", 1e-5))
    t = cv.idx(x)
    flat = cv.b.reshape(t, [0, 0, -1])
    ln = cv.b.op1("LayerNorm", [flat], "LayerNorm", {"axis": np.asarray([-1], np.int32), "epsilon": eps,
                                                     "group": 1})
    back = cv.b.reshape(ln, cv.b.shape_of(t))
    rank = x.rank
    if rank is None:
        raise cv.unsupported("InstanceNormalization of a tensor of unknown rank")
    shp = [s.size] + [1] * (rank - 2)
    y = cv.b.binary("MUL", back, cv.b.const(s.reshape(shp)))
    return cv.out(cv.b.binary("ADD", y, cv.b.const(b.reshape(shp)), _name(node)))


@handler("LayerNormalization")
def layer_norm(cv: GraphConverter, node, ins):
    """MNN LayerNorm over the trailing axes from ``axis``, with constant gamma / beta."""
    if any(o and cv.uses.get(o) for o in node.output[1:]):
        raise cv.unsupported("LayerNormalization's mean / inverse-deviation outputs")
    x = ins[0]
    at = attrs_of(node)
    axis = int(at.get("axis", -1))
    rank = x.rank
    if axis >= 0:
        if rank is None:
            raise cv.unsupported("LayerNormalization with a positive axis on a tensor of unknown rank")
        axis -= rank
    axes = list(range(axis, 0))
    norm_shape = [x.dim(a) for a in axes]
    eps = float(at.get("epsilon", 1e-5))
    if len(axes) > 1:
        return _layer_norm_ops(cv, node, x, axes, eps, ins[1], ins[2] if len(ins) > 2 else None)
    main = {"axis": np.asarray(axes, np.int32), "epsilon": eps}
    post = []
    for key, v in (("gamma", ins[1]), ("beta", ins[2] if len(ins) > 2 else None)):
        if v is None:
            continue
        if v.const is not None and None not in norm_shape:
            main[key] = np.broadcast_to(v.const.astype(np.float32), norm_shape).reshape(-1).copy()
        else:
            post.append((key, v))
    name = _name(node)
    if "beta" in main and "gamma" not in main:
        main["gamma"] = np.ones_like(main["beta"])
    t = cv.b.op1("LayerNorm", [cv.idx(x)], "LayerNorm", main, None if post else name)
    for k, (key, v) in enumerate(post):
        t = cv.b.binary("MUL" if key == "gamma" else "ADD", t, cv.idx(v), name if k == len(post) - 1 else None)
    return cv.out(t)


def _layer_norm_ops(cv: GraphConverter, node, x: Val, axes: list, eps: float, gamma, beta) -> Val:
    """Layer normalization over several axes from elementwise ops and reductions (real MNN's
    LayerNorm op normalizes the last axis only, as its converter writes it)."""
    t = cv.idx(x)
    red = {"dim": np.asarray(axes, np.int32), "keepDims": True, "dType": "DT_FLOAT"}
    mean = cv.b.op1("Reduction", [t], "ReductionParam", dict(red, operation="MEAN"))
    d = cv.b.binary("SUB", t, mean)
    var = cv.b.op1("Reduction", [cv.b.unary("SQUARE", d)], "ReductionParam", dict(red, operation="MEAN"))
    y = cv.b.binary("MUL", d, cv.b.unary("RSQRT", cv.b.binary("ADD", var, cv.b.scalar(eps))))
    if gamma is not None:
        y = cv.b.binary("MUL", y, cv.idx(gamma))
    if beta is not None:
        y = cv.b.binary("ADD", y, cv.idx(beta))
    return cv.out(y)


# ------------------------------------------------------------------------------------ Gemm / MatMul
def dense(b: GraphBuilder, x: int, w: np.ndarray, bias: np.ndarray, name: str) -> tuple:
    """x [M, K, 1, 1] times w [N, K]^T plus bias as a 1x1 Convolution; returns
    (tensor [M, N, 1, 1], the conv op)."""
    n, k = w.shape
    sp = {"strides": [1, 1], "dilations": [1, 1], "mode": "CAFFE", "pads4": [0, 0, 0, 0]}
    common = _common(1, 1, sp, 1, n, k)
    del common["pads"]
    main = {"common": common, "weight": w.reshape(-1).astype(np.float32), "bias": bias.astype(np.float32)}
    y = b.op1("Convolution", [b.to_nc4(x, name)], "Convolution2D", main, f"{name}__nc4")
    return b.to_nchw(y, name + "__conv"), b.producer[y]


def linear_rows(b: GraphBuilder, x: int, w: np.ndarray, bias: np.ndarray, name: str) -> int:
    """x [M, K] @ w[N, K]^T + bias -> [M, N] (a 1x1 convolution)."""
    n, k = w.shape
    y, _ = dense(b, b.reshape(x, [-1, k, 1, 1]), w, bias, name)
    return b.reshape(y, [-1, n])


def _linear(cv: GraphConverter, a: Val, w: np.ndarray, bias: np.ndarray, name: str) -> Val:
    """a [..., K] @ w[N, K]^T + bias via a 1x1 convolution, reshaped back to [..., N]."""
    n, k = w.shape
    t = cv.b.reshape(cv.idx(a), [-1, k, 1, 1])
    y, op = dense(cv.b, t, w, bias, name)
    rank = a.rank
    lead = None if rank is None else a.shape[:-1]
    if lead is not None and all(d is not None for d in lead):
        out = cv.b.reshape(y, list(lead) + [n], name)
    elif rank == 2:
        out = cv.b.reshape(y, [-1, n], name)
    else:
        shp = cv.b.shape_of(cv.idx(a))
        lead_t = cv.b.slice1(shp, 0, -1, 0)
        out = cv.b.reshape(y, cv.b.concat([lead_t, cv.b.ints([n])], 0), name)
    return Val(index=out, dtype=np.dtype(np.float32), conv=op, conv_axis=-1)


@handler("Gemm")
def gemm(cv: GraphConverter, node, ins):
    """alpha * A' @ B' + beta * C: a 1x1 convolution when B is constant, else MatMul."""
    at = attrs_of(node)
    alpha, beta = float(at.get("alpha", 1.0)), float(at.get("beta", 1.0))
    ta, tb = int(at.get("transA", 0)), int(at.get("transB", 0))
    a, b = ins[0], ins[1]
    c = ins[2] if len(ins) > 2 else None
    name = _name(node)
    if b.const is not None:
        w = b.const.astype(np.float32)
        w = (w if tb else w.T) * np.float32(alpha)
        n = w.shape[0]
        bias = np.zeros(n, np.float32)
        if c is not None and c.const is not None and c.const.size in (1, n) and (
                c.const.ndim < 2 or c.const.shape[0] == 1):
            bias = np.broadcast_to(c.const.astype(np.float32).reshape(-1), (n,)) * np.float32(beta)
            c = None
        av = a
        if ta:
            av = Val(index=cv.b.permute(cv.idx(a), [1, 0]), shape=None if a.shape is None else a.shape[::-1])
        y = _linear(cv, av, w, bias.astype(np.float32), name + ("__gemm" if c is not None else ""))
        if c is None:
            return y
        t = y.index
    else:
        t = cv.b.op1("MatMul", [cv.idx(a), cv.idx(b)], "MatMul", {"transposeA": bool(ta), "transposeB": bool(tb),
                                                                  "T": "DT_FLOAT"})
        if alpha != 1.0:
            t = cv.b.binary("MUL", t, cv.b.scalar(alpha))
        if c is None:
            return cv.out(t)
    cc = cv.idx(c) if beta == 1.0 else cv.b.binary("MUL", cv.idx(c), cv.b.scalar(beta))
    return cv.out(cv.b.binary("ADD", t, cc, name))


@handler("MatMul")
def matmul(cv: GraphConverter, node, ins):
    """numpy matmul: a 1x1 convolution for a constant 2-D right operand, else MNN MatMul."""
    a, b = ins
    name = _name(node)
    if b.const is not None and b.const.ndim == 2 and (a.rank or 0) >= 2:
        w = b.const.astype(np.float32).T
        return _linear(cv, a, np.ascontiguousarray(w), np.zeros(w.shape[0], np.float32), name)
    ra, rb = a.rank, b.rank
    if ra is None or rb is None:
        return cv.out(cv.b.op1("MatMul", [cv.idx(a), cv.idx(b)], "MatMul", {"T": "DT_FLOAT"}, name), a.dtype)
    ta, tb = cv.idx(a), cv.idx(b)
    if ra == 1:
        ta = cv.b.unsqueeze(ta, [0])
    if rb == 1:
        tb = cv.b.unsqueeze(tb, [1])
    squeeze = ([-2] if ra == 1 else []) + ([-1] if rb == 1 else [])
    t = cv.b.op1("MatMul", [ta, tb], "MatMul", {"T": "DT_FLOAT"}, None if squeeze else name)
    if squeeze:
        out_rank = max(ra, rb, 2)
        t = cv.b.squeeze(t, sorted(s % out_rank for s in squeeze), name)
    return cv.out(t, a.dtype)


@handler("Add")
def add(cv: GraphConverter, node, ins):
    """Elementwise add; a constant per-channel bias folds into a preceding convolution."""
    from .ops_math import binary
    a, b = ins
    if b.conv is not None and a.const is not None:
        a, b = b, a
    if a.conv is not None and b.const is not None and cv.only_use(node, 0 if ins[0] is a else 1):
        main = a.conv.main
        n = main["bias"].size
        c = b.const.astype(np.float32)
        rank = a.rank
        ok = False
        if a.conv_axis == -1 and c.size == n and c.shape[-1:] == (n,) and (rank is None or c.ndim <= rank):
            ok = True
        elif a.conv_axis == 1 and rank is not None and c.ndim <= rank and c.size == n and \
                c.ndim >= rank - 1 and c.shape[c.ndim - (rank - 1)] == n:
            ok = True
        if ok and not main["common"].get("relu") and not main["common"].get("relu6"):
            main["bias"] = (main["bias"] + c.reshape(-1)).astype(np.float32)
            cv.b.rename(a.index, _name(node))
            return Val(index=a.index, shape=a.shape, dtype=a.dtype, conv=a.conv, conv_axis=a.conv_axis, nc4=a.nc4)
    if a.nc4 is not None and b.nc4 is not None and a.static_shape is not None and \
            a.static_shape == b.static_shape and len(a.static_shape) == 4:
        # two CNN outputs of one shape (a residual): added in NC4HW4, as real MNN's converter does
        t = cv.b.binary("ADD", a.nc4, b.nc4, _name(node) + "__nc4")
        return Val(index=cv.b.to_nchw(t, _name(node)), shape=a.shape, nc4=t)
    return binary(cv, node, ins)


# ------------------------------------------------------------------------------------ resize
_CTM = {"half_pixel": "HalfPixels", "align_corners": "AlignCorners", "asymmetric": "Asymmetric",
        "pytorch_half_pixel": "PytorchHalfPixels", "tf_half_pixel_for_nn": "TensorflowHalfPixels"}


@handler("Resize", "Upsample")
def resize(cv: GraphConverter, node, ins):
    """Interp (nearest floor / round-half-down, bilinear) of 4-D NCHW tensors; cubic and the other
    nearest roundings as two matrix products (see resize_matrix.py), which needs known sizes."""
    at = attrs_of(node)
    x = ins[0]
    if x.rank is not None and x.rank != 4:
        raise cv.unsupported(f"resizing a {x.rank}-D tensor")
    mode = _s(at.get("mode", "nearest"))
    cubic_a, exclude = -0.75, False
    if node.op_type == "Upsample" or cv.opset < 11:
        ctm, nearest = "asymmetric", "floor"
        if cv.opset < 9 and "scales" in at:
            scales, sizes = Val(const=np.asarray(at["scales"], np.float32)), None
        else:
            scales, sizes = ins[1], None
    else:
        ctm = _s(at.get("coordinate_transformation_mode", "half_pixel"))
        nearest = _s(at.get("nearest_mode", "round_prefer_floor"))
        scales = ins[2] if len(ins) > 2 and ins[2] is not None and not (
            ins[2].const is not None and ins[2].const.size == 0) else None
        sizes = ins[3] if len(ins) > 3 and ins[3] is not None else None
        exclude = bool(int(at.get("exclude_outside", 0)))
        cubic_a = float(at.get("cubic_coeff_a", -0.75))
        if int(at.get("antialias", 0)):
            raise cv.unsupported("antialias=1")
        if "axes" in at:
            raise cv.unsupported("Resize axes")
    if ctm not in _CTM:
        raise cv.unsupported(f"coordinate_transformation_mode {ctm!r}")
    mode = {"bilinear": "linear"}.get(mode, mode)
    if mode not in ("nearest", "linear", "cubic"):
        raise cv.unsupported(f"mode {mode!r}")
    target = sizes if sizes is not None else scales
    if target is None:
        raise cv.unsupported("Resize without scales or sizes")
    if target.const is not None and target.const.size == 4 and (
            tuple(target.const[:2]) != ((1.0, 1.0) if target is scales else (x.dim(0), x.dim(1)))):
        if target is scales or None not in (x.dim(0), x.dim(1)):
            raise cv.unsupported("resizing the batch or channel axis")
    native = mode == "linear" or (mode == "nearest" and nearest in ("floor", "round_prefer_floor"))
    if native and not exclude:
        main = {"resizeType": {"nearest": 4 if nearest == "round_prefer_floor" else 1, "linear": 2}[mode],
                "ctm": _CTM[ctm], "alignCorners": ctm == "align_corners", "halfPixelCenters": ctm == "half_pixel",
                "cubicCoeffA": -0.75}
        if target.const is not None:
            tt = cv.b.const(target.const.astype(np.float32 if target is scales else np.int32))
        else:
            tt = cv.idx(target)
        return cv.out(cv.b.cnn("Interp", cv.idx(x), "Interp", main, _name(node), extra=[tt]))
    return _resize_by_matrices(cv, node, x, target, target is scales, mode, ctm, nearest, cubic_a, exclude)


def _resize_by_matrices(cv: GraphConverter, node, x: Val, target: Val, is_scales: bool, mode: str, ctm: str,
                        nearest: str, cubic_a: float, exclude: bool) -> Val:
    """y = Mh @ x @ Mw^T with constant interpolation matrices (MatMul ops, never quantized)."""
    from .resize_matrix import resize_matrix
    h, w = x.dim(2), x.dim(3)
    if h is None or w is None or target.const is None:
        raise cv.unsupported(f"{mode} resizing ({nearest if mode == 'nearest' else ctm}) of inputs of unknown size")
    v = target.const.astype(np.float64).reshape(-1)[-2:]
    if is_scales:
        sh, sw = float(np.float32(v[0])), float(np.float32(v[1]))
        oh, ow = int(np.floor(h * sh)), int(np.floor(w * sw))
    else:
        oh, ow = int(v[0]), int(v[1])
        sh, sw = oh / h, ow / w
    mh = resize_matrix(h, oh, sh, mode, ctm, nearest, cubic_a, exclude)
    mw = resize_matrix(w, ow, sw, mode, ctm, nearest, cubic_a, exclude)
    t = cv.b.op1("MatMul", [cv.idx(x), cv.b.const(mw.T.copy())], "MatMul", {"T": "DT_FLOAT"})
    t = cv.b.op1("MatMul", [cv.b.const(mh), t], "MatMul", {"T": "DT_FLOAT"}, _name(node))
    return cv.out(t)


@handler("LRN")
def lrn(cv: GraphConverter, node, ins):
    """Cross-channel local response normalization: x / (bias + alpha / size * sum(x^2))^beta, the
    window sum as a channel-axis average pooling of x^2 (exact, no LRN op semantics to rely on)."""
    at = attrs_of(node)
    size = int(at["size"])
    alpha, beta, bias = float(at.get("alpha", 1e-4)), float(at.get("beta", 0.75)), float(at.get("bias", 1.0))
    x = ins[0]
    if x.rank != 4:
        raise cv.unsupported("LRN of a tensor that is not 4-D")
    t = cv.idx(x)
    sq = cv.b.unary("SQUARE", t)
    # [N, C, H, W] -> [N, 1, C, H*W]: average the squares over `size` channels with zero padding
    shp = cv.b.shape_of(t)
    r = cv.b.unsqueeze(cv.b.reshape(sq, [0, 0, -1]), [1])
    lo, hi = (size - 1) // 2, size // 2
    main = {"kernelX": 1, "kernelY": size, "strideX": 1, "strideY": 1, "padX": 0, "padY": lo,
            "pads": np.asarray([lo, 0, hi, 0], np.int32), "type": "AVEPOOL", "padType": "CAFFE",
            "countType": "INCLUDE_PADDING", "dataType": "DT_FLOAT"}
    avg = cv.b.cnn("Pooling", r, "Pool", main, _name(node) + "__window")
    s = cv.b.reshape(cv.b.squeeze(avg, [1]), shp)
    den = cv.b.binary("ADD", cv.b.binary("MUL", s, cv.b.scalar(alpha)), cv.b.scalar(bias))
    den = cv.b.binary("POW", den, cv.b.scalar(beta))
    return cv.out(cv.b.binary("REALDIV", t, den, _name(node)))


# ------------------------------------------------------------------------------------ Einsum
def _einsum_terms(eq: str) -> tuple:
    eq = eq.replace(" ", "")
    if "..." in eq:
        raise ValueError("ellipsis")
    lhs, _, out = eq.partition("->")
    terms = lhs.split(",")
    if not _:
        seen = "".join(terms)
        out = "".join(sorted(c for c in set(seen) if seen.count(c) == 1))
    return terms, out


@handler("Einsum")
def einsum(cv: GraphConverter, node, ins):
    """One or two operands without repeated letters in a term: sums, a permutation, and one batched
    MatMul (kept / contracted letter groups merged by reshapes when there are several)."""
    eq = _s(attrs_of(node)["equation"])
    try:
        terms, out = _einsum_terms(eq)
    except ValueError:
        raise cv.unsupported(f"equation {eq!r} (ellipsis)") from None
    if len(terms) != len(ins) or len(terms) > 2 or any(len(set(t)) != len(t) for t in terms + [out]):
        raise cv.unsupported(f"equation {eq!r}")
    vals = list(ins)
    ts, letters = [], []
    others = [set("".join(terms[:k] + terms[k + 1:])) for k in range(len(terms))]
    for k, (t, v) in enumerate(zip(terms, vals)):
        if v.rank is not None and v.rank != len(t):
            raise cv.unsupported(f"equation {eq!r}: operand {k} has rank {v.rank}")
        drop = [i for i, c in enumerate(t) if c not in out and c not in others[k]]
        x = cv.idx(v)
        if drop:  # letters only this operand has and the output lacks: summed first
            x = cv.b.op1("Reduction", [x], "ReductionParam", {"operation": "SUM", "dim": np.asarray(drop, np.int32),
                                                              "keepDims": False, "dType": "DT_FLOAT"})
        ts.append(x)
        letters.append("".join(c for c in t if c not in [t[i] for i in drop]))
    sizes = {}
    for t, v in zip(terms, vals):
        for i, c in enumerate(t):
            if v.dim(i) is not None:
                sizes[c] = v.dim(i)
    if len(ts) == 1:
        (a,), (la,) = ts, letters
        perm = [la.index(c) for c in out]
        y = a if perm == sorted(perm) else cv.b.permute(a, perm)
        return cv.out(y if y != a else cv.b.identity(a), ins[0].dtype)
    (a, b), (la, lb) = ts, letters
    batch = [c for c in out if c in la and c in lb]
    left = [c for c in out if c in la and c not in lb]
    right = [c for c in out if c in lb and c not in la]
    contract = [c for c in la if c in lb and c not in out]

    def group(x, lets, order):
        perm = [lets.index(c) for c in order]
        return x if perm == list(range(len(perm))) else cv.b.permute(x, perm)
    a = group(a, la, batch + left + contract)
    b = group(b, lb, batch + contract + right)
    merge = [g for g in (left, contract, right) if len(g) != 1]
    if merge:
        need = [c for g in merge for c in g] + batch
        if any(c not in sizes for c in need):
            raise cv.unsupported(f"equation {eq!r} on operands of unknown sizes")
        nb = [sizes[c] for c in batch]
        prod = lambda g: int(np.prod([sizes[c] for c in g])) if g else 1  # noqa: E731
        a = cv.b.reshape(a, nb + [prod(left), prod(contract)])
        b = cv.b.reshape(b, nb + [prod(contract), prod(right)])
    y = cv.b.op1("MatMul", [a, b], "MatMul", {"T": "DT_FLOAT"})
    cur = batch + (left if len(left) == 1 else ["<l>"]) + (right if len(right) == 1 else ["<r>"])
    if merge:
        y = cv.b.reshape(y, [sizes[c] for c in batch + left + right])
        cur = batch + left + right
    perm = [cur.index(c) for c in out]
    if perm != list(range(len(perm))):
        y = cv.b.permute(y, perm)
    return cv.out(y, ins[0].dtype)
