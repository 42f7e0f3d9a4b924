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
import builtins
from dataclasses import dataclass
from functools import lru_cache

from ...compiler.fusion import GroupSpec
from ...ops import registry

CODEGEN_VERSION = 3


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


CODECS: dict[str, Codec] = {
    "float32": Codec("float32", "float32"),
    "int32": Codec("int32", "int32"),
    "uint8": Codec("uint8", "uint8"),
    "int8": Codec("int8", "int8"),
}

#: Names a scalar template may use that are not op attributes.
_KNOWN = {"a", "b", "c", "acc", "math", "np"} | set(dir(builtins))


@lru_cache(maxsize=None)
def template_attrs(op: str) -> tuple[str, ...]:
    """The attribute names an op's scalar template refers to."""
    tpl = registry.get(op).scalar
    names = {n.id for n in ast.walk(ast.parse(tpl, mode="eval")) if isinstance(n, ast.Name)}
    return tuple(sorted(names - _KNOWN))


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
        return init, "v if (v > acc or v != v) else acc"
    if op == "reduce_min":
        init = f"np.{in_dt}(np.inf)" if is_float else f"np.{in_dt}({_INT_LIMITS[in_dt][1]})"
        return init, "v if (v < acc or v != v) else acc"
    raise KeyError(op)


# ------------------------------------------------------------------ source generation
_HEADER = '''# mnnjit generated kernel (codegen v{version}); key:
# {key}
import math
import numpy as np
import numba
from numba import prange

'''
_DECO = '@numba.njit(parallel=True, cache={cache}, error_model="numpy", nogil=True)\n'


def _body_exprs(spec: GroupSpec, leaf_names: list[str], ind: str) -> tuple[list[str], str]:
    """Statements computing the group's node values; returns (lines, name of the last value)."""
    lines: list[str] = []
    if not spec.nodes:  # a reduction straight over its input
        return lines, leaf_names[0]
    for j, (op, dt, refs, attrs) in enumerate(spec.nodes):
        args = [leaf_names[i] if kind == "l" else f"v{i}" for kind, i in refs]
        params = {name: f"p{k}" for name, k in attrs}
        expr = instantiate(op, args, params)
        if op == "cast" and dt in ("uint8", "int8") and refs and _ref_dtype(spec, refs[0]).startswith("float"):
            expr = f"np.int32({expr})"  # float -> 8-bit goes through int32 and wraps, as numpy does on x86
        lines.append(f"{ind}v{j} = {CODECS[dt].cast(expr)}")
    return lines, f"v{len(spec.nodes) - 1}"


def _ref_dtype(spec: GroupSpec, ref: tuple) -> str:
    kind, i = ref
    return spec.leaf_dtypes[i] if kind == "l" else spec.nodes[i][1]


def _param_list(spec: GroupSpec) -> str:
    return "".join(f", p{k}" for k in range(len(spec.param_kinds)))


def _loads(spec: GroupSpec, modes: tuple, idx_of, ind: str) -> tuple[list[str], list[str]]:
    """Per-element leaf loads for non-scalar leaves; scalar leaves are hoisted by the caller."""
    names, lines = [], []
    for k, mode in enumerate(modes):
        if mode == "s":
            names.append(f"s{k}")
        else:
            names.append(f"a{k}")
            lines.append(f"{ind}a{k} = {CODECS[spec.leaf_dtypes[k]].load(f'x{k}', idx_of(k, mode))}")
    return names, lines


def _hoist_scalars(spec: GroupSpec, modes: tuple, ind: str) -> list[str]:
    return [f"{ind}s{k} = {CODECS[spec.leaf_dtypes[k]].load(f'x{k}', '0')}"
            for k, m in enumerate(modes) if m == "s"]


def gen_flat(spec: GroupSpec, modes: tuple, cache: bool = True) -> str:
    """An elementwise kernel over a flat contiguous output: every leaf is ``c`` or ``s``."""
    xs = "".join(f"x{k}, " for k in range(len(modes)))
    out_codec = CODECS[spec.nodes[-1][1]]
    src = [_HEADER.format(version=CODEGEN_VERSION, key=spec.key() + f" flat {modes}"), _DECO.format(cache=cache),
           f"def kernel({xs}out, n{_param_list(spec)}):"]
    src += _hoist_scalars(spec, modes, "    ")
    src.append("    for i in prange(n):")
    names, loads = _loads(spec, modes, lambda k, m: "i", "        ")
    body, last = _body_exprs(spec, names, "        ")
    src += loads + body + ["        " + out_codec.store("out", "i", last)]
    return "\n".join(src) + "\n"


def gen_strided(spec: GroupSpec, modes: tuple, ndim: int, cache: bool = True) -> str:
    """An elementwise kernel over an ``ndim``-d iteration space with per-leaf strides.

    Arguments: leaves, ``out`` (flat, C order), ``shp`` (int64[ndim]), ``st`` (int64[nleaves, ndim],
    element strides, 0 on broadcast axes), ``nb``/``bs`` (the innermost axis is split into ``nb``
    blocks of ``bs`` so that even a 1-d strided loop runs in parallel), then the parameters.
    """
    xs = "".join(f"x{k}, " for k in range(len(modes)))
    out_codec = CODECS[spec.nodes[-1][1]]
    last = ndim - 1
    src = [_HEADER.format(version=CODEGEN_VERSION, key=spec.key() + f" nd{ndim} {modes}"),
           _DECO.format(cache=cache),
           f"def kernel({xs}out, shp, st, nb, bs{_param_list(spec)}):",
           f"    inner = shp[{last}]",
           "    outer = 1"]
    for d in range(last):
        src.append(f"    outer *= shp[{d}]")
    src += _hoist_scalars(spec, modes, "    ")
    for k, m in enumerate(modes):
        if m == "g":
            src.append(f"    sl{k} = st[{k}, {last}]")
    src += ["    for t in prange(outer * nb):",
            "        o = t // nb",
            "        jb = t - o * nb",
            "        rem = o"]
    for d in range(last - 1, -1, -1):
        if d == 0:
            src.append("        i0 = rem")
        else:
            src += [f"        i{d} = rem % shp[{d}]", f"        rem = rem // shp[{d}]"]
    for k, m in enumerate(modes):
        if m == "g":
            terms = " + ".join(f"i{d} * st[{k}, {d}]" for d in range(last)) or "0"
            src.append(f"        b{k} = {terms}")
    src += ["        ob = o * inner",
            "        j0 = jb * bs",
            "        j1 = min(inner, j0 + bs)",
            "        for j in range(j0, j1):"]
    names, loads = _loads(spec, modes, lambda k, m: "ob + j" if m == "c" else f"b{k} + j * sl{k}", "            ")
    body, lastv = _body_exprs(spec, names, "            ")
    src += loads + body + ["            " + out_codec.store("out", "ob + j", lastv)]
    return "\n".join(src) + "\n"


def gen_reduce(spec: GroupSpec, modes: tuple, nk: int, nr: int, cache: bool = True) -> str:
    """A reduction kernel: ``nk`` kept axes (outer, parallel) and ``nr >= 1`` reduced axes.

    Arguments: leaves, ``out`` (flat over kept axes), ``shk``/``shr`` (int64 extents of kept and
    reduced axes), ``stk``/``str_`` (int64[nleaves, nk] and [nleaves, nr] element strides), ``P``
    (the first reduced axis is split into ``P`` chunks so that full reductions run in parallel;
    partial results are combined in a fixed order), ``count`` (elements per output, for mean), then
    the parameters.
    """
    rop, in_dt, out_dt = spec.reduce
    init, combine = _reduce_parts(rop, in_dt)
    xs = "".join(f"x{k}, " for k in range(len(modes)))
    src = [_HEADER.format(version=CODEGEN_VERSION, key=spec.key() + f" reduce k{nk} r{nr} {modes}"),
           _DECO.format(cache=cache),
           f"def kernel({xs}out, shk, shr, stk, str_, P, count{_param_list(spec)}):",
           "    K = 1"]
    for d in range(nk):
        src.append(f"    K *= shk[{d}]")
    src += ["    R0 = shr[0]",
            "    chunk = (R0 + P - 1) // P",
            f"    acc0 = {init}",
            "    part = np.empty(K * P, dtype=type(acc0))"]
    src += _hoist_scalars(spec, modes, "    ")
    src += ["    for t in prange(K * P):",
            "        o = t // P",
            "        p = t - o * P",
            "        rem = o"]
    for d in range(nk - 1, -1, -1):
        if d == 0:
            src.append("        i0 = rem")
        else:
            src += [f"        i{d} = rem % shk[{d}]", f"        rem = rem // shk[{d}]"]
    strided = [k for k, m in enumerate(modes) if m != "s"]
    for k in strided:
        terms = " + ".join(f"i{d} * stk[{k}, {d}]" for d in range(nk)) or "0"
        src.append(f"        c{k}_0 = {terms}")
    src += [f"        acc = {init}",
            "        r0s = p * chunk",
            "        r0e = min(R0, r0s + chunk)"]
    ind = "        "
    for d in range(nr):
        rng = "range(r0s, r0e)" if d == 0 else f"range(shr[{d}])"
        src.append(f"{ind}for r{d} in {rng}:")
        ind += "    "
        if d < nr - 1:
            for k in strided:
                src.append(f"{ind}c{k}_{d + 1} = c{k}_{d} + r{d} * str_[{k}, {d}]")

    def idx(k: int, m: str) -> str:
        if m == "u":
            return f"c{k}_{nr - 1} + r{nr - 1}"
        return f"c{k}_{nr - 1} + r{nr - 1} * str_[{k}, {nr - 1}]"

    names, loads = _loads(spec, modes, idx, ind)
    body, lastv = _body_exprs(spec, names, ind)
    src += loads + body + [f"{ind}v = {lastv}", f"{ind}acc = {combine}"]
    src += ["        part[t] = acc",
            "    for o in prange(K):",
            "        acc = part[o * P]",
            "        for p in range(1, P):",
            f"            v = part[o * P + p]",
            f"            acc = {combine}"]
    final = "acc / count" if rop == "reduce_mean" else "acc"
    src.append("        " + CODECS[out_dt].store("out", "o", CODECS[out_dt].cast(final)))
    return "\n".join(src) + "\n"
