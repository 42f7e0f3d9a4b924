"""Recurrent ops: ``rnn_tanh``, the ONNX-layout simple RNN that MNN's ``RNN`` op computes.

Conventions in docs/NN_OPS.md. Inputs (float32):

* ``x`` [T, B, I] (time major), ``w`` [D, H, I], ``r`` [D, H, H], ``b`` [D, H] (ONNX's Wb + Rb, already
  summed), optionally ``h0`` [D, B, H] (zeros when absent); D = 1 (forward) or 2 (forward, backward).

Outputs: ``y`` [T, D, B, H] (every hidden state) and ``y_h`` [D, B, H] (the last one of each direction:
step T-1 forward, step 0 backward). Per direction d, ``h_t = tanh(x_t w[d]^T + h_{t-1} r[d]^T + b[d])``,
the backward direction walking t = T-1 .. 0. Always tanh and always the full T steps: MNN's op keeps
neither ONNX's activations nor its sequence lengths.
"""
from __future__ import annotations

import numpy as np

from .._dtypes import F32
from .registry import OpDef, register


def rnn_shapes(x: tuple, w: tuple, r: tuple, b: tuple, h0: tuple | None) -> tuple[int, int, int, int]:
    """(T, B, D, H) of an ``rnn_tanh`` with these input shapes; ValueError naming a mismatch."""
    if len(x) != 3 or len(w) != 3 or len(r) != 3:
        raise ValueError(f"rnn_tanh: x, w and r must be 3-D, got shapes {list(x)}, {list(w)}, {list(r)}")
    t, batch, inp = x
    d, h, w_in = w
    if d not in (1, 2):
        raise ValueError(f"rnn_tanh: {d} directions (weights of shape {list(w)}); 1 or 2 are possible")
    if w_in != inp:
        raise ValueError(f"rnn_tanh: input size {inp} (x of shape {list(x)}) does not match w of shape {list(w)}")
    if tuple(r) != (d, h, h):
        raise ValueError(f"rnn_tanh: r has shape {list(r)}, expected {[d, h, h]}")
    if tuple(b) != (d, h):
        raise ValueError(f"rnn_tanh: b has shape {list(b)}, expected {[d, h]}")
    if h0 is not None and tuple(h0) != (d, batch, h):
        raise ValueError(f"rnn_tanh: the initial hidden state has shape {list(h0)}, expected {[d, batch, h]}")
    return t, batch, d, h


def _rnn_infer(inputs, attrs):
    if len(inputs) not in (4, 5):
        raise ValueError(f"rnn_tanh takes 4 or 5 inputs (x, w, r, b[, h0]), got {len(inputs)}")
    for n in inputs:
        if n.dtype != F32:
            raise ValueError(f"rnn_tanh: inputs must be float32, got {n.dtype}")
    h0 = inputs[4].shape if len(inputs) == 5 else None
    t, batch, d, h = rnn_shapes(*(n.shape for n in inputs[:4]), h0)
    return [((t, d, batch, h), F32), ((d, batch, h), F32)]


def _rnn_ref(xs, attrs):
    x, w, r, b = (np.asarray(a, F32) for a in xs[:4])
    t, batch, d, h = rnn_shapes(x.shape, w.shape, r.shape, b.shape, xs[4].shape if len(xs) == 5 else None)
    y = np.empty((t, d, batch, h), F32)
    for k in range(d):
        # the input part of every step at once: [T, B, H]
        gates = np.matmul(x, w[k].T) + b[k]
        state = np.asarray(xs[4][k], F32) if len(xs) == 5 else np.zeros((batch, h), F32)
        steps = range(t) if k == 0 else range(t - 1, -1, -1)
        rt = np.ascontiguousarray(r[k].T)
        for i in steps:
            state = np.tanh(gates[i] + state @ rt)
            y[i, k] = state
    last = np.empty((d, batch, h), F32)
    if t:
        last[0] = y[t - 1, 0]
        if d == 2:
            last[1] = y[0, 1]
    else:  # no steps: the initial state
        last[...] = np.asarray(xs[4], F32) if len(xs) == 5 else 0
    return y, last


register(OpDef("rnn_tanh", "opaque", _rnn_infer, _rnn_ref, mnn_type="RNN", n_out=2,
               doc="simple tanh RNN (ONNX layout, MNN's RNN op): (y [T,D,B,H], y_h [D,B,H])"))
