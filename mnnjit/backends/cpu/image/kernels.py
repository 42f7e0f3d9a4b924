"""Numba kernels for the hot image ops (resize, warpAffine, cvtColor, separable filters).

Imported lazily (only when an image op runs on an image above its size threshold): importing this
module imports Numba. Every kernel is a nogil Numba loop over a block of output rows computing what the
op's numpy reference in ``mnnjit/ops/image_*.py`` computes (same fixed-point arithmetic); large images
are split into row blocks run by the calling thread plus a small thread pool (``run_rows``), which keeps
working when the machine is oversubscribed, where an OpenMP ``prange`` team stalls. Kernels are compiled
with ``cache=True`` so a second process loads them from Numba's on-disk cache.
"""
from __future__ import annotations

import functools
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from mnnjit.backends.cpu.runtime import numba_setup  # noqa: F401  (first: OpenMP policy, cross-process compile lock)
import numba as nb
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from mnnjit.ops.image_color import GRAY_B, GRAY_G, GRAY_R, GRAY_SHIFT
from mnnjit.ops.image_geometry import CV_BORDER_CONSTANT, CV_BORDER_REPLICATE, linear_taps, INTER_LINEAR

_SERIAL = dict(cache=True, nogil=True, boundscheck=False, error_model="numpy")


_POOL = None
_POOL_LOCK = threading.Lock()


def _pool():
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            n = max(1, min(os.cpu_count() or 1, nb.config.NUMBA_NUM_THREADS) - 1)
            _POOL = ThreadPoolExecutor(max_workers=n, thread_name_prefix="mnnjit-cv")
        return _POOL


def run_rows(kernel, args: tuple, n_rows: int, chunks: int) -> None:
    """Run ``kernel(*args, y0, y1)`` (a nogil Numba function) over row blocks on the calling thread and a
    small thread pool. Blocks are taken dynamically and the caller waits only for blocks a worker has
    started, never for a worker to be scheduled: on a busy machine a late worker finds nothing left and
    the call costs what the serial loop costs (a static OpenMP split, or waiting for the pool's tasks,
    waits for the descheduled thread)."""
    if chunks <= 1:
        kernel(*args, 0, n_rows)
        return
    step = max(1, (n_rows + chunks - 1) // chunks)
    starts = list(range(0, n_rows, step))
    lock = threading.Lock()
    done = threading.Event()
    state = {"next": 0, "left": len(starts), "error": None}
    from mnnjit.backends.cpu.runtime.tiering import carried
    mode = carried()    # helpers defer a missing kernel's compile when the caller does

    def work():
        with mode():
            _work()

    def _work():
        while True:
            with lock:
                k = state["next"]
                if k >= len(starts):
                    return
                state["next"] = k + 1
            try:
                kernel(*args, starts[k], min(n_rows, starts[k] + step))
            except BaseException as exc:  # reported by the caller
                state["error"] = exc
            with lock:
                state["left"] -= 1
                if state["left"] == 0:
                    done.set()
    pool = _pool()
    for _ in range(pool._max_workers):
        pool.submit(work)
    work()
    done.wait()
    if state["error"] is not None:
        raise state["error"]


def n_chunks(work: int, per_chunk: int) -> int:
    """How many parallel chunks ``work`` element-operations deserve (1 = run serially: Numba's thread
    team costs more than it saves on small images, and far more when the machine is oversubscribed)."""
    return 1 if work < per_chunk else min(16, max(4, work // per_chunk))


_IDLE = {"t": -1.0, "ticks": None, "idle": 1.0}


def idle_cpus() -> float:
    """CPUs idle on average over the last interval of at least 0.1 s (from /proc/stat; the number of CPUs
    when it cannot be read). Our own busy thread counts as busy."""
    now = time.monotonic()
    if now - _IDLE["t"] < 0.1:
        return _IDLE["idle"]
    try:
        with open("/proc/stat", "rb") as f:
            fields = [int(v) for v in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return float(os.cpu_count() or 1)
    prev = _IDLE["ticks"]
    if prev is not None:
        total = sum(fields) - sum(prev)
        idle = fields[3] + fields[4] - prev[3] - prev[4]
        if total > 0:
            _IDLE["idle"] = (os.cpu_count() or 1) * idle / total
    _IDLE["ticks"], _IDLE["t"] = fields, now
    return _IDLE["idle"]


def n_chunks_if_idle(work: int, per_chunk: int) -> int:
    """``n_chunks`` for memory-bound passes, which a second thread speeds up only when a CPU is idle: on a
    busy machine the hand-off costs more than it saves (1080p gray: 0.92 ms serial vs 1.05 in blocks),
    while with a free CPU two threads nearly halve these passes (docs/DECISIONS.md)."""
    n = n_chunks(work, per_chunk)
    return n if n > 1 and idle_cpus() >= 0.5 else 1


# ----------------------------------------------------------------------------- byte-level intrinsics
@intrinsic
def _load_u64(typingctx, arr, off):
    """The 8 bytes ``arr[off:off + 8]`` of a uint8 array as one unaligned little-endian uint64 load
    (``off``: uint64; the caller keeps ``off + 8`` within the array)."""
    if not (isinstance(arr, types.Array) and arr.dtype == types.uint8 and off == types.uint64):
        return None

    def codegen(context, builder, sig, args):
        a = context.make_array(sig.args[0])(context, builder, args[0])
        ptr = builder.bitcast(builder.gep(a.data, [args[1]]), ir.IntType(64).as_pointer())
        return builder.load(ptr, align=1)
    return types.uint64(arr, off), codegen


def _shuffle16(mask: list[int], fill: int = 0):
    """An intrinsic ``f(src, soff, dst, doff)``: ``dst[doff:doff + 16] = src[soff:soff + 16][mask]`` (uint8
    arrays, uint64 offsets; one unaligned 16-byte load, one byte shuffle, one store); mask entries 16 and up
    give the byte ``fill``. The caller keeps both ranges inside the arrays and rewrites the bytes the mask
    fills with junk."""
    mask = list(mask)

    @intrinsic
    def shuffle(typingctx, src, soff, dst, doff):
        if not (isinstance(src, types.Array) and isinstance(dst, types.Array) and src.dtype == types.uint8
                and dst.dtype == types.uint8 and soff == types.uint64 and doff == types.uint64):
            return None

        def codegen(context, builder, sig, args):
            s = context.make_array(sig.args[0])(context, builder, args[0])
            d = context.make_array(sig.args[2])(context, builder, args[2])
            vt = ir.VectorType(ir.IntType(8), 16)
            v = builder.load(builder.bitcast(builder.gep(s.data, [args[1]]), vt.as_pointer()), align=1)
            m = ir.Constant(ir.VectorType(ir.IntType(32), 16), mask)
            fv = ir.Constant(vt, [fill] * 16)
            builder.store(builder.shuffle_vector(v, fv, m),
                          builder.bitcast(builder.gep(d.data, [args[3]]), vt.as_pointer()), align=1)
            return context.get_dummy_value()
        return types.void(src, soff, dst, doff), codegen
    return shuffle


_ROUND_MAGIC = np.float32(8388608.0)  # 2**23


@nb.njit(inline="always", cache=True)
def _rint_small(v):
    """Round half to even of a float32 in [-2**22, 2**22] by adding and subtracting 2**23 (exactly np.rint's
    result there; vectorises, where np.rint is a library call)."""
    return (v + _ROUND_MAGIC) - _ROUND_MAGIC


#: Reverses the bytes of five 3-byte pixels (byte 15 copied, to be rewritten).
_swap5px = _shuffle16([2, 1, 0, 5, 4, 3, 8, 7, 6, 11, 10, 9, 14, 13, 12, 15])
#: Four 4-byte pixels -> four 3-byte pixels with the first and third bytes swapped (RGBX -> BGR; bytes 12-15
#: junk, to be rewritten).
_rgbx4_to_bgr = _shuffle16([2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, 15, 15, 15, 15])
#: Four 3-byte pixels -> four 4-byte pixels with the first and third bytes swapped and alpha 255 (BGR -> RGBA).
_bgr4_to_rgba = _shuffle16([2, 1, 0, 16, 5, 4, 3, 16, 8, 7, 6, 16, 11, 10, 9, 16], 255)
#: Four 4-byte pixels -> four 3-byte pixels (bytes 12-15 junk, to be rewritten).
_pack4to3 = _shuffle16([0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, 15, 15, 15, 15])


@nb.njit(inline="always", cache=True)
def _store_rgbx_row(tb, orow, n):
    """orow[3*i + k] = tb[4*i + k] for i < n, k < 3 (4-byte pixels packed to 3 bytes): 16-byte
    shuffles while a whole 16-byte store fits, then pixel by pixel."""
    i = 0
    while 3 * i + 16 <= 3 * n:
        _pack4to3(tb, np.uint64(4 * i), orow, np.uint64(3 * i))
        i += 4
    while i < n:
        orow[3 * i] = tb[4 * i]
        orow[3 * i + 1] = tb[4 * i + 1]
        orow[3 * i + 2] = tb[4 * i + 2]
        i += 1
_M8 = np.uint64(0xff)


# ----------------------------------------------------------------------------- resize
@nb.njit(**_SERIAL)
def _resize_linear_u8(src, xo0, xo1, a0, a1, yi, by, out, y0, y1):
    """Rows [y0, y1) of OpenCV's fixed-point bilinear resize; src [h, w*c], out [oh, ow*c]. Per output
    element j of a row: source byte offsets xo0[j], xo1[j] (unsigned: no negative-index checks) and 11-bit
    weights a0[j], a1[j]; simple gather loops that LLVM vectorises."""
    n = out.shape[1]
    h0 = np.empty(n, np.int32)
    h1 = np.empty(n, np.int32)
    for dy in range(y0, y1):
        s0 = src[yi[dy, 0]]
        s1 = src[yi[dy, 1]]
        b0 = by[dy, 0]
        b1 = by[dy, 1]
        orow = out[dy]
        for j in range(n):  # every step narrowed to int32: Numba widens to int64, which AVX2 cannot shift
            h0[j] = np.int32(np.int32(np.int32(s0[xo0[j]]) * a0[j] + np.int32(s0[xo1[j]]) * a1[j]) >> 4)
        for j in range(n):
            h1[j] = np.int32(np.int32(np.int32(s1[xo0[j]]) * a0[j] + np.int32(s1[xo1[j]]) * a1[j]) >> 4)
        for j in range(n):
            v = np.int32(np.int32(np.int32(np.int32(h0[j] * b0) >> 16) + np.int32(np.int32(h1[j] * b1) >> 16) + 2) >> 2)
            orow[j] = np.uint8(min(max(v, np.int32(0)), np.int32(255)))


@nb.njit(**_SERIAL)
def _resize_linear_u8c3(src, xo, wa, wb, nsafe, yi, by, out, y0, y1):
    """Rows [y0, y1) of the same fixed-point bilinear resize for 3-channel images, per output pixel: one
    unaligned 8-byte load per source row holds the left and right pixels (byte offset xo[x]; the right pixel
    is always the next one, edge pixels use weights (0, 2048)); the arithmetic then runs vectorised over
    pixels with the channels in uint64 lanes, and four-byte results are packed to three with byte shuffles.
    Pixels from ``nsafe`` on read their six bytes one by one (an 8-byte load would pass the row end)."""
    ow = xo.shape[0]
    _resize_rows_c3(src, xo, wa, wb, nsafe, yi, by, out, y0, y1, np.empty(ow, np.uint64), np.empty(ow, np.uint64),
                    np.empty(ow, np.uint32))


@nb.njit(**_SERIAL)
def _resize_rows_c3(src, xo, wa, wb, nsafe, yi, by, out, y0, y1, st0, st1, tmp):
    """``_resize_linear_u8c3`` with caller-provided scratch rows (``st0``, ``st1``: uint64[ow], ``tmp``:
    uint32[ow]), for kernels that resize one row at a time."""
    ow = xo.shape[0]
    tb = tmp.view(np.uint8)
    for dy in range(y0, y1):
        s0 = src[yi[dy, 0]]
        s1 = src[yi[dy, 1]]
        b0 = np.int32(by[dy, 0])
        b1 = np.int32(by[dy, 1])
        for x in range(nsafe):
            p = xo[x]
            st0[x] = _load_u64(s0, p)
            st1[x] = _load_u64(s1, p)
        for x in range(nsafe, ow):
            p = xo[x]
            u = np.uint64(0)
            v = np.uint64(0)
            for k in range(6):
                u |= np.uint64(s0[p + np.uint64(k)]) << np.uint64(8 * k)
                v |= np.uint64(s1[p + np.uint64(k)]) << np.uint64(8 * k)
            st0[x] = u
            st1[x] = v
        for x in range(ow):
            u = st0[x]
            v = st1[x]
            a = wa[x]
            b = wb[x]
            r = np.uint32(0)
            for k in range(3):
                l0 = np.int32((u >> np.uint64(8 * k)) & _M8)
                r0 = np.int32((u >> np.uint64(8 * k + 24)) & _M8)
                l1 = np.int32((v >> np.uint64(8 * k)) & _M8)
                r1 = np.int32((v >> np.uint64(8 * k + 24)) & _M8)
                h0 = np.int32(np.int32(l0 * a + r0 * b) >> 4)
                h1 = np.int32(np.int32(l1 * a + r1 * b) >> 4)
                t = np.int32(np.int32(np.int32(np.int32(h0 * b0) >> 16) + np.int32(np.int32(h1 * b1) >> 16) + 2) >> 2)
                t = min(max(t, np.int32(0)), np.int32(255))
                r |= np.uint32(t) << np.uint32(8 * k)
            tmp[x] = r
        _store_rgbx_row(tb, out[dy], ow)


@nb.njit(**_SERIAL)
def _resize_linear_f32(src, xi, ax, yi, by, out, y0, y1):
    oh, ow, c = out.shape
    for dy in range(y0, y1):
        r0 = yi[dy, 0]
        r1 = yi[dy, 1]
        b0 = by[dy, 0]
        b1 = by[dy, 1]
        for dx in range(ow):
            x0 = xi[dx, 0]
            x1 = xi[dx, 1]
            a0 = ax[dx, 0]
            a1 = ax[dx, 1]
            for k in range(c):
                h0 = src[r0, x0, k] * a0 + src[r0, x1, k] * a1
                h1 = src[r1, x0, k] * a0 + src[r1, x1, k] * a1
                out[dy, dx, k] = h0 * b0 + h1 * b1


@functools.lru_cache(maxsize=64)
def _flat_taps(w: int, ow: int, scale: float, c: int):
    """Per output element (column x channel) byte offsets and 11-bit weights of a uint8 row resize."""
    xi, ax = _taps(w, ow, scale, True)
    ch = np.arange(c, dtype=np.uint64)
    xo0 = (xi[:, 0:1].astype(np.uint64) * np.uint64(c) + ch).ravel()
    xo1 = (xi[:, 1:2].astype(np.uint64) * np.uint64(c) + ch).ravel()
    return xo0, xo1, np.repeat(ax[:, 0], c).astype(np.int32), np.repeat(ax[:, 1], c).astype(np.int32)


@functools.lru_cache(maxsize=64)
def _pixel_taps(w: int, ow: int, scale: float):
    """Per output pixel of a 3-channel row resize (w >= 2): byte offset of the left source pixel, the 11-bit
    weights of the left and right pixels (the right one is always the next pixel: at the right edge the pair
    moves one pixel left with weights (0, 2048), the same value), and how many leading pixels can be read
    with one 8-byte load without passing the row end."""
    xi, ax = _taps(w, ow, scale, True)
    left = xi[:, 0].astype(np.int64)
    wa = ax[:, 0].astype(np.int32)
    wb = ax[:, 1].astype(np.int32)
    edge = xi[:, 1] == xi[:, 0]
    left[edge] = np.maximum(left[edge] - 1, 0)
    wa[edge], wb[edge] = 0, 2048
    xo = (left * 3).astype(np.uint64)
    nsafe = int(np.count_nonzero(xo + 8 <= w * 3))  # xo is non-decreasing
    return xo, wa, wb, nsafe


@functools.lru_cache(maxsize=64)
def _taps(n_in: int, n_out: int, scale: float, fixed: bool):
    idx, w = linear_taps(n_in, n_out, scale, INTER_LINEAR)
    if fixed:
        a0 = np.rint(w[:, 0] * 2048).astype(np.int32)
        return idx.astype(np.int32), np.stack([a0, 2048 - a0], -1)
    return idx.astype(np.int32), w.astype(np.float32)


def resize_linear(x: np.ndarray, oh: int, ow: int, sy: float, sx: float) -> np.ndarray:
    """Bilinear resize (uint8: OpenCV's 11-bit fixed point; float32: float taps)."""
    h, w, c = x.shape
    u8 = x.dtype == np.uint8
    yi, by = _taps(h, oh, float(sy), u8)
    xi, ax = _taps(w, ow, float(sx), u8)
    x = np.ascontiguousarray(x)
    out = np.empty((oh, ow, c), np.uint8 if u8 else np.float32)
    work = oh * ow * c * 8
    chunks = n_chunks(work, 1 << 21) if work >= 1 << 23 else n_chunks_if_idle(work, 1 << 19)
    if u8 and c == 3 and w >= 2:
        xo, wa, wb, nsafe = _pixel_taps(w, ow, float(sx))
        run_rows(_resize_linear_u8c3, (x.reshape(h, w * c), xo, wa, wb, nsafe, yi, by, out.reshape(oh, ow * c)),
                 oh, chunks)
    elif u8:
        xo0, xo1, a0, a1 = _flat_taps(w, ow, float(sx), c)
        run_rows(_resize_linear_u8, (x.reshape(h, w * c), xo0, xo1, a0, a1, yi, by, out.reshape(oh, ow * c)),
                 oh, chunks)
    else:
        run_rows(_resize_linear_f32, (x, xi, ax, yi, by, out), oh, chunks)
    return out


# ----------------------------------------------------------------------------- warpAffine
@nb.njit(**_SERIAL)
def _warp_rows(src, c, m0, m3, rowx, rowy, replicate, bval, out, y0, y1):
    """Bilinear warp of rows [y0, y1): src [h, w*c] uint8, out [oh, ow*c]; coordinates
    (m0*x + rowx[y], m3*x + rowy[y]) in float32, lerp along x then y, round half to even.
    Per row: a vectorisable pass computes offsets and weights, then a gather pass reads pixels with
    unsigned offsets (no negative-index checks); pixels near or outside the border take the slow path."""
    h = src.shape[0]
    w = src.shape[1] // c
    ow = out.shape[1] // c
    stride = src.shape[1]
    flat = src.reshape(-1)
    fx = np.empty(ow, np.float32)
    fy = np.empty(ow, np.float32)
    offs = np.empty(ow, np.uint64)
    ins = np.empty(ow, np.bool_)
    wlim = np.float32(w - 1)
    hlim = np.float32(h - 1)
    for y in range(y0, y1):
        mx0 = rowx[y]
        my0 = rowy[y]
        for x in range(ow):
            X = m0 * np.float32(x) + mx0
            Y = m3 * np.float32(x) + my0
            xf = np.floor(X)
            yf = np.floor(Y)
            fx[x] = X - xf
            fy[x] = Y - yf
            ok = (xf >= 0) & (yf >= 0) & (xf < wlim) & (yf < hlim)
            ins[x] = ok
            offs[x] = (np.uint64(yf) * np.uint64(stride) + np.uint64(xf) * np.uint64(c)) if ok else np.uint64(0)
        orow = out[y]
        for x in range(ow):
            ax = fx[x]
            ay = fy[x]
            o = x * c
            if ins[x]:
                p = offs[x]
                for k in range(c):
                    q = p + np.uint64(k)
                    p00 = np.float32(flat[q])
                    p01 = np.float32(flat[q + np.uint64(c)])
                    p10 = np.float32(flat[q + np.uint64(stride)])
                    p11 = np.float32(flat[q + np.uint64(stride + c)])
                    v0 = p00 + ax * (p01 - p00)
                    v1 = p10 + ax * (p11 - p10)
                    orow[o + k] = np.uint8(np.rint(v0 + ay * (v1 - v0)))
            else:
                X = m0 * np.float32(x) + mx0
                Y = m3 * np.float32(x) + my0
                if not (-1e8 < X < 1e8 and -1e8 < Y < 1e8):
                    X = np.float32(-10.0)
                    Y = np.float32(-10.0)
                x0 = np.int64(np.floor(X))
                y0_ = np.int64(np.floor(Y))
                if not replicate and (x0 < -1 or y0_ < -1 or x0 >= w or y0_ >= h):
                    for k in range(c):
                        orow[o + k] = np.uint8(bval[k])
                    continue
                for k in range(c):
                    p00 = _px2(src, c, y0_, x0, k, replicate, bval[k])
                    p01 = _px2(src, c, y0_, x0 + 1, k, replicate, bval[k])
                    p10 = _px2(src, c, y0_ + 1, x0, k, replicate, bval[k])
                    p11 = _px2(src, c, y0_ + 1, x0 + 1, k, replicate, bval[k])
                    v0 = p00 + ax * (p01 - p00)
                    v1 = p10 + ax * (p11 - p10)
                    v = np.rint(v0 + ay * (v1 - v0))
                    orow[o + k] = np.uint8(min(max(v, np.float32(0)), np.float32(255)))


#: Output tile of the 3-channel warp kernel: the source pixels a tile reads stay in cache (rotations and
#: shears walk across source rows, so an untiled pass re-reads them from memory).
WARP_TILE_H = 16
WARP_TILE_W = 256


@nb.njit(**_SERIAL)
def _warp_rows_c3(src, m0, m3, rowx, rowy, replicate, bval, out, y0, y1):
    """``_warp_rows`` for 3-channel images (fewer than 2**31 bytes) with the same float32 arithmetic, over
    output tiles, each tile row in passes: coordinates and int32 byte offsets (vectorised); one unaligned
    8-byte load per source row for the pixel pair, split into two 32-bit words (scalar gathers); the lerps
    of the three channels in 32-bit lanes (vectorised); the slow path for pixels near the border; and
    4 -> 3 byte packing with shuffles. Offsets code pixels outside as -2 (constant border) or -1 (slow path)."""
    h = src.shape[0]
    stride = src.shape[1]
    w = stride // 3
    ow = out.shape[1] // 3
    flat = src.reshape(-1)
    last = np.int32(flat.shape[0] - 8 - stride)  # largest offset whose two 8-byte loads stay inside
    TW = WARP_TILE_W
    fx = np.empty(TW, np.float32)
    fy = np.empty(TW, np.float32)
    offs = np.empty(TW, np.int32)
    lo0 = np.empty(TW, np.uint32)
    hi0 = np.empty(TW, np.uint32)
    lo1 = np.empty(TW, np.uint32)
    hi1 = np.empty(TW, np.uint32)
    tmp = np.empty(TW, np.uint32)
    tb = tmp.view(np.uint8)
    wlim = np.float32(w - 1)
    hlim = np.float32(h - 1)
    fw = np.float32(w)
    fh = np.float32(h)
    s32 = np.int32(stride)
    ustride = np.uint64(stride)
    m32 = np.uint64(0xffffffff)
    far_code = np.int32(-1) if replicate else np.int32(-2)
    bword = np.uint32(0)
    for k in range(3):
        bword |= np.uint32(np.uint8(bval[k])) << np.uint32(8 * k)
    for yb in range(y0, y1, WARP_TILE_H):
        for xb in range(0, ow, TW):
            n = min(TW, ow - xb)
            for y in range(yb, min(y1, yb + WARP_TILE_H)):
                mx0 = rowx[y]
                my0 = rowy[y]
                for j in range(n):
                    X = m0 * np.float32(xb + j) + mx0
                    Y = m3 * np.float32(xb + j) + my0
                    xf = np.floor(X)
                    yf = np.floor(Y)
                    fx[j] = X - xf
                    fy[j] = Y - yf
                    ok = (xf >= 0) & (yf >= 0) & (xf < wlim) & (yf < hlim)
                    far = (xf < -1) | (yf < -1) | (xf >= fw) | (yf >= fh)
                    o = np.int32(np.int32(np.int32(yf) * s32) + np.int32(np.int32(xf) * np.int32(3))) \
                        if ok else np.int32(-1)
                    o = o if o <= last else np.int32(-1)
                    offs[j] = far_code if far else o
                for j in range(n):
                    o = offs[j]
                    p = np.uint64(o) if o >= 0 else np.uint64(0)
                    u = _load_u64(flat, p)
                    v = _load_u64(flat, p + ustride)
                    lo0[j] = np.uint32(u & m32)
                    hi0[j] = np.uint32(u >> np.uint64(32))
                    lo1[j] = np.uint32(v & m32)
                    hi1[j] = np.uint32(v >> np.uint64(32))
                for j in range(n):
                    a0 = lo0[j]  # pixel pair bytes: lo = b0 g0 r0 b1, hi = g1 r1 . .
                    a1 = hi0[j]
                    c0 = lo1[j]
                    c1 = hi1[j]
                    ax = fx[j]
                    ay = fy[j]
                    r = np.uint32(0)
                    for k in range(3):
                        p00 = np.float32(np.int32((a0 >> np.uint32(8 * k)) & np.uint32(255)))
                        p10 = np.float32(np.int32((c0 >> np.uint32(8 * k)) & np.uint32(255)))
                        if k == 0:
                            p01 = np.float32(np.int32(a0 >> np.uint32(24)))
                            p11 = np.float32(np.int32(c0 >> np.uint32(24)))
                        else:
                            p01 = np.float32(np.int32((a1 >> np.uint32(8 * k - 8)) & np.uint32(255)))
                            p11 = np.float32(np.int32((c1 >> np.uint32(8 * k - 8)) & np.uint32(255)))
                        v0 = p00 + ax * (p01 - p00)
                        v1 = p10 + ax * (p11 - p10)
                        r |= np.uint32(np.int32(_rint_small(v0 + ay * (v1 - v0)))) << np.uint32(8 * k)
                    tmp[j] = bword if offs[j] == -2 else np.uint32(r)
                for j in range(n):
                    if offs[j] != -1:
                        continue
                    ax = fx[j]
                    ay = fy[j]
                    X = m0 * np.float32(xb + j) + mx0
                    Y = m3 * np.float32(xb + j) + my0
                    if not (-1e8 < X < 1e8 and -1e8 < Y < 1e8):
                        X = np.float32(-10.0)
                        Y = np.float32(-10.0)
                    x0 = np.int64(np.floor(X))
                    y0_ = np.int64(np.floor(Y))
                    if not replicate and (x0 < -1 or y0_ < -1 or x0 >= w or y0_ >= h):
                        tmp[j] = bword
                        continue
                    r = np.uint32(0)
                    for k in range(3):
                        p00 = _px2(src, 3, y0_, x0, k, replicate, bval[k])
                        p01 = _px2(src, 3, y0_, x0 + 1, k, replicate, bval[k])
                        p10 = _px2(src, 3, y0_ + 1, x0, k, replicate, bval[k])
                        p11 = _px2(src, 3, y0_ + 1, x0 + 1, k, replicate, bval[k])
                        v0 = p00 + ax * (p01 - p00)
                        v1 = p10 + ax * (p11 - p10)
                        vv = np.rint(v0 + ay * (v1 - v0))
                        r |= np.uint32(np.uint8(min(max(vv, np.float32(0)), np.float32(255)))) << np.uint32(8 * k)
                    tmp[j] = np.uint32(r)
                _store_rgbx_row(tb, out[y, 3 * xb:3 * (xb + n)], n)


@nb.njit(inline="always", cache=True)
def _px2(src, c, y, x, k, replicate, bv):
    h = src.shape[0]
    w = src.shape[1] // c
    if replicate:
        y = min(max(y, 0), h - 1)
        x = min(max(x, 0), w - 1)
        return np.float32(src[y, x * c + k])
    if y < 0 or x < 0 or y >= h or x >= w:
        return np.float32(bv)
    return np.float32(src[y, x * c + k])


def warp_affine_linear_u8(x: np.ndarray, M: tuple, oh: int, ow: int, border: int, value: tuple) -> np.ndarray:
    """Bilinear warpAffine of uint8 HWC data with the inverse map M (float32 coordinates, as OpenCV 5)."""
    if border not in (CV_BORDER_CONSTANT, CV_BORDER_REPLICATE):
        raise ValueError("warp kernel handles BORDER_CONSTANT and BORDER_REPLICATE only")
    m = np.asarray(M, np.float64)
    ys = np.arange(oh, dtype=np.float64)
    rowx = (ys * m[1] + m[2]).astype(np.float32)
    rowy = (ys * m[4] + m[5]).astype(np.float32)
    h, w, c = x.shape
    bval = np.array((list(value) + [0.0] * 4)[:max(c, 4)], np.float64)
    bval = np.clip(np.rint(bval), 0, 255).astype(np.float32)
    res = np.empty((oh, ow, c), np.uint8)
    src = np.ascontiguousarray(x).reshape(h, w * c)
    out = res.reshape(oh, ow * c)
    args = (src, c, np.float32(m[0]), np.float32(m[3]), rowx, rowy, border == CV_BORDER_REPLICATE, bval, out)
    chunks = n_chunks(oh * ow * c * 4, 1 << 21)
    if c == 3 and w >= 2 and h >= 2 and x.size + 8 < 1 << 31:
        run_rows(_warp_rows_c3, (src,) + args[2:], oh, chunks)
    else:
        run_rows(_warp_rows, args, oh, chunks)
    return res


# ----------------------------------------------------------------------------- cvtColor
@nb.njit(**_SERIAL)
def _swap_pixels(src, dst, p0, p1):
    """BGR <-> RGB of pixels [p0, p1) of flat 3-channel uint8 data: 10 pixels per step as two byte shuffles.
    Writes stay inside the range (the 16th byte of a shuffle is rewritten by the next one or the tail)."""
    off = 3 * p0
    end = 3 * p1
    while off + 31 <= end:
        _swap5px(src, np.uint64(off), dst, np.uint64(off))
        _swap5px(src, np.uint64(off + 15), dst, np.uint64(off + 15))
        off += 30
    while off < end:
        dst[off] = src[off + 2]
        dst[off + 1] = src[off + 1]
        dst[off + 2] = src[off]
        off += 3


@nb.njit(**_SERIAL)
def _rgbx_to_bgr_pixels(src, dst, p0, p1):
    """Pixels [p0, p1) of flat 4-channel uint8 data to 3 channels with the first and third swapped (alpha
    dropped): 4 pixels per byte shuffle, writes kept inside the range."""
    i = p0
    while i + 6 <= p1:
        _rgbx4_to_bgr(src, np.uint64(4 * i), dst, np.uint64(3 * i))
        i += 4
    while i < p1:
        dst[3 * i] = src[4 * i + 2]
        dst[3 * i + 1] = src[4 * i + 1]
        dst[3 * i + 2] = src[4 * i]
        i += 1


@nb.njit(**_SERIAL)
def _bgr_to_rgba_pixels(src, dst, p0, p1):
    """Pixels [p0, p1) of flat 3-channel uint8 data to 4 channels, first and third swapped, alpha 255: 4 pixels
    per byte shuffle (reads stay inside the range)."""
    i = p0
    while i + 6 <= p1:
        _bgr4_to_rgba(src, np.uint64(3 * i), dst, np.uint64(4 * i))
        i += 4
    while i < p1:
        dst[4 * i] = src[3 * i + 2]
        dst[4 * i + 1] = src[3 * i + 1]
        dst[4 * i + 2] = src[3 * i]
        dst[4 * i + 3] = 255
        i += 1


@nb.njit(**_SERIAL)
def _swap_rows(src, out, order, alpha_src, y0, y1):
    h, w, dc = out.shape
    for y in range(y0, y1):
        for x in range(w):
            out[y, x, 0] = src[y, x, order[0]]
            out[y, x, 1] = src[y, x, order[1]]
            out[y, x, 2] = src[y, x, order[2]]
            if dc == 4:
                out[y, x, 3] = src[y, x, 3] if alpha_src else np.uint8(255)


@nb.njit(**_SERIAL)
def _gray_rows(src, out, bidx, scn, y0, y1):
    w = out.shape[1]
    if scn == 3 and bidx == 0:  # literal strides and offsets let LLVM vectorise the common case
        for y in range(y0, y1):
            sr = src[y]
            orow = out[y]
            for x in range(w):
                orow[x] = np.uint8((np.int32(sr[3 * x]) * GRAY_B + np.int32(sr[3 * x + 1]) * GRAY_G
                                    + np.int32(sr[3 * x + 2]) * GRAY_R + (1 << (GRAY_SHIFT - 1))) >> GRAY_SHIFT)
    elif scn == 3:
        for y in range(y0, y1):
            sr = src[y]
            orow = out[y]
            for x in range(w):
                orow[x] = np.uint8((np.int32(sr[3 * x + 2]) * GRAY_B + np.int32(sr[3 * x + 1]) * GRAY_G
                                    + np.int32(sr[3 * x]) * GRAY_R + (1 << (GRAY_SHIFT - 1))) >> GRAY_SHIFT)
    else:
        for y in range(y0, y1):
            sr = src[y]
            orow = out[y]
            for x in range(w):
                i = scn * x
                orow[x] = np.uint8((np.int32(sr[i + bidx]) * GRAY_B + np.int32(sr[i + 1]) * GRAY_G
                                    + np.int32(sr[i + 2 - bidx]) * GRAY_R + (1 << (GRAY_SHIFT - 1))) >> GRAY_SHIFT)


@nb.njit(**_SERIAL)
def _gray2bgr_rows(src, out, y0, y1):
    h, w, dc = out.shape
    for y in range(y0, y1):
        for x in range(w):
            v = src[y, x, 0]
            out[y, x, 0] = v
            out[y, x, 1] = v
            out[y, x, 2] = v
            if dc == 4:
                out[y, x, 3] = 255


def cvt_color(x: np.ndarray, code: int) -> np.ndarray:
    """uint8 channel swaps, BGR->gray (14-bit fixed point) and gray->BGR(A)."""
    from mnnjit.ops.image_color import GRAY_FROM, GRAY_TO, SWAP
    x = np.ascontiguousarray(x)
    h, w = x.shape[:2]
    chunks = n_chunks_if_idle(x.size, 1 << 20)  # memory-bound passes
    if code in SWAP:
        scn, dcn, swap, _ = SWAP[code]
        out = np.empty((h, w, dcn), np.uint8)
        if scn == 3 and dcn == 3 and swap:  # byte shuffles: a second thread did not gain, idle or busy
            _swap_pixels(x.reshape(-1), out.reshape(-1), 0, h * w)
            return out
        if scn == 3 and dcn == 4 and swap:
            run_rows(_bgr_to_rgba_pixels, (x.reshape(-1), out.reshape(-1)), h * w, chunks)
            return out
        if scn == 4 and dcn == 3 and swap:
            run_rows(_rgbx_to_bgr_pixels, (x.reshape(-1), out.reshape(-1)), h * w, chunks)
            return out
        order = np.array([2, 1, 0] if swap else [0, 1, 2], np.int64)
        _swap_rows(x, out, order, scn == 4, 0, h)
        return out
    if code in GRAY_FROM:
        scn, bidx = GRAY_FROM[code]
        res = np.empty((h, w, 1), np.uint8)
        out = res.reshape(h, w)
        src = x.reshape(h, w * scn)
        run_rows(_gray_rows, (src, out, bidx, scn), h, chunks)
        return res
    if code in GRAY_TO:
        out = np.empty((h, w, GRAY_TO[code]), np.uint8)
        _gray2bgr_rows(x, out, 0, h)
        return out
    raise ValueError(f"no kernel for cvtColor code {code}")


# ----------------------------------------------------------------------------- separable filters
@nb.njit(**_SERIAL)
def _sep_chunk(src, xidx, lead, kx, yidx, ky, c, fixed, delta, u8out, out, y0, y1):
    """Rows [y0, y1) of a separable correlation, in blocks of 32 rows. ``src``/``out`` are [h, w*c];
    xidx/yidx map padded column/row positions to source ones (-1: constant zero border). ``fixed``: integer
    taps with 8 fractional bits each (exact in float32), result (sum + 2^15) >> 16 as OpenCV's bit-exact
    GaussianBlur; else float32 taps, rounded half to even."""
    wc = out.shape[1]
    nkx = kx.shape[0]
    nky = ky.shape[0]
    wp = xidx.shape[0]
    w = wc // c
    # padded positions [lead, lead + w) are source columns 0..w-1 (a plain copy)
    B = 32
    row = np.empty(wp * c, np.float32)
    hbuf = np.empty((B + nky - 1, wc), np.float32)
    acc = np.empty(wc, np.float32)
    for b0 in range(y0, y1, B):
        b1 = min(y1, b0 + B)
        nrows = b1 - b0 + nky - 1
        for r in range(nrows):
            sy = yidx[b0 + r]
            hr = hbuf[r]
            if sy < 0:
                for i in range(wc):
                    hr[i] = 0
                continue
            srow = src[sy]
            mid = row[lead * c:]  # slice views index from 0: no negative-index checks, so LLVM vectorises
            for i in range(wc):
                mid[i] = srow[i]
            for j in range(wp):
                if j < lead or j >= lead + w:
                    sx = xidx[j]
                    for k in range(c):
                        row[j * c + k] = np.float32(srow[sx * c + k]) if sx >= 0 else np.float32(0)
            if nkx == 5:  # the common 5-tap case in one pass
                q0, q1, q2, q3, q4 = row, row[c:], row[2 * c:], row[3 * c:], row[4 * c:]
                k0, k1, k2, k3, k4 = kx[0], kx[1], kx[2], kx[3], kx[4]
                for i in range(wc):
                    hr[i] = k0 * q0[i] + k1 * q1[i] + k2 * q2[i] + k3 * q3[i] + k4 * q4[i]
            else:
                k0 = kx[0]
                for i in range(wc):
                    hr[i] = k0 * row[i]
                for j in range(1, nkx):
                    kj = kx[j]
                    sub = row[j * c:]
                    for i in range(wc):
                        hr[i] += kj * sub[i]
        for y in range(b0, b1):
            r0 = y - b0
            if nky == 5:
                g0, g1, g2, g3, g4 = hbuf[r0], hbuf[r0 + 1], hbuf[r0 + 2], hbuf[r0 + 3], hbuf[r0 + 4]
                k0, k1, k2, k3, k4 = ky[0], ky[1], ky[2], ky[3], ky[4]
                for i in range(wc):
                    acc[i] = k0 * g0[i] + k1 * g1[i] + k2 * g2[i] + k3 * g3[i] + k4 * g4[i]
            else:
                k0 = ky[0]
                h0 = hbuf[r0]
                for i in range(wc):
                    acc[i] = k0 * h0[i]
                for t in range(1, nky):
                    kt = ky[t]
                    ht = hbuf[r0 + t]
                    for i in range(wc):
                        acc[i] += kt * ht[i]
            orow = out[y]
            if fixed:
                for i in range(wc):
                    orow[i] = (np.int32(acc[i]) + 32768) >> 16
            elif u8out:
                for i in range(wc):
                    orow[i] = min(max(np.rint(acc[i] + delta), np.float32(0)), np.float32(255))
            else:
                for i in range(wc):
                    orow[i] = acc[i] + delta


def sep_filter_u8(x: np.ndarray, kx, ky, anchor, border: int, delta: float, dtype: np.dtype,
                  fixed: bool = False) -> np.ndarray:
    """Separable correlation of uint8 HWC data: row blocks, contiguous inner loops; ``fixed`` uses 8-bit
    fixed-point taps (exact integer sums in float32, OpenCV's GaussianBlur rounding), else float32 taps."""
    from mnnjit.ops.image_filter import fixed_taps
    from mnnjit.ops.image_geometry import border_index
    h, w, c = x.shape
    ax, ay = anchor
    qx, qy = (fixed_taps(kx), fixed_taps(ky)) if fixed else (None, None)
    use_fixed = qx is not None and qy is not None and dtype == np.uint8 and delta == 0 and \
        len(qx) <= 5 and len(qy) <= 5
    kxa = np.asarray(qx if use_fixed else kx, np.float32)
    kya = np.asarray(qy if use_fixed else ky, np.float32)
    xidx = border_index(np.arange(-ax, w + len(kxa) - 1 - ax), w, border).astype(np.int64)
    yidx = border_index(np.arange(-ay, h + len(kya) - 1 - ay), h, border).astype(np.int64)
    src = np.ascontiguousarray(x).reshape(h, w * c)
    res = np.empty((h, w, c), dtype)
    out = res.reshape(h, w * c)
    chunks = n_chunks(x.size * (len(kxa) + len(kya)), 1 << 23)
    run_rows(_sep_chunk, (src, xidx, ax, kxa, yidx, kya, c, use_fixed, np.float32(delta), dtype == np.uint8, out),
             h, chunks)
    return res


# ----------------------------------------------------------------------------- contours
# neighbour offsets (dy, dx) counter-clockwise on screen starting east: E, NE, N, NW, W, SW, S, SE
_DY = np.array([0, -1, -1, -1, 0, 1, 1, 1], np.int64)
_DX = np.array([1, 1, 0, -1, -1, -1, 0, 1], np.int64)


@nb.njit(**_SERIAL)
def _dir_of(dy, dx):
    for k in range(8):
        if _DY[k] == dy and _DX[k] == dx:
            return k
    return -1


@nb.njit(**_SERIAL)
def suzuki_borders(f, pts, meta):
    """Suzuki & Abe border following on ``f`` (int32, 0/1, zero frame of one pixel; modified in place).

    Writes the border points (x, y in padded coordinates) of every border into ``pts`` and per border
    (start index, length, is_hole, parent id, own id) into ``meta``; returns (n_borders, n_points).
    Borders are numbered from 2 (1 is the frame, a hole border)."""
    h, w = f.shape
    nbd = 1
    nb_count = 0
    npts = 0
    # border kinds/parents by id (id 1 = frame, a hole)
    maxb = meta.shape[0] + 2
    kind = np.zeros(maxb, np.int64)
    parent = np.zeros(maxb, np.int64)
    kind[1] = 1
    for i in range(1, h - 1):
        lnbd = 1
        for j in range(1, w - 1):
            fij = f[i, j]
            if fij == 0:
                continue
            start = False
            hole = False
            if fij == 1 and f[i, j - 1] == 0:
                start = True
                i2, j2 = i, j - 1
            elif fij >= 1 and f[i, j + 1] == 0:
                start = True
                hole = True
                i2, j2 = i, j + 1
                if fij > 1:
                    lnbd = fij
            if start and nbd + 1 < maxb and nb_count < meta.shape[0]:
                nbd += 1
                kind[nbd] = 1 if hole else 0
                lk = kind[lnbd]
                if hole:
                    parent[nbd] = parent[lnbd] if lk == 1 else lnbd
                else:
                    parent[nbd] = lnbd if lk == 1 else parent[lnbd]
                s0 = npts
                # 3.1: clockwise around (i, j) from (i2, j2) for a non-zero pixel
                d = _dir_of(i2 - i, j2 - j)
                found = -1
                for t in range(8):
                    k = (d - t) % 8
                    if f[i + _DY[k], j + _DX[k]] != 0:
                        found = k
                        break
                if found < 0:
                    f[i, j] = -nbd
                    pts[npts, 0] = j
                    pts[npts, 1] = i
                    npts += 1
                else:
                    i1, j1 = i + _DY[found], j + _DX[found]
                    i2, j2 = i1, j1
                    i3, j3 = i, j
                    while True:
                        pts[npts, 0] = j3
                        pts[npts, 1] = i3
                        npts += 1
                        # 3.3: counter-clockwise around (i3, j3) starting after (i2, j2)
                        d = _dir_of(i2 - i3, j2 - j3)
                        east_zero = False
                        k4 = -1
                        for t in range(1, 9):
                            k = (d + t) % 8
                            yy, xx = i3 + _DY[k], j3 + _DX[k]
                            if f[yy, xx] != 0:
                                k4 = k
                                break
                            if k == 0:
                                east_zero = True
                        i4, j4 = i3 + _DY[k4], j3 + _DX[k4]
                        if east_zero:
                            f[i3, j3] = -nbd
                        elif f[i3, j3] == 1:
                            f[i3, j3] = nbd
                        if i4 == i and j4 == j and i3 == i1 and j3 == j1:
                            break
                        i2, j2 = i3, j3
                        i3, j3 = i4, j4
                        if npts >= pts.shape[0]:
                            break
                meta[nb_count, 0] = s0
                meta[nb_count, 1] = npts - s0
                meta[nb_count, 2] = 1 if hole else 0
                meta[nb_count, 3] = parent[nbd]
                meta[nb_count, 4] = nbd
                nb_count += 1
            fij = f[i, j]
            if fij != 1:
                lnbd = abs(fij)
    return nb_count, npts


# ----------------------------------------------------------------------------- 2-D filters and morphology
@nb.njit(**_SERIAL)
def _fill_row(srow, xidx, lead, w, c, fill, row):
    """Padded row of one source row: positions [lead, lead + w) copy the source, the others follow ``xidx``
    (-1: ``fill``)."""
    wc = w * c
    mid = row[lead * c:]
    for i in range(wc):
        mid[i] = srow[i]
    for j in range(xidx.shape[0]):
        if j < lead or j >= lead + w:
            sx = xidx[j]
            for k in range(c):
                row[j * c + k] = srow[sx * c + k] if sx >= 0 else fill


@nb.njit(**_SERIAL)
def _filter2d_rows(src, xidx, lead, yidx, kern, c, delta, u8out, out, y0, y1):
    """Rows [y0, y1) of a 2-D correlation in float32 (src [h, w*c], out [h, w*c], kern [kh, kw])."""
    wc = out.shape[1]
    w = wc // c
    kh, kw = kern.shape
    wp = xidx.shape[0]
    rows = np.empty((kh, wp * c), np.float32)
    acc = np.empty(wc, np.float32)
    for y in range(y0, y1):
        for i in range(kh):
            sy = yidx[y + i]
            if sy < 0:
                rows[i, :] = 0
            else:
                _fill_row(src[sy], xidx, lead, w, c, np.float32(0), rows[i])
        acc[:] = delta
        for i in range(kh):
            r = rows[i]
            for j in range(kw):
                kv = kern[i, j]
                if kv != 0:
                    sub = r[j * c:]
                    for q in range(wc):
                        acc[q] += kv * sub[q]
        orow = out[y]
        if u8out:
            for q in range(wc):
                orow[q] = min(max(np.rint(acc[q]), np.float32(0)), np.float32(255))
        else:
            for q in range(wc):
                orow[q] = acc[q]


def filter2d(x: np.ndarray, kernel, anchor, border: int, delta: float, dtype: np.dtype) -> np.ndarray:
    """2-D correlation of uint8/float32 HWC data (float32 accumulation)."""
    from mnnjit.ops.image_geometry import border_index
    h, w, c = x.shape
    k = np.asarray(kernel, np.float32)
    kh, kw = k.shape
    ax, ay = anchor
    xidx = border_index(np.arange(-ax, w + kw - 1 - ax), w, border).astype(np.int64)
    yidx = border_index(np.arange(-ay, h + kh - 1 - ay), h, border).astype(np.int64)
    res = np.empty((h, w, c), dtype)
    out = res.reshape(h, w * c)
    src = np.ascontiguousarray(x).reshape(h, w * c)
    run_rows(_filter2d_rows, (src, xidx, ax, yidx, k, c, np.float32(delta), dtype == np.uint8, out), h,
             n_chunks(x.size * int((k != 0).sum()), 1 << 24))
    return res


@nb.njit(**_SERIAL)
def _morph_rows(src, xidx, lead, yidx, mask, c, erode, fill, out, y0, y1):
    """Rows [y0, y1) of erosion (min) or dilation (max) over the taps where ``mask`` is set."""
    wc = out.shape[1]
    w = wc // c
    kh, kw = mask.shape
    wp = xidx.shape[0]
    rows = np.empty((kh, wp * c), src.dtype)
    acc = np.empty(wc, src.dtype)
    for y in range(y0, y1):
        for i in range(kh):
            sy = yidx[y + i]
            if sy < 0:
                rows[i, :] = fill
            else:
                _fill_row(src[sy], xidx, lead, w, c, fill, rows[i])
        first = True
        for i in range(kh):
            r = rows[i]
            for j in range(kw):
                if mask[i, j]:
                    sub = r[j * c:]
                    if first:
                        for q in range(wc):
                            acc[q] = sub[q]
                        first = False
                    elif erode:
                        for q in range(wc):
                            acc[q] = min(acc[q], sub[q])
                    else:
                        for q in range(wc):
                            acc[q] = max(acc[q], sub[q])
        out[y, :] = acc


def morphology(x: np.ndarray, kernel, anchor, op: str, iterations: int, border: int, value) -> np.ndarray:
    """erode / dilate of HWC data with a 0/1 structuring element (BORDER_CONSTANT pads with ``value`` or the
    neutral element)."""
    from mnnjit.ops.image_geometry import CV_BORDER_CONSTANT, border_index
    h, w, c = x.shape
    mask = np.asarray(kernel) != 0
    kh, kw = mask.shape
    ax, ay = anchor
    erode = op == "erode"
    if x.dtype.kind == "f":
        neutral = np.inf if erode else -np.inf
    else:
        info = np.iinfo(x.dtype)
        neutral = info.max if erode else info.min
    fill = x.dtype.type(neutral if value is None or border != CV_BORDER_CONSTANT else value)
    xidx = border_index(np.arange(-ax, w + kw - 1 - ax), w, border).astype(np.int64)
    yidx = border_index(np.arange(-ay, h + kh - 1 - ay), h, border).astype(np.int64)
    cur = np.ascontiguousarray(x).reshape(h, w * c)
    if not mask.any():
        return np.array(x)
    for _ in range(max(int(iterations), 1)):
        nxt = np.empty_like(cur)
        run_rows(_morph_rows, (cur, xidx, ax, yidx, mask, c, erode, fill, nxt), h,
                 n_chunks(x.size * int(mask.sum()), 1 << 25))
        cur = nxt
    return cur.reshape(h, w, c)


# ----------------------------------------------------------------------------- warpPerspective / remap (bilinear)
@nb.njit(**_SERIAL)
def _lerp_row(src, c, fx, fy, replicate, bval, orow):
    """One output row of bilinear sampling at float32 coordinates (fx[x], fy[x]) (OpenCV 5's float path)."""
    h = src.shape[0]
    w = src.shape[1] // c
    ow = fx.shape[0]
    stride = src.shape[1]
    flat = src.reshape(-1)
    for x in range(ow):
        X = fx[x]
        Y = fy[x]
        if not (-1e8 < X < 1e8 and -1e8 < Y < 1e8):
            X = np.float32(-10.0)
            Y = np.float32(-10.0)
        xf = np.floor(X)
        yf = np.floor(Y)
        ax = X - xf
        ay = Y - yf
        x0 = np.int64(xf)
        y0 = np.int64(yf)
        o = x * c
        if x0 >= 0 and y0 >= 0 and x0 + 1 < w and y0 + 1 < h:
            p = np.uint64(y0) * np.uint64(stride) + np.uint64(x0) * np.uint64(c)
            q = p + np.uint64(stride)
            for k in range(c):
                uk = np.uint64(k)
                p00 = np.float32(flat[p + uk])
                p01 = np.float32(flat[p + uk + np.uint64(c)])
                p10 = np.float32(flat[q + uk])
                p11 = np.float32(flat[q + uk + np.uint64(c)])
                v0 = p00 + ax * (p01 - p00)
                v1 = p10 + ax * (p11 - p10)
                orow[o + k] = np.uint8(np.rint(v0 + ay * (v1 - v0)))
        elif not replicate and (x0 < -1 or y0 < -1 or x0 >= w or y0 >= h):
            for k in range(c):
                orow[o + k] = np.uint8(bval[k])
        else:
            for k in range(c):
                p00 = _px2(src, c, y0, x0, k, replicate, bval[k])
                p01 = _px2(src, c, y0, x0 + 1, k, replicate, bval[k])
                p10 = _px2(src, c, y0 + 1, x0, k, replicate, bval[k])
                p11 = _px2(src, c, y0 + 1, x0 + 1, k, replicate, bval[k])
                v0 = p00 + ax * (p01 - p00)
                v1 = p10 + ax * (p11 - p10)
                v = np.rint(v0 + ay * (v1 - v0))
                orow[o + k] = np.uint8(min(max(v, np.float32(0)), np.float32(255)))


@nb.njit(**_SERIAL)
def _persp_rows(src, c, m, rowx, rowy, roww, replicate, bval, out, y0, y1):
    ow = out.shape[1] // c
    fx = np.empty(ow, np.float32)
    fy = np.empty(ow, np.float32)
    m0 = np.float32(m[0])
    m3 = np.float32(m[3])
    m6 = np.float32(m[6])
    for y in range(y0, y1):
        for x in range(ow):
            xx = np.float32(x)
            wv = m6 * xx + roww[y]
            fx[x] = (m0 * xx + rowx[y]) / wv
            fy[x] = (m3 * xx + rowy[y]) / wv
        _lerp_row(src, c, fx, fy, replicate, bval, out[y])


@nb.njit(**_SERIAL)
def _remap_rows(src, c, mapx, mapy, replicate, bval, out, y0, y1):
    for y in range(y0, y1):
        _lerp_row(src, c, mapx[y], mapy[y], replicate, bval, out[y])


def _bval(value, c):
    b = np.array((list(value) + [0.0] * 4)[:max(c, 4)], np.float64)
    return np.clip(np.rint(b), 0, 255).astype(np.float32)


def warp_perspective_linear_u8(x: np.ndarray, M: tuple, oh: int, ow: int, border: int, value: tuple) -> np.ndarray:
    """Bilinear warpPerspective of uint8 HWC data with the inverse homography M (float32 coordinates)."""
    m = np.asarray(M, np.float64)
    ys = np.arange(oh, dtype=np.float64)
    rowx = (ys * m[1] + m[2]).astype(np.float32)
    rowy = (ys * m[4] + m[5]).astype(np.float32)
    roww = (ys * m[7] + m[8]).astype(np.float32)
    h, w, c = x.shape
    res = np.empty((oh, ow, c), np.uint8)
    args = (np.ascontiguousarray(x).reshape(h, w * c), c, m, rowx, rowy, roww, border == CV_BORDER_REPLICATE,
            _bval(value, c), res.reshape(oh, ow * c))
    run_rows(_persp_rows, args, oh, n_chunks(oh * ow * c * 4, 1 << 21))
    return res


def remap_linear_u8(x: np.ndarray, mx: np.ndarray, my: np.ndarray, border: int, value: tuple) -> np.ndarray:
    """Bilinear remap of uint8 HWC data at float32 maps."""
    h, w, c = x.shape
    oh, ow = mx.shape
    res = np.empty((oh, ow, c), np.uint8)
    args = (np.ascontiguousarray(x).reshape(h, w * c), c, np.ascontiguousarray(mx, np.float32),
            np.ascontiguousarray(my, np.float32), border == CV_BORDER_REPLICATE, _bval(value, c),
            res.reshape(oh, ow * c))
    run_rows(_remap_rows, args, oh, n_chunks(oh * ow * c * 4, 1 << 21))
    return res


# ----------------------------------------------------------------------------- resize with general taps
@nb.njit(**_SERIAL)
def _resize_int_rows(src, yi, by, xo, ax, out, y0, y1):
    """uint8 resize with integer taps: v = sum_t by[t] * sum_k ax[k] * src[yi[t], xo[k]]; (v + 2^21) >> 22."""
    n = out.shape[1]
    kx = xo.shape[0]
    ky = yi.shape[1]
    acc = np.empty(n, np.int64)
    hs = np.empty(n, np.int64)
    for dy in range(y0, y1):
        acc[:] = 0
        for t in range(ky):
            s = src[yi[dy, t]]
            b = by[dy, t]
            hs[:] = 0
            for k in range(kx):
                o = xo[k]
                a = ax[k]
                for j in range(n):
                    hs[j] += np.int64(s[o[j]]) * a[j]
            for j in range(n):
                acc[j] += hs[j] * b
        orow = out[dy]
        for j in range(n):
            orow[j] = min(max((acc[j] + (1 << 21)) >> 22, 0), 255)


@nb.njit(**_SERIAL)
def _resize_float_rows(src, yi, yw, xo, xw, u8out, out, y0, y1):
    """Resize with float taps, vertical pass first then horizontal, float32 (the reference's order)."""
    n = out.shape[1]
    wc = src.shape[1]
    kx = xo.shape[0]
    ky = yi.shape[1]
    vrow = np.empty(wc, np.float32)
    acc = np.empty(n, np.float32)
    for dy in range(y0, y1):
        s0 = src[yi[dy, 0]]
        b0 = yw[dy, 0]
        for i in range(wc):
            vrow[i] = np.float32(s0[i]) * b0
        for t in range(1, ky):
            s = src[yi[dy, t]]
            b = yw[dy, t]
            for i in range(wc):
                vrow[i] = vrow[i] + np.float32(s[i]) * b
        o0 = xo[0]
        a0 = xw[0]
        for j in range(n):
            acc[j] = vrow[o0[j]] * a0[j]
        for k in range(1, kx):
            o = xo[k]
            a = xw[k]
            for j in range(n):
                acc[j] = acc[j] + vrow[o[j]] * a[j]
        orow = out[dy]
        if u8out:
            for j in range(n):
                orow[j] = min(max(np.rint(acc[j]), np.float32(0)), np.float32(255))
        else:
            for j in range(n):
                orow[j] = acc[j]


def _flat_cols(xi: np.ndarray, c: int) -> np.ndarray:
    """[k, ow*c] unsigned byte offsets of each tap for each output element."""
    ch = np.arange(c, dtype=np.uint64)
    return np.ascontiguousarray(np.stack([(xi[:, k:k + 1].astype(np.uint64) * np.uint64(c) + ch).ravel()
                                          for k in range(xi.shape[1])]))


def _flat_w(w: np.ndarray, c: int, dtype) -> np.ndarray:
    return np.ascontiguousarray(np.stack([np.repeat(w[:, k], c) for k in range(w.shape[1])]).astype(dtype))


def resize_general(x: np.ndarray, oh: int, ow: int, interp: int, sy: float, sx: float) -> np.ndarray | None:
    """Cubic / Lanczos / area resizes (uint8 integer taps or float32 taps); None for plans without a kernel."""
    from mnnjit.ops.image_geometry import resize_plan
    h, w, c = x.shape
    plan = resize_plan(h, w, oh, ow, interp, sy, sx, x.dtype)
    src = np.ascontiguousarray(x).reshape(h, w * c)
    if plan[0] == "int_taps":
        yi, by, xi, ax = plan[1:]
        res = np.empty((oh, ow, c), np.uint8)
        run_rows(_resize_int_rows, (src, np.ascontiguousarray(yi, np.int64), np.ascontiguousarray(by, np.int64),
                                    _flat_cols(xi, c), _flat_w(ax, c, np.int64), res.reshape(oh, ow * c)),
                 oh, n_chunks(oh * ow * c * yi.shape[1] * xi.shape[1], 1 << 23))
        return res
    if plan[0] == "float_taps" and x.dtype in (np.uint8, np.float32):
        yi, yw, xi, xw = plan[1:]
        res = np.empty((oh, ow, c), x.dtype)
        run_rows(_resize_float_rows, (src, np.ascontiguousarray(yi, np.int64), np.ascontiguousarray(yw, np.float32),
                                      _flat_cols(xi, c), _flat_w(xw, c, np.float32), x.dtype == np.uint8,
                                      res.reshape(oh, ow * c)),
                 oh, n_chunks(oh * w * c * yi.shape[1], 1 << 23))
        return res
    return None


@nb.njit(**_SERIAL)
def _area_int_rows(src, isy, isx, c, scale, out, y0, y1):
    """Integer-factor INTER_AREA of uint8 data: block sums, (s + 2) >> 2 for 2x2, else rint(s * scale)."""
    n = out.shape[1]
    ow = n // c
    acc = np.empty(n, np.int32)
    for dy in range(y0, y1):
        acc[:] = 0
        for t in range(isy):
            s = src[dy * isy + t]
            for x in range(ow):
                base = x * isx * c
                for k in range(c):
                    v = np.int32(0)
                    for q in range(isx):
                        v += np.int32(s[base + q * c + k])
                    acc[x * c + k] += v
        orow = out[dy]
        if isx * isy == 4:
            for j in range(n):
                orow[j] = (acc[j] + 2) >> 2
        else:
            for j in range(n):
                orow[j] = min(max(np.rint(np.float32(acc[j]) * scale), np.float32(0)), np.float32(255))


def resize_area_int(x: np.ndarray, oh: int, ow: int, isy: int, isx: int) -> np.ndarray:
    """uint8 INTER_AREA by integer factors (exactly the reference's arithmetic)."""
    h, w, c = x.shape
    res = np.empty((oh, ow, c), np.uint8)
    run_rows(_area_int_rows, (np.ascontiguousarray(x).reshape(h, w * c), isy, isx, c,
                              np.float32(1.0 / (isx * isy)), res.reshape(oh, ow * c)), oh,
             n_chunks(h * w * c, 1 << 23))
    return res


# ----------------------------------------------------------------------------- BGR -> HSV (uint8)
@nb.njit(**_SERIAL)
def _hsv_rows(src, bidx, hrange, sdiv, hdiv, out, y0, y1):
    w = out.shape[1] // 3
    for y in range(y0, y1):
        s = src[y]
        o = out[y]
        for x in range(w):
            i = 3 * x
            b = np.int32(s[i + bidx])
            g = np.int32(s[i + 1])
            r = np.int32(s[i + 2 - bidx])
            v = max(max(b, g), r)
            vmin = min(min(b, g), r)
            diff = v - vmin
            sat = (diff * sdiv[v] + (1 << 11)) >> 12
            if v == r:
                hh = g - b
            elif v == g:
                hh = b - r + 2 * diff
            else:
                hh = r - g + 4 * diff
            hh = (hh * hdiv[diff] + (1 << 11)) >> 12
            if hh < 0:
                hh += hrange
            o[i] = np.uint8(hh & 255)
            o[i + 1] = np.uint8(sat)
            o[i + 2] = np.uint8(v)


def bgr_to_hsv(x: np.ndarray, bidx: int, full: bool) -> np.ndarray:
    """OpenCV's table-based uint8 RGB->HSV (12-bit fixed point)."""
    from mnnjit.ops.image_color import _hsv_tables
    hrange = 256 if full else 180
    sdiv, hdiv = _hsv_tables(hrange)
    h, w, _ = x.shape
    res = np.empty((h, w, 3), np.uint8)
    run_rows(_hsv_rows, (np.ascontiguousarray(x).reshape(h, w * 3), bidx, hrange, sdiv.astype(np.int32),
                         hdiv.astype(np.int32), res.reshape(h, w * 3)), h, n_chunks(x.size * 8, 1 << 24))
    return res
