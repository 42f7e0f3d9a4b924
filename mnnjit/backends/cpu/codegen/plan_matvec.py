"""Matrix-vector products in the whole-plan kernel (:mod:`.whole_plan`): a recurrent cell's
``W @ h`` at every time step (MNN's converter writes an LSTM's hidden projection as a
``matmul_ex`` of a ``[4H, H]`` matrix and an ``[H]`` vector).

:func:`matvec` writes ``out[j] = act(bias[j] + sum_k v[k] * M[k, j])`` with a constant matrix
laid out once as ``[k, n]`` rows in the blob (one slice for every time step: the writer's keyed
constants), so the loop over ``j`` runs over contiguous weights and outputs in vector registers;
eight products of ``k`` per pass over the outputs (each output loaded and stored once per eight
weight rows: the pass is bound by the weights' loads). A computed matrix is read in place.
"""
from __future__ import annotations

from typing import Any

import numpy as np

F32 = np.dtype(np.float32)

#: Rows of ``M`` (values of ``k``) per pass over the outputs.
K_BLOCK = 8

#: Largest matrix (elements) written this way: the kernel's loops are for small models.
MAX_ELEMENTS = 1 << 21

_NAN_SAFE = {
    "relu": "{0} if not ({0} < np.float32(0)) else np.float32(0)",
    "relu6": "({0} if not ({0} < np.float32(0)) else np.float32(0)) if not ({0} > np.float32(6)) else np.float32(6)",
}


def matvec(w: Any, node: Any, ins: tuple, out: int) -> bool:
    """Write ``matmul_ex`` of a matrix and a vector (either order) as loops on the plan kernel's
    writer ``w`` and return True, or return False for any other product."""
    a, b = node.inputs[0], node.inputs[1]
    if len(node.shape) != 1:
        return False
    attrs = node.attrs
    act = attrs.get("act", "")
    if act not in ("", "relu", "relu6"):
        return False
    ta, tb = bool(attrs.get("transpose_a")), bool(attrs.get("transpose_b"))
    if len(a.shape) == 2 and len(b.shape) == 1:
        # out[j] = sum_k A[j, k] v[k]: A is stored [n, k], or [k, n] when transposed
        mat, mslot, vslot, kn = a, ins[0], ins[1], ta
    elif len(a.shape) == 1 and len(b.shape) == 2:
        # out[j] = sum_k v[k] B[k, j]: B is stored [k, n], or [n, k] when transposed
        mat, mslot, vslot, kn = b, ins[1], ins[0], not tb
    else:
        return False
    n, k = int(node.shape[0]), int(node.inputs[1 if mat is a else 0].shape[0])
    if n == 0 or k == 0 or int(mat.size) != n * k or n * k > MAX_ELEMENTS:
        return False
    bias_at = None
    if len(node.inputs) > 2:
        bias = node.inputs[2]
        if bias.dtype != F32 or tuple(bias.shape) not in ((), (1,), (n,)):
            return False
        bn = w.value(ins[2])
        bias_at = (lambda j: f"{bn}[0]") if int(bias.size) == 1 else (lambda j: f"{bn}[{j}]")
    vn = w.value(vslot)
    weights = w.init[mslot]
    if weights is not None:
        mn = w.const(np.asarray(weights) if kn else np.asarray(weights).T, key=("matvec", mslot, kn))
        kn = True
    else:
        mn = w.value(mslot)
    o = w.fresh(out, n)
    j, kk = w.idx(), w.idx()

    def m_at(kx: str) -> str:
        return f"{mn}[({kx}) * {n} + {j}]" if kn else f"{mn}[{j} * {k} + {kx}]"
    w.emit(f"for {j} in range({n}):")
    w.emit(f"{o}[{j}] = {bias_at(j) if bias_at else 'np.float32(0)'}", 1)
    kb = k - k % K_BLOCK
    if kb:
        w.emit(f"for {kk} in range(0, {kb}, {K_BLOCK}):")
        for u in range(K_BLOCK):
            w.emit(f"s{u} = {vn}[{kk} + {u}]", 1)
        w.emit(f"for {j} in range({n}):", 1)
        terms = " + ".join(f"s{u} * {m_at(f'{kk} + {u}')}" for u in range(K_BLOCK))
        w.emit(f"{o}[{j}] = {o}[{j}] + ({terms})", 2)
    if kb < k:
        w.emit(f"for {kk} in range({kb}, {k}):")
        w.emit(f"s0 = {vn}[{kk}]", 1)
        w.emit(f"for {j} in range({n}):", 1)
        w.emit(f"{o}[{j}] += s0 * {m_at(kk)}", 2)
    if act:
        w.emit(f"for {j} in range({n}):")
        w.emit(f"t = {o}[{j}]", 1)
        w.emit(f"{o}[{j}] = {_NAN_SAFE[act].format('t')}", 1)
    return True
