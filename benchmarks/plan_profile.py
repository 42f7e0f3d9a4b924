"""Where a whole-forward plan kernel spends its time, per step kind (matmuls on constant weights,
attention products, softmax, layer norm, GELU, views and copies, adds, ...).

    .venv/bin/python benchmarks/plan_profile.py [--zoo build/zoo] [--models NAME ...] [--threads 1]
                                                [--seconds 2] [--steps]

For each zoo model: load it with mnnjit, run it until its plan is compiled whole
(:mod:`mnnjit.backends.cpu.codegen.whole_plan`), then build the same kernel again with a cycle
counter read (``llvm.readcyclecounter``) between every two statements of its body (loop folding
off, so every step is one statement) and time forwards of that instrumented copy. Each statement's
cycles go to the step it came from; the report scales the shares to the plain kernel's median time
and gives, for products, their shape and GFLOP/s. The instrumented kernel compiles without the
disk cache (seconds per model).
"""
from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import os
import sys
import tempfile
import time

os.environ.setdefault("MNNJIT_COMPILE", "sync")

import numpy as np  # noqa: E402
from llvmlite import ir  # noqa: E402
from numba import types  # noqa: E402
from numba.core import cgutils  # noqa: E402
from numba.extending import intrinsic  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)


@intrinsic
def rdtsc(typingctx):
    """The CPU's cycle counter."""
    sig = types.int64()

    def codegen(context, builder, signature, args):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(64), []),
                                            "llvm.readcyclecounter")
        return builder.call(fn, [])
    return sig, codegen


def _describe(w, node, ins) -> dict:
    """A step's op and shapes (and whether its right operand is a constant)."""
    const_b = len(ins) > 1 and ins[1] is not None and w.init[ins[1]] is not None
    conv_k = 0
    if node.op == "mnn_conv2d":
        conv_k = int(np.prod(node.attrs["weights"].shape[1:]))
    return {"conv_k": conv_k, "op": node.op, "shape": tuple(int(d) for d in node.shape),
            "in_shapes": [tuple(int(d) for d in i.shape) for i in node.inputs],
            "attrs": {k: v for k, v in node.attrs.items() if isinstance(v, (str, int, float, bool, tuple))},
            "const_b": bool(const_b)}


def _kind(d: dict, lines: list[str]) -> str:
    text = "\n".join(lines)
    op = d["op"]
    if op == "matmul_ex":
        path = "gemm" if ("gemm_f32(" in text or "gemm_linked(" in text) else "loops"
        return f"matmul_ex const-W ({path})" if d["const_b"] else f"matmul_ex act x act ({path})"
    if op == "matmul":
        path = "gemm" if "gemm_batched" in text else "loops"
        return f"batched matmul ({path})"
    if op == "mnn_conv2d":
        return "patch conv"
    if op == "elementwise" or op in ("add", "mul", "sub", "div"):
        return f"binary {op}"
    return op


def _flops(d: dict) -> int:
    op, shape, ins = d["op"], d["shape"], d["in_shapes"]
    if op == "matmul_ex":
        a = ins[0]
        k = a[0] if d["attrs"].get("transpose_a") else a[1]
        return 2 * int(np.prod(shape)) * int(k)
    if op == "matmul":
        return 2 * int(np.prod(shape)) * int(ins[0][-1])
    if op == "mnn_conv2d":
        return 2 * int(np.prod(shape)) * d["conv_k"]
    return 0


def instrumented(args: tuple, wp) -> tuple:
    """(kernel, blob, workspace size, out shapes, used inputs, tags, descriptions) for the plan
    ``args`` with a cycle count per body statement."""
    steps, init, feed_slots, out_slots, order = args[:5]
    marks: list[tuple[int, dict]] = []

    def wrap(fn):
        def writer(w, node, ins, out):
            marks.append((len(w.lines), _describe(w, node, ins)))
            return fn(w, node, ins, out)
        return writer
    saved = (dict(wp._WRITERS), wp._elementwise, wp._outline, wp.fold_loops, wp.MAX_STEPS)
    orig_outline = wp._outline
    state: dict = {}

    def outline(lines, bounds):
        body, functions = orig_outline(lines, bounds)
        starts = [m[0] for m in marks]

        def step_at(i):
            k = np.searchsorted(starts, i, side="right") - 1
            return int(k) if k >= 0 else -1
        tags: list[int] = []
        step_end = {first: end for first, end in bounds if end > first}
        k = 0
        while k < len(lines):
            end = step_end.get(k)
            if end is None:
                tags.append(-1 if k >= (bounds[-1][1] if bounds else 0) else step_at(k))
                k += 1
                continue
            block = lines[k:end]
            s = step_at(k)
            setup = [ln for ln in block if wp._SETUP.match(ln)]
            rest = len(setup) < len(block)
            tags.extend([s] * (len(setup) + (1 if rest else 0)))
            state.setdefault("calls", {})[s] = state.get("calls", {}).get(s, []) + [ln for ln in block]
            k = end
        assert len(tags) == len(body), (len(tags), len(body))
        state["tags"] = tags
        return body, functions

    def fold(head, body):
        tags = state["tags"]
        out, slots = [], []
        first = True
        for ln, tag in zip(body, tags):
            if ln.startswith("    ") and not ln.startswith("     "):
                if first:
                    out.append("    _t0 = rdtsc()")
                    first = False
                elif slots:
                    out += ["    _t1 = rdtsc()", f"    tp[{len(slots) - 1}] += _t1 - _t0", "    _t0 = _t1"]
                slots.append(tag)
            out.append(ln)
        state["slots"] = slots
        return out
    try:
        for op, fn in list(wp._WRITERS.items()):
            wp._WRITERS[op] = wrap(fn)
        wp._elementwise = wrap(saved[1])
        wp._outline = outline
        wp.fold_loops = fold
        wp.MAX_STEPS = 10 ** 9
        sizes: dict = {}
        made = wp.plan_source(steps, init, feed_slots, out_slots, order, sizes)
    finally:
        wp._WRITERS.clear()
        wp._WRITERS.update(saved[0])
        wp._elementwise, wp._outline, wp.fold_loops, wp.MAX_STEPS = saved[1:]
    assert made is not None
    source, blob = made
    source = source.replace("cache=True", "cache=False")
    source = source.replace("def kernel(", "def kernel(tp, ", 1)
    source = source.replace("import numba\n", "import numba\nfrom __main__ import rdtsc\n", 1)
    d = tempfile.mkdtemp(prefix="plan_profile_")
    path = os.path.join(d, "prof_kernel.py")
    with open(path, "w") as fh:
        fh.write(source)
    spec = importlib.util.spec_from_file_location("prof_kernel_" + str(abs(hash(source))), path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    used = [k for k, s in enumerate(feed_slots) if s is not None]
    shapes = [tuple(int(x) for x in order[s].shape) for s in out_slots]
    return mod.kernel, blob, sizes["workspace"], shapes, used, state["slots"], [m[1] for m in marks], state


def profile(name: str, entry: dict, zoo: str, threads: int, seconds: float, show_steps: bool) -> dict:
    """Per-kind shares of one model's plan kernel time."""
    import mnnjit as M
    from mnnjit.backends.cpu.codegen import whole_plan as wp
    captured: list = []
    orig = wp.compile_plan

    def cap(steps, init, feed_slots, out_slots, order, check=None, sample=None):
        captured.append((steps, init, feed_slots, out_slots, order, sample))
        return orig(steps, init, feed_slots, out_slots, order, check=check, sample=sample)
    wp.compile_plan = cap
    try:
        data = np.load(os.path.join(zoo, entry["files"]["npz"]))
        x = data["in0_x"]
        F = M.expr
        rt = M.nn.create_runtime_manager(({"backend": "CPU", "numThread": threads, "precision": "normal"},))
        net = M.nn.load_module_from_file(os.path.join(zoo, entry["files"]["mnn"]), ["x"], ["y"], runtime_manager=rt)

        def call():
            return net.forward(F.const(x, list(x.shape), F.NCHW)).read()
        for _ in range(80):
            call()
    finally:
        wp.compile_plan = orig
    if not captured:
        raise SystemExit(f"{name}: no whole-plan kernel was compiled")
    args = captured[-1]
    sample = args[5]
    t = time.perf_counter()
    kern, blob, wsn, shapes, used, slots, descs, state = instrumented(args, wp)
    tp = np.zeros(len(slots) + 1, np.int64)
    ins = [np.ascontiguousarray(sample[k]) for k in used]
    outs = [np.empty(s, np.float32) for s in shapes]
    wsa = np.empty(wsn, np.float32)
    kern(tp, *ins, blob, *outs, wsa)
    compile_s = time.perf_counter() - t
    # the plain kernel's time (the same compile_plan, from the cache)
    run = orig(*args[:5], sample=sample)
    for _ in range(20):
        run(sample)
    plain = []
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end or len(plain) < 30:
        t0 = time.perf_counter()
        run(sample)
        plain.append(time.perf_counter() - t0)
    # per statement, the median over forwards (a forward preempted by another process's work on
    # a shared machine inflates its own statements only)
    runs = []
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end or len(runs) < 30:
        tp[:] = 0
        kern(tp, *ins, blob, *outs, wsa)
        runs.append(tp.copy())
    tp = np.median(np.array(runs), axis=0)
    total = float(tp.sum())
    med = float(np.median(plain))
    per_kind: dict = collections.defaultdict(lambda: [0.0, 0, 0])
    per_step: dict = collections.defaultdict(float)
    for i, s in enumerate(slots):
        per_step[s] += tp[i] / total
    rows = []
    for s, share in per_step.items():
        if s < 0:
            kind, fl = "(outside steps)", 0
        else:
            kind = _kind(descs[s], state.get("calls", {}).get(s, []))
            fl = _flops(descs[s])
        per_kind[kind][0] += share
        per_kind[kind][1] += fl
        per_kind[kind][2] += 1
        rows.append((share, s, kind, fl))
    out = {"model": name, "threads": threads, "plain_median_s": med, "compile_s": compile_s, "kinds": {}}
    print(f"\n{name}: plain kernel {med * 1e3:.3f} ms at {threads} thread(s); instrumented compile {compile_s:.1f} s")
    print(f"  {'kind':34s} {'share':>6s} {'time':>10s} {'steps':>5s} {'GFLOP/s':>8s}")
    for kind, (share, fl, cnt) in sorted(per_kind.items(), key=lambda kv: -kv[1][0]):
        tm = share * med
        gf = fl / tm / 1e9 if fl and tm > 0 else 0.0
        out["kinds"][kind] = {"share": share, "time_s": tm, "steps": cnt, "gflops": gf}
        print(f"  {kind:34s} {share * 100:5.1f}% {tm * 1e6:8.1f}us {cnt:5d} {gf:8.1f}")
    if show_steps:
        for share, s, kind, fl in sorted(rows, reverse=True)[:40]:
            d = descs[s] if s >= 0 else {}
            tm = share * med
            gf = fl / tm / 1e9 if fl and tm > 0 else 0.0
            print(f"    {share * 100:5.1f}% {tm * 1e6:8.1f}us {kind:30s} {d.get('in_shapes')} -> {d.get('shape')} "
                  f"{gf:6.1f} GF/s {d.get('attrs', {}).get('transpose_b', '')}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--zoo", default=os.path.join(ROOT, "build", "zoo"))
    ap.add_argument("--models", nargs="+", default=["tf_l2_s64_d256", "vit_small", "tf_l2_s32_d128"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--steps", action="store_true", help="also list the 40 costliest steps")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    with open(os.path.join(args.zoo, "MANIFEST.json")) as fh:
        entries = json.load(fh)["entries"]
    res = [profile(m, entries[m], args.zoo, args.threads, args.seconds, args.steps) for m in args.models]
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
