"""Unrolled loops in a whole-plan kernel's body folded back into loops (:mod:`.whole_plan`).

A recurrent model's ``While`` loop reaches the backend unrolled (``mnnjit.models.control_flow``):
a 100-step LSTM is thousands of steps, one call of an outlined step function each
(``whole_plan._outline``). Iteration ``t + 1`` calls the same functions as iteration ``t`` on
arrays at regularly shifted places: its values are pieces of the one per-call workspace
(allocated in step order, so every iteration's pieces sit one iteration's size further on), its
slice of the input projection is one row further (or back, for a reverse direction), and the
weights are the same blob slice. :func:`fold_loops` finds such runs of calls and writes each as
one ``for`` loop whose arguments are slices of the root arrays (``ws``, ``blob``, the inputs and
outputs) at offsets affine in the loop index: the kernel's source, and with it Numba's and
LLVM's compile time, stays the size of one iteration however long the sequence is, and the
calls (their order and arrays) are exactly the unrolled ones.

It works on the generated lines only (the steps' own code is untouched), so it applies to any
plan whose step sequence repeats: RNN cells, a transformer's identical layers.
"""
from __future__ import annotations

import bisect
import re
from typing import Iterable

#: Fewest repetitions folded into a loop (two calls of a block cost about as little written out).
MIN_REPS = 3

#: Longest loop body considered, in calls (a two-layer bidirectional cell is ~80).
MAX_PERIOD = 512

_WS = re.compile(r"^    (v\d+) = ws\[(\d+):(\d+)\]$")
_VIEW = re.compile(r"^    (w\d+) = (\w+)\[(\d+):(\d+)\]$")
_OUT = re.compile(r"^    (v\d+) = o\d+\.reshape\(\d+\)$")
_RAVEL = re.compile(r"^    (x\d+f) = x\d+\.ravel\(\)$")
_CALL = re.compile(r"^    (step_[0-9a-f]+)\(([\w, ]*)\)$")
_CONST = re.compile(r"^    (c\d+) = blob\[(\d+):(\d+)\]$")
_NAME = re.compile(r"\b(?:[vwc]\d+|x\d+f|o\d+|gs)\b")

#: Where a name's array lies: (root array, first element, elements; None: all of the root).
_Place = tuple[str, int, "int | None"]


def count_calls(body: Iterable[str]) -> int:
    """Step calls written in a kernel body (a loop's body counted once)."""
    return sum(1 for ln in body if ln.lstrip().startswith("step_"))


def _places(head: list[str], body: list[str]) -> dict[str, _Place]:
    """Every array name of the kernel resolved to its root array and range."""
    # (``gs``: the packed GEMM's scratch, :mod:`.plan_gemm_steps`)
    places: dict[str, _Place] = {"gs": ("gs", 0, None)}
    for ln in head:
        m = _CONST.match(ln)
        if m:
            places[m.group(1)] = ("blob", int(m.group(2)), int(m.group(3)) - int(m.group(2)))
    for ln in body:
        m = _WS.match(ln)
        if m:
            places[m.group(1)] = ("ws", int(m.group(2)), int(m.group(3)) - int(m.group(2)))
            continue
        m = _VIEW.match(ln)
        if m and m.group(2) in places:
            root, start, _ = places[m.group(2)]
            a, b = int(m.group(3)), int(m.group(4))
            places[m.group(1)] = (root, start + a, b - a)
            continue
        m = _OUT.match(ln) or _RAVEL.match(ln)
        if m:
            places[m.group(1)] = (m.group(1), 0, None)
    return places


def _slice(place: _Place, step: int, var: str) -> str:
    """The expression of an argument at iteration ``var`` (``step`` elements further each time)."""
    root, start, size = place
    if size is None:
        return root
    if step == 0:
        return f"{root}[{start}:{start + size}]"
    shift = f" + {step} * {var}" if step > 0 else f" - {-step} * {var}"
    return f"{root}[{start}{shift}:{start + size}{shift}]"


def _find_run(keys: list[int], offs: list[tuple[int, ...]], i: int, end: int,
              where: dict[int, list[int]]) -> tuple[int, int, list[int]] | None:
    """The longest loop starting at call ``i`` (before ``end``): (period, repetitions, per-argument
    offset step of the block's flattened arguments), or None."""
    best = None
    occ = where[keys[i]]
    lo = bisect.bisect_right(occ, i)
    for j in occ[lo:]:
        p = j - i
        if p > MAX_PERIOD or i + 2 * p > end:
            break
        if keys[i:i + p] != keys[j:j + p]:
            continue
        first = [o for t in offs[i:i + p] for o in t]
        prev = [o for t in offs[j:j + p] for o in t]
        step = [b - a for a, b in zip(first, prev)]
        reps = 2
        while i + (reps + 1) * p <= end and keys[i + reps * p:i + (reps + 1) * p] == keys[i:i + p]:
            cur = [o for t in offs[i + reps * p:i + (reps + 1) * p] for o in t]
            if any(c - q != s for c, q, s in zip(cur, prev, step)):
                break
            prev = cur
            reps += 1
        if reps >= MIN_REPS and (best is None or p * reps > best[0] * best[1]):
            best = (p, reps, step)
    return best


def fold_loops(head: list[str], body: list[str]) -> list[str]:
    """``body`` (a whole-plan kernel's lines after ``_outline``) with every run of at least
    :data:`MIN_REPS` repetitions of a block of step calls, whose arrays move by a fixed offset
    from one repetition to the next, written as one loop (see the module docstring). ``head``
    holds the constants' blob slices. Lines this does not recognise end a run and stay as they are."""
    places = _places(head, body)
    # the calls and where each run of them (uninterrupted by other lines) ends
    calls: list[tuple[int, str, list[str]]] = []
    for k, ln in enumerate(body):
        m = _CALL.match(ln)
        if m and all(a in places for a in m.group(2).split(", ")):
            calls.append((k, m.group(1), m.group(2).split(", ")))
    if len(calls) < MIN_REPS:
        return body
    call_at = {k: n for n, (k, _, _) in enumerate(calls)}
    transparent = {k for k, ln in enumerate(body)
                   if _WS.match(ln) or _VIEW.match(ln) or _OUT.match(ln) or _RAVEL.match(ln)}
    segment, seg = [], 0
    for n, (k, _, _) in enumerate(calls):
        if n and any(j not in transparent for j in range(calls[n - 1][0] + 1, k)):
            seg += 1
        segment.append(seg)
    # each call as a key (function and its arguments' roots and sizes) and its arguments' offsets
    ids: dict[tuple, int] = {}
    keys: list[int] = []
    offs: list[tuple[int, ...]] = []
    for _, fn, args in calls:
        pl = [places[a] for a in args]
        keys.append(ids.setdefault((fn,) + tuple((r, s) for r, _, s in pl), len(ids)))
        offs.append(tuple(st for _, st, _ in pl))
    where: dict[int, list[int]] = {}
    for n, key in enumerate(keys):
        where.setdefault(key, []).append(n)
    seg_end = {}
    for n in range(len(calls) - 1, -1, -1):
        seg_end.setdefault(segment[n], n + 1)
    loops: dict[int, tuple[int, int, list[int]]] = {}
    n = 0
    while n < len(calls):
        found = _find_run(keys, offs, n, seg_end[segment[n]], where)
        if found is None:
            n += 1
            continue
        loops[n] = found
        n += found[0] * found[1]
    if not loops:
        return body
    # the last line reading each name (a folded region's names used later are defined again after it)
    last_use: dict[str, int] = {}
    for k, ln in enumerate(body):
        defined = ln.split(" = ", 1)[0].strip() if " = " in ln else None
        for m in _NAME.finditer(ln):
            if m.group(0) != defined:
                last_use[m.group(0)] = k
    out = [ln for ln in body if _RAVEL.match(ln) or _OUT.match(ln)]  # roots first: arguments only
    k = 0
    counter = 0
    while k < len(body):
        n = call_at.get(k)
        if n is None or n not in loops:
            ln = body[k]
            if not (_RAVEL.match(ln) or _OUT.match(ln)):
                out.append(ln)
            k += 1
            continue
        p, reps, step = loops[n]
        var = f"lp{counter}"
        counter += 1
        out.append(f"    for {var} in range({reps}):")
        flat = 0
        # each array of an iteration sliced once (a value is written by one call and read by
        # the next ones): Numba's IR for a slice is most of the kernel's compile time
        named: dict[str, str] = {}
        lines = []
        for _, fn, args in calls[n:n + p]:
            exprs = []
            for a in args:
                expr = _slice(places[a], step[flat], var)
                flat += 1
                if "[" in expr:
                    if expr not in named:
                        named[expr] = f"{var}a{len(named)}"
                        lines.append(f"        {named[expr]} = {expr}")
                    expr = named[expr]
                exprs.append(expr)
            lines.append(f"        {fn}({', '.join(exprs)})")
        out.extend(lines)
        end = calls[n + p * reps - 1][0] + 1
        # names the folded lines defined that later lines read: their slices again
        for j in range(k, end):
            m = _WS.match(body[j]) or _VIEW.match(body[j])
            if m and last_use.get(m.group(1), -1) >= end:
                out.append(f"    {m.group(1)} = {_slice(places[m.group(1)], 0, var)}")
        k = end
    return out
