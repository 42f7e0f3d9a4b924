"""Throughput of one model's forwards from several Python threads at once.

    PYTHONPATH=. python benchmarks/threads.py [--models mobilenetv2 convbn] [--threads 1 2 4]
                                              [--seconds 3] [--numba-threads N] [--json out.json]

For each model and thread count T, T threads run forwards (after a warm-up and a barrier) in three
arrangements, alternating in ``--rounds`` rounds that share ``--seconds`` per arrangement:

* ``shared``: all threads call one Module (each forward takes an activation arena of its own:
  the default);
* ``locked``: the same, with the kernel-step plan capped at one arena (``max_arenas = 1``), so
  forwards take turns on one set of buffers - the lock alternative (models whose plan is not a
  kernel-step plan show "-");
* ``clones``: each thread calls its own ``Module.clone()`` (sharing weights and compiled plans).

Reported: forwards per second over all threads, and the median latency of one forward (medians
over the rounds). Every
thread checks its outputs against the single-threaded reference (a mismatch stops the run).
``--numba-threads``: Numba worker threads per forward (default: Numba's default, all cores).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time

import numpy as np

# kernels compile before the first forward returns (a cold cache would otherwise time the
# reference path while they compile in the background)
os.environ.setdefault("MNNJIT_COMPILE", "sync")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "threads"))

from threads_helpers import case_arrays, forward, load  # noqa: E402


def _run(targets: list, x: list[np.ndarray], want: list[np.ndarray], seconds: float,
         numba_threads: int | None) -> tuple[float, float]:
    """(forwards per second, median seconds per forward) of len(targets) threads."""
    import numba
    n = len(targets)
    barrier = threading.Barrier(n + 1)
    stop = threading.Event()
    lat: list[list[float]] = [[] for _ in range(n)]
    errors: list[str] = []

    def work(t: int) -> None:
        if numba_threads:
            numba.set_num_threads(numba_threads)
        mod = targets[t]
        forward(mod, x)     # this thread's first forward (thread-local settings) untimed
        barrier.wait()
        while not stop.is_set():
            t0 = time.perf_counter()
            got = forward(mod, x)
            lat[t].append(time.perf_counter() - t0)
            if not all(np.array_equal(g, w) for g, w in zip(got, want)):
                errors.append(f"thread {t}: wrong output")
                return

    threads = [threading.Thread(target=work, args=(t,), daemon=True) for t in range(n)]
    for th in threads:
        th.start()
    barrier.wait()
    t0 = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for th in threads:
        th.join()
    elapsed = time.perf_counter() - t0
    if errors:
        raise SystemExit(errors[0])
    count = sum(len(v) for v in lat)
    return count / elapsed, statistics.median([s for v in lat for s in v])


def bench(name: str, thread_counts: list[int], seconds: float, numba_threads: int | None,
          rounds: int = 5) -> list[dict]:
    """Rows of (model, arrangement, threads, forwards/s, median ms): medians over ``rounds``."""
    import numba
    if numba_threads:
        numba.set_num_threads(numba_threads)
    cases = case_arrays(name)
    x = cases[-1]
    mod = load(name)
    # past every tier switch (a tiny plan compiles into one kernel after 32 forwards), so all
    # later outputs are bit-for-bit the reference
    for _ in range(40):
        forward(mod, x)
    want = forward(mod, x)
    plan = mod._last_plan
    kernel_steps = hasattr(plan, "max_arenas")
    rows = []
    for t in thread_counts:
        kinds = ["shared", "clones"] + (["locked"] if kernel_steps else [])
        clones = [mod.clone() for _ in range(t)]
        got: dict = {k: [] for k in kinds}
        # rounds alternate the arrangements (a shared machine's load drifts: each arrangement
        # sees the same drift), each round runs every arrangement for seconds / rounds
        for _ in range(rounds):
            for kind in kinds:
                if kernel_steps:
                    plan.max_arenas = 1 if kind == "locked" else None
                targets = clones if kind == "clones" else [mod] * t
                got[kind].append(_run(targets, x, want, seconds / rounds, numba_threads))
        for kind in ("shared", "locked", "clones"):
            if kind not in got:
                rows.append({"model": name, "arrangement": kind, "threads": t, "fps": None, "ms": None})
                continue
            fps = statistics.median(f for f, _ in got[kind])
            med = statistics.median(m for _, m in got[kind])
            rows.append({"model": name, "arrangement": kind, "threads": t, "fps": round(fps, 1),
                         "ms": round(med * 1e3, 3)})
            print(f"{name:16s} {kind:7s} threads={t}: {fps:9.1f} forwards/s  median {med * 1e3:8.3f} ms",
                  flush=True)
    if kernel_steps:
        plan.max_arenas = None
        print(f"{name:16s} arenas made: {plan.n_arenas} "
              f"({plan.activation_nbytes / 2**20:.1f} MiB of activations each)", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=["mobilenetv2", "dynamic", "mlp"])
    ap.add_argument("--threads", nargs="+", type=int, default=[1, 2, 4])
    ap.add_argument("--seconds", type=float, default=3.0, help="per arrangement and thread count")
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds the seconds are split into")
    ap.add_argument("--numba-threads", type=int, default=None)
    ap.add_argument("--json", default=None, help="write the rows to this file")
    args = ap.parse_args()
    import numba
    print(f"cpus: {os.cpu_count()}, numba threads per forward: {args.numba_threads or numba.get_num_threads()}, "
          f"numba layer: {os.environ.get('NUMBA_THREADING_LAYER', 'default')}", flush=True)
    rows = []
    for name in args.models:
        rows += bench(name, args.threads, args.seconds, args.numba_threads, args.rounds)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
