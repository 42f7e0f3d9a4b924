"""Cheaper kernel compiles: faster equivalents of Numba's slowest IR analyses, and machine code
only for the libraries that run.

mnnjit's large parallel kernels (a convolution, a fused expand+depthwise block) inline hundreds of
statements into one function; Numba then spends most of their compile time not in LLVM but in
data-flow analyses written for small functions:

* :func:`copy_propagate` deep-copies its whole ``{block: set of (name, name)}`` state after every
  fixed-point round (``copy.deepcopy`` on millions of string tuples), and
  :func:`init_copy_propagate_data` rebuilds each block's assigned-name set once per program copy
  (blocks x copies x block size). Measured on the fp32 convolution kernel: about a quarter of its
  compile time.
* :func:`compute_live_map` unions Python sets of variable names block by block until a fixed point
  (the def-reach pass alone was ~9 %): here the same fixed points run on integer bit sets.
* Inlining a function (``inline="always"``) deep-copies its IR block by block, each block with a
  memo of its own, so the function's whole scope (every variable) is copied once per block
  (blocks x variables; ~23 % of the fused depthwise+pointwise kernel's compile). :class:`_BlockCopier`
  copies the blocks of one IR with one memo: one copy of the scope, shared by the copied blocks
  as the blocks of the original share theirs.
* A parallel loop (``prange``) is compiled into a gufunc library, wrapped by a second library that
  links it, both linked into the kernel's library. Numba generated machine code for all three
  (the loop body three times; ~20 % of the Winograd kernel's compile) and optimized the
  loop's module three times, though only the kernel's library is ever run or cached. Here the
  gufunc and its wrapper are "link-only" libraries: finalized without machine code (generated
  lazily should anything ask for an address or an object file, :func:`_materialize`) and
  without their own module-level optimization: the loop's IR is optimized once, with the
  kernel's module (per-function passes as before). This one changes the kernels' machine code
  (LLVM's code-generation passes no longer rewrite the loop's IR before it is linked, and one
  module optimization instead of three): same outputs; steady-state latency measured unchanged
  (MobileNetV2, ResNet-18 at 1 thread); compile of the Winograd kernel 39 -> 24 CPU-s.

The analyses compute exactly what Numba's functions compute (the same sets, the same fixed
points; ``tests/core/test_numba_speedups.py`` checks them against the originals), so they leave
the generated code unchanged. :func:`install` swaps them in for the Numba version they were
written against (:data:`NUMBA_VERSIONS`) and does nothing for any other version;
``MNNJIT_NUMBA_SPEEDUPS=0`` turns them off.

Importing this module imports numba.
"""
from __future__ import annotations

import copy
import os
import weakref
from collections import defaultdict
from typing import Any, Dict, Set, Tuple

import numba
from numba.core import analysis, inline_closurecall, ir, ir_utils
from numba.core.ir_utils import compute_cfg_from_blocks, get_block_copies

__all__ = ["install", "installed", "copy_propagate", "init_copy_propagate_data", "compute_live_map",
           "NUMBA_VERSIONS"]

#: Numba versions whose ``ir_utils.copy_propagate`` / ``init_copy_propagate_data`` and
#: ``analysis.compute_live_map`` these functions reproduce
NUMBA_VERSIONS = ("0.68.",)

_ORIGINALS: Dict[str, Any] = {}


def init_copy_propagate_data(blocks, entry, typemap) -> tuple:
    """``numba.core.ir_utils.init_copy_propagate_data``: the same gen/kill/in/out sets, with each
    block's kill set gathered from an index of the copies by variable name."""
    gen_copies, extra_kill = get_block_copies(blocks, typemap)
    all_copies: Set[Tuple[str, str]] = set()
    for s in gen_copies.values():
        all_copies |= s
    by_var: Dict[str, list] = defaultdict(list)
    for c in all_copies:
        by_var[c[0]].append(c)
        if c[1] != c[0]:
            by_var[c[1]].append(c)
    kill_copies = {}
    for label, gen_set in gen_copies.items():
        kill: Set[Tuple[str, str]] = set()
        # a copy is killed if one of its names is in the block's extra kill set ...
        for v in extra_kill[label]:
            kill.update(by_var.get(v, ()))
        # ... or if it is not generated here and one of its names is assigned here
        for v in {lhs for lhs, _rhs in gen_set}:
            for c in by_var.get(v, ()):
                if c not in gen_set:
                    kill.add(c)
        kill_copies[label] = kill
    in_copies = {lab: all_copies.copy() for lab in blocks.keys()}
    in_copies[entry] = set()
    out_copies = {}
    for label in blocks.keys():
        out_copies[label] = gen_copies[label] | (in_copies[label] - kill_copies[label])
    out_copies[entry] = gen_copies[entry]
    return gen_copies, all_copies, kill_copies, in_copies, out_copies


def copy_propagate(blocks, typemap) -> tuple:
    """``numba.core.ir_utils.copy_propagate``: the same fixed-point iteration, comparing each round's
    out sets with the previous round's by a shallow snapshot (the sets hold immutable string
    tuples: a deep copy equals a shallow one)."""
    cfg = compute_cfg_from_blocks(blocks)
    entry = cfg.entry_point()
    gen_copies, _all, kill_copies, in_copies, out_copies = init_copy_propagate_data(blocks, entry, typemap)
    preds = {label: [p for p, _d in cfg.predecessors(label)] for label in blocks.keys() if label != entry}
    old_point = None
    new_point = {k: set(v) for k, v in out_copies.items()}
    while old_point != new_point:
        for label in blocks.keys():
            if label == entry:
                continue
            predecs = preds[label]
            cur = out_copies[predecs[0]].copy()
            for p in predecs:
                cur &= out_copies[p]
            in_copies[label] = cur
            out_copies[label] = gen_copies[label] | (cur - kill_copies[label])
        old_point = new_point
        new_point = {k: set(v) for k, v in out_copies.items()}
    return in_copies, out_copies


def compute_live_map(cfg, blocks, var_use_map, var_def_map) -> dict:
    """``numba.core.analysis.compute_live_map``: the variables live at the entry of each block, by
    the same def-reach and liveness fixed points (in the same block order) on integer bit sets."""
    topo_order = cfg.topo_order()
    index: Dict[str, int] = {}
    names: list = []

    def bits(names_in) -> int:
        b = 0
        for v in names_in:
            i = index.get(v)
            if i is None:
                i = index[v] = len(names)
                names.append(v)
            b |= 1 << i
        return b

    # every name appears in some block's use or def set: index them all first, so the bit sets
    # are built once
    defs = {k: bits(v) for k, v in var_def_map.items()}
    uses = {k: bits(v) for k, v in var_use_map.items()}
    succ = {k: [s for s, _d in cfg.successors(k)] for k in topo_order}
    pred = {k: [p for p, _d in cfg.predecessors(k)] for k in topo_order}

    reach: Dict[Any, int] = defaultdict(int)
    while True:      # def_reach until no set grows (Numba compares the sizes: sets only grow)
        before = tuple(reach.values())
        keys_before = len(reach)
        for off in topo_order:
            reach[off] |= defs.get(off, 0) | uses.get(off, 0)
            r = reach[off]
            for s in succ[off]:
                reach[s] |= r
        if len(reach) == keys_before and tuple(reach.values()) == before:
            break
    live = {off: uses.get(off, 0) for off in blocks.keys()}
    rev = list(reversed(topo_order))
    while True:
        before = tuple(live.values())
        keys_before = len(live)
        for off in rev:
            lv = live[off]
            for p in pred[off]:
                live[p] = live.get(p, 0) | ((lv & reach[p]) & ~defs.get(p, 0))
        if len(live) == keys_before and tuple(live.values()) == before:
            break
    return {off: _names(b, names) for off, b in live.items()}


def _names(b: int, names: list) -> set:
    """The set of ``names[i]`` for the bits ``i`` set in ``b``."""
    s = bin(b)[:1:-1]          # bit i at position i
    out = set()
    i = s.find("1")
    while i >= 0:
        out.add(names[i])
        i = s.find("1", i + 1)
    return out


class _BlockCopier:
    """Stands in for the ``copy`` module inside ``numba.core.inline_closurecall``, whose IR copy
    (``InlineWorker.inline_ir.copy_ir``: ``FunctionIR.copy()``, then ``copy.deepcopy`` of each
    block) is its one use of ``copy``. The blocks of one ``FunctionIR.copy`` call (counted by
    :func:`_counting_ir_copy`) and one scope share a memo; anything else goes to ``copy`` as is."""

    def __init__(self) -> None:
        self.generation = 0
        self._key: Any = None
        self._memo: Dict[int, Any] = {}
        self._scope: Any = None

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)

    def deepcopy(self, x: Any, memo: Any = None) -> Any:
        if memo is None and type(x) is ir.Block:
            key = (self.generation, id(x.scope))
            if key != self._key:
                self._key, self._memo, self._scope = key, {}, x.scope   # the scope held: its id stays unique
            return copy.deepcopy(x, self._memo)
        return copy.deepcopy(x, memo)

    def release(self) -> None:
        """Drop the last memo (the IR it references)."""
        self._key, self._memo, self._scope = None, {}, None


_COPIER = _BlockCopier()


def _counting_ir_copy(orig):
    def copy_(self):
        _COPIER.generation += 1
        _COPIER.release()
        return orig(self)
    copy_.__wrapped__ = orig
    copy_.__doc__ = orig.__doc__
    return copy_


# ------------------------------------------------------------------ link-only libraries
def _finalize_final_module(self) -> None:
    """``CPUCodeLibrary._finalize_final_module`` without machine code for a link-only library
    (``_mnnjit_link_only``): the checks run, the module is neither added to the JIT engine nor
    compiled until :func:`_materialize`."""
    if not getattr(self, "_mnnjit_link_only", False):
        _ORIGINALS["_finalize_final_module"](self)
        return
    self._finalize_dynamic_globals()
    self._verify_declare_only_symbols()
    # what Numba records on the module for its object cache hooks (``self._final_module.__library``
    # inside CPUCodeLibrary)
    setattr(self._final_module, "_CPUCodeLibrary__library", weakref.proxy(self))
    self._mnnjit_deferred = True
    self._finalized = True


def _optimize_final_module(self) -> None:
    """``CPUCodeLibrary._optimize_final_module``, skipped for a link-only library (its IR is
    optimized with the kernel's module, where it is linked; ``MNNJIT_LINK_ONLY_OPT=1`` optimizes
    it here too, as Numba did)."""
    if getattr(self, "_mnnjit_link_only", False) and os.environ.get("MNNJIT_LINK_ONLY_OPT", "0") != "1":
        return
    _ORIGINALS["_optimize_final_module"](self)


def _materialize(self) -> None:
    """Generate a deferred link-only library's machine code (what Numba's finalization did)."""
    if getattr(self, "_mnnjit_deferred", False):
        self._mnnjit_deferred = False
        cleanup = self._codegen._add_module(self._final_module)
        if cleanup:
            weakref.finalize(self, cleanup)
        self._finalize_specific()


def _needs_code(name: str):
    orig = _ORIGINALS[name]

    def method(self, *args, **kwargs):
        self._ensure_finalized()
        _materialize(self)
        return orig(self, *args, **kwargs)
    method.__name__ = orig.__name__
    method.__doc__ = orig.__doc__
    method.__wrapped__ = orig
    return method


#: the qualified name Numba gives a parallel loop's gufunc (``parfor_lowering``)
_GUFUNC_PREFIX = "__numba_parfor_gufunc"


class _LinkOnlyEntry:
    """Stands for the entry point of a gufunc compiled into a link-only library (nothing calls a
    gufunc from Python; its library is linked into the kernel's)."""

    def __init__(self, fndesc) -> None:
        self.fndesc = fndesc


def _get_executable(self, library, fndesc, env):
    """``CPUContext.get_executable``: for a parallel loop's gufunc no machine code (which the
    entry point's address would need); its library becomes link-only."""
    if fndesc.qualname.startswith(_GUFUNC_PREFIX) and not library._finalized:
        library._mnnjit_link_only = True
        return _LinkOnlyEntry(fndesc)
    return _ORIGINALS["get_executable"](self, library, fndesc, env)


def _build_gufunc_wrapper(py_func, cres, sin, sout, cache, is_parfors):
    """Numba's ``build_gufunc_wrapper``; a parallel loop's wrapper library is link-only."""
    info = _ORIGINALS["build_gufunc_wrapper"](py_func, cres, sin, sout, cache, is_parfors)
    if is_parfors:
        info.library._mnnjit_link_only = True
    return info


def _install_link_only() -> None:
    from numba.core import codegen, cpu
    from numba.np.ufunc import parallel
    _ORIGINALS["_finalize_final_module"] = codegen.CPUCodeLibrary._finalize_final_module
    _ORIGINALS["_optimize_final_module"] = codegen.CPUCodeLibrary._optimize_final_module
    codegen.CPUCodeLibrary._optimize_final_module = _optimize_final_module
    for name in ("get_pointer_to_function", "_get_compiled_object", "serialize_using_object_code"):
        _ORIGINALS[name] = getattr(codegen.JITCodeLibrary, name)
    _ORIGINALS["get_executable"] = cpu.CPUContext.get_executable
    _ORIGINALS["build_gufunc_wrapper"] = parallel.build_gufunc_wrapper
    codegen.CPUCodeLibrary._finalize_final_module = _finalize_final_module
    for name in ("get_pointer_to_function", "_get_compiled_object", "serialize_using_object_code"):
        setattr(codegen.JITCodeLibrary, name, _needs_code(name))
    cpu.CPUContext.get_executable = _get_executable
    parallel.build_gufunc_wrapper = _build_gufunc_wrapper


def installed() -> bool:
    """Whether the replacements are in place."""
    return bool(_ORIGINALS)


def install() -> bool:
    """Swap the replacements into Numba (once); False when this Numba version is not one they
    were written against or ``MNNJIT_NUMBA_SPEEDUPS=0``."""
    if _ORIGINALS:
        return True
    if os.environ.get("MNNJIT_NUMBA_SPEEDUPS", "1").strip().lower() in ("0", "off", "no", "false"):
        return False
    if not numba.__version__.startswith(NUMBA_VERSIONS):
        return False
    from numba.parfors import parfor
    _ORIGINALS["copy_propagate"] = ir_utils.copy_propagate
    _ORIGINALS["init_copy_propagate_data"] = ir_utils.init_copy_propagate_data
    _ORIGINALS["compute_live_map"] = analysis.compute_live_map
    _ORIGINALS["inline_copy_module"] = inline_closurecall.copy
    _ORIGINALS["FunctionIR.copy"] = ir.FunctionIR.copy
    ir.FunctionIR.copy = _counting_ir_copy(ir.FunctionIR.copy)
    inline_closurecall.copy = _COPIER
    ir_utils.copy_propagate = copy_propagate
    ir_utils.init_copy_propagate_data = init_copy_propagate_data
    parfor.copy_propagate = copy_propagate
    analysis.compute_live_map = compute_live_map
    for mod in (ir_utils, parfor):
        if getattr(mod, "compute_live_map", None) is _ORIGINALS["compute_live_map"]:
            mod.compute_live_map = compute_live_map
    _install_link_only()
    return True


def originals() -> Dict[str, Any]:
    """Numba's own functions that :func:`install` replaced (empty before it ran)."""
    return dict(_ORIGINALS)
