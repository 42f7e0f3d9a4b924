"""MNN's documented examples run unchanged under mnnjit and give real MNN 3.6.1's results.

Every ```python block of ``../shared/reference/pymnn-docs/*.md`` is run statement by statement (doctest
prompts) or as one script, first with real MNN - all documents in one child process, since some examples
corrupt real MNN's heap (it aborts now and then, at exit or later) - then with mnnjit in this process
(``import MNN`` inside an example imports mnnjit), each document in its own temporary directory. Each expression's value, each assigned
name's value and what the example prints are compared (Vars by shape, dtype, values and - for 3-D and
larger - data format; uint8 pixels within 1, floats to 1e-5).

Not compared, each for the reason given:
* statements real MNN does not run: they raise (a doc typo, a missing import) or crash the interpreter
  (``CRASHES_REAL_MNN``), or need a file that is not shipped (a model such as ``mobilenet_v1.mnn``); names
  they would assign are dropped, and later statements that use them are not run either;
* ``STATEFUL``: executor settings that would change real MNN for the other tests in this process;
* random values (``np.random``, freshly initialised ``nn`` layers) and what is computed from them or from a
  ``DELIBERATE`` statement's result: compared by type, shape and dtype only;
* ``DELIBERATE``: where mnnjit deliberately differs from real MNN (docs/COMPATIBILITY.md gives each reason);
  mnnjit must still run them.

``cat.jpg`` is the project's shipped ``examples/images/cat.jpg``, stored losslessly under the docs' name:
real MNN's JPEG decoder differs from OpenCV's by up to 3 per pixel and mnnjit decodes as OpenCV does
(COMPATIBILITY.md), so both sides start from the same pixels.
"""
from __future__ import annotations

import ast
import builtins
import contextlib
import io
import math
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

cv2 = pytest.importorskip("cv2")

ROOT = Path(__file__).resolve().parent.parent
from shared_paths import SHARED  # noqa: E402

DOCS = SHARED / "reference" / "pymnn-docs"
CAT = ROOT / "examples" / "images" / "cat.jpg"

#: statements that crash real MNN 3.6.1 (segmentation fault), by (doc, code)
CRASHES_REAL_MNN = {("cv.md", "cv.hconcat(img)")}

#: executor settings: process-wide in real MNN (they would leak into the other tests); both return None
STATEFUL = {"expr.lazy_eval(True)", "expr.set_lazy_mode(0)", "expr.set_lazy_mode(1)",
            "expr.set_global_executor_config(2, 2, 1)", "expr.set_thread_number(4)"}

_CONTOURS = "findContours follows OpenCV's border following (real MNN's own tracer finds other points)"
_WARPS = "warps equal OpenCV's (real MNN samples other pixels: 0.3 % of an affine, 79 % of a perspective warp)"
_GRAY = "gray uses OpenCV 5's weights (real MNN's differ by up to 2)"
#: (doc, code) or (doc, code, the statement before it) -> why mnnjit's answer differs from real MNN's
#: (docs/COMPATIBILITY.md). zeros/ones without a dtype give float32 as documented (real MNN: int32): what
#: they and the values computed from them give is compared without the int32/float32 distinction.
DELIBERATE = {
    ("numpy.md", "np.vdot([[1, 0], [0, 1]], [[4, 1], [2, 2]])"): "vdot is numpy's dot of the flattened inputs "
                                                                  "(real MNN and its docs: a matmul)",
    ("numpy.md", "np.trunc([1.2, 3.5, 4.7])"): "trunc truncates toward zero as numpy (real MNN rounds)",
    ("numpy.md", "np.fix([1.2, 3.5, 4.7])"): "fix truncates toward zero as numpy (real MNN rounds)",
    ("numpy.md", "np.copysign(13, -1)"): "copysign gives float32 as numpy (real MNN: int32)",
    ("numpy.md", "np.modf([2.1, -1.2])"): "modf's integral part truncates as numpy (real MNN floors)",
    ("numpy.md", "np.lexsort(a)"): "lexsort sorts by the keys as numpy (real MNN returns the sorted keys)",
    ("numpy.md", "np.linspace(0, 10, 2, False, True)"): "linspace gives float32 as numpy (real MNN: int32)",
    ("numpy.md", "np.square(13)"): "square of an int stays int32 (MNN's docs example; real MNN: float32)",
    ("linalg.md", "np.linalg.svd(x)"): "svd is LAPACK's (real MNN's singular vectors differ in sign and order)",
    ("expr.md", "expr.cumsum([[1,2],[3,4]])"): "cumsum along axis 0 as MNN's docs print (real MNN: garbage)",
    ("expr.md", "expr.cumprod([[1.,2.],[3.,4.]])"): "cumprod along axis 0 as MNN's docs print (real MNN: garbage)",
    ("cv.md", "cv.cvtColor(img, cv.COLOR_BGR2GRAY) # gray"): _GRAY,
    ("cv.md", "success, buf = cv.imencode('jpg', cv.imread('cat.jpg'))"): "JPEG bytes come from Pillow's "
                                                                            "libjpeg (real MNN: its own encoder)",
    ("cv.md", "img = cv.pyrUp(img)"): "pyrUp equals OpenCV's (real MNN's differs by up to 37)",
    ("cv.md", "img = cv.filter2D(img, -1, cv.getStructuringElement(0, (3, 3)))"):
        "filter2D equals OpenCV's (real MNN saturates some uint8 sums that fit)",
    ("cv.md", "img = img.astype(np.uint8)", "img = cv.sqrBoxFilter(img, -1, (3,3))"):
        "sqrBoxFilter sums are exact (real MNN's are 1 ulp low, so the uint8 cast truncates one lower)",
    ("cv.md", "img = cv.warpAffine(img, transform, [300, 330])"): _WARPS,
    ("cv.md", "img = cv.warpPerspective(img, transform, [500, 333])"): _WARPS,
    ("cv.md", "img = cv.adaptiveThreshold(img, 50, cv.ADAPTIVE_THRESH_MEAN_C, cv.THRESH_BINARY, 5, 2)"):
        "adaptiveThreshold equals OpenCV's (real MNN's local means round differently)",
    ("cv.md", "gray = cv.cvtColor(img, cv.COLOR_BGR2GRAY)"): _GRAY + " (within 1, but thresholds of it flip)",
    ("cv.md", "contours, _ = cv.findContours(binary, cv.RETR_EXTERNAL, cv.CHAIN_APPROX_SIMPLE)"): _CONTOURS,
    ("cv.md", "cv.findContours(binary, cv.RETR_EXTERNAL, cv.CHAIN_APPROX_SIMPLE)"): _CONTOURS,
    ("cv.md", "cv.contourArea(contours[0], False)"): _CONTOURS,
    ("cv.md", "cv.convexHull(contours[0])"): _CONTOURS,
    ("cv.md", "cv.minAreaRect(contours[0])"): _CONTOURS,
    ("cv.md", "cv.boundingRect(contours[0])"): _CONTOURS,
    ("cv.md", "cv.boxPoints(cv.minAreaRect(contours[0]))"): _CONTOURS,
    ("cv.md", "cv.solvePnP(model_points, image_points, camera_matrix, dist_coeffs, flags=cv.SOLVEPNP_SQPNP)"):
        "SQPnP equals OpenCV's (real MNN's differs from OpenCV's in the 4th digit)",
    ("start_python.md", "print(image.mean([0, 1]))"): "resize follows OpenCV's bilinear weights (real MNN's "
                                                      "differ: the means differ in the 4th digit)",
    ("CVImageProcess.md", "image_processer.convert(image_data, src_width, src_height, 0, dst_tensor)"):
        "convert returns None as documented (real MNN returns 0); the converted tensor is compared",
}
#: (doc, code fragment) -> (fraction of elements, by at most) allowed to differ: known rounding rarities
TOLERANT = {("CVImageProcess.md", "MNN.CV_Filter_BILINEAL"): (1e-4, 0.0079)}  # one uint8 step x normal: real
#                                     MNN's bilinear blend rounds ~0.01 % of pixels the other way (COMPATIBILITY.md)
#: data formats real MNN gives 1-D and 2-D results are not compared (cv.solve's [3, 1] result is NC4HW4)
_ZEROS_ONES = re.compile(r"\bnp\.(zeros|ones)\((?![^)]*dtype)")
_RANDOM = re.compile(r"\brandom\b|\brandn?\b|\brandint\b|\bnn\.(conv|linear|batch_norm|dropout)\(")
_FILE = re.compile(r"""['"]([^'"\s]+\.(?:jpg|jpeg|png|bmp|mnn|onnx|tflite|pb|caffemodel|prototxt|json|npy))['"]""")
_WRITERS = ("save(", "imwrite(", "open(")
_MODULE_NAMES = ("MNN", "np", "cv", "expr", "F", "nn")


# ---------------------------------------------------------------- extracting the examples
def _blocks(text: str) -> list[list[str]]:
    out, cur, inside = [], [], False
    for line in text.splitlines():
        if line.strip().startswith("```python"):
            inside, cur = True, []
        elif inside and line.strip().startswith("```"):
            out.append(cur)
            inside = False
        elif inside:
            cur.append(line)
    return out


def _parses(src: str) -> bool:
    try:
        ast.parse(src)
    except SyntaxError:
        return False
    return True


def _statements(lines: list[str]) -> list[str]:
    """A doctest block's statements (prompt lines with their continuations; code written before the first
    prompt counts too), or a script block as one statement; signature lines such as ``module cv`` drop out."""
    if not any(line.lstrip().startswith(">>>") for line in lines):
        src = "\n".join(lines)
        return [src] if _parses(src) else []
    stmts: list[str] = []
    code: str | None = None
    pre: list[str] = []
    has_output = False
    for line in lines:
        s = line.lstrip()
        if s.startswith(">>>"):
            if code is not None:
                stmts.append(code)
            elif pre and _parses("\n".join(pre)):
                stmts.append("\n".join(pre))
            code, has_output = s[4:] if s.startswith(">>> ") else s[3:], False
        elif s.startswith("...") and code is not None and not has_output:
            code += "\n" + (s[4:] if s.startswith("... ") else s[3:])
        elif code is None:
            pre.append(line)
        else:
            has_output = True
    if code is not None:
        stmts.append(code)
    return [c.rstrip() for c in stmts if _parses(c)]


def _doc_examples(doc: str) -> list[list[str]]:
    return [st for st in (_statements(b) for b in _blocks((DOCS / doc).read_text(encoding="utf8"))) if st]


def _names(code: str) -> tuple[set[str], set[str]]:
    """(names read, names assigned) by ``code``."""
    read, wrote = set(), set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Name):
            (wrote if isinstance(node.ctx, (ast.Store, ast.Del)) else read).add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            wrote.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            wrote.add(node.name)
    return read, wrote


# ---------------------------------------------------------------- values in comparable form
def _plain(x, depth: int = 0):
    """``x`` as plain data (copied: real MNN's arrays may view memory freed with their Var or Tensor)."""
    name = type(x).__name__
    if depth > 5:
        return ("deep", name)
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, np.generic):
        return x.item()
    if name == "Var":
        return ("Var", list(x.shape), str(x.dtype), str(x.data_format), np.array(x.read(), copy=True))
    if isinstance(x, np.ndarray):
        return ("ndarray", list(x.shape), str(x.dtype), "", np.array(x, copy=True))
    if name == "Tensor":
        return ("Tensor", tuple(x.getShape()), np.array(x.getNumpyData(), copy=True))
    if name == "CVMatrix":
        return ("CVMatrix", [float(v) for v in x.read()])
    if isinstance(x, (list, tuple)):
        return (name, [_plain(i, depth + 1) for i in x])
    if isinstance(x, dict) or name in ("dict_keys", "dict_values"):
        items = x.items() if isinstance(x, dict) else enumerate(x)
        return (name, [(str(k), _plain(v, depth + 1)) for k, v in items])
    if name in ("PyCapsule", "memoryview", "HalideType"):
        return ("opaque",)
    return ("object", name, tuple(c.__name__ for c in type(x).__mro__))


def _same(a, b, loose: bool, any_dtype: bool = False, tol: tuple | None = None) -> bool:
    """Whether plain values ``a`` (real MNN) and ``b`` (mnnjit) agree; ``loose``: type, shape and dtype only;
    ``any_dtype``: int32 and float32 data with equal values agree."""
    if a == ("opaque",):  # real MNN's capsules (Var.ptr, getHost) have no comparable value
        return True
    if isinstance(a, tuple) and isinstance(b, tuple) and a and b and a[0] == b[0]:
        kind = a[0]
        if kind in ("Var", "ndarray"):
            _, shape_a, dt_a, fmt_a, va = a
            _, shape_b, dt_b, fmt_b, vb = b
            if shape_a != shape_b or (len(shape_a) >= 3 and fmt_a != fmt_b):
                return False
            if dt_a != dt_b and not (any_dtype and {dt_a, dt_b} <= {"dtype.int", "dtype.float"}):
                return False
            return loose or _close(va, vb, tol)
        if kind == "Tensor":
            return a[1] == b[1] and (loose or _close(a[2], b[2], tol))
        if kind == "CVMatrix":  # a perspective matrix is defined up to scale
            ma, mb = np.array(a[1]), np.array(b[1])
            ma, mb = (ma / ma[8], mb / mb[8]) if ma[8] and mb[8] else (ma, mb)
            return loose or np.allclose(ma, mb, rtol=1e-5, atol=1e-4)
        if kind in ("list", "tuple", "dict", "dict_keys", "dict_values"):
            return len(a[1]) == len(b[1]) and all(_same(x, y, loose, any_dtype, tol) for x, y in zip(a[1], b[1]))
        if kind == "object":  # mnnjit's layer classes derive from _Module, real MNN's are _Module
            return a[1] in b[2]
        return a == b
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b) == 2 and \
            isinstance(a[0], str):  # a dict item
        return a[0] == b[0] and _same(a[1], b[1], loose, any_dtype, tol)
    if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, (int, float)) or \
            not isinstance(b, (int, float)):
        return a == b and type(a) is type(b)
    if type(a) is not type(b) and not any_dtype:
        return False
    if loose:
        return True
    if math.isnan(a) and math.isnan(b):
        return True
    return math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-6)


def _close(va: np.ndarray, vb: np.ndarray, tol: tuple | None = None) -> bool:
    if va.dtype.kind not in "fiub" or vb.dtype.kind not in "fiub":
        return np.array_equal(va, vb)
    fa, fb = va.astype(np.float64), vb.astype(np.float64)
    # uint8 pixels: real MNN's and OpenCV's fixed-point roundings differ by one
    atol = 1.0 if va.dtype == np.uint8 else 1e-6
    near = np.isclose(fa, fb, rtol=1e-5, atol=atol, equal_nan=True)
    if tol is not None and fa.shape == fb.shape:
        fraction, most = tol
        return bool((~near).mean() <= fraction and np.abs(fa - fb)[~near].max(initial=0) <= most)
    return bool(near.all())


_OPAQUE = re.compile(r"<capsule object NULL at 0x[0-9a-f]+>|<memory at 0x[0-9a-f]+>|<Halide_Type_\w+>|0x[0-9a-f]+")
_NUMBER = re.compile(r"-?\d+\.?\d*(?:e[-+]?\d+)?")


def _same_output(a: str, b: str) -> bool:
    """Printed text, with opaque objects and addresses blanked and numbers compared to 1e-5."""
    a, b = _OPAQUE.sub("<opaque>", a), _OPAQUE.sub("<opaque>", b)
    if _NUMBER.sub("#", a) != _NUMBER.sub("#", b):
        return False
    na, nb = [float(v) for v in _NUMBER.findall(a)], [float(v) for v in _NUMBER.findall(b)]
    return all(math.isclose(x, y, rel_tol=1e-5, abs_tol=1e-6) for x, y in zip(na, nb))


# ---------------------------------------------------------------- running a document
def _namespace(prefix: str) -> dict:
    real_import = builtins.__import__

    def _import(name, globals=None, locals=None, fromlist=(), level=0):
        if prefix != "MNN" and (name == "MNN" or name.startswith("MNN.")):
            name = prefix + name[3:]
        return real_import(name, globals, locals, fromlist, level)

    b = dict(vars(builtins))
    b["__import__"] = _import
    top = _import("MNN")
    for sub in ("numpy", "cv", "expr", "nn"):
        _import("MNN." + sub)
    return {"__builtins__": b, "MNN": top, "np": top.numpy, "cv": top.cv, "expr": top.expr, "F": top.expr,
            "nn": top.nn}


def _execute(code: str, ns: dict):
    """Run ``code`` in ``ns``: (value of a final expression or None, printed text)."""
    tree = ast.parse(code)
    out = io.StringIO()
    value = None
    with contextlib.redirect_stdout(out):
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            if len(tree.body) > 1:
                exec(compile(ast.Module(tree.body[:-1], []), "<doc>", "exec"), ns)
            value = eval(compile(ast.Expression(tree.body[-1].value), "<doc>", "eval"), ns)
        else:
            exec(compile(tree, "<doc>", "exec"), ns)
    return value, out.getvalue()


def _run(doc: str, prefix: str, workdir: Path, plan: dict | None, crashed: frozenset = frozenset(),
         in_flight: Path | None = None) -> dict:
    """Run every example of ``doc`` with ``prefix`` (``MNN`` or ``mnnjit``) in ``workdir``.

    Without ``plan`` (real MNN's run) decide which statements run; with it, run exactly those. ``crashed``
    names statements {(block, index)} known to crash this process; ``in_flight``, when given, is rewritten
    with the key of each statement before it runs (so a parent can tell which one killed the process).
    Returns {(block, index): record} with the status, the plain value, the assigned names' plain values
    and the printed text."""
    workdir.mkdir()
    img = cv2.imread(str(CAT))
    cv2.imwrite(str(workdir / "cat.jpg.png"), img)
    os.replace(workdir / "cat.jpg.png", workdir / "cat.jpg")  # PNG bytes: both decode the same pixels
    records: dict = {}
    poisoned: set[str] = set()
    tainted: set[str] = set()
    dtype_free: set[str] = set()
    user: dict = {}
    old = os.getcwd()
    os.chdir(workdir)
    try:
        for b, stmts in enumerate(_doc_examples(doc)):
            ns = _namespace(prefix)
            ns.update(user)
            for i, code in enumerate(stmts):
                read, wrote = _names(code)
                key = (b, i)
                if plan is None:
                    missing = [f for f in _FILE.findall(code) if not os.path.exists(f)]
                    if (doc, code) in CRASHES_REAL_MNN or key in crashed:
                        status = "crashes real MNN"
                    elif code in STATEFUL:
                        status = "stateful"
                    elif missing and not any(w in code for w in _WRITERS):
                        status = f"needs {missing}"
                    elif read & poisoned:
                        status = f"uses {sorted(read & poisoned)}"
                    else:
                        status = "run"
                else:
                    status = plan[key]["status"]
                if status != "run":
                    poisoned |= wrote
                    for n in wrote:
                        ns.pop(n, None)
                    records[key] = {"status": status, "code": code}
                    continue
                before = stmts[i - 1] if i else None
                deliberate = (doc, code) in DELIBERATE or (doc, code, before) in DELIBERATE
                # values computed from random or deliberately different ones: type, shape and dtype only
                loose = bool(_RANDOM.search(code)) or bool(read & tainted) or deliberate
                any_dtype = bool(_ZEROS_ONES.search(code)) or bool(read & dtype_free)
                rec = {"code": code, "loose": loose, "any_dtype": any_dtype}
                if in_flight is not None:
                    in_flight.write_text(repr(key))
                    if os.environ.get("DROPIN_TEST_ABORT_AT") == repr(key):
                        os.abort()  # the restart test's stand-in for real MNN's heap corruption
                try:
                    value, printed = _execute(code, ns)
                    rec.update(status="run", value=_plain(value), printed=printed,
                               names={n: _plain(ns[n]) for n in wrote if n in ns and n not in _MODULE_NAMES})
                except Exception as e:  # real MNN: the example does not run; mnnjit: a failure
                    rec.update(status=f"raises {type(e).__name__}: {e}"[:300] if plan is None else "run",
                               error=f"{type(e).__name__}: {e}")
                    if plan is None:
                        poisoned |= wrote
                        for n in wrote:
                            ns.pop(n, None)
                if rec["status"] == "run" and "error" not in rec:
                    poisoned -= wrote  # a fresh value replaces one a failed statement dropped
                tainted = tainted | wrote if loose else tainted - wrote
                dtype_free = dtype_free | wrote if any_dtype else dtype_free - wrote
                records[key] = rec
            user.update({k: v for k, v in ns.items() if k != "__builtins__" and k not in _MODULE_NAMES})
    finally:
        os.chdir(old)
    return records


def _doc_files() -> list[str]:
    if not DOCS.is_dir():
        return []
    return sorted(p.name for p in DOCS.glob("*.md") if "```python" in p.read_text(encoding="utf8"))


def _real_mnn_main(doc: str, workdir: str, out: str, crashed: str) -> None:
    """Child process: run one document with real MNN and pickle its records (then leave without running
    real MNN's teardown, which may crash on the heap the examples corrupted)."""
    skip = frozenset(ast.literal_eval(crashed))
    records = _run(doc, "MNN", Path(workdir), None, skip, Path(out + ".in-flight"))
    with open(out, "wb") as f:
        pickle.dump(records, f)
    sys.stdout.flush()
    os._exit(0)


#: how many times one document's real-MNN run may be restarted after the process dies
_MAX_RESTARTS = 6


def _real_mnn_records(doc: str, tmp: Path) -> dict:
    """{(block, index): record} of real MNN running ``doc``, each run in a child process.

    Real MNN corrupts its heap on some examples and on some machines (glibc then aborts the process). A
    child that dies names the statement it was running; that statement is marked "crashes real MNN" (its
    names are dropped, like a statement that raises) and the document runs again without it. mnnjit is
    compared on every statement real MNN completed."""
    crashed: set = set()
    err = ""
    for attempt in range(_MAX_RESTARTS + 1):
        out = tmp / f"real-mnn-{attempt}.pkl"
        proc = subprocess.run([sys.executable, __file__, "--real-mnn", doc, str(tmp / f"mnn-{attempt}"), str(out),
                               repr(sorted(crashed))], cwd=ROOT, capture_output=True, text=True, timeout=600)
        if out.is_file():
            with open(out, "rb") as f:
                return pickle.load(f)
        err = f"exit status {proc.returncode}: {proc.stderr[-3000:]}"
        marker = Path(str(out) + ".in-flight")
        if not marker.is_file():
            break  # died before any statement ran: not an example's doing
        crashed.add(ast.literal_eval(marker.read_text()))
    pytest.fail(f"running {doc} with real MNN failed ({err}); statements marked as crashing: {sorted(crashed)}")


@pytest.fixture(autouse=True)
def _restore_mnnjit_settings():
    from mnnjit.expr import _config
    saved = dict(_config.settings)
    yield
    _config.settings.update(saved)


@pytest.mark.parametrize("doc", _doc_files() or ["(pymnn-docs not found)"])
def test_documented_examples_match_real_mnn(doc, tmp_path):
    pytest.importorskip("MNN")
    if not DOCS.is_dir() or not CAT.is_file():
        pytest.skip(f"{DOCS} or {CAT} not found")
    theirs = _real_mnn_records(doc, tmp_path)
    ours = _run(doc, "mnnjit", tmp_path / "mnnjit", theirs)
    failures, deliberate_seen = [], set()
    for key, want in theirs.items():
        got = ours[key]
        if want["status"] != "run":
            continue
        where = f"{doc} block {key[0]}: {want['code'][:90]!r}"
        if "error" in got:
            failures.append(f"{where}: mnnjit raises {got['error']}")
            continue
        before = theirs.get((key[0], key[1] - 1), {}).get("code")
        listed = (doc, want["code"], before) if (doc, want["code"], before) in DELIBERATE else (doc, want["code"])
        if listed in DELIBERATE:
            deliberate_seen.add(listed)
            continue
        # a listed line inside a script: the script's final value and printed text are not compared
        partial = [k for k in DELIBERATE if k[0] == doc and len(k) == 2 and k[1] in want["code"]]
        deliberate_seen.update(partial)
        loose, any_dtype = want["loose"], want["any_dtype"]
        tol = next((t for (d, frag), t in TOLERANT.items() if d == doc and frag in want["code"]), None)
        if not partial and not _same(want["value"], got["value"], loose, any_dtype, tol):
            failures.append(f"{where}: value {_show(got['value'])} != real MNN's {_show(want['value'])}")
        for name, value in want["names"].items():
            if name not in got["names"] or not _same(value, got["names"][name], loose, any_dtype, tol):
                failures.append(f"{where}: {name} = {_show(got['names'].get(name))} != real MNN's {_show(value)}")
        if not partial and not loose and not _same_output(want["printed"], got["printed"]):
            failures.append(f"{where}: prints {got['printed'][:200]!r} != real MNN's {want['printed'][:200]!r}")
    assert not failures, "\n".join(failures)
    listed = {k for k in DELIBERATE if k[0] == doc}
    assert listed <= deliberate_seen, f"DELIBERATE entries that no longer run: {sorted(listed - deliberate_seen)}"


def test_a_statement_that_kills_real_mnn_is_marked_and_the_rest_compared(tmp_path, monkeypatch):
    pytest.importorskip("MNN")
    if not DOCS.is_dir() or not CAT.is_file():
        pytest.skip(f"{DOCS} or {CAT} not found")
    doc = "numpy.md"
    monkeypatch.setenv("DROPIN_TEST_ABORT_AT", repr((0, 1)))
    records = _real_mnn_records(doc, tmp_path)
    assert records[(0, 1)]["status"] == "crashes real MNN"
    assert records[(0, 0)]["status"] == "run" and len(records) > 2


def _show(v) -> str:
    """A short description of a plain value (arrays by shape, dtype and a few values)."""
    if isinstance(v, tuple) and v and v[0] in ("Var", "ndarray"):
        arr = v[4]
        return f"{v[0]}{v[1]} {v[2]} {v[3]} {np.array2string(arr.ravel()[:6], precision=5)}"
    if isinstance(v, tuple) and v and v[0] == "Tensor":
        return f"Tensor{list(v[1])} {np.array2string(v[2].ravel()[:6], precision=5)}"
    return repr(v)[:160]


if __name__ == "__main__" and len(sys.argv) == 6 and sys.argv[1] == "--real-mnn":
    _real_mnn_main(*sys.argv[2:])
