"""ONNX LSTM, GRU and RNN as MNN While loops (one per direction), as real MNN's converter writes them.

The input projection of every time step is one 1x1 convolution over the whole sequence
(``G = X W^T + b``, [T, N, gates]); the loop body takes step ``i``'s row of ``G``, adds the
recurrent projection (another 1x1 convolution, so weight quantization covers both) and updates the
state. The While op is in ONNX's Loop form: inputs (T, 1, G, states...), body outputs
(condition, G, new states..., the step's hidden state as a scan output). A reverse direction runs
on the time-reversed sequence and reverses its outputs back.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..format import SubGraph
from .builder import GraphBuilder, Val
from .core import GraphConverter, attrs_of, handler
from .ops_nn import _linear, linear_rows


def _name(node) -> str:
    return node.output[0] or node.name


def _check_attrs(cv: GraphConverter, node, defaults: list) -> dict:
    at = attrs_of(node)
    acts = [a.decode() if isinstance(a, bytes) else a for a in at.get("activations", [])]
    ndir = 2 if _direction(at) == "bidirectional" else 1
    if acts and [a.lower() for a in acts] != [d.lower() for d in defaults * ndir]:
        raise cv.unsupported(f"activations {acts}")
    if "clip" in at:
        raise cv.unsupported("cell clipping")
    if int(at.get("input_forget", 0)):
        raise cv.unsupported("input_forget=1")
    return at


def _direction(at: dict) -> str:
    d = at.get("direction", b"forward")
    return d.decode() if isinstance(d, bytes) else d


def _const(cv: GraphConverter, v: Val | None, what: str):
    if v is None:
        return None
    if v.const is None:
        raise cv.unsupported(f"{what} computed at run time")
    return v.const.astype(np.float32)


def _check_seq_lens(cv: GraphConverter, v: Val | None, x: Val) -> None:
    if v is None:
        return
    t = x.dim(0)
    if v.const is None or t is None or not (v.const == t).all():
        raise cv.unsupported("sequence_lens shorter than the sequence")


Body = Callable[[GraphBuilder, int, list], list]


def _run_loop(cv: GraphConverter, name: str, gates: int, states: list, n_gates: int, body: Body) -> list:
    """Write a While over the rows of ``gates`` ([T, N, n_gates]); ``body(b, g_t, state tensors)``
    returns the new state tensors (the first is the step's output). Returns (final states..., the
    stacked step outputs [T, N, H])."""
    b = GraphBuilder()
    i = b.op1("Input", [], "Input", {"dtype": "DT_INT32", "dformat": "NCHW"}, "i")
    cond = b.op1("Input", [], "Input", {"dtype": "DT_INT32", "dformat": "NCHW"}, "cond")
    g = b.op1("Input", [], "Input", {"dims": np.asarray([-1, -1, n_gates], np.int32), "dtype": "DT_FLOAT",
                                      "dformat": "NCHW"}, "gates")
    st = [b.op1("Input", [], "Input", {"dtype": "DT_FLOAT", "dformat": "NCHW"}, f"state{k}")
          for k in range(len(states))]
    g_t = b.gather(g, i, 0, "gates_t")
    new = body(b, g_t, st)
    cond_out = b.scalar(1, np.int32, "cond_out")
    step_out = b.identity(new[0], "step_out")
    sub = SubGraph(name=cv.root.subgraph_name(name.replace("/", "_") + "_loop"), tensors=b.names, nodes=b.ops,
                   inputs=[i, cond, g] + st, outputs=[cond_out, g] + new + [step_out])
    cv.root.subgraphs.append(sub)
    trip = cv.b.gather(cv.b.shape_of(gates), cv.b.scalar(0, np.int32), 0)
    outs = cv.b.op("While", [trip, cv.b.scalar(1, np.int32), gates] + states, "WhileParam",
                   {"body_graph": sub.name}, f"{name}__loop", n_out=2 + len(states))
    return outs[1:]


def _zeros_state(cv: GraphConverter, x: Val, x_t: int, hidden: int) -> int:
    """Zeros [N, hidden] for a sequence [T, N, ...] (N known or read at run time)."""
    n = x.dim(1)
    if n is not None:
        return cv.b.const(np.zeros((n, hidden), np.float32))
    n_t = cv.b.slice1(cv.b.shape_of(x_t), 1, 2, 0)
    return cv.b.op1("Fill", [cv.b.concat([n_t, cv.b.ints([hidden])], 0), cv.b.scalar(0.0)], None, None)


def _rnn_common(cv: GraphConverter, node, ins, kind: str, n_gates: int, defaults: list):
    """Shared driver: per direction, project the inputs, run the loop, assemble Y / Y_h (/ Y_c)."""
    at = _check_attrs(cv, node, defaults)
    hidden = int(at["hidden_size"])
    direction = _direction(at)
    dirs = ["forward", "reverse"] if direction == "bidirectional" else [direction]
    x = ins[0]
    layout = int(at.get("layout", 0))
    w = _const(cv, ins[1], f"{kind} weights")
    r = _const(cv, ins[2], f"{kind} recurrent weights")
    bias = _const(cv, ins[3] if len(ins) > 3 else None, f"{kind} bias")
    if bias is None:
        bias = np.zeros((len(dirs), 2 * n_gates * hidden), np.float32)
    _check_seq_lens(cv, ins[4] if len(ins) > 4 else None, x)
    h0 = ins[5] if len(ins) > 5 else None
    c0 = ins[6] if len(ins) > 6 else None
    if len(ins) > 7 and ins[7] is not None:
        raise cv.unsupported("peephole weights")
    name = _name(node)
    xt = cv.idx(x)
    if layout:
        xt = cv.b.permute(xt, [1, 0, 2])
        x = Val(index=xt, shape=None if x.shape is None else (x.shape[1], x.shape[0], x.shape[2]))
        if h0 is not None:
            h0 = Val(index=cv.b.permute(cv.idx(h0), [1, 0, 2]))
        if c0 is not None:
            c0 = Val(index=cv.b.permute(cv.idx(c0), [1, 0, 2]))
    ys, hs, cs = [], [], []
    for d, dname in enumerate(dirs):
        xs = xt if dname == "forward" else cv.b.op1("Reverse", [xt, cv.b.scalar(0, np.int32)], None, None)
        wd, rd = w[d], r[d]
        wb, rb = bias[d][:n_gates * hidden], bias[d][n_gates * hidden:]
        if kind == "GRU":
            in_bias = wb + np.concatenate([rb[:2 * hidden], np.zeros(hidden, np.float32)])
        else:
            in_bias = wb + rb
        gates = _linear(cv, Val(index=xs, shape=x.shape), wd, in_bias, f"{name}__x{d}").index
        h_init = cv.b.gather(cv.idx(h0), cv.b.scalar(d, np.int32), 0) if h0 is not None else \
            _zeros_state(cv, x, xt, hidden)
        states = [h_init]
        if kind == "LSTM":
            c_init = cv.b.gather(cv.idx(c0), cv.b.scalar(d, np.int32), 0) if c0 is not None else \
                _zeros_state(cv, x, xt, hidden)
            states.append(c_init)
        body = _BODIES[kind](hidden, rd, rb, int(at.get("linear_before_reset", 0)),
                             (at.get("activations") or [None] * 2 * len(dirs)))
        outs = _run_loop(cv, f"{name}_{dname}", gates, states, n_gates * hidden, body)
        seq = outs[-1]
        if dname == "reverse":
            seq = cv.b.op1("Reverse", [seq, cv.b.scalar(0, np.int32)], None, None)
        ys.append(cv.b.unsqueeze(seq, [1]))
        hs.append(cv.b.unsqueeze(outs[0], [0]))
        if kind == "LSTM":
            cs.append(cv.b.unsqueeze(outs[1], [0]))
    y = ys[0] if len(ys) == 1 else cv.b.concat(ys, 1)
    yh = hs[0] if len(hs) == 1 else cv.b.concat(hs, 0)
    yc = (cs[0] if len(cs) == 1 else cv.b.concat(cs, 0)) if cs else None
    if layout:
        y = cv.b.permute(y, [2, 0, 1, 3])
        yh = cv.b.permute(yh, [1, 0, 2])
        yc = None if yc is None else cv.b.permute(yc, [1, 0, 2])
    res = [cv.out(y), cv.out(yh)]
    if kind == "LSTM":
        res.append(cv.out(yc))
    return res


def _lstm_body(hidden: int, r: np.ndarray, rb: np.ndarray, lbr: int, acts) -> Body:
    """ONNX LSTM step (gates i, o, f, c)."""
    def body(b: GraphBuilder, g_t: int, st: list) -> list:
        h, c = st
        s = b.binary("ADD", g_t, linear_rows(b, h, r, np.zeros(4 * hidden, np.float32), "rec"))
        gi, go, gf, gc = b.op("Slice", [s], "Slice", {"axis": 1, "slicePoints": np.asarray([hidden] * 4, np.int32),
                                                      "sourceType": "TORCH"}, "gates_split", n_out=4)
        i_, o_, f_ = (b.unary("SIGMOID", t) for t in (gi, go, gf))
        c_new = b.binary("ADD", b.binary("MUL", f_, c), b.binary("MUL", i_, b.unary("TANH", gc)), "c_next")
        h_new = b.binary("MUL", o_, b.unary("TANH", c_new), "h_next")
        return [h_new, c_new]
    return body


def _gru_body(hidden: int, r: np.ndarray, rb: np.ndarray, lbr: int, acts) -> Body:
    """ONNX GRU step (gates z, r, h; linear_before_reset 0 or 1)."""
    def body(b: GraphBuilder, g_t: int, st: list) -> list:
        (h,) = st
        gz, gr, gh = b.op("Slice", [g_t], "Slice", {"axis": 1, "slicePoints": np.asarray([hidden] * 3, np.int32),
                                                    "sourceType": "TORCH"}, "gates_split", n_out=3)
        if lbr:
            rec = linear_rows(b, h, r, np.concatenate([np.zeros(2 * hidden, np.float32), rb[2 * hidden:]]), "rec")
            rz, rr, rh = b.op("Slice", [rec], "Slice", {"axis": 1, "slicePoints": np.asarray(
                [hidden] * 3, np.int32), "sourceType": "TORCH"}, "rec_split", n_out=3)
            z = b.unary("SIGMOID", b.binary("ADD", gz, rz))
            rg = b.unary("SIGMOID", b.binary("ADD", gr, rr))
            hh = b.unary("TANH", b.binary("ADD", gh, b.binary("MUL", rg, rh)))
        else:
            rec = linear_rows(b, h, r[:2 * hidden], np.zeros(2 * hidden, np.float32), "rec")
            rz, rr = b.op("Slice", [rec], "Slice", {"axis": 1, "slicePoints": np.asarray([hidden] * 2, np.int32),
                                                    "sourceType": "TORCH"}, "rec_split", n_out=2)
            z = b.unary("SIGMOID", b.binary("ADD", gz, rz))
            rg = b.unary("SIGMOID", b.binary("ADD", gr, rr))
            rh = linear_rows(b, b.binary("MUL", rg, h), r[2 * hidden:], rb[2 * hidden:], "rec_h")
            hh = b.unary("TANH", b.binary("ADD", gh, rh))
        h_new = b.binary("ADD", hh, b.binary("MUL", z, b.binary("SUB", h, hh)), "h_next")
        return [h_new]
    return body


def _rnn_body(hidden: int, r: np.ndarray, rb: np.ndarray, lbr: int, acts) -> Body:
    """ONNX RNN step (tanh, relu or sigmoid)."""
    act = (acts[0].decode() if isinstance(acts[0], bytes) else acts[0]) if acts and acts[0] else "Tanh"

    def body(b: GraphBuilder, g_t: int, st: list) -> list:
        (h,) = st
        s = b.binary("ADD", g_t, linear_rows(b, h, r, np.zeros(hidden, np.float32), "rec"))
        if act.lower() == "relu":
            return [b.op1("ReLU", [s], "Relu", {}, "h_next")]
        return [b.unary("SIGMOID" if act.lower() == "sigmoid" else "TANH", s, "h_next")]
    return body


_BODIES = {"LSTM": _lstm_body, "GRU": _gru_body, "RNN": _rnn_body}


@handler("LSTM")
def lstm(cv: GraphConverter, node, ins):
    """ONNX LSTM (forward, reverse or bidirectional; default activations, no peepholes)."""
    return _rnn_common(cv, node, ins, "LSTM", 4, ["Sigmoid", "Tanh", "Tanh"])


@handler("GRU")
def gru(cv: GraphConverter, node, ins):
    """ONNX GRU (default activations)."""
    return _rnn_common(cv, node, ins, "GRU", 3, ["Sigmoid", "Tanh"])


@handler("RNN")
def rnn(cv: GraphConverter, node, ins):
    """ONNX RNN (one activation: Tanh, Relu or Sigmoid)."""
    at = attrs_of(node)
    acts = [a.decode() if isinstance(a, bytes) else a for a in at.get("activations", [])]
    if acts and acts[0].lower() not in ("tanh", "relu", "sigmoid") or len(set(a.lower() for a in acts)) > 1:
        raise cv.unsupported(f"activations {acts}")
    return _rnn_common(cv, node, ins, "RNN", 1, acts[:1] or ["Tanh"])
