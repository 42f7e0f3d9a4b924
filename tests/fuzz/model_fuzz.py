"""Seeded fuzzing of the .mnn loader and of forwards on mutated models, each input checked in a
child process under memory and CPU-time limits.

Mutations (:func:`mutants`), from a real model's bytes:

* ``flip``: 1-8 random bytes XORed (anywhere in a small model; in a large one, mostly in the
  tables before and after the weight arrays);
* ``truncate``: the file cut at a random length;
* ``word``: one aligned 32-bit word overwritten with an extreme value (0, -1, 2^31-1, ...);
* ``field``: one number of the decoded model made inconsistent and the model re-encoded: an
  input's dims, a tensor index of an op, a convolution's kernel / stride / pad / channel counts,
  a pool's sizes, a constant's dims (against its data), an axis, a reshape target, ...

:func:`run_cases` feeds the mutants to a child process (``python -m model_fuzz``) that sets
``RLIMIT_AS`` and ``RLIMIT_CPU``, loads each one with ``nn.load_module_from_file`` and runs a
forward on inputs of the shapes the model declares. Every case must end in a result or a Python
exception; the parent records the outcome of each, and a child that dies (a signal, the limits)
or goes silent past the per-case timeout marks its case as such and is replaced for the rest.
"""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np

#: outcomes that are not a result or a Python exception
BAD = ("crash", "timeout", "killed")
#: extreme values for overwritten words and fields
EXTREMES = (0, 1, -1, 2, 3, 7, 255, 4096, 65535, 2**31 - 1, -2**31, 2**30, -7)


@dataclass
class Case:
    """One mutated model: its bytes and how it was made."""

    label: str
    data: bytes


@dataclass
class Outcome:
    """What one case ended in: ``ok``, ``error`` (with the exception type and message), or one of
    :data:`BAD` (with the child's signal / status)."""

    label: str
    kind: str
    detail: str = ""
    seconds: float = 0.0


# ---------------------------------------------------------------------------- mutations
def _flip(data: bytes, rng: np.random.Generator) -> Case:
    buf = bytearray(data)
    n = int(rng.integers(1, 9))
    # big models: weight arrays fill the middle of the file; aim at the first and last 64 KiB
    span = len(buf)
    for _ in range(n):
        if span > 256 * 1024 and rng.random() < 0.9:
            pos = int(rng.integers(0, 64 * 1024)) if rng.random() < 0.5 else \
                span - 1 - int(rng.integers(0, 64 * 1024))
        else:
            pos = int(rng.integers(0, span))
        buf[pos] ^= int(rng.integers(1, 256))
    return Case(f"flip x{n}", bytes(buf))


def _truncate(data: bytes, rng: np.random.Generator) -> Case:
    n = int(rng.integers(0, len(data)))
    return Case(f"truncate {n}/{len(data)}", data[:n])


def _word(data: bytes, rng: np.random.Generator) -> Case:
    buf = bytearray(data)
    limit = min(len(buf), 64 * 1024) if rng.random() < 0.8 else len(buf)
    pos = int(rng.integers(0, max(1, limit // 4))) * 4
    value = int(EXTREMES[int(rng.integers(0, len(EXTREMES)))])
    buf[pos:pos + 4] = (value & 0xFFFFFFFF).to_bytes(4, "little")
    return Case(f"word @{pos}={value}", bytes(buf))


def _numbers(obj: Any, path: tuple = ()) -> Iterator[tuple]:
    """Paths to the int fields and small int arrays of a decoded op parameter."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _numbers(v, path + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _numbers(v, path + (i,))
    elif isinstance(obj, bool):
        return
    elif isinstance(obj, (int, np.integer)):
        yield path
    elif isinstance(obj, np.ndarray) and obj.dtype.kind in "iu" and obj.size <= 64:
        yield path


def _set(obj: Any, path: tuple, value: Any) -> None:
    for k in path[:-1]:
        obj = obj[k]
    obj[path[-1]] = value


def _get(obj: Any, path: tuple) -> Any:
    for k in path:
        obj = obj[k]
    return obj


def _bad_int(old: int, rng: np.random.Generator) -> int:
    choices = [0, -1, 1, old + 1, old - 1, old * 2 + 3, 2**31 - 1, -2**31, 1 << 20]
    return int(choices[int(rng.integers(0, len(choices)))])


def _field(net_bytes: bytes, rng: np.random.Generator) -> Case | None:
    """One number of the decoded model changed (see the module docstring), re-encoded."""
    import mnnjit.format as F
    net = F.read_net(net_bytes)
    ops = list(net.oplists)
    k = int(rng.integers(0, len(ops)))
    op = ops[k]
    what = rng.random()
    ntensor = len(net.tensorName or [])
    if what < 0.25 and (op.inputIndexes or op.outputIndexes):
        # an index: another tensor (out of order, a cycle), out of range, or dropped
        attr = "inputIndexes" if op.inputIndexes and (not op.outputIndexes or rng.random() < 0.6) \
            else "outputIndexes"
        idx = list(getattr(op, attr))
        j = int(rng.integers(0, len(idx)))
        r = rng.random()
        if r < 0.5:
            idx[j] = int(rng.integers(0, max(1, ntensor)))
        elif r < 0.8:
            idx[j] = [ntensor, -1, ntensor + 1000, 2**31 - 1][int(rng.integers(0, 4))]
        else:
            idx.pop(j)
        setattr(op, attr, idx)
        label = f"op {k} {op.type} {attr}[{j}]={idx[j] if j < len(idx) else 'dropped'}"
    else:
        main = op.main
        paths = list(_numbers(main)) if isinstance(main, dict) else []
        if not paths:
            return None
        path = paths[int(rng.integers(0, len(paths)))]
        old = _get(main, path)
        if isinstance(old, np.ndarray):
            arr = old.copy()
            r = rng.random()
            if r < 0.4 and arr.size:
                arr.flat[int(rng.integers(0, arr.size))] = _bad_int(int(arr.flat[0]), rng) \
                    if arr.dtype.itemsize >= 4 else 0
                new = arr
            elif r < 0.7:
                new = arr[:-1] if arr.size else np.array([1 << 20], arr.dtype)
            else:
                new = np.concatenate([arr, np.array([int(rng.integers(-2, 9))], arr.dtype)])
        else:
            new = _bad_int(int(old), rng)
        _set(main, path, new)
        label = f"op {k} {op.type} {'.'.join(map(str, path))}={np.asarray(new).tolist()}"
    try:
        return Case("field " + label, F.net_to_bytes(net))
    except Exception:       # noqa: BLE001 - not encodable (a value out of the field's range)
        return None


def mutants(data: bytes, seed: int, count: int, kinds: tuple = ("flip", "truncate", "word", "field")
            ) -> list[Case]:
    """``count`` seeded mutants of a model's bytes, the kinds taken in turn."""
    rng = np.random.default_rng(seed)
    out: list[Case] = []
    makers = {"flip": _flip, "truncate": _truncate, "word": _word, "field": _field}
    tries = 0
    while len(out) < count and tries < 20 * count:
        kind = kinds[tries % len(kinds)]
        tries += 1
        case = makers[kind](data, rng)
        if case is not None:
            out.append(case)
    return out


# ---------------------------------------------------------------------------- the child
def _inputs(mod: Any, rng: np.random.Generator, max_elements: int) -> list[Any]:
    """Vars of the shapes the model declares (unknown dims: small), random values."""
    import mnnjit as J
    vars_ = []
    for spec in mod._program.inputs:
        dims = [d if d > 0 else 4 for d in (spec.dims or ())]
        n = int(np.prod(dims, dtype=np.int64)) if dims else 1
        if n > max_elements:
            raise ValueError(f"the model declares input {spec.name!r} of {n} elements (fuzz limit)")
        if spec.dtype.kind in "iu":
            a = rng.integers(-3, 4, size=dims).astype(spec.dtype)
        else:
            a = rng.standard_normal(dims).astype(spec.dtype)
        fmt = {"NHWC": J.expr.NHWC, "NC4HW4": J.expr.NC4HW4}.get(spec.fmt, J.expr.NCHW)
        vars_.append(J.expr.const(a, list(a.shape), fmt if len(dims) == 4 else J.expr.NCHW,
                                  J.expr.int if spec.dtype.kind in "iu" else J.expr.float))
    return vars_


def _child(mem_bytes: int, cpu_seconds: int, max_elements: int) -> None:
    """Read ``path`` lines on stdin, answer one JSON line per case on stdout (see module doc)."""
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (mem_bytes, mem_bytes))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 5))
    import mnnjit as J
    selftest = os.environ.get("MNNJIT_FUZZ_SELFTEST") == "1"
    out = sys.stdout
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        path = line.strip()
        if not path:
            continue
        out.write(json.dumps({"start": path}) + "\n")
        out.flush()
        t0 = time.perf_counter()
        try:
            if selftest:
                _selftest(path)
            mod = J.nn.load_module_from_file(path)
            xs = _inputs(mod, np.random.default_rng(0), max_elements)
            outs = mod.forward(xs)
            for o in (outs if isinstance(outs, list) else [outs]):
                np.asarray(o.read())
            res = {"kind": "ok"}
        except Exception as exc:  # noqa: BLE001 - every exception is an answer here
            res = {"kind": "error", "detail": f"{type(exc).__name__}: {str(exc)[:300]}"}
        res["seconds"] = time.perf_counter() - t0
        out.write(json.dumps(res) + "\n")
        out.flush()


#: file contents that make a child misbehave on purpose (``MNNJIT_FUZZ_SELFTEST=1`` only): the
#: harness's own test that crashes, hangs, spins and huge allocations are caught and told apart
SELFTEST = {"segv": b"FUZZ-SELFTEST-SEGV", "hang": b"FUZZ-SELFTEST-HANG",
            "spin": b"FUZZ-SELFTEST-SPIN", "alloc": b"FUZZ-SELFTEST-ALLOC"}


def _selftest(path: str) -> None:
    with open(path, "rb") as fh:
        head = fh.read(32)
    if head == SELFTEST["segv"]:
        os.kill(os.getpid(), signal.SIGSEGV)
    elif head == SELFTEST["hang"]:
        time.sleep(3600)
    elif head == SELFTEST["spin"]:
        while True:
            pass
    elif head == SELFTEST["alloc"]:
        np.ones(1 << 40, np.uint8)      # 1 TiB: over the memory limit, a MemoryError


@dataclass
class _Child:
    proc: subprocess.Popen
    buf: bytes = field(default=b"")

    def line(self, timeout: float) -> dict | None:
        """The next JSON line, or None when the child stayed silent for ``timeout``, or ``{}``
        when its output ended (it died)."""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return {}
            self.buf += chunk
        raw, self.buf = self.buf.split(b"\n", 1)
        return json.loads(raw)


def _spawn(mem_bytes: int, cpu_seconds: int, max_elements: int, env: dict) -> _Child:
    here = os.path.dirname(os.path.abspath(__file__))
    code = (f"import sys; sys.path.insert(0, {here!r}); import model_fuzz; "
            f"model_fuzz._child({mem_bytes}, {cpu_seconds}, {max_elements})")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env)
    child = _Child(proc)
    if not child.line(120.0):
        proc.kill()
        raise RuntimeError("the fuzz child process did not start")
    return child


def _end(child: _Child, grace: float = 0.0) -> str:
    """Kill a child (if still running after ``grace`` seconds) and describe how it ended."""
    try:
        child.proc.wait(grace)
    except subprocess.TimeoutExpired:
        child.proc.kill()
    rc = child.proc.wait()
    if rc < 0:
        try:
            return f"signal {signal.Signals(-rc).name}"
        except ValueError:
            return f"signal {-rc}"
    return f"exit status {rc}"


def run_cases(cases: list[Case], mem_mb: int = 2048, cpu_seconds: int = 60,
              case_timeout: float = 60.0, max_elements: int = 1 << 24) -> list[Outcome]:
    """Each case loaded and run in a child process with the limits (see the module docstring)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [os.getcwd(), env.get("PYTHONPATH", "")] if p)
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="mnnjit-fuzz-") as tmp:
        paths = []
        for i, c in enumerate(cases):
            p = os.path.join(tmp, f"case{i}.mnn")
            with open(p, "wb") as fh:
                fh.write(c.data)
            paths.append(p)
        child: _Child | None = None
        try:
            for c, p in zip(cases, paths):
                if child is None:
                    child = _spawn(mem_mb << 20, cpu_seconds, max_elements, env)
                t0 = time.perf_counter()
                try:
                    child.proc.stdin.write((p + "\n").encode())
                    child.proc.stdin.flush()
                except BrokenPipeError:
                    pass
                started = child.line(30.0)
                res = child.line(case_timeout) if started else started
                if not res:
                    # silent: a timeout (killed here); output ended: it died (a signal, a limit)
                    how = _end(child, grace=10.0 if res == {} else 0.0)
                    kind = "timeout" if res is None else \
                        ("killed" if "SIGXCPU" in how or "SIGKILL" in how else "crash")
                    outcomes.append(Outcome(c.label, kind, how, time.perf_counter() - t0))
                    child = None
                    continue
                outcomes.append(Outcome(c.label, res["kind"], res.get("detail", ""), res["seconds"]))
        finally:
            if child is not None:
                child.proc.stdin.close()
                _end(child)
    return outcomes


def summary(outcomes: list[Outcome]) -> dict:
    """Counts by outcome kind, and by exception type for errors."""
    kinds: dict = {}
    errors: dict = {}
    for o in outcomes:
        kinds[o.kind] = kinds.get(o.kind, 0) + 1
        if o.kind == "error":
            t = o.detail.split(":", 1)[0]
            errors[t] = errors.get(t, 0) + 1
    return {"kinds": kinds, "errors": dict(sorted(errors.items(), key=lambda kv: -kv[1]))}
