"""Fusion groups with a fused resize producer (compiler/producers.py): resize rows, then the group's body.

The generated kernel computes one output row of OpenCV's fixed-point bilinear resize at a time into a
small uint8 buffer (``cv_kernels._resize_linear_u8c3``, the same kernel and taps as the resize op) and
runs the group's elementwise body over that row while it is in cache: the resized leaf is read from the
row (channel-reversed when the producer includes the flip), the other leaves must be scalars or
per-channel vectors (loaded once). Any other layout returns None and the caller computes the resize and
runs the group as an ordinary one.
"""
from __future__ import annotations

import numpy as np

from mnnjit.backends.ir import GroupSpec
from mnnjit.backends.cpu.runtime import jit
from mnnjit.backends.cpu.codegen.groups import CODECS, CODEGEN_VERSION, _body_exprs, _param_list

_HEADER = '''# mnnjit generated kernel (codegen v{version}, resize producer); key:
# {key}
import numpy as np
import numba
from mnnjit.backends.cpu.runtime.intrinsics import fast_expf, f32_order_key, f32_from_order_key
from mnnjit.backends.cpu.fp16 import f16_to_f32, f32_to_f16
from mnnjit.backends.cpu.image.kernels import _resize_rows_c3

'''


def gen_resize_group(spec: GroupSpec, modes: tuple, leaf: int, flip: bool, cache: bool = True) -> str:
    """Source of a serial kernel: rows of a 3-channel uint8 bilinear resize feeding the group's body.

    Arguments: the resize input rows ``src`` [h, w*3] and taps (``xo, wa, wb, nsafe, yi, by``), then one
    array per leaf (leaf ``leaf``'s slot is unused), ``out`` (flat), ``oh``, ``ow``, the parameters.
    ``modes`` per leaf: ``p`` (the resized leaf), ``s`` (scalar), ``j`` (per-channel, 3 values).
    """
    xs = "".join(f"x{k}, " for k in range(len(modes)))
    out_codec = CODECS[spec.nodes[-1][1]]
    src = [_HEADER.format(version=CODEGEN_VERSION, key=spec.key() + f" resize {modes} leaf{leaf} flip{flip}"),
           f'@numba.njit(parallel=False, cache={cache}, error_model="numpy", nogil=True)',
           f"def kernel(src, xo, wa, wb, nsafe, yi, by, {xs}out, oh, ow{_param_list(spec)}):",
           "    row = np.empty((1, ow * 3), np.uint8)",
           "    r = row[0]",
           "    st0 = np.empty(ow, np.uint64)",
           "    st1 = np.empty(ow, np.uint64)",
           "    tmp = np.empty(ow, np.uint32)"]
    for k, m in enumerate(modes):
        if m == "s":
            src.append(f"    s{k} = {CODECS[spec.leaf_dtypes[k]].load(f'x{k}', '0')}")
        elif m == "j":
            src += [f"    h{k}_{jj} = {CODECS[spec.leaf_dtypes[k]].load(f'x{k}', str(jj))}" for jj in range(3)]
    src += ["    for dy in range(oh):",
            "        _resize_rows_c3(src, xo, wa, wb, nsafe, yi[dy:dy + 1], by[dy:dy + 1], row, 0, 1, st0, st1, tmp)",
            "        base = dy * ow * 3",
            "        for o in range(ow):",
            "            ob = o * 3"]
    for jj in range(3):
        names = []
        for k, m in enumerate(modes):
            names.append({"s": f"s{k}", "j": f"h{k}_{jj}", "p": f"a{k}"}[m])
        lines = [f"            a{leaf} = r[np.uint64(ob + {2 - jj if flip else jj})]"]
        body, last = _body_exprs(spec, names, "            ")
        src += lines + body + ["            " + out_codec.store("out", f"np.uint64(base + ob + {jj})", last)]
    return "\n".join(src) + "\n"


def run_resize_group(g, inputs: list[np.ndarray], out: np.ndarray) -> np.ndarray | None:
    """Run group ``g`` (with ``g.producer``) fused with its resize; None when the layout is not covered."""
    from mnnjit.backends.cpu.image.kernels import _pixel_taps, _taps
    prod = g.producer
    x = inputs[prod.leaf]
    if x.dtype != np.uint8 or x.ndim != 3 or x.shape[2] != 3 or x.shape[1] < 2 or out.dtype == np.float16:
        return None
    modes = []
    for k, a in enumerate(inputs):
        if k == prod.leaf:
            modes.append("p")
        elif a.size == 1:
            modes.append("s")
        elif a.shape[-1] == 3 and a.size == 3:
            modes.append("j")
        else:
            return None
    h, w, _ = x.shape
    oh, ow = prod.size
    sy, sx = prod.scale
    yi, by = _taps(h, oh, float(sy), True)
    xo, wa, wb, nsafe = _pixel_taps(w, ow, float(sx))
    spec = g.spec
    modes_t = tuple(modes)
    kern = jit.get_kernel(spec.key() + f"|resize{modes_t}|{prod.leaf}|{prod.flip}",
                          lambda: gen_resize_group(spec, modes_t, prod.leaf, prod.flip))
    leaves = [np.ascontiguousarray(a).reshape(-1) for a in inputs]
    srcs = np.ascontiguousarray(x).reshape(h, w * 3)
    if kern(srcs, xo, wa, wb, nsafe, yi, by, *leaves, out.reshape(-1), oh, ow, *g.params) is jit.BROKEN:
        return None
    return out


def resize_leaf(g, x: np.ndarray) -> np.ndarray:
    """The value leaf ``g.producer.leaf`` stands for: the resize of ``x`` (channel-flipped if fused so)."""
    from mnnjit.ops import registry
    from mnnjit.backends.cpu.handwritten import registry as kernels
    prod = g.producer
    attrs = {"size": prod.size, "interp": prod.interp, "scale": prod.scale}
    kernels.load_kernel_modules()
    from mnnjit.backends.cpu.handwritten.image_ops import resize_image
    y = resize_image([x], attrs) if x.dtype in (np.uint8, np.float32) else registry.get("resize_image").ref([x], attrs)
    return y[..., ::-1] if prod.flip else y

