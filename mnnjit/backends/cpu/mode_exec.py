"""Run a model's execution plan in precision=low (fp16 storage) and/or memory=low (quantized
weights kept as codes) with the kernels of :mod:`.fp16_kernels` and :mod:`.quant`.

:class:`ModePlan` wraps an :class:`mnnjit.models.program.ExecutionPlan`: it walks the plan's
graph once and turns each node into a step:

* ``conv2d`` with constant weights -> :func:`fp16_kernels.conv2d` on a weight source kept in the
  mode's memory form (fp16 rows, int8/int4 codes, or fp32), depthwise -> the depthwise kernel;
* ``add`` of two same-shape float tensors, ``relu``/``relu6``/``sigmoid``/``tanh`` ->
  the elementwise kernels; global ``pool2d`` -> the global pooling kernel;
* ``matmul_ex`` with a constant weight (a classifier) -> the GEMM on fp16 rows
  (precision=low) or codes (memory=low, quantized op);
* anything else -> the op's numpy reference on float32 (fp16 inputs widened first).

Activations between kernel steps stay in the mode's storage dtype; the outputs are float32.
With memory=low the float copies of quantized weights are released after the plan is built
(they were decoded once while the model was translated), so the process keeps only codes.

This module imports numba (through the kernels): import it lazily.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import numpy as np

from ...graph import Node, topo_order
from ...ops import registry
from ...precision import Modes, activation_dtype, weight_storage
from . import fp16_kernels as K
from .fp16 import to_f16, to_f32
from .quant import QuantRows

__all__ = ["ModePlan", "quantized_consts"]

_ACTS = {"relu": "relu", "relu6": "relu6", "sigmoid": "sigmoid", "tanh": "tanh"}


def quantized_consts(program: Any) -> Dict[int, tuple]:
    """id(const node) -> (QuantizedWeight, layout) for the conv/FC weights of ``program`` whose
    op stores 8-bit-or-narrower codes; layout ``"oihw"`` (conv weight) or ``"t"`` (the
    transposed [C, O] weight of a 1x1 conv turned into a matrix product)."""
    from ...format import quantized_weight
    ops = {id(op): op for op in program.net.oplists}
    out: Dict[int, tuple] = {}
    for key, val in program.weight_cache.items():
        if not (isinstance(key, tuple) and len(key) == 2 and key[1] in ("wnode", "wt")):
            continue
        op = ops.get(key[0])
        main = getattr(op, "main", None) or {}
        quan = main.get("quanParameter") if isinstance(main, dict) else None
        w = main.get("weight") if isinstance(main, dict) else None
        if quan is None or (w is not None and len(w)) or quan.get("index") is not None \
                or int(quan.get("type") or 0) not in (1, 2, 4):
            continue
        qw = quantized_weight(quan, f"op {op.name!r}")
        if qw.bits > 8 or not isinstance(val, Node):
            continue
        out[id(val)] = (qw, "oihw" if key[1] == "wnode" else "t", key[0])
    return out


class ModePlan:
    """An execution plan re-targeted to ``modes`` (see the module docstring)."""

    def __init__(self, plan: Any, modes: Modes) -> None:
        self.modes = modes
        self.out_fmts = list(plan.out_fmts)
        self.placeholders = plan.placeholders
        self.dtype = activation_dtype(modes)
        qconsts = quantized_consts(plan.program) if modes.keep_quantized else {}
        order = topo_order(plan.outputs, stop_at_values=False)
        slot = {id(n): k for k, n in enumerate(order)}
        self.init: List[Optional[np.ndarray]] = [None] * len(order)
        self.feed_slots = [slot.get(id(p)) for p in plan.placeholders]
        self.steps: List[tuple] = []
        self.weights: List[Any] = []
        used_q = set()
        skip_init = set()
        for k, n in enumerate(order):
            if n.op == "const":
                self.init[k] = n.value
            elif n.op != "placeholder":
                step = self._special(n, slot, qconsts, used_q, skip_init)
                if step is None:
                    ref = registry.get(n.op).ref
                    step = ("ref", ref, n.attrs, tuple(slot[id(i)] for i in n.inputs), n.dtype,
                            n.shape)
                self.steps.append(step + (k,))
        for k in skip_init:
            self.init[k] = None                   # float copies of quantized weights: not kept
        self.out_slots = [slot[id(o)] for o in plan.outputs]
        self.out_shapes = [o.shape for o in plan.outputs]
        if used_q:
            for key in [key for key in plan.program.weight_cache if key[0] in used_q]:
                del plan.program.weight_cache[key]

    # ------------------------------------------------------------------ building
    def _special(self, n: Node, slot, qconsts, used_q, skip_init) -> Optional[tuple]:
        ins = n.inputs
        if n.dtype != np.float32:
            return None
        if n.op == "conv2d" and len(ins) in (2, 3) and ins[1].op == "const" and \
                (len(ins) == 2 or ins[2].op == "const") and len(n.shape) == 4:
            w_node = ins[1]
            O, cg, kh, kw = w_node.shape
            C = ins[0].shape[1]
            g = int(n.attrs.get("group", 1))
            # writable copy: a read-only constant would be copied by the kernel wrapper per call
            bias = None if len(ins) == 2 else np.array(ins[2].value, np.float32)
            q = qconsts.get(id(w_node))
            if q is not None:
                qw, _, opid = q
                used_q.add(opid)
                skip_init.add(slot[id(w_node)])
                src = QuantRows.from_quantized(qw, (O, cg * kh * kw))
            else:
                src = weight_storage(self.modes, w_node.value, (O, cg * kh * kw))
            self.weights.append(src)
            a = n.attrs
            if g == C == O and cg == 1:
                dw = src.dense() if not isinstance(src, np.ndarray) else src
                return ("dw", np.ascontiguousarray(dw.reshape(O, kh * kw), np.float32), bias,
                        (kh, kw), a["stride"], a["pads"], a["dilation"], a.get("act", ""),
                        slot[id(ins[0])])
            return ("conv", src, bias, (kh, kw), a["stride"], a["pads"], a["dilation"], g,
                    a.get("act", ""), slot[id(ins[0])])
        if n.op == "add" and len(ins) == 2 and ins[0].shape == ins[1].shape == n.shape and \
                ins[0].dtype == ins[1].dtype == np.float32:
            return ("add", slot[id(ins[0])], slot[id(ins[1])])
        if n.op in _ACTS and ins[0].dtype == np.float32:
            return ("act", _ACTS[n.op], slot[id(ins[0])])
        if n.op == "pool2d" and len(n.shape) == 4 and n.shape[2:] == (1, 1) and \
                tuple(n.attrs["kernel"]) == tuple(ins[0].shape[2:]) and \
                not any(n.attrs["pads"]) and n.attrs["kind"] == "avg":
            return ("gap", slot[id(ins[0])])
        if n.op == "matmul_ex" and len(ins) in (2, 3) and ins[1].op == "const" and \
                not n.attrs.get("transpose_a") and not n.attrs.get("transpose_b") and \
                len(ins[0].shape) == 2 and len(ins[1].shape) == 2 and \
                (len(ins) == 2 or ins[2].op == "const"):
            # a classifier: [N, C] @ W^T with W [O, C] kept in the mode's memory form
            C, O = ins[1].shape
            q = qconsts.get(id(ins[1]))
            if q is not None and q[1] == "t":
                used_q.add(q[2])
                skip_init.add(slot[id(ins[1])])
                src = QuantRows.from_quantized(q[0], (O, C))
            elif self.modes.fp16:
                src = weight_storage(self.modes, np.ascontiguousarray(ins[1].value.T), (O, C))
                skip_init.add(slot[id(ins[1])])
            else:
                return None
            self.weights.append(src)
            bias = None if len(ins) == 2 else np.asarray(ins[2].value, np.float32)
            if bias is not None and bias.size != O:
                return None
            return ("fc", src, bias, n.attrs.get("act", ""), slot[id(ins[0])])
        return None

    @property
    def weight_nbytes(self) -> int:
        """Bytes of the weights the plan's GEMM/conv steps keep."""
        return sum(int(w.nbytes) for w in self.weights)

    # ------------------------------------------------------------------ running
    def _st(self, v: np.ndarray) -> np.ndarray:
        if self.dtype == np.float16 and v.dtype == np.float32:
            return to_f16(v)
        return v

    def run(self, arrays: List[np.ndarray]) -> List[np.ndarray]:
        """Evaluate on input arrays; float32 outputs."""
        vals = list(self.init)
        for s, a in zip(self.feed_slots, arrays):
            if s is not None:
                vals[s] = a
        with np.errstate(all="ignore"):
            for st in self.steps:
                kind, out = st[0], st[-1]
                if kind == "conv":
                    _, src, bias, k, s, p, d, g, act, i, _o = st
                    vals[out] = K.conv2d(self._st(vals[i]), src, bias, k, s, p, d, g, act)
                elif kind == "dw":
                    _, w, bias, k, s, p, d, act, i, _o = st
                    vals[out] = K.depthwise_conv2d(self._st(vals[i]), w, bias, k, s, p, d, act)
                elif kind == "add":
                    a, b = self._st(vals[st[1]]), self._st(vals[st[2]])
                    vals[out] = K.add(a, b)
                elif kind == "act":
                    vals[out] = K.activation(self._st(vals[st[2]]), st[1])
                elif kind == "gap":
                    vals[out] = K.global_avg_pool(self._st(vals[st[1]]))
                elif kind == "fc":
                    _, src, bias, act, i, _o = st
                    a = _f32(vals[i])
                    y = src.matmul(np.ascontiguousarray(a.T)).T
                    if bias is not None:
                        y = y + bias.reshape(-1)
                    if act:
                        y = K.activation(np.ascontiguousarray(y, np.float32), act)
                    vals[out] = np.ascontiguousarray(y, np.float32)
                else:
                    _, ref, attrs, ins, dt, shape, _o = st
                    v = ref([_f32(vals[j]) for j in ins], attrs)
                    if dt is not None:
                        v = np.asarray(v)
                        if v.dtype != dt:
                            v = v.astype(dt)
                        if v.shape != shape:
                            v = v.reshape(shape)
                    vals[out] = v
        #: bytes of every intermediate this forward produced (float16 under precision=low)
        self.last_activation_nbytes = sum(vals[st[-1]].nbytes for st in self.steps
                                          if isinstance(vals[st[-1]], np.ndarray))
        outs = []
        for s, shape in zip(self.out_slots, self.out_shapes):
            v = _f32(vals[s])
            outs.append(v.reshape(shape) if v.shape != shape else v)
        return outs


def _f32(v):
    if isinstance(v, np.ndarray) and v.dtype == np.float16:
        return to_f32(v)
    return v
