"""The convolutions a CPU graph lowering prepares, and the rules deciding which chains fuse.

:class:`ConvKernels` is the CPU's answer to ``Backend.fusion_rules``: for one lowering (modes, thread
count) it prepares each constant-weight convolution once - a :class:`.depthwise.planes.Depthwise`, a
:class:`Winograd` when :func:`.gemm.winograd.choose` says it is fastest, else a
:class:`.gemm.conv.ConvGemm` (weights packed as float32 panels, or int8/4-bit codes under memory=low) -
and accepts a fusion pattern of ``compiler/fuse_blocks.py`` when the fused kernel takes those layers:

* ``expand_dw``: a direct 1x1 GEMM (not narrow) and a depthwise layer on a path
  :class:`.depthwise.expand_dw.ExpandDepthwise` runs;
* ``dw_pointwise``: :func:`.depthwise.dw_pointwise.fusable` (3x3 stride-1 flat depthwise, direct 1x1, bands
  enough for the threads), with a producing GEMM convolution inside when :func:`.pre_fits`;
* ``expand_dw_pointwise``: the same with the expansion inside, when the expanded tensor is large
  (:data:`EXPANDED_FUSE_MIN_BYTES`: smaller blocks measured faster as ``expand_dw`` + 1x1);
* ``conv_residual``: a GEMM, Winograd or dw_pointwise kernel with no activation of its own (not the
  narrow GEMM path) adds the residual, then the relu/relu6, per output block while it is in L1;
* ``add_act``: always (the add kernel applies the activation).

The lowering (:class:`.kernel_steps.NetPlan`) then takes the prepared ops from here.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import numpy as np

from mnnjit.backends.cpu.depthwise.dw_pointwise import DepthwisePointwise, fusable, pre_fits
from mnnjit.backends.cpu.depthwise.expand_dw import FUSABLE_PATHS, ExpandDepthwise
from mnnjit.backends.cpu.depthwise.planes import Depthwise
from mnnjit.backends.cpu.gemm.conv import ConvGemm, PackedWeights, pack_grouped
from mnnjit.graph import Node
from mnnjit.ops.conv_info import conv_params

__all__ = ["ConvKernels", "Winograd", "EXPANDED_FUSE_MIN_BYTES"]

#: expanded tensors from this size run their whole inverted residual block as one ``dwpw``
EXPANDED_FUSE_MIN_BYTES = 1 << 20


class ConvKernels:
    """Prepared convolutions and the fusion rules for one CPU lowering (see the module docstring)."""

    def __init__(self, modes: Any, threads: int) -> None:
        self.fp16 = bool(modes is not None and modes.fp16)
        self.keep_quantized = bool(modes is not None and modes.keep_quantized)
        self.act_dtype = np.dtype(np.float16) if self.fp16 else np.dtype(np.float32)
        self.threads = threads
        self._ops: Dict[int, Any] = {}
        self._nodes: list = []          # keeps the nodes alive: their ids key ``_ops``
        self._fused: Dict[Tuple[int, ...], Any] = {}

    # ------------------------------------------------------------------ single convolutions
    def op(self, n: Node) -> Any:
        """The prepared kernel of convolution ``n`` (Depthwise, Winograd or ConvGemm), built once."""
        op = self._ops.get(id(n))
        if op is None:
            op = self._depthwise(n)
            if op is None:
                w, bias, shape = conv_params(n)
                a = n.attrs
                g = int(a.get("group", 1))
                op = winograd_for(w, bias, shape, n.inputs[0].shape, a, g, self.threads,
                                  self.keep_quantized)
                if op is None:
                    O, cg, kh, kw = shape
                    op = ConvGemm(self._weights(w, shape, g), bias, n.inputs[0].shape, (kh, kw),
                                  a["stride"], a["pads"], a["dilation"], g, a.get("act", ""),
                                  self.threads)
            self._ops[id(n)] = op
            self._nodes.append(n)
        return op

    def kind(self, n: Node) -> str:
        """``"dw"``, ``"wino"`` or ``"gemm"``: how convolution ``n`` runs on its own."""
        op = self.op(n)
        return "dw" if isinstance(op, Depthwise) else "wino" if isinstance(op, Winograd) else "gemm"

    @staticmethod
    def weights_of(op: Any) -> Any:
        """The weight object of a prepared op (what the plan's weight bytes count)."""
        return op.w if isinstance(op, (Depthwise, ConvGemm)) else op

    def _weights(self, w: Any, shape: Tuple[int, ...], group: int) -> PackedWeights:
        O, cg, kh, kw = shape
        if not isinstance(w, np.ndarray) and w.quantized and self.keep_quantized and group == 1:
            from mnnjit.backends.cpu.quant import QuantRows
            return PackedWeights.from_quant_rows(
                QuantRows.from_quantized(w._quant, (O, cg * kh * kw)))
        dense = w if isinstance(w, np.ndarray) else w.dense()
        mat = np.asarray(dense, np.float32).reshape(O, cg * kh * kw)
        # float32 panels in every mode: float16 weight panels (one scalar widening per weight and
        # k-step inside the micro-kernel) measured 3x slower; precision=low halves the activations
        if group > 1:
            return pack_grouped(mat, group)
        return PackedWeights.from_dense(mat)

    def _depthwise(self, n: Node) -> Optional[Depthwise]:
        """``n`` as a prepared depthwise convolution (group == channels, one input channel per
        group), else None."""
        conv = conv_params(n)
        if conv is None or min(n.attrs["pads"]) < 0:
            return None
        w, bias, (O, cg, kh, kw) = conv
        a = n.attrs
        in_shape = n.inputs[0].shape
        if not (int(a.get("group", 1)) == in_shape[1] == O and cg == 1):
            return None
        dense = w if isinstance(w, np.ndarray) else w.dense()
        return Depthwise(np.asarray(dense).reshape(O, kh * kw), bias, in_shape, (kh, kw),
                         a["stride"], a["pads"], a["dilation"], a.get("act", ""), self.threads)

    # ------------------------------------------------------------------ fused blocks
    def fused_op(self, pattern: str, body: Tuple[Node, ...]) -> Any:
        """The fused kernel of an accepted block (built once): ExpandDepthwise for ``expand_dw``,
        DepthwisePointwise for the dw_pointwise patterns; for ``conv_residual``, the kernel of the
        convolution part (its activation set to the epilogue's)."""
        key = tuple(id(b) for b in body)
        op = self._fused.get(key)
        if op is None:
            if pattern == "expand_dw":
                op = ExpandDepthwise(self.op(body[0]), self.op(body[1]), self.threads)
            elif pattern in ("dw_pointwise", "expand_dw_pointwise"):
                pre = self.op(body[0]) if len(body) == 3 else None
                op = DepthwisePointwise(self.op(body[-2]), self.op(body[-1]), self.threads, pre=pre)
            else:
                raise ValueError(f"no fused kernel for pattern {pattern!r}")
            self._fused[key] = op
            self._nodes.extend(body)
        return op

    def conv_part(self, body: Tuple[Node, ...]) -> Tuple[Any, Tuple[Node, ...]]:
        """(kernel, nodes) of the convolution part of a ``conv_residual`` body (all before the add)."""
        k = next(i for i, b in enumerate(body) if b.op == "add")
        inner = tuple(body[:k])
        if len(inner) == 1:
            return self.op(inner[0]), inner
        return self.fused_op("dw_pointwise", inner), inner

    def accepts(self, pattern: str, body: Tuple[Node, ...]) -> bool:
        """Whether the CPU runs ``body`` as one kernel for ``pattern`` (see the module docstring)."""
        if pattern == "add_act":
            return True
        if pattern == "expand_dw":
            e, d = body
            if self.kind(e) != "gemm" or self.kind(d) != "dw":
                return False
            op = self.op(e)
            return op.direct and op.group == 1 and not op.narrow and self.op(d).path in FUSABLE_PATHS
        if pattern in ("dw_pointwise", "expand_dw_pointwise"):
            if self.kind(body[-2]) != "dw" or self.kind(body[-1]) != "gemm":
                return False
            dw, pw = self.op(body[-2]), self.op(body[-1])
            if not fusable(dw, pw, self.act_dtype, self.threads):
                return False
            if len(body) == 2:
                return True
            if self.kind(body[0]) != "gemm" or not pre_fits(self.op(body[0]), dw):
                return False
            if pattern == "expand_dw_pointwise":
                big = int(np.prod(self.op(body[0]).out_shape)) * 4 >= EXPANDED_FUSE_MIN_BYTES
                return big
            return True
        if pattern == "conv_residual":
            op, inner = self.conv_part(body)
            if len(inner) == 1 and self.kind(inner[0]) == "dw":
                return False
            return not op.act and not getattr(op, "narrow", False)
        return False


class Winograd:
    """A 3x3 stride-1 convolution by Winograd F(m x m, 3 x 3) (:mod:`.winograd`), weights
    transformed once; ``run`` takes the executor's storage arrays."""

    def __init__(self, w: np.ndarray, bias: Optional[np.ndarray], pads, act: str, m: int) -> None:
        from mnnjit.backends.cpu.gemm import winograd
        self._conv = winograd.winograd_conv3x3
        self.wt = winograd.winograd_weights(np.asarray(w, np.float32), m)
        self.bias = None if bias is None else np.array(bias, np.float32).reshape(-1)
        self.pads, self.act = tuple(int(p) for p in pads), act
        #: float32 workspace from the plan's first arena (for inspection: each arena passes its
        #: own to ``launch`` / ``run``; None: the module's per-thread one)
        self.scratch: Optional[np.ndarray] = None

    @property
    def nbytes(self) -> int:
        """Bytes of the transformed weights."""
        return int(self.wt.u.nbytes)

    def workspace_floats(self, in_shape: Tuple[int, ...], threads: int) -> int:
        """float32 values of workspace a call on ``in_shape`` takes at ``threads`` threads."""
        from mnnjit.backends.cpu.gemm import winograd
        return winograd.workspace_floats(in_shape, self.wt, self.pads, threads)

    def launch(self, x: np.ndarray, out: np.ndarray, res: Optional[np.ndarray] = None,
               ws: Optional[np.ndarray] = None):
        """The kernel and arguments of :meth:`run` on these C-contiguous storage arrays (see
        :func:`.launch.bind_launch`), or None; ``ws``: the workspace (None: the module's
        per-thread one)."""
        if not all(a is None or a.flags.c_contiguous for a in (x, out, res)):
            return None
        if x.dtype == np.uint16:
            x, out = x.view(np.float16), out.view(np.float16)
            res = None if res is None else res.view(np.float16)
        return self._conv(x, self.wt, self.bias, self.pads, self.act, out, res=res, ws=ws,
                          launch_only=True)

    def run(self, x: np.ndarray, out: np.ndarray, res: Optional[np.ndarray] = None,
            ws: Optional[np.ndarray] = None) -> np.ndarray:
        """Compute into ``out`` (storage arrays: float32 or uint16 half bits); ``res`` (like
        ``out``) is added before the activation; ``ws`` as for :meth:`launch`."""
        if x.dtype == np.uint16:
            x, out = x.view(np.float16), out.view(np.float16)
            res = None if res is None else res.view(np.float16)
        self._conv(x, self.wt, self.bias, self.pads, self.act, out, res=res, ws=ws)
        return out


def winograd_for(w, bias, shape, in_shape, attrs, group, threads, keep_quantized):
    """A Winograd convolution for a 3x3 stride-1 layer when :func:`.winograd.choose` says it is
    the fastest method. Quantized codes kept by memory=low: float Winograd weights where
    :func:`.winograd.transform_under_memory_low` says they pay (large planes, small weights), else
    Winograd on the codes (:class:`WinogradCodesConv`: per-channel 8-bit codes) or the GEMM path."""
    O, cg, kh, kw = shape
    if (kh, kw) != (3, 3) or tuple(attrs["stride"]) != (1, 1) or tuple(attrs["dilation"]) != (1, 1) \
            or group != 1 or min(attrs["pads"]) < 0:
        return None
    from mnnjit.backends.cpu.gemm import winograd
    N, C, H, W = in_shape
    oh = H + attrs["pads"][0] + attrs["pads"][1] - 2
    ow = W + attrs["pads"][2] + attrs["pads"][3] - 2
    codes = keep_quantized and not isinstance(w, np.ndarray) and w.quantized \
        and not winograd.transform_under_memory_low(C, O, oh, ow)
    if codes and not _per_channel_int8(w, cg * 9):
        return None
    m = winograd.choose(C, O, oh, ow, threads)
    if not m:
        return None
    if codes:
        return WinogradCodesConv(w._quant, O, cg, bias, attrs["pads"], attrs.get("act", ""), m)
    dense = w if isinstance(w, np.ndarray) else w.dense()
    return Winograd(dense, bias, attrs["pads"], attrs.get("act", ""), m)


def _per_channel_int8(w: Any, k: int) -> bool:
    """Whether quantized weight ``w`` has 8-bit codes with one scale per output channel (``k``
    codes per channel), the codes :mod:`.gemm.winograd_codes` transforms."""
    q = getattr(w, "_quant", None)
    return q is not None and int(q.bits) > 4 and int(q.block_size) == k \
        and q.codes.dtype == np.int8


class WinogradCodesConv(Winograd):
    """A 3x3 stride-1 convolution by Winograd F(m x m, 3 x 3) on its int8 codes (memory=low,
    :mod:`.gemm.winograd_codes`): the transformed weights are computed per forward, a group of
    output channels at a time, and never stored."""

    #: how the plan's layer table describes the weights
    weight_kind = "int8 codes, Winograd-transformed per task"

    def __init__(self, q: Any, O: int, C: int, bias: Optional[np.ndarray], pads, act: str,
                 m: int) -> None:
        from mnnjit.backends.cpu.gemm import winograd_codes
        self._conv = winograd_codes.winograd_codes_conv3x3
        self.wt = winograd_codes.winograd_codes_weights(q.codes.reshape(O, C, 3, 3), q.scale,
                                                        q.offset, m)
        self.bias = None if bias is None else np.array(bias, np.float32).reshape(-1)
        self.pads, self.act = tuple(int(p) for p in pads), act
        self.scratch: Optional[np.ndarray] = None

    @property
    def nbytes(self) -> int:
        """Bytes of the codes, scales and offsets."""
        return self.wt.nbytes

    def workspace_floats(self, in_shape: Tuple[int, ...], threads: int) -> int:
        """float32 values of workspace a call on ``in_shape`` takes at ``threads`` threads."""
        from mnnjit.backends.cpu.gemm import winograd_codes
        return winograd_codes.codes_workspace_floats(in_shape, self.wt, self.pads, threads)
