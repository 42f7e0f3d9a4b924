"""The OpenCL kernel library: convolutions, GEMM, pooling, softmax, normalisations, resize and copies.

Every kernel takes its geometry as runtime arguments, so one program per kernel (built once per
device and storage type, then loaded from the disk cache) serves every layer of every model. Activations are
``store_t`` - ``float``, or ``half`` under precision=low, read and written through ``LD``/``ST``
(``vload_half``/``vstore_half``: half storage with float arithmetic on any device); weights, biases
and resize taps are float. Accumulation is in float.

Epilogues (convolutions, GEMM): ``bias`` (none / per output row / per output column), a residual
``res`` (same layout as the output, added before the activation) and an activation code
(:data:`ACT_CODES`).
"""
from __future__ import annotations

#: activation codes of the epilogues (the CPU kernel steps use the same numbering)
ACT_CODES = {"": 0, "none": 0, "relu": 1, "relu6": 2, "sigmoid": 3, "tanh": 4, "hard_swish": 5, "silu": 6}

#: GEMM tile: TM x TN outputs per work-group of (TN / WN) x (TM / WM) work-items, TK deep
TM, TN, TK, WM, WN = 64, 64, 16, 4, 4
#: rows per work-item of the register-blocked GEMM (no local memory)
RM = 8
GEMM_LOCAL = (TN // WN, TM // WM)
#: lanes of the row kernels (softmax, normalisations, global pooling, GEMV)
ROW_LOCAL = 64

_HEAD = r"""
#ifdef STORE_HALF
#define store_t half
#define LD(p, i) vload_half((i), (p))
#define ST(p, i, v) vstore_half((v), (i), (p))
#define LD8(p, i) vload_half8(0, (p) + (i))
#define ST8(p, i, v) vstore_half8((v), 0, (p) + (i))
#else
#define store_t float
#define LD(p, i) ((p)[(i)])
#define ST(p, i, v) ((p)[(i)] = (v))
#define LD8(p, i) vload8(0, (p) + (i))
#define ST8(p, i, v) vstore8((v), 0, (p) + (i))
#endif

static inline float act(float v, int code) {
    switch (code) {
    case 1: return fmax(v, 0.0f);
    case 2: return fmin(fmax(v, 0.0f), 6.0f);
    case 3: return 1.0f / (1.0f + exp(-v));
    case 4: return tanh(v);
    case 5: return v * fmin(fmax(v + 3.0f, 0.0f), 6.0f) / 6.0f;
    case 6: return v / (1.0f + exp(-v));
    default: return v;
    }
}

static inline float8 act8(float8 v, int code) {
    switch (code) {
    case 1: return fmax(v, (float8)(0.0f));
    case 2: return fmin(fmax(v, (float8)(0.0f)), (float8)(6.0f));
    case 3: return 1.0f / (1.0f + exp(-v));
    case 4: return tanh(v);
    case 5: return v * fmin(fmax(v + 3.0f, (float8)(0.0f)), (float8)(6.0f)) / 6.0f;
    case 6: return v / (1.0f + exp(-v));
    default: return v;
    }
}
"""

# A tiled GEMM C[z] = act(A[z] B[z] + bias + res) over a batch z = zo * G + zg (convolution groups:
# G > 1). Each work-group computes a TM x TN tile, each work-item WM x WN outputs spaced by the
# work-group's extent (coalesced loads and stores); A and B tiles pass through local memory.
# {LOAD_A}/{LOAD_B} read one element of each operand: plain strided loads, or the convolution's
# implicit im2col gather.
_GEMM = r"""
__kernel __attribute__((reqd_work_group_size(LX, LY, 1)))
void {NAME}(__global const {A_T} *restrict A, __global const store_t *restrict B, __global store_t *restrict C,
            __global const float *restrict bias, __global const store_t *restrict res,
            const int M, const int N, const int K,
            const int sam, const int sak, const int sbk, const int sbn, const int scm, const int scn,
            const int G, const int az_o, const int az_g, const int bz_o, const int bz_g,
            const int cz_o, const int cz_g, const int bias_mode, const int has_res, const int act_code
            {EXTRA_ARGS})
{
    __local float As[TK][TM + 1];
    __local float Bs[TK][TN];
    const int tx = get_local_id(0), ty = get_local_id(1);
    const int tid = ty * LX + tx;
    const int n0 = get_group_id(0) * TN, m0 = get_group_id(1) * TM;
    const int z = get_global_id(2);
    const int zo = z / G, zg = z - (z / G) * G;
    const int aoff = zo * az_o + zg * az_g, boff = zo * bz_o + zg * bz_g, coff = zo * cz_o + zg * cz_g;
    {PRE_B}
    float acc[WM][WN];
    for (int i = 0; i < WM; ++i) for (int j = 0; j < WN; ++j) acc[i][j] = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TK) {
        for (int l = tid; l < TM * TK; l += LX * LY) {
            const int kk = l % TK, mm = l / TK;
            const int m = m0 + mm, k = k0 + kk;
            As[kk][mm] = (m < M && k < K) ? {LOAD_A} : 0.0f;
        }
        for (int l = tid; l < TN * TK; l += LX * LY) {
            const int nn = l % TN, kk = l / TN;
            const int n = n0 + nn, k = k0 + kk;
            Bs[kk][nn] = (n < N && k < K) ? {LOAD_B} : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int kk = 0; kk < TK; ++kk) {
            float a[WM], b[WN];
            for (int i = 0; i < WM; ++i) a[i] = As[kk][ty + i * LY];
            for (int j = 0; j < WN; ++j) b[j] = Bs[kk][tx + j * LX];
            for (int i = 0; i < WM; ++i) for (int j = 0; j < WN; ++j) acc[i][j] = mad(a[i], b[j], acc[i][j]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int i = 0; i < WM; ++i) {
        const int m = m0 + ty + i * LY;
        if (m >= M) continue;
        for (int j = 0; j < WN; ++j) {
            const int n = n0 + tx + j * LX;
            if (n >= N) continue;
            float v = acc[i][j];
            if (bias_mode == 1) v += bias[zg * M + m];
            else if (bias_mode == 2) v += bias[n];
            const int ci = coff + m * scm + n * scn;
            if (has_res) v += LD(res, ci);
            ST(C, ci, act(v, act_code));
        }
    }
}
"""

# The same product without local memory: each work-item computes RM rows of one output column,
# adjacent work-items adjacent columns (their B loads and C stores are contiguous, A's are shared).
# CPU OpenCL drivers (PoCL) vectorise this across work-items; the tiled kernel's barriers serialise
# them there. Same arguments as the tiled kernel.
_GEMM_R = r"""
__kernel void {NAME}(__global const {A_T} *restrict A, __global const store_t *restrict B, __global store_t *restrict C,
            __global const float *restrict bias, __global const store_t *restrict res,
            const int M, const int N, const int K,
            const int sam, const int sak, const int sbk, const int sbn, const int scm, const int scn,
            const int G, const int az_o, const int az_g, const int bz_o, const int bz_g,
            const int cz_o, const int cz_g, const int bias_mode, const int has_res, const int act_code
            {EXTRA_ARGS})
{
    const int n = get_global_id(0), m0 = get_global_id(1) * RM, z = get_global_id(2);
    if (n >= N) return;
    const int zo = z / G, zg = z - (z / G) * G;
    const int aoff = zo * az_o + zg * az_g, boff = zo * bz_o + zg * bz_g, coff = zo * cz_o + zg * cz_g;
    {PRE_B}
    float acc[RM];
    for (int i = 0; i < RM; ++i) acc[i] = 0.0f;
    const int mr = min(RM, M - m0);
    if (mr == RM) {
        for (int k = 0; k < K; ++k) {
            const float b = {LOAD_B};
            for (int i = 0; i < RM; ++i) { const int m = m0 + i; acc[i] = mad({LOAD_A}, b, acc[i]); }
        }
    } else {
        for (int k = 0; k < K; ++k) {
            const float b = {LOAD_B};
            for (int i = 0; i < mr; ++i) { const int m = m0 + i; acc[i] = mad({LOAD_A}, b, acc[i]); }
        }
    }
    for (int i = 0; i < mr; ++i) {
        const int m = m0 + i;
        float v = acc[i];
        if (bias_mode == 1) v += bias[zg * M + m];
        else if (bias_mode == 2) v += bias[n];
        const int ci = coff + m * scm + n * scn;
        if (has_res) v += LD(res, ci);
        ST(C, ci, act(v, act_code));
    }
}
"""

# The register-blocked product 8 columns wide with vector loads and stores, for rows of B and C
# that are contiguous along n (1x1 convolutions): RM rows x 8 columns per work-item. CPU drivers
# run the float8 arithmetic as SIMD. Rows past M repeat the last row (computed, not stored);
# a ragged last column block runs scalar.
_GEMM_V = r"""
__kernel void {NAME}(__global const {A_T} *restrict A, __global const store_t *restrict B, __global store_t *restrict C,
            __global const float *restrict bias, __global const store_t *restrict res,
            const int M, const int N, const int K,
            const int sam, const int sak, const int sbk, const int sbn, const int scm, const int scn,
            const int G, const int az_o, const int az_g, const int bz_o, const int bz_g,
            const int cz_o, const int cz_g, const int bias_mode, const int has_res, const int act_code)
{
    const int n0 = get_global_id(0) * 8, m0 = get_global_id(1) * RM, z = get_global_id(2);
    if (n0 >= N || m0 >= M) return;
    const int zo = z / G, zg = z - (z / G) * G;
    const int aoff = zo * az_o + zg * az_g, boff = zo * bz_o + zg * bz_g, coff = zo * cz_o + zg * cz_g;
    const int mr = min(RM, M - m0);
    int ar[RM];
    for (int i = 0; i < RM; ++i) ar[i] = aoff + min(m0 + i, M - 1) * sam;
    if (n0 + 8 > N) {
        for (int n = n0; n < N; ++n) {
            for (int i = 0; i < mr; ++i) {
                const int m = m0 + i;
                float v = 0.0f;
                for (int k = 0; k < K; ++k) v = mad({LOAD_A1}, LD(B, boff + k * sbk + n), v);
                if (bias_mode == 1) v += bias[zg * M + m];
                else if (bias_mode == 2) v += bias[n];
                const int ci = coff + m * scm + n;
                if (has_res) v += LD(res, ci);
                ST(C, ci, act(v, act_code));
            }
        }
        return;
    }
    float8 acc[RM];
    for (int i = 0; i < RM; ++i) acc[i] = (float8)(0.0f);
    for (int k = 0; k < K; ++k) {
        const float8 b = LD8(B, boff + k * sbk + n0);
        for (int i = 0; i < RM; ++i) acc[i] = mad((float8)({LOAD_AR}), b, acc[i]);
    }
    for (int i = 0; i < mr; ++i) {
        const int m = m0 + i;
        float8 v = acc[i];
        if (bias_mode == 1) v += (float8)(bias[zg * M + m]);
        else if (bias_mode == 2) v += vload8(0, bias + n0);
        const int ci = coff + m * scm + n0;
        if (has_res) v += LD8(res, ci);
        ST8(C, ci, act8(v, act_code));
    }
}
"""

_CONV_ARGS = (", const int Cg, const int H, const int W, const int KH, const int KW, const int SH, const int SW,"
              " const int PT, const int PL, const int DH, const int DW, const int OW")
_CONV_PRE = "const int KHW = KH * KW; const int HW = H * W;"
_CONV_LOAD = ("conv_load(B, boff, k, n, KHW, KW, OW, SH, SW, PT, PL, DH, DW, H, W, HW)")

_CONV_HELPER = r"""
static inline float conv_load(__global const store_t *restrict B, int boff, int k, int n, int KHW, int KW, int OW,
                       int SH, int SW, int PT, int PL, int DH, int DW, int H, int W, int HW) {
    const int ci = k / KHW, r = k - ci * KHW;
    const int ky = r / KW, kx = r - ky * KW;
    const int oy = n / OW, ox = n - oy * OW;
    const int iy = oy * SH - PT + ky * DH, ix = ox * SW - PL + kx * DW;
    if (iy < 0 || iy >= H || ix < 0 || ix >= W) return 0.0f;
    return LD(B, boff + ci * HW + iy * W + ix);
}
"""

_K_GEMV_W = r"""

// y[z][m] = act(sum_k A[z][m][k] x[z][k] + bias) for thin products (a classifier): one work-group
// per output, its lanes striding over k and combining in local memory.
__kernel __attribute__((reqd_work_group_size(RL, 1, 1)))
void gemv_w(__global const float *restrict A, __global const store_t *restrict X, __global store_t *restrict Y,
            __global const float *restrict bias, const int M, const int K, const int sam, const int sak,
            const int sx, const int sy, const int az, const int xz, const int yz, const int bias_mode,
            const int act_code)
{
    __local float part[RL];
    const int m = get_group_id(0), z = get_group_id(1), lane = get_local_id(0);
    const int ao = z * az + m * sam, xo = z * xz;
    float acc = 0.0f;
    for (int k = lane; k < K; k += RL) acc = mad(A[ao + k * sak], LD(X, xo + k * sx), acc);
    part[lane] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = RL / 2; s > 0; s >>= 1) {
        if (lane < s) part[lane] += part[lane + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lane == 0) {
        float v = part[0];
        if (bias_mode == 1) v += bias[m];
        ST(Y, z * yz + m * sy, act(v, act_code));
    }
}
"""

_K_DEPTHWISE = r"""
__kernel void depthwise(__global const store_t *restrict X, __global const float *restrict Wt,
                        __global const float *restrict bias, __global store_t *restrict Y,
                        __global const store_t *restrict res,
                        const int C, const int H, const int W, const int OH, const int OW, const int KH, const int KW,
                        const int SH, const int SW, const int PT, const int PL, const int DH, const int DW,
                        const int has_bias, const int has_res, const int act_code)
{
    const int ox = get_global_id(0), oy = get_global_id(1), nc = get_global_id(2);
    if (ox >= OW || oy >= OH) return;
    const int c = nc % C;
    const int xo = nc * H * W, wo = c * KH * KW;
    const int iy0 = oy * SH - PT, ix0 = ox * SW - PL;
    float acc = has_bias ? bias[c] : 0.0f;
    for (int ky = 0; ky < KH; ++ky) {
        const int iy = iy0 + ky * DH;
        if (iy < 0 || iy >= H) continue;
        for (int kx = 0; kx < KW; ++kx) {
            const int ix = ix0 + kx * DW;
            if (ix < 0 || ix >= W) continue;
            acc = mad(LD(X, xo + iy * W + ix), Wt[wo + ky * KW + kx], acc);
        }
    }
    const int yo = (nc * OH + oy) * OW + ox;
    if (has_res) acc += LD(res, yo);
    ST(Y, yo, act(acc, act_code));
}
"""

_K_DECONV = r"""
// Transposed convolution as a gather: each output sums the inputs whose taps land on it.
// Weights [C_in][O/G][KH][KW].
__kernel void deconv(__global const store_t *restrict X, __global const float *restrict Wt,
                     __global const float *restrict bias, __global store_t *restrict Y,
                     const int C, const int H, const int W, const int O, const int OH, const int OW,
                     const int KH, const int KW, const int SH, const int SW, const int PT, const int PL,
                     const int DH, const int DW, const int G, const int has_bias, const int act_code)
{
    const int ox = get_global_id(0), oy = get_global_id(1), no = get_global_id(2);
    if (ox >= OW || oy >= OH) return;
    const int n = no / O, o = no - n * O;
    const int Og = O / G, Cg = C / G;
    const int g = o / Og, og = o - g * Og;
    float acc = has_bias ? bias[o] : 0.0f;
    for (int ky = 0; ky < KH; ++ky) {
        const int ty = oy + PT - ky * DH;
        if (ty < 0 || ty % SH) continue;
        const int iy = ty / SH;
        if (iy >= H) continue;
        for (int kx = 0; kx < KW; ++kx) {
            const int tx = ox + PL - kx * DW;
            if (tx < 0 || tx % SW) continue;
            const int ix = tx / SW;
            if (ix >= W) continue;
            for (int cc = 0; cc < Cg; ++cc) {
                const int ci = g * Cg + cc;
                acc = mad(LD(X, ((n * C + ci) * H + iy) * W + ix), Wt[((ci * Og + og) * KH + ky) * KW + kx], acc);
            }
        }
    }
    ST(Y, (no * OH + oy) * OW + ox, act(acc, act_code));
}
"""

_K_POOL = r"""
// Max pooling clamps window cells to the input (a window in the padding takes the nearest edge cell);
// average pooling sums the real cells and divides by the window clipped as count_include_pad says.
__kernel void pool(__global const store_t *restrict X, __global store_t *restrict Y,
                   const int H, const int W, const int OH, const int OW, const int KH, const int KW,
                   const int SH, const int SW, const int PT, const int PB, const int PL, const int PR,
                   const int is_max, const int include_pad)
{
    const int ox = get_global_id(0), oy = get_global_id(1), nc = get_global_id(2);
    if (ox >= OW || oy >= OH) return;
    const int xo = nc * H * W;
    const int y0 = oy * SH - PT, x0 = ox * SW - PL;
    float v;
    if (is_max) {
        v = -INFINITY;
        for (int ky = 0; ky < KH; ++ky) {
            const int iy = clamp(y0 + ky, 0, H - 1);
            for (int kx = 0; kx < KW; ++kx) {
                const float t = LD(X, xo + iy * W + clamp(x0 + kx, 0, W - 1));
                v = (t > v || t != t) ? t : v;
            }
        }
    } else {
        float s = 0.0f;
        const int ya = max(y0, 0), yb = min(y0 + KH, H), xa = max(x0, 0), xb = min(x0 + KW, W);
        for (int iy = ya; iy < yb; ++iy)
            for (int ix = xa; ix < xb; ++ix) s += LD(X, xo + iy * W + ix);
        int ch, cw;
        if (include_pad) { ch = min(y0 + KH, H + PB) - y0; cw = min(x0 + KW, W + PR) - x0; }
        else { ch = yb - ya; cw = xb - xa; }
        ch = max(ch, 0); cw = max(cw, 0);
        v = s / fmax((float)(ch * cw), 1.0f);
    }
    ST(Y, (nc * OH + oy) * OW + ox, v);
}
"""

_K_GLOBAL_POOL = r"""
// Global average / max pooling: one work-group per (n, c) plane.
__kernel __attribute__((reqd_work_group_size(RL, 1, 1)))
void global_pool(__global const store_t *restrict X, __global store_t *restrict Y, const int HW, const int is_max)
{
    __local float part[RL];
    const int p = get_group_id(0), lane = get_local_id(0);
    const int xo = p * HW;
    float acc = is_max ? -INFINITY : 0.0f;
    for (int i = lane; i < HW; i += RL) {
        const float t = LD(X, xo + i);
        if (is_max) acc = (t > acc || t != t) ? t : acc; else acc += t;
    }
    part[lane] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = RL / 2; s > 0; s >>= 1) {
        if (lane < s) {
            const float t = part[lane + s];
            if (is_max) part[lane] = (t > part[lane] || t != t) ? t : part[lane]; else part[lane] += t;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lane == 0) ST(Y, p, is_max ? part[0] : part[0] / (float)HW);
}
"""

_K_ROW_SUM = r"""
static inline float row_sum(__local float *part, int lane, float v) {
    part[lane] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = RL / 2; s > 0; s >>= 1) {
        if (lane < s) part[lane] += part[lane + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float r = part[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}
"""

_K_ROW_MAX = r"""
static inline float row_max(__local float *part, int lane, float v) {
    part[lane] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = RL / 2; s > 0; s >>= 1) {
        if (lane < s) { const float t = part[lane + s]; part[lane] = (t > part[lane] || t != t) ? t : part[lane]; }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float r = part[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}
"""

_K_SOFTMAX = r"""
// Softmax (log_softmax with is_log) along an axis of extent L with stride `inner`: one work-group
// per (outer, inner) row.
__kernel __attribute__((reqd_work_group_size(RL, 1, 1)))
void softmax(__global const store_t *restrict X, __global store_t *restrict Y, const int L, const int inner,
             const int is_log)
{
    __local float part[RL];
    const int row = get_group_id(0), lane = get_local_id(0);
    const int o = row / inner, i = row - o * inner;
    const int base = o * L * inner + i;
    float m = -INFINITY;
    for (int k = lane; k < L; k += RL) { const float t = LD(X, base + k * inner); m = (t > m || t != t) ? t : m; }
    m = row_max(part, lane, m);
    float s = 0.0f;
    for (int k = lane; k < L; k += RL) s += exp(LD(X, base + k * inner) - m);
    s = row_sum(part, lane, s);
    const float ls = log(s);
    for (int k = lane; k < L; k += RL) {
        const float d = LD(X, base + k * inner) - m;
        ST(Y, base + k * inner, is_log ? d - ls : exp(d) / s);
    }
}
"""

_K_NORM_ROWS = r"""
// Normalisation of contiguous rows of length L (layer norm over trailing axes, instance norm over
// a plane): (x - mean) / sqrt(var + eps) (or x / sqrt(mean(x^2) + eps) with rms), then gamma/beta
// per element of the row (affine 1) or per row % C (affine 2, instance norm's channels).
__kernel __attribute__((reqd_work_group_size(RL, 1, 1)))
void norm_rows(__global const store_t *restrict X, __global store_t *restrict Y,
               __global const float *restrict gamma, __global const float *restrict beta,
               const int L, const int C, const float eps, const int rms, const int affine, const int has_beta)
{
    __local float part[RL];
    const int row = get_group_id(0), lane = get_local_id(0);
    const int base = row * L;
    float mean = 0.0f;
    if (!rms) {
        float s = 0.0f;
        for (int k = lane; k < L; k += RL) s += LD(X, base + k);
        mean = row_sum(part, lane, s) / (float)L;
    }
    float q = 0.0f;
    for (int k = lane; k < L; k += RL) { const float d = LD(X, base + k) - mean; q += d * d; }
    const float inv = 1.0f / sqrt(row_sum(part, lane, q) / (float)L + eps);
    const int c = row % C;
    for (int k = lane; k < L; k += RL) {
        float v = (LD(X, base + k) - mean) * inv;
        if (affine == 1) { v *= gamma[k]; if (has_beta) v += beta[k]; }
        else if (affine == 2) { v *= gamma[c]; if (has_beta) v += beta[c]; }
        ST(Y, base + k, v);
    }
}
"""

_K_RESIZE = r"""
// Separable resize of the last two axes from per-axis taps computed on the host (indices and
// weights, TY / TX taps per output row / column): nearest, bilinear and cubic alike.
__kernel void resize(__global const store_t *restrict X, __global store_t *restrict Y,
                     __global const int *restrict iy, __global const float *restrict wy,
                     __global const int *restrict ix, __global const float *restrict wx,
                     const int H, const int W, const int OH, const int OW, const int TY, const int TX)
{
    const int ox = get_global_id(0), oy = get_global_id(1), p = get_global_id(2);
    if (ox >= OW || oy >= OH) return;
    const int xo = p * H * W;
    float acc = 0.0f;
    for (int a = 0; a < TY; ++a) {
        const int r = xo + iy[oy * TY + a] * W;
        float row = 0.0f;
        for (int b = 0; b < TX; ++b) row = mad(wx[ox * TX + b], LD(X, r + ix[ox * TX + b]), row);
        acc = mad(wy[oy * TY + a], row, acc);
    }
    ST(Y, (p * OH + oy) * OW + ox, acc);
}

"""

# Copies, by element width (``T`` = uint / ushort / uchar: float and int / half / 8-bit): a strided
# N-d copy (transpose, slice, broadcast, concat into a region: 6 axes, leading ones of extent 1) and
# a gather through per-axis index maps (pad modes, constant-index take): map value -1 writes `fill`.
_COPY = r"""
__kernel void copy_{W}(__global const {T} *restrict src, __global {T} *restrict dst, const int n,
                     const int d1, const int d2, const int d3, const int d4, const int d5,
                     const int so, const int s0, const int s1, const int s2, const int s3, const int s4, const int s5,
                     const int doff, const int t0, const int t1, const int t2, const int t3, const int t4, const int t5)
{
    const int gid = get_global_id(0);
    if (gid >= n) return;
    int r = gid;
    const int i5 = r % d5; r /= d5;
    const int i4 = r % d4; r /= d4;
    const int i3 = r % d3; r /= d3;
    const int i2 = r % d2; r /= d2;
    const int i1 = r % d1; r /= d1;
    const int i0 = r;
    dst[doff + i0 * t0 + i1 * t1 + i2 * t2 + i3 * t3 + i4 * t4 + i5 * t5] =
        src[so + i0 * s0 + i1 * s1 + i2 * s2 + i3 * s3 + i4 * s4 + i5 * s5];
}

"""

_GATHER = r"""
__kernel void gather_{W}(__global const {T} *restrict src, __global {T} *restrict dst, __global const int *restrict maps,
                       const int n, const int d1, const int d2, const int d3, const int d4, const int d5,
                       const int m0, const int m1, const int m2, const int m3, const int m4, const int m5,
                       const int s0, const int s1, const int s2, const int s3, const int s4, const int s5,
                       const {T} fill)
{
    const int gid = get_global_id(0);
    if (gid >= n) return;
    int r = gid;
    const int j5 = maps[m5 + r % d5]; r /= d5;
    const int j4 = maps[m4 + r % d4]; r /= d4;
    const int j3 = maps[m3 + r % d3]; r /= d3;
    const int j2 = maps[m2 + r % d2]; r /= d2;
    const int j1 = maps[m1 + r % d1]; r /= d1;
    const int j0 = maps[m0 + r];
    if ((j0 | j1 | j2 | j3 | j4 | j5) < 0) { dst[gid] = fill; return; }
    dst[gid] = src[j0 * s0 + j1 * s1 + j2 * s2 + j3 * s3 + j4 * s4 + j5 * s5];
}
"""

COPY_TYPES = {1: "uchar", 2: "ushort", 4: "uint"}


def _gemm(name: str) -> str:
    base = name[:-2] if name.endswith(("_r", "_v")) else name
    a_t, load_a, load_b, extra, pre = {
        "gemm_w": ("float", "A[aoff + m * sam + k * sak]", "LD(B, boff + k * sbk + n * sbn)", "", ""),
        "gemm_x": ("store_t", "LD(A, aoff + m * sam + k * sak)", "LD(B, boff + k * sbk + n * sbn)", "", ""),
        "conv_gemm": ("float", "A[aoff + m * sam + k * sak]", _CONV_LOAD, _CONV_ARGS, _CONV_PRE),
    }[base]
    src = _GEMM_R if name.endswith("_r") else (_GEMM_V if name.endswith("_v") else _GEMM)
    a_ld = "LD(A, " if a_t == "store_t" else "A["
    a_end = ")" if a_t == "store_t" else "]"
    src = src.replace("{LOAD_A1}", f"{a_ld}aoff + m * sam + k * sak{a_end}")
    src = src.replace("{LOAD_AR}", f"{a_ld}ar[i] + k * sak{a_end}")
    for k, v in (("{NAME}", name), ("{A_T}", a_t), ("{LOAD_A}", load_a), ("{LOAD_B}", load_b),
                 ("{EXTRA_ARGS}", extra), ("{PRE_B}", pre)):
        src = src.replace(k, v)
    return (_CONV_HELPER if base == "conv_gemm" else "") + src


#: kernel name -> its source (helpers included); copy/gather kernels by element width
KERNELS: dict[str, str] = {
    "gemv_w": _K_GEMV_W, "depthwise": _K_DEPTHWISE, "deconv": _K_DECONV, "pool": _K_POOL,
    "global_pool": _K_GLOBAL_POOL, "softmax": _K_ROW_SUM + _K_ROW_MAX + _K_SOFTMAX,
    "norm_rows": _K_ROW_SUM + _K_NORM_ROWS, "resize": _K_RESIZE,
}
for _w, _t in COPY_TYPES.items():
    KERNELS[f"copy_{_w}"] = _COPY.replace("{W}", str(_w)).replace("{T}", _t)
    KERNELS[f"gather_{_w}"] = _GATHER.replace("{W}", str(_w)).replace("{T}", _t)
for _g in ("gemm_w", "gemm_x", "conv_gemm", "gemm_w_r", "gemm_x_r", "conv_gemm_r", "gemm_w_v", "gemm_x_v"):
    KERNELS[_g] = _gemm(_g)


def kernel_source(name: str, half: bool) -> str:
    """The program holding library kernel ``name`` for float (``half=False``) or half activation
    storage: one kernel per program, so a process compiles (and a driver like PoCL turns into a
    binary) only the kernels its graphs use."""
    try:
        body = KERNELS[name]
    except KeyError:
        raise KeyError(f"no OpenCL library kernel {name!r} (known: {sorted(KERNELS)})") from None
    defines = ("#define STORE_HALF\n" if half else "") + (
        f"#define TM {TM}\n#define TN {TN}\n#define TK {TK}\n#define WM {WM}\n#define WN {WN}\n"
        f"#define LX {GEMM_LOCAL[0]}\n#define LY {GEMM_LOCAL[1]}\n#define RL {ROW_LOCAL}\n#define RM {RM}\n")
    return defines + _HEAD + body
