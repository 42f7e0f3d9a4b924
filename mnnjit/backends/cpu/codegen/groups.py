"""Python/Numba source generation for fusion groups (no numba import here).

A fusion group is described by a :class:`GroupSpec`: its nodes in evaluation order, each an op of
the registry with its output dtype and its inputs (leaf ``k`` or earlier group node ``j``), the leaf
dtypes, the kinds of the runtime scalar parameters (op attributes such as ``clip``'s ``lo``/``hi``
are kernel arguments, not constants baked into the source, so one kernel serves every value), and an
optional final reduction. Shapes and strides are kernel arguments too: a kernel is keyed only by
the group's structure, dtypes, the per-leaf access mode and the collapsed rank of the iteration space.

Per-leaf access modes (chosen at run time from the actual arrays):

* ``c`` - contiguous with the output: indexed by the output's flat index
* ``s`` - a single element (scalar, broadcast everywhere): loaded once before the loop
* ``g`` - general strides (broadcasting, transposed or sliced views): index = base + j * stride
* ``u`` - (reductions) general strides with unit stride along the innermost reduced axis

Each dtype's load, store and compute type come from a :class:`Codec`, so that a storage type that is
not a compute type (float16, computed in float32 through ``fpext``/``fptrunc``) swaps in its own.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import lru_cache

from mnnjit.backends.ir import GroupSpec
from mnnjit.ops import registry

CODEGEN_VERSION = 14  # bump when generated code or intrinsics.py change (kernel cache directory)


@dataclass(frozen=True)
class Codec:
    """How generated code loads, stores and computes one storage dtype."""

    dtype: str          # numpy dtype name of the storage
    compute: str        # numpy scalar type expressions are rounded to (np.float32, np.int32, ...)

    def load(self, arr: str, idx: str) -> str:
        """An expression reading element ``idx`` of array ``arr``."""
        return f"{arr}[{idx}]"

    def store(self, arr: str, idx: str, value: str) -> str:
        """A statement writing ``value`` (already of the compute type) to element ``idx``."""
        return f"{arr}[{idx}] = {value}"

    def cast(self, expr: str) -> str:
        """``expr`` rounded/wrapped to this dtype, as numpy's elementwise ops store it."""
        return f"np.{self.compute}({expr})"


@dataclass(frozen=True)
class F16Codec(Codec):
    """float16 storage (arrays passed as their uint16 bits), computed in float32 (fpext/fptrunc).

    A float16 node's value is rounded to half after every op, as numpy's float16 arithmetic stores it.
    """

    def load(self, arr: str, idx: str) -> str:
        return f"f16_to_f32({arr}[{idx}])"

    def store(self, arr: str, idx: str, value: str) -> str:
        return f"{arr}[{idx}] = f32_to_f16({value})"

    def cast(self, expr: str) -> str:
        return f"f16_to_f32(f32_to_f16(np.float32({expr})))"


CODECS: dict[str, Codec] = {
    "float16": F16Codec("float16", "float32"),
    "float32": Codec("float32", "float32"),
    "int32": Codec("int32", "int32"),
    "uint8": Codec("uint8", "uint8"),
    "int8": Codec("int8", "int8"),
}

template_attrs = registry.template_attrs


@lru_cache(maxsize=None)
def _template_ast(op: str) -> ast.Expression:
    return ast.parse(registry.get(op).scalar, mode="eval")


class _Rename(ast.NodeTransformer):
    def __init__(self, mapping: dict[str, str]):
        self.mapping = mapping

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.mapping:
            return ast.copy_location(ast.Name(id=self.mapping[node.id], ctx=node.ctx), node)
        return node


def instantiate(op: str, args: list[str], params: dict[str, str]) -> str:
    """The op's scalar template with input names ``a, b, c`` and attributes replaced."""
    mapping = dict(zip("abc", args))
    mapping.update(params)
    tree = _Rename(mapping).visit(ast.parse(ast.unparse(_template_ast(op)), mode="eval"))
    return ast.unparse(tree)


# ------------------------------------------------------------------ reductions
_ACC = {  # reduce op -> (float accumulator, int accumulator)
    "reduce_sum": ("float64", "int64"),
    "reduce_mean": ("float64", "float64"),
    "reduce_prod": ("float64", "int64"),
    "reduce_max": (None, None),
    "reduce_min": (None, None),
}
REDUCE_OPS = frozenset(_ACC)

#: Independent accumulators in a max/min reduction's innermost loop.
LANES_MINMAX = 4

_INT_LIMITS = {"int32": (-2 ** 31, 2 ** 31 - 1), "uint8": (0, 255), "int8": (-128, 127)}


def _reduce_parts(op: str, in_dt: str) -> tuple[str, str]:
    """(init expression, combine expression over ``acc`` and ``v``) for a reduction."""
    is_float = in_dt.startswith("float")
    if op in ("reduce_sum", "reduce_mean"):
        acc = _ACC[op][0 if is_float else 1]
        return f"np.{acc}(0)", "acc + v"
    if op == "reduce_prod":
        acc = _ACC[op][0 if is_float else 1]
        return f"np.{acc}(1)", "acc * v"
    if op == "reduce_max":
        init = f"np.{in_dt}(-np.inf)" if is_float else f"np.{in_dt}({_INT_LIMITS[in_dt][0]})"
        return init, "v if ((v > acc) | (v != v)) else acc"
    if op == "reduce_min":
        init = f"np.{in_dt}(np.inf)" if is_float else f"np.{in_dt}({_INT_LIMITS[in_dt][1]})"
        return init, "v if ((v < acc) | (v != v)) else acc"
    raise KeyError(op)


# ------------------------------------------------------------------ source generation
_HEADER = '''# mnnjit generated kernel (codegen v{version}); key:
# {key}
import math
import numpy as np
import numba
from numba import prange
from mnnjit.backends.cpu.runtime.intrinsics import fast_expf, f32_order_key, f32_from_order_key
from mnnjit.backends.cpu.fp16 import f16_to_f32, f32_to_f16

'''
_DECO = '@numba.njit(parallel={parallel}, cache={cache}, error_model="numpy", nogil=True)\n'

#: Innermost extents up to this are unrolled as literal loops in strided kernels (an image's channel axis
#: broadcast against per-channel constants): LLVM then vectorises across the outer axis (measured: 3.5x).
SMALL_INNER = 4


def _body_exprs(spec: GroupSpec, leaf_names: list[str], ind: str) -> tuple[list[str], str]:
    """Statements computing the group's node values; returns (lines, name of the last value)."""
    lines: list[str] = []
    if not spec.nodes:  # a reduction straight over its input
        return lines, leaf_names[0]
    for j, (op, dt, refs, attrs) in enumerate(spec.nodes):
        args = [leaf_names[i] if kind == "l" else f"v{i}" for kind, i in refs]
        params = {name: f"p{k}" for name, k in attrs}
        override = _FAST.get((op, _ref_dtype(spec, refs[0]) if refs else ""))
        expr = instantiate(op, args, params) if override is None else override.format(*args)
        if op == "cast" and dt in ("uint8", "int8") and refs and _ref_dtype(spec, refs[0]).startswith("float"):
            expr = f"np.int32({expr})"  # float -> 8-bit goes through int32 and wraps, as numpy does on x86
        lines.append(f"{ind}v{j} = {CODECS[dt].cast(expr)}")
    return lines, f"v{len(spec.nodes) - 1}"


#: Vectorisable replacements for templates that call libm (see intrinsics.py), per (op, input dtype).
_FAST = {
    ("exp", "float32"): "fast_expf({0})",
    ("sigmoid", "float32"): "np.float32(1.0) / (np.float32(1.0) + fast_expf(-{0}))",
}


def _ref_dtype(spec: GroupSpec, ref: tuple) -> str:
    kind, i = ref
    return spec.leaf_dtypes[i] if kind == "l" else spec.nodes[i][1]


def _param_list(spec: GroupSpec) -> str:
    return "".join(f", p{k}" for k in range(len(spec.param_kinds)))


def _loads(spec: GroupSpec, modes: tuple, idx_of, ind: str, jj: int = 0) -> tuple[list[str], list[str]]:
    """Per-element leaf loads for non-scalar leaves; scalar (``s``), per-row (``r``) and per-channel (``j``,
    element ``jj``) leaves are hoisted by the caller."""
    names, lines = [], []
    for k, mode in enumerate(modes):
        if mode == "s":
            names.append(f"s{k}")
        elif mode == "r":
            names.append(f"r{k}")
        elif mode == "j":
            names.append(f"h{k}_{jj}")
        else:
            names.append(f"a{k}")
            lines.append(f"{ind}a{k} = {CODECS[spec.leaf_dtypes[k]].load(f'x{k}', idx_of(k, mode))}")
    return names, lines


def _hoist_scalars(spec: GroupSpec, modes: tuple, ind: str) -> list[str]:
    return [f"{ind}s{k} = {CODECS[spec.leaf_dtypes[k]].load(f'x{k}', '0')}"
            for k, m in enumerate(modes) if m == "s"]


def gen_flat(spec: GroupSpec, modes: tuple, cache: bool = True, parallel: bool = True) -> str:
    """An elementwise kernel over a flat contiguous output: every leaf is ``c`` or ``s``.

    ``parallel=False`` gives a serial loop (mid-size groups: no thread team to wake)."""
    xs = "".join(f"x{k}, " for k in range(len(modes)))
    out_codec = CODECS[spec.nodes[-1][1]]
    kind = "" if parallel else " serial"
    src = [_HEADER.format(version=CODEGEN_VERSION, key=spec.key() + f" flat {modes}{kind}"),
           _DECO.format(cache=cache, parallel=parallel),
           f"def kernel({xs}out, n{_param_list(spec)}):"]
    src += _hoist_scalars(spec, modes, "    ")
    src.append(f"    for i in {'prange' if parallel else 'range'}(n):")
    names, loads = _loads(spec, modes, lambda k, m: "i", "        ")
    body, last = _body_exprs(spec, names, "        ")
    src += loads + body + ["        " + out_codec.store("out", "i", last)]
    return "\n".join(src) + "\n"


def gen_strided(spec: GroupSpec, modes: tuple, ndim: int, cache: bool = True, parallel: bool = True,
                inner: int = 0) -> str:
    """An elementwise kernel over an ``ndim``-d iteration space with per-leaf strides.

    Arguments: leaves, ``out`` (flat, C order), ``shp`` (int64[ndim]), ``st`` (int64[nleaves, ndim],
    element strides, 0 on broadcast axes, negative on reversed axes), ``off`` (int64[nleaves], the element
    offset of index 0 in each leaf's flat view: non-zero when a stride is negative), ``nb``/``bs`` (the
    innermost axis is split into ``nb`` blocks of ``bs`` so that even a 1-d strided loop runs in parallel),
    then the parameters (``nb`` must be 1 for serial or ``inner`` kernels). ``parallel=False``: a serial loop.
    ``inner > 0``: the innermost extent is that literal (small channel axes): the element loop is written
    out and the outer loop vectorises; two more leaf modes exist then: ``v`` (contiguous with the output
    but the innermost axis reversed, an image's ``[..., ::-1]``) and ``j`` (varying along the innermost
    axis only, per-channel constants: loaded once before the loop).
    """
    xs = "".join(f"x{k}, " for k in range(len(modes)))
    out_codec = CODECS[spec.nodes[-1][1]]
    last = ndim - 1
    kind = ("" if parallel else " serial") + (f" inner{inner}" if inner else "")
    src = [_HEADER.format(version=CODEGEN_VERSION, key=spec.key() + f" nd{ndim} {modes}{kind}"),
           _DECO.format(cache=cache, parallel=parallel),
           f"def kernel({xs}out, shp, st, off, nb, bs{_param_list(spec)}):",
           f"    inner = {inner}" if inner else f"    inner = shp[{last}]",
           "    outer = 1"]
    for d in range(last):
        src.append(f"    outer *= shp[{d}]")
    src += _hoist_scalars(spec, modes, "    ")
    for k, m in enumerate(modes):
        if m == "g":
            src.append(f"    sl{k} = st[{k}, {last}]")
        if m in ("g", "r"):
            src.append(f"    z{k} = off[{k}]")
            for d in range(last):
                src.append(f"    st{k}_{d} = st[{k}, {d}]")
    for d in range(1, last):
        src.append(f"    n{d} = shp[{d}]")
    if parallel and not inner:
        src += ["    for t in prange(outer * nb):",
                "        o = t // nb",
                "        jb = t - o * nb",
                "        rem = o + 0"]
    else:  # one block per row (nb == 1): no division in the loop, the compiler can vectorise
        # (``o + 0``: a plain copy of the prange index that is then overwritten made Numba's parfor
        # pass refuse some kernels, "Overwrite of parallel loop index", e.g. uint8 ``x == x``)
        src += [f"    for o in {'prange' if parallel else 'range'}(outer):",
                "        rem = o + 0"]
    for d in range(last - 1, -1, -1):
        if d == 0:
            src.append("        i0 = rem")
        else:
            src += [f"        i{d} = rem % n{d}", f"        rem = rem // n{d}"]
    for k, m in enumerate(modes):
        if m in ("g", "r"):
            terms = "".join(f" + i{d} * st{k}_{d}" for d in range(last))
            src.append(f"        b{k} = z{k}{terms}")
        if m == "r":  # constant along the innermost axis: one load per row
            src.append(f"        r{k} = {CODECS[spec.leaf_dtypes[k]].load(f'x{k}', f'np.uint64(b{k})')}")
    if inner:  # the innermost axis written out element by element (j literal)
        for k, m in enumerate(modes):
            if m == "j":  # a per-channel vector: loaded once, before the loop
                pos = src.index("    for o in " + ("prange" if parallel else "range") + "(outer):")
                src[pos:pos] = [f"    h{k}_{jj} = {CODECS[spec.leaf_dtypes[k]].load(f'x{k}', str(jj))}"
                                for jj in range(inner)]
        src.append("        ob = o * inner")
        for jj in range(inner):
            def idx(k: int, m: str, jj: int = jj) -> str:
                if m == "c":
                    return f"np.uint64(ob + {jj})"
                if m == "v":  # contiguous with the innermost axis reversed
                    return f"np.uint64(ob + {inner - 1 - jj})"
                return f"np.uint64(b{k} + {jj} * sl{k})"
            names, loads = _loads(spec, modes, idx, "        ", jj)
            body, lastv = _body_exprs(spec, names, "        ")
            src += loads + body + ["        " + out_codec.store("out", f"np.uint64(ob + {jj})", lastv)]
        return "\n".join(src) + "\n"
    elif not parallel:
        src += ["        ob = o * inner",
                "        for j in range(inner):"]
    else:
        src += ["        ob = o * inner",
                "        j0 = jb * bs",
                "        j1 = min(inner, j0 + bs)",
                "        for j in range(j0, j1):"]
    names, loads = _loads(spec, modes, lambda k, m: "oj" if m == "c" else f"np.uint64(b{k} + j * sl{k})",
                          "            ")
    body, lastv = _body_exprs(spec, names, "            ")
    # unsigned indices: Numba then skips negative-index wraparound, which would block vectorisation
    src += ["            oj = np.uint64(ob + j)"] + loads + body + ["            " + out_codec.store("out", "oj", lastv)]
    return "\n".join(src) + "\n"


def gen_reduce(spec: GroupSpec, modes: tuple, nk: int, nr: int, cache: bool = True) -> str:
    """A reduction kernel: ``nk`` kept axes (outer, parallel) and ``nr >= 1`` reduced axes.

    Arguments: leaves, ``out`` (flat over kept axes), ``shk``/``shr`` (int64 extents of kept and
    reduced axes), ``stk``/``str_`` (int64[nleaves, nk] and [nleaves, nr] element strides), ``P``
    (the first reduced axis is split into ``P`` chunks so that full reductions run in parallel;
    partial results are combined in a fixed order), ``count`` (elements per output, for mean), then
    the parameters. Leaf mode ``k``: constant over the reduced axes (loaded once per output).
    """
    rop, in_dt, out_dt = spec.reduce
    init, combine = _reduce_parts(rop, in_dt)
    # Sums and products let LLVM reassociate (it then vectorises the accumulation); max/min are
    # exact in any order and use LANES independent accumulators instead.
    arith = rop in ("reduce_sum", "reduce_mean", "reduce_prod")
    LANES = 1 if arith else LANES_MINMAX
    keyed = rop in ("reduce_max", "reduce_min") and in_dt == "float32"
    if keyed:  # float32 max/min as an integer reduction over order keys (vectorises, propagates NaN)
        LANES = 1
        nan_bits = 0x7FC00000 if rop == "reduce_max" else -0x400000
        init = "np.int64(-2 ** 62)" if rop == "reduce_max" else "np.int64(2 ** 62)"
        cmp = ">" if rop == "reduce_max" else "<"
        combine = f"v if v {cmp} acc else acc"
    elif not arith and not in_dt.startswith("float"):
        LANES = 1  # integer max/min: a plain select reduction vectorises
        cmp = ">" if rop == "reduce_max" else "<"
        combine = f"v if v {cmp} acc else acc"
    deco = _DECO.format(cache=cache, parallel=True)
    if arith:
        deco = deco.replace("nogil=True", "nogil=True, fastmath={'reassoc'}")
    xs = "".join(f"x{k}, " for k in range(len(modes)))
    src = [_HEADER.format(version=CODEGEN_VERSION, key=spec.key() + f" reduce k{nk} r{nr} {modes}"),
           deco,
           f"def kernel({xs}out, shk, shr, stk, str_, P, count{_param_list(spec)}):",
           "    K = 1"]
    for d in range(nk):
        src.append(f"    K *= shk[{d}]")
        src.append(f"    n{d} = shk[{d}]")
    for d in range(nr):
        src.append(f"    e{d} = shr[{d}]")
    src += ["    R0 = shr[0]",
            "    chunk = (R0 + P - 1) // P",
            f"    acc0 = {init}",
            "    part = np.empty(K * P, dtype=type(acc0))"]
    src += _hoist_scalars(spec, modes, "    ")
    strided = [k for k, m in enumerate(modes) if m != "s"]
    walking = [k for k, m in enumerate(modes) if m in ("g", "u")]
    for k in strided:
        for d in range(nk):
            src.append(f"    sk{k}_{d} = stk[{k}, {d}]")
    for k in walking:
        for d in range(nr):
            src.append(f"    sr{k}_{d} = str_[{k}, {d}]")
    src += ["    for t in prange(K * P):",
            "        o = t // P",
            "        p = t - o * P",
            "        rem = o + 0"]
    for d in range(nk - 1, -1, -1):
        if d == 0:
            src.append("        i0 = rem")
        else:
            src += [f"        i{d} = rem % n{d}", f"        rem = rem // n{d}"]
    for k in strided:
        terms = " + ".join(f"i{d} * sk{k}_{d}" for d in range(nk)) or "0"
        src.append(f"        c{k}_0 = {terms}")
        if modes[k] == "k":
            src.append(f"        q{k} = {CODECS[spec.leaf_dtypes[k]].load(f'x{k}', f'np.uint64(c{k}_0)')}")
    src += [f"        acc = {init}"] + [f"        acc_{L} = {init}" for L in range(LANES)]
    src += ["        r0s = p * chunk",
            "        r0e = min(R0, r0s + chunk)"]
    ind = "        "
    for d in range(nr - 1):
        rng = "range(r0s, r0e)" if d == 0 else f"range(e{d})"
        src.append(f"{ind}for r{d} in {rng}:")
        ind += "    "
        for k in walking:
            src.append(f"{ind}c{k}_{d + 1} = c{k}_{d} + r{d} * sr{k}_{d}")
    last = nr - 1
    lo, hi = ("r0s", "r0e") if last == 0 else ("0", f"e{last}")

    def idx(k: int, m: str) -> str:
        if m == "u":
            return f"np.uint64(c{k}_{last} + r{last})"
        return f"np.uint64(c{k}_{last} + r{last} * sr{k}_{last})"

    def element(ind2: str, acc_name: str) -> list[str]:
        names, loads = [], []
        for k, m in enumerate(modes):
            if m == "s":
                names.append(f"s{k}")
            elif m == "k":
                names.append(f"q{k}")
            else:
                names.append(f"a{k}")
                loads.append(f"{ind2}a{k} = {CODECS[spec.leaf_dtypes[k]].load(f'x{k}', idx(k, m))}")
        body, lastv = _body_exprs(spec, names, ind2)
        value = f"f32_order_key({lastv}, {nan_bits})" if keyed else lastv
        return loads + body + [f"{ind2}v = {value}", f"{ind2}{acc_name} = {combine.replace('acc', acc_name)}"]

    # The innermost reduced loop runs LANES independent accumulators (vectorisable without
    # reassociating), then a remainder loop; lanes are combined in a fixed order.
    src.append(f"{ind}rm = {lo} + ({hi} - {lo}) // {LANES} * {LANES}")
    src.append(f"{ind}for rr in range({lo}, rm, {LANES}):")
    for L in range(LANES):
        src.append(f"{ind}    r{last} = rr + {L}")
        src += element(ind + "    ", f"acc_{L}")
    src.append(f"{ind}for r{last} in range(rm, {hi}):")
    src += element(ind + "    ", "acc")
    lanes = [f"acc_{L}" for L in range(LANES)] + ["acc"]
    while len(lanes) > 1:
        nxt = []
        for i in range(0, len(lanes) - 1, 2):
            a, b = lanes[i], lanes[i + 1]
            src.append(f"        v = {b}")
            src.append(f"        {a} = {combine.replace('acc', a)}")
            nxt.append(a)
        if len(lanes) % 2:
            nxt.append(lanes[-1])
        lanes = nxt
    if lanes[0] != "acc":
        src.append(f"        acc = {lanes[0]}")
    src += ["        part[t] = acc",
            "    for o in range(K):  # serial: K * P partials, and one parallel region compiles faster",
            "        acc = part[o * P]",
            "        for p in range(1, P):",
            "            v = part[o * P + p]",
            f"            acc = {combine}"]
    final = "acc / count" if rop == "reduce_mean" else ("f32_from_order_key(acc)" if keyed else "acc")
    src.append("        " + CODECS[out_dt].store("out", "o", CODECS[out_dt].cast(final)))
    return "\n".join(src) + "\n"
