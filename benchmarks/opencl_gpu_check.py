#!/usr/bin/env python3
"""mnnjit's OpenCL backend on a real GPU: correctness of every shared model and a sweep of ops, and
the latency of MobileNetV2 and a ResNet-18-shaped network. Self-contained; no network needed.

WHAT IT NEEDS on the machine that runs it
  * Python 3 with numpy (any recent version);
  * pyopencl - installed, or the bundle that ``--prepare`` writes (``build/gpu_check/site``, pure
    Python plus pyopencl's extension module: it needs the Python minor version it was made with,
    printed by --prepare);
  * an OpenCL driver. NVIDIA's is ``libnvidia-opencl.so.1``: when no ICD vendor file names it, the
    script writes one into a temporary directory and points ``OCL_ICD_VENDORS`` there (nothing is
    written under /etc);
  * the shared models: ``$MNNJIT_SHARED/models``, ``../shared/models`` beside the checkout, or the
    copy ``--prepare`` puts in ``build/gpu_check/models``.
  Numba is not needed (the references are the ops' numpy references and real MNN's stored outputs);
  when numba is importable the CPU backend's latency is measured too.

RUN
    python3 benchmarks/opencl_gpu_check.py              # on the GPU machine, from the repo root
    OUT=/some/dir python3 benchmarks/opencl_gpu_check.py   # also writes $OUT/opencl_gpu_check.json
  Options: --device P:D or a name substring (default: the first GPU), --budget SECONDS (default 270:
  parts not started by then are skipped), --runs N (timed forwards, default 50).

PREPARE (where the project's venv exists, before copying the repo to the GPU machine)
    .venv/bin/python benchmarks/opencl_gpu_check.py --prepare [--with-numpy]
  copies pyopencl (without its bundled PoCL library), its pure-Python dependencies and the shared
  models into build/gpu_check/ (about 25 MB; --with-numpy adds numpy, about 45 MB more). Carry
  ``build/gpu_check`` with the repo (it is git-ignored).

Exit status: 0 when every check passed, 1 when one failed, 2 when no OpenCL device was found.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUNDLE = ROOT / "build" / "gpu_check"
MODEL_FILES = ("MANIFEST.json",)


# ---------------------------------------------------------------------------- preparation
def prepare(with_numpy: bool) -> None:
    """Copy pyopencl (minus PoCL), its dependencies and the shared models into build/gpu_check."""
    import importlib.util
    site = BUNDLE / "site"
    if site.exists():
        shutil.rmtree(site)
    site.mkdir(parents=True)
    names = ["pyopencl", "pytools", "platformdirs", "siphash24", "typing_extensions"] + (["numpy"] if with_numpy else [])
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            print(f"  {name}: not installed here, skipped")
            continue
        origin = Path(spec.origin)
        if origin.name == "__init__.py":
            src = origin.parent
            shutil.copytree(src, site / src.name, ignore=shutil.ignore_patterns(
                "__pycache__", "libpocl*", "pocl.icd", "*.pyc"))
        else:
            shutil.copy2(origin, site / origin.name)
        parent = origin.parent.parent if origin.name == "__init__.py" else origin.parent
        for info in parent.glob(f"{name}-*.dist-info"):  # packages read their own version from it
            shutil.copytree(info, site / info.name)
        if name == "numpy":  # numpy's bundled OpenBLAS lives beside the package
            libs = origin.parent.parent / "numpy.libs"
            if libs.is_dir():
                shutil.copytree(libs, site / "numpy.libs")
    models = _find_models()
    if models is not None:
        dst = BUNDLE / "models"
        dst.mkdir(parents=True, exist_ok=True)
        for f in sorted(models.iterdir()):
            if f.suffix in (".mnn", ".npz") or f.name in MODEL_FILES:
                shutil.copy2(f, dst / f.name)
    size = sum(f.stat().st_size for f in BUNDLE.rglob("*") if f.is_file())
    print(f"wrote {BUNDLE} ({size / 2 ** 20:.1f} MB) for Python {sys.version_info.major}.{sys.version_info.minor}; "
          f"carry build/gpu_check with the repo")


# ---------------------------------------------------------------------------- environment
def _find_models() -> Path | None:
    cands = []
    if os.environ.get("MNNJIT_SHARED"):
        cands.append(Path(os.environ["MNNJIT_SHARED"]) / "models")
    cands += [ROOT.parent / "shared" / "models", ROOT / "shared" / "models", BUNDLE / "models"]
    for c in cands:
        if (c / "MANIFEST.json").is_file():
            return c
    return None


def _setup_icd(log: dict) -> None:
    """Point the ICD loader at NVIDIA's OpenCL library when no vendor file names it."""
    if os.environ.get("OCL_ICD_VENDORS"):
        log["icd"] = f"OCL_ICD_VENDORS={os.environ['OCL_ICD_VENDORS']} (given)"
        return
    vendors = Path("/etc/OpenCL/vendors")
    existing = sorted(vendors.glob("*.icd")) if vendors.is_dir() else []
    texts = {f.name: f.read_text(errors="replace").strip() for f in existing}
    log["icd_files"] = texts
    import ctypes
    try:
        ctypes.CDLL("libnvidia-opencl.so.1")
        nvidia = True
    except OSError:
        nvidia = False
    log["libnvidia_opencl"] = nvidia
    if not nvidia or any("nvidia" in t for t in texts.values()):
        return
    d = Path(tempfile.mkdtemp(prefix="mnnjit_icd_"))
    (d / "nvidia.icd").write_text("libnvidia-opencl.so.1\n")
    for name, t in texts.items():  # keep the other vendors the machine lists
        (d / name).write_text(t + "\n")
    os.environ["OCL_ICD_VENDORS"] = str(d)
    log["icd"] = f"wrote {d}/nvidia.icd (libnvidia-opencl.so.1); OCL_ICD_VENDORS={d}"


def _setup_paths(log: dict) -> None:
    sys.path.insert(0, str(ROOT))
    try:
        import pyopencl  # noqa: F401
        log["pyopencl"] = "installed"
    except ImportError:
        site = BUNDLE / "site"
        if not site.is_dir():
            raise SystemExit("pyopencl is not installed and build/gpu_check/site is missing: run "
                             "`python benchmarks/opencl_gpu_check.py --prepare` where the venv is, and carry "
                             "build/gpu_check")
        sys.path.insert(0, str(site))
        log["pyopencl"] = f"bundle {site}"
    import numpy
    import pyopencl
    log["versions"] = {"python": sys.version.split()[0], "numpy": numpy.__version__,
                       "pyopencl": getattr(pyopencl, "VERSION_TEXT", "?")}


# ---------------------------------------------------------------------------- checks
class Checker:
    """Runs the checks, keeping results and the time budget."""

    def __init__(self, args: argparse.Namespace, log: dict) -> None:
        self.args, self.log = args, log
        self.t0 = time.perf_counter()
        self.failures: list[str] = []
        import numpy as np
        self.np = np

    def left(self) -> float:
        return self.args.budget - (time.perf_counter() - self.t0)

    def fail(self, what: str) -> None:
        self.failures.append(what)
        print("  FAIL", what, flush=True)

    # .................................................................. helpers
    def reference(self, outputs, feeds: dict):
        """Outputs by the ops' numpy references."""
        from mnnjit.graph import topo_order
        from mnnjit.ops import registry
        np = self.np
        vals = {}
        for n in topo_order(list(outputs), stop_at_values=False):
            if n.op == "const":
                vals[id(n)] = n.value
            elif n.op == "placeholder":
                vals[id(n)] = feeds[id(n)]
            else:
                with np.errstate(all="ignore"):
                    vals[id(n)] = registry.get(n.op).ref([vals[id(i)] for i in n.inputs], n.attrs)
        return [np.asarray(vals[id(o)]) for o in outputs]

    def rel(self, got, want) -> float:
        np = self.np
        got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
        if got.shape != want.shape:
            return float("inf")
        if want.size == 0:
            return 0.0
        fin = np.isfinite(want)
        if not np.array_equal(np.isnan(got), np.isnan(want)):
            return float("inf")
        return float(np.abs(got[fin] - want[fin]).max(initial=0.0) / max(1.0, float(np.abs(want[fin]).max(initial=0.0))))

    # .................................................................. models
    def models(self, backend) -> dict:
        np = self.np
        import mnnjit as MNN
        from mnnjit.backends.base import GraphIR
        from mnnjit.compiler.lower import compile_graph
        from mnnjit.precision import parse_modes
        out = {}
        mdir = _find_models()
        if mdir is None:
            self.fail("shared models not found (set MNNJIT_SHARED or run --prepare)")
            return out
        entries = json.loads((mdir / "MANIFEST.json").read_text())["entries"]
        for name, e in entries.items():
            path = mdir / e["files"]["mnn"]
            if not path.exists() or not (mdir / f"{name}.npz").exists():
                continue
            if self.left() < 30:
                out[name] = "skipped (time budget)"
                continue
            ins = [i["name"] for i in e["inputs"]]
            outs = [o["name"] for o in e["outputs"]]
            module = MNN.nn.load_module_from_file(str(path), ins, outs)
            data = np.load(mdir / f"{name}.npz")
            res = out[name] = {"cases": []}
            precisions = [0, 2] if name in ("convbn", "mobilenetv2", "dynamic") else [0]
            for case in e["cases"]:
                sig = tuple((tuple(case["inputs"][n]["shape"]), np.dtype(case["inputs"][n]["dtype"]), "NCHW")
                            for n in ins)
                plan = module._program.plan(sig)
                if plan.dynamic:
                    res["cases"].append({"index": case["index"], "note": "dynamic plan: not lowered"})
                    continue
                arrays = [data[case["inputs"][n]["key"]] for n in ins]
                feeds = {id(p): a for p, a in zip(plan.placeholders, arrays)}
                ref = self.reference(plan.outputs, feeds)
                for prec in precisions:
                    t = time.perf_counter()
                    graph = compile_graph(backend, GraphIR(plan.placeholders, plan.outputs, list(plan.out_fmts)),
                                                parse_modes({"precision": prec}))
                    t_build = time.perf_counter() - t
                    t = time.perf_counter()
                    got = graph.run(arrays)
                    t_first = time.perf_counter() - t
                    t = time.perf_counter()
                    got = graph.run(arrays)
                    t_run = time.perf_counter() - t
                    tol_ref, tol_mnn = (1e-4, 1e-3) if prec == 0 else (2e-2, 2e-2)
                    row = {"index": case["index"], "precision": "low" if prec else "normal",
                           "build_s": round(t_build, 3), "first_run_s": round(t_first, 3), "run_s": round(t_run, 4),
                           "host_steps": [lbl for lbl, _ in graph.fallbacks]}
                    for o, g, r in zip(outs, got, ref):
                        mnn = data[case["outputs"][o]["key"]]
                        row[o] = {"rel_vs_numpy_ref": self.rel(g, r), "rel_vs_real_mnn": self.rel(g, mnn)}
                        if row[o]["rel_vs_numpy_ref"] > tol_ref or row[o]["rel_vs_real_mnn"] > tol_mnn:
                            self.fail(f"model {name} case {case['index']} {o} precision {prec}: {row[o]}")
                    if graph.fallbacks:
                        self.fail(f"model {name}: steps on the host: {graph.fallbacks}")
                    res["cases"].append(row)
                    if name.startswith("mobilenetv2") and prec == 0:
                        res["explain"] = graph.explain().splitlines()[0]
            print(f"  model {name}: {len(res['cases'])} runs checked", flush=True)
        return out

    # .................................................................. ops
    def ops(self, backend) -> dict:
        """A fixed sweep of ops against their numpy references (a small Hypothesis-free conformance run)."""
        np = self.np
        from mnnjit.backends.base import GraphIR
        from mnnjit.compiler.lower import compile_graph
        from mnnjit.graph import Node
        from mnnjit.ops import build as B
        rng = np.random.default_rng(0)

        def ph(shape):
            return Node("placeholder", (), {}, tuple(shape), np.dtype(np.float32), "NCHW", name="x")

        def c(a):
            return Node.constant(np.asarray(a, np.float32))

        def conv(x, cin, cout, k, s, p, d=1, g=1, act=""):
            w = c(rng.standard_normal((cout, cin // g, k, k)) * 0.2)
            return B.make_node("conv2d", [x, w, c(rng.standard_normal(cout))], {
                "stride": (s, s), "dilation": (d, d), "pads": (p, p, p, p), "group": g, "act": act})

        cases = {}
        x = ph((2, 16, 33, 31))
        cases["conv 1x1 (GEMM)"] = conv(x, 16, 70, 1, 1, 0, act="relu")
        cases["conv 3x3 stride 2"] = conv(x, 16, 24, 3, 2, 1, act="relu6")
        cases["conv 5x5 dilated"] = conv(x, 16, 8, 5, 1, 4, d=2)
        cases["conv depthwise 3x3"] = conv(x, 16, 16, 3, 1, 1, g=16)
        cases["conv grouped"] = conv(x, 16, 32, 3, 1, 1, g=4)
        cases["conv + residual + relu"] = B.make_node("relu", [B.make_node("add", [conv(x, 16, 16, 3, 1, 1), x])])
        cases["deconv 4x4 stride 2"] = B.make_node("conv2d_transpose", [x, c(rng.standard_normal((16, 8, 4, 4))),
                                                                        c(rng.standard_normal(8))],
                                                   {"stride": (2, 2), "dilation": (1, 1), "pads": (1, 1, 1, 1),
                                                    "group": 1, "act": ""})
        cases["max pool 3x3/2"] = B.make_node("pool2d", [x], {"kind": "max", "kernel": (3, 3), "stride": (2, 2),
                                                             "pads": (1, 1, 1, 1), "out": (17, 16),
                                                             "count_include_pad": True})
        cases["avg pool 2x2"] = B.make_node("pool2d", [x], {"kind": "avg", "kernel": (2, 2), "stride": (2, 2),
                                                           "pads": (0, 0, 0, 0), "out": (16, 15),
                                                           "count_include_pad": False})
        cases["global avg pool"] = B.make_node("pool2d", [x], {"kind": "avg", "kernel": (33, 31), "stride": (1, 1),
                                                              "pads": (0, 0, 0, 0), "out": (1, 1),
                                                              "count_include_pad": False})
        m = ph((3, 70, 45))
        cases["matmul batched, transposed b"] = B.make_node("matmul_ex", [m, c(rng.standard_normal((50, 45)))],
                                                            {"transpose_a": False, "transpose_b": True, "act": ""})
        cases["matmul activations"] = B.make_node("matmul", [m, B.make_node("transpose", [m], {"perm": (0, 2, 1)})])
        cases["softmax"] = B.make_node("softmax", [m], {"axis": 2})
        cases["layer norm"] = B.make_node("layer_norm", [m, c(rng.standard_normal(45)), c(rng.standard_normal(45))],
                                          {"axes": (2,), "eps": 1e-5})
        cases["instance norm"] = B.make_node("instance_norm", [x, c(rng.standard_normal(16)),
                                                               c(rng.standard_normal(16))], {"eps": 1e-5})
        cases["resize bilinear x2"] = B.make_node("resize", [x], {"size": (66, 62), "method": "bilinear",
                                                                 "coord": "half_pixel", "scale": None})
        cases["resize nearest"] = B.make_node("resize", [x], {"size": (20, 50), "method": "nearest",
                                                             "coord": "asymmetric", "scale": None})
        chain = B.make_node("tanh", [B.make_node("add", [B.make_node("mul", [x, c(1.5)]),
                                                         c(rng.standard_normal((16, 1, 1)))])])
        cases["fused elementwise chain"] = chain
        cases["fused reduce_sum"] = B.make_node("reduce_sum", [chain], {"axes": (1, 3), "keepdims": False})
        cases["concat + slice + transpose"] = B.make_node("transpose", [B.make_node("slice", [
            B.make_node("concat", [x, chain], {"axis": 1})], {"begin": (0, 1, 0, 30), "end": (2, 32, 33, -1),
                                                               "step": (1, 2, 1, -1)})], {"perm": (0, 2, 3, 1)})
        cases["pad reflect"] = B.make_node("pad", [x], {"pads": ((0, 0), (0, 0), (2, 3), (1, 4)), "mode": "reflect"})
        out = {}
        feeds = {"x": rng.standard_normal((2, 16, 33, 31)).astype(np.float32),
                 "m": rng.standard_normal((3, 70, 45)).astype(np.float32)}
        for label, node in cases.items():
            phs = [p for p in (x, m) if _depends(node, p)]
            arrays = [feeds["x" if p is x else "m"] for p in phs]
            try:
                g = compile_graph(backend, GraphIR(phs, [node], ["NCHW"]), None)
                got = g.run(arrays)[0]
                want = self.reference([node], {id(p): a for p, a in zip(phs, arrays)})[0]
                err = self.rel(got, want)
                out[label] = {"rel_err": err, "host_steps": [lbl for lbl, _ in g.fallbacks]}
                if err > 1e-4 or g.fallbacks:
                    self.fail(f"op {label}: {out[label]}")
            except Exception as exc:
                out[label] = {"error": f"{type(exc).__name__}: {exc}"}
                self.fail(f"op {label}: {exc}")
        print(f"  ops: {len(out)} checked", flush=True)
        return out

    # .................................................................. timing
    def timing(self, backend) -> dict:
        np = self.np
        import mnnjit as MNN
        from mnnjit.backends.base import GraphIR
        from mnnjit.compiler.lower import compile_graph
        from mnnjit.precision import parse_modes
        out = {}
        graphs = {}
        mdir = _find_models()
        rng = np.random.default_rng(1)
        if mdir is not None and (mdir / "mobilenetv2.mnn").exists():
            module = MNN.nn.load_module_from_file(str(mdir / "mobilenetv2.mnn"), ["x"], ["logits"])
            plan = module._program.plan((((1, 3, 224, 224), np.dtype(np.float32), "NCHW"),))
            graphs["mobilenetv2"] = (GraphIR(plan.placeholders, plan.outputs, list(plan.out_fmts)),
                                     [rng.standard_normal((1, 3, 224, 224)).astype(np.float32)])
        graphs["resnet18_shaped"] = (_resnet18_graph(np), [rng.standard_normal((1, 3, 224, 224)).astype(np.float32)])
        for name, (gir, arrays) in graphs.items():
            for prec in (0, 2):
                if self.left() < 15:
                    out[f"{name}_{'fp16' if prec else 'fp32'}"] = "skipped (time budget)"
                    continue
                key = f"{name}_{'fp16' if prec else 'fp32'}"
                t = time.perf_counter()
                g = compile_graph(backend, gir, parse_modes({"precision": prec}))
                g.run(arrays)
                first = time.perf_counter() - t
                for _ in range(2):
                    g.run(arrays)
                times = []
                for _ in range(self.args.runs):
                    t = time.perf_counter()
                    g.run(arrays)
                    times.append(time.perf_counter() - t)
                    if len(times) >= 3 and self.left() < 20:  # a slow device: fewer runs, within budget
                        break
                rt = backend.rt
                launches = [l for st in g.steps for l in st.launches]
                rt.finish()
                t = time.perf_counter()
                reps = 20 if times[-1] < 0.05 else 2
                for _ in range(reps):
                    for l in launches:
                        rt.launch(l.kernel, l.gsize, l.lsize)
                rt.finish()
                device_only = (time.perf_counter() - t) / reps
                per_kernel = {}
                for st in g.steps:
                    for l in st.launches:
                        rt.finish()
                        t = time.perf_counter()
                        for _ in range(reps):
                            rt.launch(l.kernel, l.gsize, l.lsize)
                        rt.finish()
                        per_kernel[l.name.split(":")[0]] = per_kernel.get(l.name.split(":")[0], 0.0) + \
                            (time.perf_counter() - t) / reps
                out[key] = {"median_ms": 1e3 * float(np.median(times)), "min_ms": 1e3 * float(np.min(times)),
                            "device_only_ms": 1e3 * device_only, "first_forward_s": round(first, 3),
                            "launches": len(launches), "host_steps": len(g.fallbacks),
                            "per_kernel_ms_serialised": {k: round(1e3 * v, 3) for k, v in
                                                         sorted(per_kernel.items(), key=lambda kv: -kv[1])}}
                if g.fallbacks:
                    self.fail(f"timing graph {key}: steps on the host {g.fallbacks}")
                print(f"  {key}: median {out[key]['median_ms']:.2f} ms (device only "
                      f"{out[key]['device_only_ms']:.2f} ms), {len(launches)} launches", flush=True)
        try:  # the CPU backend in the same process, when numba is here (MobileNetV2: its compile
            import numba  # noqa: F401      # on a cold cache takes minutes, so only with time left)
            from mnnjit.backends import registry
            cpu = registry.get("cpu")
            for name, (gir, arrays) in graphs.items():
                if self.left() < 120 or name != "mobilenetv2":
                    out[f"{name}_cpu_backend"] = "not measured (time budget)"
                    continue
                g = compile_graph(cpu, gir, None)
                for _ in range(3):
                    g.run(arrays)
                times = []
                for _ in range(10):
                    t = time.perf_counter()
                    g.run(arrays)
                    times.append(time.perf_counter() - t)
                out[f"{name}_cpu_backend"] = {"median_ms": 1e3 * float(np.median(times))}
        except ImportError:
            out["cpu_backend"] = "numba not installed: not measured"
        return out


def _depends(node, target) -> bool:
    from mnnjit.graph import topo_order
    return any(n is target for n in topo_order([node], stop_at_values=False))


def _resnet18_graph(np):
    """ResNet-18's shape (224x224, widths 64-512, projection shortcuts) with random weights."""
    from mnnjit.backends.base import GraphIR
    from mnnjit.graph import Node
    from mnnjit.ops import build as B
    rng = np.random.default_rng(7)

    def c(a):
        return Node.constant(np.asarray(a, np.float32))

    def conv(x, cin, cout, k, s, p, act=""):
        w = c(rng.standard_normal((cout, cin, k, k)) * (2.0 / (cin * k * k)) ** 0.5)
        return B.make_node("conv2d", [x, w, c(rng.standard_normal(cout) * 0.1)], {
            "stride": (s, s), "dilation": (1, 1), "pads": (p, p, p, p), "group": 1, "act": act})

    x = Node("placeholder", (), {}, (1, 3, 224, 224), np.dtype(np.float32), "NCHW", name="x")
    y = conv(x, 3, 64, 7, 2, 3, "relu")
    y = B.make_node("pool2d", [y], {"kind": "max", "kernel": (3, 3), "stride": (2, 2), "pads": (1, 1, 1, 1),
                                    "out": (56, 56), "count_include_pad": True})
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        for b in range(2):
            s = stride if b == 0 else 1
            r = conv(conv(y, cin, cout, 3, s, 1, "relu"), cout, cout, 3, 1, 1)
            sc = conv(y, cin, cout, 1, s, 0) if (s != 1 or cin != cout) else y
            y = B.make_node("relu", [B.make_node("add", [r, sc])])
            cin = cout
    y = B.make_node("pool2d", [y], {"kind": "avg", "kernel": (7, 7), "stride": (1, 1), "pads": (0, 0, 0, 0),
                                    "out": (1, 1), "count_include_pad": False})
    y = B.make_node("reshape", [y], {"shape": (1, 512)})
    y = B.make_node("matmul_ex", [y, c(rng.standard_normal((512, 1000)) * 0.05), c(rng.standard_normal(1000))],
                    {"transpose_a": False, "transpose_b": False, "act": ""})
    return GraphIR([x], [y], ["NCHW"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prepare", action="store_true", help="write build/gpu_check (pyopencl bundle, models)")
    ap.add_argument("--with-numpy", action="store_true", help="--prepare: bundle numpy too")
    ap.add_argument("--device", help="MNNJIT_OPENCL_DEVICE: P:D or a name substring (default: the first GPU)")
    ap.add_argument("--budget", type=float, default=270.0, help="seconds; later parts are skipped")
    ap.add_argument("--runs", type=int, default=50, help="timed forwards per model")
    args = ap.parse_args()
    if args.prepare:
        prepare(args.with_numpy)
        return 0
    log: dict = {"started": time.strftime("%Y-%m-%d %H:%M:%S")}
    _setup_icd(log)
    _setup_paths(log)
    if args.device:
        os.environ["MNNJIT_OPENCL_DEVICE"] = args.device
    os.environ.setdefault("MNNJIT_CACHE_DIR", tempfile.mkdtemp(prefix="mnnjit_gpu_cache_"))
    os.environ.setdefault("MNNJIT_OPENCL_TUNING", "fast")
    from mnnjit import settings
    from mnnjit.backends.opencl import device as cl_device
    log["devices"] = [d.__dict__ for d in cl_device.list_devices()]
    print(cl_device.format_devices(), flush=True)
    from mnnjit.backends.opencl.backend import OpenCLBackend
    why = OpenCLBackend.unavailable_reason()
    if why is not None:
        log["error"] = why
        _write(log)
        print("no OpenCL device:", why)
        return 2
    from mnnjit.backends import registry
    backend = registry.get("opencl")
    log["backend"] = backend.describe()
    log["is_gpu"] = backend.is_gpu
    print("running on:", backend.describe(), flush=True)
    chk = Checker(args, log)
    for part in ("ops", "models", "timing"):
        if chk.left() < 10:
            log[part] = "skipped (time budget)"
            continue
        print(f"{part} ...", flush=True)
        try:
            log[part] = getattr(chk, part)(backend)
        except Exception as exc:
            log[part] = {"error": traceback.format_exc()}
            chk.fail(f"{part}: {type(exc).__name__}: {exc}")
        log["failures"] = chk.failures
        _write(log, quiet=True)  # a run cut short still leaves what it measured
    log["counters"] = {k: v for k, v in settings.counters.items() if k.startswith("opencl")}
    log["failures"] = chk.failures
    log["seconds"] = round(time.perf_counter() - chk.t0, 1)
    _write(log)
    print(f"done in {log['seconds']} s: {len(chk.failures)} failure(s)", flush=True)
    return 1 if chk.failures else 0


def _write(log: dict, quiet: bool = False) -> None:
    out = os.environ.get("OUT")
    if out:
        p = Path(out) / "opencl_gpu_check.json"
        p.write_text(json.dumps(log, indent=1, default=str))
        if not quiet:
            print("wrote", p, flush=True)


if __name__ == "__main__":
    sys.exit(main())
