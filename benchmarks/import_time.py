"""How much `import mnnjit, mnnjit.numpy, mnnjit.cv, mnnjit.expr, mnnjit.nn` costs over `import numpy`.

Each measurement runs in a fresh interpreter (median of N runs), after one untimed run that writes the
bytecode caches (as any installed package has them; PYTHONDONTWRITEBYTECODE is dropped for the children,
otherwise every run would time compiling the sources). Budget: at most 150 ms more than numpy.
Run: python benchmarks/import_time.py [--runs 7]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def time_import(statement: str, runs: int) -> float:
    """Median wall time (s) of a fresh `python -c statement` (after one untimed warm-up run)."""
    subprocess.run([sys.executable, "-c", statement], check=True, cwd=ROOT, env=CHILD_ENV)
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", statement], check=True, cwd=ROOT, env=CHILD_ENV)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def main() -> None:
    """Print numpy's import time, mnnjit's, and the difference."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    base = time_import("import numpy", args.runs)
    ours = time_import("import mnnjit, mnnjit.numpy, mnnjit.cv, mnnjit.expr, mnnjit.nn", args.runs)
    heavy = subprocess.run([sys.executable, "-c", "import sys, mnnjit, mnnjit.numpy, mnnjit.cv, mnnjit.expr, "
                            "mnnjit.nn; print(sorted(m for m in ('numba', 'cv2', 'onnx', 'pyopencl', 'llvmlite') "
                            "if m in sys.modules))"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    print(f"import numpy:                 {base * 1e3:7.1f} ms")
    print(f"import mnnjit (all fronts):   {ours * 1e3:7.1f} ms")
    print(f"difference:                   {(ours - base) * 1e3:7.1f} ms  (budget 150 ms)")
    print(f"heavy modules imported:       {heavy}")


if __name__ == "__main__":
    main()
