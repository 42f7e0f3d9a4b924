"""OpenCL C for fusion groups, from the same :class:`~mnnjit.backends.ir.GroupSpec` the CPU code
generator renders to Numba.

Each op's scalar template (a Python expression over ``a``, ``b``, ``c`` and attribute names, see
``mnnjit.ops.registry``) is translated to a C expression (:func:`translate`): Python's ``min``/``max``
keep their argument order on NaN, ``//`` and ``%`` follow Python's sign rules, comparisons chain.
A node computes in float when any input is a float, else in int, and its value is cast to its
dtype as numpy stores it (float -> 8-bit through int32, float16 rounded to half).

Leaves are read in one of three modes (chosen per launch from the actual operands): ``c``
(contiguous with the output), ``s`` (one element, broadcast everywhere), ``g`` (strided over the
collapsed iteration space; 0 strides broadcast). Storage types per leaf and output (``float``,
``half`` - read with ``vload_half`` - ``int``, ``uchar``, ``char``) are part of a kernel's key, so the
same spec renders for float32 and for half storage.

Reductions (a group ending in ``reduce_sum/mean/prod/max/min``) render in two forms: one work-item
per output looping over the reduced elements, or one work-group per output whose lanes stride over
them and combine in local memory (few outputs, long reductions).
"""
from __future__ import annotations

import ast
from functools import lru_cache

from mnnjit.backends.ir import GroupSpec
from mnnjit.ops import registry


class Untranslatable(ValueError):
    """A template construct (or dtype) the OpenCL code generator does not render."""


#: Elementwise ops the CPU code generator also declines (templates that miss numpy on some inputs)
DENY = frozenset({"cbrt", "fmod", "sign", "trunc", "rint", "floor", "ceil", "round", "sinh", "cosh", "atanh",
                  "pow", "gcd", "lcm"})
KERNEL_DTYPES = frozenset({"float16", "float32", "int32", "uint8", "int8"})

_MATH = {  # Python / numpy function -> OpenCL builtin (float arguments)
    "exp": "exp", "log": "log", "sqrt": "sqrt", "sin": "sin", "cos": "cos", "tan": "tan", "asin": "asin",
    "acos": "acos", "atan": "atan", "atan2": "atan2", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh",
    "asinh": "asinh", "acosh": "acosh", "atanh": "atanh", "arctanh": "atanh", "erf": "erf", "erfc": "erfc",
    "expm1": "expm1", "log1p": "log1p", "log2": "log2", "log10": "log10", "floor": "floor", "ceil": "ceil",
    "copysign": "copysign", "hypot": "hypot", "fmod": "fmod", "nextafter": "nextafter", "rint": "rint",
}
_CMP = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
_BIN = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^",
        ast.LShift: "<<", ast.RShift: ">>"}

#: Helpers the translated expressions call (Python's floor division and modulo on floats, as numpy's
#: divmod computes them; half rounding without cl_khr_fp16).
PRELUDE = r"""
static inline float py_mod_f(float a, float b) {
    float m = fmod(a, b);
    if (b == 0.0f) return m;
    if (m != 0.0f) { if ((b < 0.0f) != (m < 0.0f)) m += b; }
    else m = copysign(0.0f, b);
    return m;
}
static inline float py_floordiv_f(float a, float b) {
    float m = fmod(a, b);
    if (b == 0.0f) return a / b;
    float d = (a - m) / b;
    if (m != 0.0f && ((b < 0.0f) != (m < 0.0f))) d -= 1.0f;
    if (d != 0.0f) { float f = floor(d); if (d - f > 0.5f) f += 1.0f; return f; }
    return copysign(0.0f, a / b);
}
static inline int py_mod_i(int a, int b) {
    if (b == 0) return 0;
    int m = a % b;
    if (m != 0 && ((m < 0) != (b < 0))) m += b;
    return m;
}
static inline int py_floordiv_i(int a, int b) {
    if (b == 0) return 0;
    int q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;
    return q;
}
static inline float round_half(float x) {
    ushort u;
    vstore_half(x, 0, (__private half *)&u);
    return vload_half(0, (__private half *)&u);
}
"""


class _Tx:
    """Translates one template AST to C (``kind``: ``'f'`` float or ``'i'`` int arithmetic)."""

    def __init__(self, names: dict[str, str], kind: str) -> None:
        self.names, self.kind = names, kind

    def lit(self, v) -> str:
        if isinstance(v, bool):
            return "1" if v else "0"
        if isinstance(v, int):
            return f"{v}.0f" if self.kind == "f" else str(v)
        if isinstance(v, float):
            if v != v:
                return "NAN"
            if v in (float("inf"), float("-inf")):
                return "INFINITY" if v > 0 else "(-INFINITY)"
            return repr(v) + "f"
        raise Untranslatable(f"literal {v!r}")

    def __call__(self, n: ast.AST) -> str:
        m = getattr(self, "t_" + type(n).__name__, None)
        if m is None:
            raise Untranslatable(type(n).__name__)
        return m(n)

    def t_Expression(self, n):
        return self(n.body)

    def t_Constant(self, n):
        return self.lit(n.value)

    def t_Name(self, n):
        if n.id in self.names:
            return self.names[n.id]
        raise Untranslatable(f"name {n.id!r}")

    def t_Attribute(self, n):
        if isinstance(n.value, ast.Name) and n.value.id in ("math", "np"):
            if n.attr == "inf":
                return "INFINITY"
            if n.attr == "nan":
                return "NAN"
            if n.attr == "pi":
                return self.lit(3.141592653589793)
            if n.attr == "e":
                return self.lit(2.718281828459045)
        raise Untranslatable(ast.unparse(n))

    def t_UnaryOp(self, n):
        x = self(n.operand)
        if isinstance(n.op, ast.USub):
            return f"(-{x})"
        if isinstance(n.op, ast.UAdd):
            return x
        if isinstance(n.op, ast.Not):
            return f"(({x}) == 0)"  # OpenCL C takes no float operand for ! (NaN is truthy, as in Python)
        if isinstance(n.op, ast.Invert):
            if self.kind != "i":
                raise Untranslatable("~ on floats")
            return f"(~{x})"
        raise Untranslatable(type(n.op).__name__)

    def t_BinOp(self, n):
        a, b = self(n.left), self(n.right)
        op = type(n.op)
        if op in _BIN:
            if op not in (ast.Add, ast.Sub, ast.Mult) and self.kind != "i":
                raise Untranslatable("bit operation on floats")
            return f"({a} {_BIN[op]} {b})"
        if op is ast.Div:
            if self.kind == "i":
                return f"((float)({a}) / (float)({b}))"
            return f"({a} / {b})"
        if op is ast.FloorDiv:
            return f"py_floordiv_{self.kind}({a}, {b})"
        if op is ast.Mod:
            return f"py_mod_{self.kind}({a}, {b})"
        if op is ast.Pow:
            if isinstance(n.left, ast.Constant) and n.left.value == 2.0:
                return f"exp2((float)({b}))"
            return f"pow((float)({a}), (float)({b}))"
        raise Untranslatable(type(n.op).__name__)

    def t_BoolOp(self, n):
        op = " && " if isinstance(n.op, ast.And) else " || "
        return "(" + op.join(f"(({self(v)}) != 0)" for v in n.values) + ")"

    def t_Compare(self, n):
        parts, left = [], self(n.left)
        for op, right in zip(n.ops, n.comparators):
            if type(op) not in _CMP:
                raise Untranslatable(type(op).__name__)
            r = self(right)
            parts.append(f"({left} {_CMP[type(op)]} {r})")
            left = r
        return "(" + " && ".join(parts) + ")" if len(parts) > 1 else parts[0]

    def t_IfExp(self, n):
        # OpenCL C's ?: takes no float condition: compare with 0 (NaN is truthy, as in Python)
        return f"((({self(n.test)}) != 0) ? ({self(n.body)}) : ({self(n.orelse)}))"

    def t_Call(self, n):
        f = n.func
        args = [self(a) for a in n.args]
        if isinstance(f, ast.Name):
            name = f.id
            if name == "abs" and len(args) == 1:
                return f"fabs({args[0]})" if self.kind == "f" else f"(({args[0]}) < 0 ? -({args[0]}) : ({args[0]}))"
            if name in ("min", "max") and len(args) == 2:
                x, y = args
                cmp = "<" if name == "min" else ">"
                return f"(({y}) {cmp} ({x}) ? ({y}) : ({x}))"  # Python: the first unless the second wins
            if name == "float" and len(args) == 1:
                return f"((float)({args[0]}))"
            if name == "int" and len(args) == 1:
                return f"((int)({args[0]}))"
            if name == "bool" and len(args) == 1:
                return f"(({args[0]}) != 0)"
            raise Untranslatable(f"call {name}")
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in ("math", "np"):
            if f.attr == "ldexp" and len(args) == 2:
                return f"ldexp((float)({args[0]}), (int)({args[1]}))"
            c = _MATH.get(f.attr)
            if c is None:
                raise Untranslatable(f"{f.value.id}.{f.attr}")
            return f"{c}(" + ", ".join(f"(float)({a})" for a in args) + ")"
        raise Untranslatable(ast.unparse(n))


@lru_cache(maxsize=None)
def _template(op: str) -> ast.Expression:
    tpl = registry.get(op).scalar
    if not tpl:
        raise Untranslatable(f"op {op!r} has no scalar template")
    return ast.parse(tpl, mode="eval")


def translate(op: str, args: list[str], params: dict[str, str], kind: str) -> str:
    """Op ``op``'s scalar template as a C expression over ``args`` (``a, b, c``) and ``params``."""
    names = dict(zip("abc", args))
    names.update(params)
    return _Tx(names, kind)(_template(op))


# ------------------------------------------------------------------ storage and casts
_CT = {"float32": "float", "float16": "half", "int32": "int", "uint8": "uchar", "int8": "char"}
#: the C type values of a dtype are computed in
_COMPUTE = {"float32": "float", "float16": "float", "int32": "int", "uint8": "int", "int8": "int"}


def load(ctype: str, ptr: str, idx: str) -> str:
    """An expression reading element ``idx`` of ``ptr`` stored as ``ctype`` (half reads as float)."""
    if ctype == "half":
        return f"vload_half({idx}, {ptr})"
    return f"{ptr}[{idx}]"


def store(ctype: str, ptr: str, idx: str, value: str) -> str:
    """A statement writing ``value`` to element ``idx`` of ``ptr`` stored as ``ctype``."""
    if ctype == "half":
        return f"vstore_half({value}, {idx}, {ptr});"
    return f"{ptr}[{idx}] = {value};"


def cast(dtype: str, expr: str, from_kind: str) -> str:
    """``expr`` as numpy stores it in ``dtype`` (float -> 8-bit wraps through int32)."""
    if dtype == "float32":
        return f"((float)({expr}))"
    if dtype == "float16":
        return f"round_half((float)({expr}))"
    if dtype == "int32":
        return f"((int)({expr}))"
    if dtype in ("uint8", "int8"):
        c = _CT[dtype]
        return f"(({c})(int)({expr}))" if from_kind == "f" else f"(({c})({expr}))"
    raise Untranslatable(f"dtype {dtype}")


def _ref_dtype(spec: GroupSpec, ref: tuple) -> str:
    kind, i = ref
    return spec.leaf_dtypes[i] if kind == "l" else spec.nodes[i][1]


def body(spec: GroupSpec, leaf_names: list[str], ind: str = "    ") -> tuple[list[str], str]:
    """C statements computing the group's nodes from its leaf values; (lines, name of the last value)."""
    lines: list[str] = []
    if not spec.nodes:
        return lines, leaf_names[0]
    for j, (op, dt, refs, attrs) in enumerate(spec.nodes):
        if op in DENY or dt not in KERNEL_DTYPES:
            raise Untranslatable(f"op {op} ({dt})")
        in_dts = [_ref_dtype(spec, r) for r in refs]
        if any(d not in KERNEL_DTYPES for d in in_dts):
            raise Untranslatable(f"op {op} on {in_dts}")
        kind = "f" if any(d.startswith("float") for d in in_dts) or (not in_dts and dt.startswith("float")) else "i"
        args = [leaf_names[i] if k == "l" else f"v{i}" for k, i in refs]
        params = {name: f"p{k}" for name, k in attrs}
        expr = translate(op, args, params, kind)
        lines.append(f"{ind}{_COMPUTE[dt]} v{j} = {cast(dt, expr, kind)};")
    return lines, f"v{len(spec.nodes) - 1}"


def _params_decl(spec: GroupSpec) -> str:
    return "".join(f", const {'int' if k == 'i' else 'float'} p{n}" for n, k in enumerate(spec.param_kinds))


def _leaf_decls(spec: GroupSpec, ctypes: tuple) -> str:
    return ", ".join(f"__global const {ctypes[k]} *restrict x{k}" for k in range(len(spec.leaf_dtypes)))


def out_dtype(spec: GroupSpec) -> str:
    """The dtype a group writes (its reduction's output, else its last node's)."""
    if spec.reduce is not None:
        return spec.reduce[2]
    return spec.nodes[-1][1]


def _header(spec: GroupSpec, fp64: bool) -> list[str]:
    src = []
    if fp64:
        src.append("#pragma OPENCL EXTENSION cl_khr_fp64 : enable")
    src.append(PRELUDE)
    return src


# ------------------------------------------------------------------ elementwise
def elementwise_source(spec: GroupSpec, modes: tuple, ndim: int, ctypes: tuple, out_ctype: str) -> str:
    """An elementwise kernel ``group`` over an ``ndim``-d collapsed iteration space.

    Arguments: leaves (storage ``ctypes``), ``out`` (``out_ctype``, C order), ``n`` (elements),
    ``d1..d{ndim-1}`` (extents of the axes after the first), for each ``g`` leaf its offset and
    ``ndim`` element strides, then the spec's parameters."""
    leaves = _leaf_decls(spec, ctypes)
    args = [leaves] if leaves else []
    args.append(f"__global {out_ctype} *restrict out")
    args.append("const int n")
    args += [f"const int d{d}" for d in range(1, ndim)]
    for k, m in enumerate(modes):
        if m == "g":
            args.append(f"const int o{k}")
            args += [f"const int s{k}_{d}" for d in range(ndim)]
    src = _header(spec, False)
    src.append(f"__kernel void group({', '.join(args)}{_params_decl(spec)}) {{")
    src.append("    const int gid = get_global_id(0);")
    src.append("    if (gid >= n) return;")
    if "g" in modes:
        src.append("    int rem = gid;")
        for d in range(ndim - 1, 0, -1):
            src.append(f"    const int i{d} = rem % d{d}; rem /= d{d};")
        src.append("    const int i0 = rem;")
    names = []
    for k, m in enumerate(modes):
        ct, dt = ctypes[k], spec.leaf_dtypes[k]
        if m == "s":
            idx = "0"
        elif m == "c":
            idx = "gid"
        else:
            idx = f"o{k}" + "".join(f" + i{d} * s{k}_{d}" for d in range(ndim))
        src.append(f"    const {_COMPUTE[dt]} a{k} = {load(ct, f'x{k}', idx)};")
        names.append(f"a{k}")
    lines, last = body(spec, names)
    src += lines
    src.append("    " + store(out_ctype, "out", "gid", last))
    src.append("}")
    return "\n".join(src) + "\n"


# ------------------------------------------------------------------ reductions
_INT_MIN = {"int32": "INT_MIN", "uint8": "0", "int8": "(-128)"}
_INT_MAX = {"int32": "INT_MAX", "uint8": "255", "int8": "127"}


def _reduce_parts(op: str, in_dt: str, fp64: bool) -> tuple[str, str, str]:
    """(accumulator C type, init, combine statement over ``acc`` and ``v``)."""
    is_float = in_dt.startswith("float")
    wide = ("double" if fp64 else "float") if is_float else "long"
    if op in ("reduce_sum", "reduce_mean"):
        return (wide if op == "reduce_sum" or is_float else ("double" if fp64 else "float")), "0", "acc += v;"
    if op == "reduce_prod":
        return wide, "1", "acc *= v;"
    if op == "reduce_max":
        if is_float:
            return "float", "(-INFINITY)", "acc = (v > acc || v != v) ? v : acc;"
        return "int", _INT_MIN[in_dt], "acc = v > acc ? v : acc;"
    if op == "reduce_min":
        if is_float:
            return "float", "INFINITY", "acc = (v < acc || v != v) ? v : acc;"
        return "int", _INT_MAX[in_dt], "acc = v < acc ? v : acc;"
    raise Untranslatable(op)


def reduce_acc_type(spec: GroupSpec, fp64: bool) -> str:
    """The C type a reduction accumulates in (its partial results' type in a split reduction)."""
    rop, in_dt, _ = spec.reduce
    return _reduce_parts(rop, in_dt, fp64)[0]


def reduce_source(spec: GroupSpec, modes: tuple, nk: int, nr: int, ctypes: tuple, out_ctype: str,
                  fp64: bool, local: int = 0, split: bool = False) -> str:
    """A reduction kernel ``group``: ``nk`` kept axes, ``nr >= 1`` reduced axes (collapsed).

    Arguments: leaves, ``out`` (flat over the kept axes), ``K`` (outputs), ``k1..k{nk-1}`` (kept
    extents after the first), ``e0..e{nr-1}`` (reduced extents), per non-scalar leaf its kept then
    reduced element strides, ``count`` (elements per output), then the parameters. ``local > 0``:
    one work-group of ``local`` lanes per output. ``split`` (with ``local``): a first pass over few
    outputs and long reductions - ``P`` work-groups per output each reduce a chunk of ``chunk``
    elements into ``out`` (the accumulator type, ``K * P`` partials), which :func:`reduce_final_source`
    combines."""
    rop, in_dt, odt = spec.reduce
    acc_t, init, combine = _reduce_parts(rop, in_dt, fp64)
    leaves = _leaf_decls(spec, ctypes)
    args = [leaves] if leaves else []
    args += [f"__global {acc_t if split else out_ctype} *restrict out", "const int K"]
    if split:
        args += ["const int P", "const int chunk"]
    args += [f"const int k{d}" for d in range(1, nk)]
    args += [f"const int e{d}" for d in range(nr)]
    walk = [k for k, m in enumerate(modes) if m != "s"]
    for k in walk:
        args += [f"const int sk{k}_{d}" for d in range(nk)]
        args += [f"const int sr{k}_{d}" for d in range(nr)]
    args.append("const float count")
    src = _header(spec, fp64 and acc_t == "double")
    attr = f"__attribute__((reqd_work_group_size({local}, 1, 1))) " if local else ""
    src.append(f"__kernel {attr}void group({', '.join(args)}{_params_decl(spec)}) {{")
    if local:
        src += [f"    __local {acc_t} part[{local}];",
                "    const int o = get_group_id(0)" + (" / P;" if split else ";"),
                "    const int lane = get_local_id(0);"]
        if split:
            src.append("    const int p = get_group_id(0) - o * P;")
    else:
        src += ["    const int o = get_global_id(0);", "    if (o >= K) return;"]
    src.append("    int rem = o;")
    for d in range(nk - 1, 0, -1):
        src.append(f"    const int i{d} = rem % k{d}; rem /= k{d};")
    if nk:
        src.append("    const int i0 = rem;")
    for k in walk:
        terms = " + ".join(f"i{d} * sk{k}_{d}" for d in range(nk)) or "0"
        src.append(f"    const int b{k} = {terms};")
    src.append(f"    {acc_t} acc = {init};")
    ind = "    "
    names = []
    for k, m in enumerate(modes):
        names.append(f"a{k}")
    if local:
        total = " * ".join(f"e{d}" for d in range(nr))
        if split:
            src += [f"    const int R = min({total}, (p + 1) * chunk);",
                    f"    for (int t = p * chunk + lane; t < R; t += {local}) {{", "        int tr = t;"]
        else:
            src += [f"    const int R = {total};", f"    for (int t = lane; t < R; t += {local}) {{",
                    "        int tr = t;"]
        for d in range(nr - 1, 0, -1):
            src.append(f"        const int r{d} = tr % e{d}; tr /= e{d};")
        src.append("        const int r0 = tr;")
        ind = "        "
    else:
        for d in range(nr):
            src.append(f"{ind}for (int r{d} = 0; r{d} < e{d}; ++r{d}) {{")
            ind += "    "
    for k, m in enumerate(modes):
        dt, ct = spec.leaf_dtypes[k], ctypes[k]
        if m == "s":
            idx = "0"
        else:
            idx = f"b{k}" + "".join(f" + r{d} * sr{k}_{d}" for d in range(nr))
        src.append(f"{ind}const {_COMPUTE[dt]} a{k} = {load(ct, f'x{k}', idx)};")
    lines, last = body(spec, names, ind)
    src += lines
    src.append(f"{ind}{acc_t} v = {last};")
    src.append(f"{ind}{combine}")
    if local:
        src.append("    }")
        src += ["    part[lane] = acc;", "    barrier(CLK_LOCAL_MEM_FENCE);"]
        step = local // 2
        while step >= 1:
            src += [f"    if (lane < {step}) {{ {acc_t} v = part[lane + {step}]; acc = part[lane]; {combine} "
                    f"part[lane] = acc; }}", "    barrier(CLK_LOCAL_MEM_FENCE);"]
            step //= 2
        src += ["    if (lane != 0) return;", "    acc = part[0];"]
        if split:
            src += ["    out[o * P + p] = acc;", "}"]
            return "\n".join(src) + "\n"
    else:
        for d in range(nr):
            src.append("    " * (nr - d) + "}")
    final = "acc / count" if rop == "reduce_mean" else "acc"
    src.append("    " + store(out_ctype, "out", "o", cast(odt, final, "f" if acc_t in ("float", "double") else "i")))
    src.append("}")
    return "\n".join(src) + "\n"


def reduce_final_source(spec: GroupSpec, out_ctype: str, fp64: bool) -> str:
    """The second pass of a split reduction: kernel ``final(part, out, K, P, count)`` combines each
    output's ``P`` partials in order and stores the result (mean divided by ``count``)."""
    rop, in_dt, odt = spec.reduce
    acc_t, init, combine = _reduce_parts(rop, in_dt, fp64)
    src = ["#pragma OPENCL EXTENSION cl_khr_fp64 : enable"] if acc_t == "double" else []
    src.append(PRELUDE)
    final = "acc / count" if rop == "reduce_mean" else "acc"
    src += [f"__kernel void final(__global const {acc_t} *restrict part, __global {out_ctype} *restrict out, "
            "const int K, const int P, const float count) {",
            "    const int o = get_global_id(0);",
            "    if (o >= K) return;",
            f"    {acc_t} acc = part[o * P];",
            "    for (int p = 1; p < P; ++p) {",
            f"        const {acc_t} v = part[o * P + p];",
            f"        {combine}",
            "    }",
            "    " + store(out_ctype, "out", "o", cast(odt, final, "f" if acc_t in ("float", "double") else "i")),
            "}"]
    return "\n".join(src) + "\n"


def check_spec(spec: GroupSpec) -> None:
    """Untranslatable when the spec has a construct this generator does not render."""
    names = [f"a{k}" for k in range(len(spec.leaf_dtypes))]
    body(spec, names)
    for d in spec.leaf_dtypes:
        if d not in KERNEL_DTYPES:
            raise Untranslatable(f"leaf dtype {d}")
    if spec.reduce is not None:
        rop, in_dt, odt = spec.reduce
        if rop not in ("reduce_sum", "reduce_mean", "reduce_prod", "reduce_max", "reduce_min"):
            raise Untranslatable(rop)
        if "float16" in (in_dt, odt) or odt not in KERNEL_DTYPES:
            raise Untranslatable(f"reduction {rop} {in_dt}->{odt}")
