"""A kernel-step plan's arenas (activation buffers per concurrent forward), and Numba's workqueue
threading layer (which kills the process on concurrent parallel launches) behind launch_guard."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import numpy as np

from threads_helpers import case_arrays, forward, load


def _netplan():
    mod = load("dynamic")
    cases = case_arrays("dynamic")
    x = next(c for c in cases if c[0].shape[0] == 2)    # the [2, 3, 48, 64] cases: kernel steps
    want = forward(mod, x)
    plan = mod._last_plan
    assert type(plan).__name__ == "NetPlan"
    return mod, plan, x, want


def test_arenas_are_disjoint_and_made_on_demand():
    mod, plan, x, want = _netplan()
    assert plan.n_arenas == 1
    a = plan._take()
    b = plan._take()            # the first is busy: a second one
    assert a is not b and plan.n_arenas == 2
    assert not any(np.shares_memory(p, q) for p in a.raw for q in b.raw)
    c = plan._take()            # both busy: a third
    # a forward while all three are held runs on a fourth, and gives the same numbers
    np.testing.assert_array_equal(forward(mod, x)[0], want[0])
    for arena in (a, b, c):
        plan._give(arena)
    assert plan.n_arenas == 4
    np.testing.assert_array_equal(forward(mod, x)[0], want[0])   # on a reused arena


def test_max_arenas_makes_forwards_wait():
    mod, plan, x, want = _netplan()
    plan.max_arenas = 1
    held = plan._take()
    done = threading.Event()
    out = []

    def other():
        out.append(forward(mod, x))
        done.set()

    th = threading.Thread(target=other, daemon=True)
    th.start()
    assert not done.wait(0.3), "a forward ran although the only arena was taken"
    plan._give(held)
    assert done.wait(60)
    th.join()
    assert plan.n_arenas == 1
    np.testing.assert_array_equal(out[0][0], want[0])


def test_workqueue_layer_takes_turns_instead_of_aborting(tmp_path):
    """On Numba's workqueue layer, concurrent forwards (kernel steps and compiled graphs) would
    abort the process; launch_guard serialises them."""
    code = textwrap.dedent("""
        import sys
        sys.path[:0] = [sys.argv[1], sys.argv[2]]
        import numpy as np
        from mnnjit.concurrency import serial_launches
        from threads_helpers import case_arrays, forward, load, run_together
        assert serial_launches()
        for name in ("dynamic", "convbn"):
            mod, cases = load(name), case_arrays(name)
            refs = [forward(mod, c) for c in cases]
            outs = run_together(4, lambda t: [(k, forward(mod, cases[k]))
                                              for k in [(t + i) % len(cases) for i in range(3)]])
            for runs in outs:
                for k, got in runs:
                    assert all(np.array_equal(g, w) for g, w in zip(got, refs[k])), name
        import numba
        print("layer", numba.threading_layer())
    """)
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, NUMBA_THREADING_LAYER="workqueue", MNNJIT_PLAN_KERNEL_CALLS="off")
    res = subprocess.run([sys.executable, "-c", code, here, os.path.dirname(here)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "layer workqueue" in res.stdout


def test_graph_plans_run_on_copies_when_busy():
    """A plan on the graph path (placeholders and values cached on nodes): a forward while its
    graph is in use runs on a copy with placeholders of its own, sharing the constants."""
    mod = load("convbn")
    x = case_arrays("convbn")[0]
    want = forward(mod, x)
    plan = mod._last_plan
    assert type(plan).__name__ == "ExecutionPlan" and not plan.lean
    busy = plan._graphs.pop()           # as if another thread were running on it
    np.testing.assert_array_equal(forward(mod, x)[0], want[0])
    (copy,) = plan._graphs
    assert copy is not busy
    assert not {id(p) for p in copy.placeholders} & {id(p) for p in busy.placeholders}
    from mnnjit.graph import topo_order
    consts = lambda g: {id(n) for n in topo_order(g.outputs, stop_at_values=False) if n.op == "const"}  # noqa: E731
    assert consts(copy) == consts(busy)                 # weights shared
    assert all(p._value is None for p in copy.placeholders)   # the input is not kept
    plan._graphs.append(busy)
    np.testing.assert_array_equal(forward(mod, x)[0], want[0])
