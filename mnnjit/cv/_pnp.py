"""solvePnP: a camera pose from 3-D/2-D point correspondences, computed as OpenCV computes it.

- ``SOLVEPNP_ITERATIVE`` (0): a start from the DLT (at least 6 points off a plane) or from a homography
  (points on a plane), then Levenberg-Marquardt on the reprojection error (OpenCV keeps the start's
  side of the camera, so a poor start can end behind it: so does this);
- ``SOLVEPNP_EPNP`` (1): Lepetit, Moreno-Noguer and Fua's four control points, the best of three beta
  approximations each refined by Gauss-Newton;
- ``SOLVEPNP_SQPNP`` (8, MNN's and OpenCV 4's number): Terzakis and Lourakis' globally optimal solver,
  sequential quadratic programming on SO(3) from the eigenvectors of the 9x9 cost matrix.

Image points are undistorted first (k1, k2, p1, p2[, k3[, k4, k5, k6[, s1..s4]]]) with OpenCV's five
fixed-point iterations. Where the result depends on the signs of singular vectors (EPnP's control points,
the planar start of ITERATIVE), they follow OpenCV's one-sided Jacobi SVD.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._common import image_var, to_numpy

SOLVEPNP_ITERATIVE, SOLVEPNP_EPNP, SOLVEPNP_SQPNP = 0, 1, 8
_EPS = np.finfo(np.float64).eps


# ----------------------------------------------------------------------------------------- linear algebra
def jacobi_svd(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(w, u, vt) of a small m x n matrix (m >= n) by one-sided Jacobi rotations, with OpenCV's sign
    conventions: the right vectors start from the identity, singular values sorted in decreasing order."""
    a = np.asarray(a, np.float64)
    m, n = a.shape
    at = a.T.copy()  # rows are orthogonalised
    vt = np.eye(n)
    w = np.einsum("ij,ij->i", at, at)
    eps = _EPS * 10
    for _ in range(max(m, 30)):
        changed = False
        for i in range(n - 1):
            for j in range(i + 1, n):
                p = float(at[i] @ at[j])
                wi, wj = w[i], w[j]
                if abs(p) <= eps * math.sqrt(wi * wj):
                    continue
                p *= 2
                beta = wi - wj
                gamma = math.hypot(p, beta)
                if beta < 0:
                    s = math.sqrt((gamma - beta) * 0.5 / gamma)
                    c = p / (gamma * s * 2)
                else:
                    c = math.sqrt((gamma + beta) / (gamma * 2))
                    s = p / (gamma * c * 2)
                ai, aj = at[i].copy(), at[j]
                at[i] = c * ai + s * aj
                at[j] = -s * ai + c * aj
                w[i], w[j] = at[i] @ at[i], at[j] @ at[j]
                vi = vt[i].copy()
                vt[i] = c * vi + s * vt[j]
                vt[j] = -s * vi + c * vt[j]
                changed = True
        if not changed:
            break
    w = np.sqrt(np.einsum("ij,ij->i", at, at))
    for i in range(n - 1):  # selection sort: the first of equal values stays first
        j = i + int(np.argmax(w[i:]))
        if j != i:
            w[[i, j]] = w[[j, i]]
            at[[i, j]] = at[[j, i]]
            vt[[i, j]] = vt[[j, i]]
    # left vectors: the rows divided by their norms; a zero singular value gets a vector from OpenCV's
    # random generator, made orthogonal to the vectors before it
    state = 0x12345678
    for i in range(n):
        sd = w[i]
        tries = 0
        while sd <= np.finfo(np.float64).tiny and tries < 100:
            tries += 1
            row = np.empty(m)
            for k_ in range(m):
                state = (state & 0xFFFFFFFF) * 4164903690 + (state >> 32)
                row[k_] = 1.0 / m if (state & 0xFFFFFFFF) & 256 else -1.0 / m
            for _ in range(2):
                for j in range(i):
                    row = row - float(row @ at[j]) * at[j]
                    asum = float(np.abs(row).sum())
                    row = row * (1 / asum if asum > eps * 100 else 0.0)
            at[i] = row
            sd = math.sqrt(float(row @ row))
        at[i] = at[i] * (1 / sd if sd > np.finfo(np.float64).tiny else 0.0)
    u = at.T.copy()
    return w, u, vt


def svd_solve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Least squares by the SVD above, singular values up to 2 eps times their sum dropped (cv::solve)."""
    w, u, vt = jacobi_svd(a)
    keep = np.abs(w) > w.sum() * _EPS * 2
    return vt[keep].T @ ((u[:, keep].T @ b) / w[keep])


def householder_solve(a: np.ndarray, b: np.ndarray, x_prev: np.ndarray) -> np.ndarray:
    """Least squares by Householder QR; on a column of zeros it gives up and returns ``x_prev``
    (the behaviour of EPnP's Gauss-Newton in OpenCV)."""
    a, b = a.astype(np.float64).copy(), b.astype(np.float64).copy()
    nr, nc = a.shape
    a1, a2 = np.zeros(nc), np.zeros(nc)
    for k in range(nc):
        eta = float(np.abs(a[k:, k]).max())
        if eta == 0:
            return x_prev
        a[k:, k] /= eta
        sigma = math.sqrt(float(a[k:, k] @ a[k:, k]))
        if a[k, k] < 0:
            sigma = -sigma
        a[k, k] += sigma
        a1[k], a2[k] = sigma * a[k, k], -eta * sigma
        for j in range(k + 1, nc):
            tau = float(a[k:, k] @ a[k:, j]) / a1[k]
            a[k:, j] -= tau * a[k:, k]
    for j in range(nc):
        tau = float(a[j:, j] @ b[j:]) / a1[j]
        b[j:] -= tau * a[j:, j]
    x = np.zeros(nc)
    x[nc - 1] = b[nc - 1] / a2[nc - 1]
    for i in range(nc - 2, -1, -1):
        x[i] = (b[i] - float(a[i, i + 1:] @ x[i + 1:])) / a2[i]
    return x


def rodrigues_vector(r: np.ndarray) -> np.ndarray:
    """The rotation vector of a 3x3 matrix (made orthogonal first), as OpenCV's Rodrigues."""
    u, _, vt = np.linalg.svd(np.asarray(r, np.float64).reshape(3, 3))
    r = u @ vt
    rx = np.array([r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]])
    s = math.sqrt(float(rx @ rx)) * 0.5
    c = min(max((np.trace(r) - 1) * 0.5, -1.0), 1.0)
    if s < 1e-5:
        if c > 0:
            return np.zeros(3)
        t = np.sqrt(np.maximum((np.diag(r) + 1) * 0.5, 0))
        if r[0, 1] < 0:
            t[1] = -t[1]
        if r[0, 2] < 0:
            t[2] = -t[2]
        if abs(t[0]) < abs(t[1]) and abs(t[0]) < abs(t[2]) and (r[1, 2] > 0) != (t[1] * t[2] > 0):
            t[2] = -t[2]
        return t / max(float(np.linalg.norm(t)), 1e-300) * math.acos(c)
    return rx * (math.acos(c) / (2 * s))


def rodrigues_matrix(rv: np.ndarray) -> np.ndarray:
    """The 3x3 rotation matrix of a rotation vector."""
    rv = np.asarray(rv, np.float64).ravel()
    theta = float(np.linalg.norm(rv))
    if theta < _EPS:
        return np.eye(3)
    k = rv / theta
    kx = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return math.cos(theta) * np.eye(3) + (1 - math.cos(theta)) * np.outer(k, k) + math.sin(theta) * kx


# ------------------------------------------------------------------------------------- camera model
def _dist12(dist: np.ndarray) -> np.ndarray:
    d = np.zeros(12)
    d[:dist.size] = dist
    return d


def undistort(pts: np.ndarray, k: np.ndarray, dist: np.ndarray) -> np.ndarray:
    """Normalised camera coordinates of pixel points: the inverse distortion by five fixed-point steps."""
    fx, fy, cx, cy = k[0, 0], k[1, 1], k[0, 2], k[1, 2]
    x0 = (pts[:, 0] - cx) / fx
    y0 = (pts[:, 1] - cy) / fy
    if not dist.any():
        return np.stack([x0, y0], 1)
    d = _dist12(dist)
    x, y = x0.copy(), y0.copy()
    done = np.zeros(len(x), bool)  # a point whose correction diverges restarts from its distorted position
    for _ in range(5):
        r2 = x * x + y * y
        icdist = (1 + ((d[7] * r2 + d[6]) * r2 + d[5]) * r2) / (1 + ((d[4] * r2 + d[1]) * r2 + d[0]) * r2)
        done |= icdist < 0
        dx = 2 * d[2] * x * y + d[3] * (r2 + 2 * x * x) + d[8] * r2 + d[9] * r2 * r2
        dy = d[2] * (r2 + 2 * y * y) + 2 * d[3] * x * y + d[10] * r2 + d[11] * r2 * r2
        x = np.where(done, x0, (x0 - dx) * icdist)
        y = np.where(done, y0, (y0 - dy) * icdist)
    return np.stack([x, y], 1)


def project(obj: np.ndarray, rv: np.ndarray, tv: np.ndarray, k: np.ndarray, dist: np.ndarray) -> np.ndarray:
    """Pixel projections of 3-D points (OpenCV's camera model, up to 12 distortion coefficients)."""
    pc = obj @ rodrigues_matrix(rv).T + tv
    z = pc[:, 2]
    z = np.where(z != 0, 1 / np.where(z != 0, z, 1), 1.0)
    x, y = pc[:, 0] * z, pc[:, 1] * z
    d = _dist12(dist)
    r2 = x * x + y * y
    radial = (1 + ((d[4] * r2 + d[1]) * r2 + d[0]) * r2) / (1 + ((d[7] * r2 + d[6]) * r2 + d[5]) * r2)
    xd = x * radial + 2 * d[2] * x * y + d[3] * (r2 + 2 * x * x) + d[8] * r2 + d[9] * r2 * r2
    yd = y * radial + d[2] * (r2 + 2 * y * y) + 2 * d[3] * x * y + d[10] * r2 + d[11] * r2 * r2
    return np.stack([xd * k[0, 0] + k[0, 2], yd * k[1, 1] + k[1, 2]], 1)


# --------------------------------------------------------------------------------------------- ITERATIVE
def _homography(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """The least-squares homography src -> dst (normalised DLT), scaled so that H[2, 2] = 1."""
    def norm(p):
        c = p.mean(0)
        s = np.abs(p - c).mean(0)
        s = np.where(s > _EPS, s, 1.0)
        return np.array([[1 / s[0], 0, -c[0] / s[0]], [0, 1 / s[1], -c[1] / s[1]], [0, 0, 1]])
    ts, td = norm(src), norm(dst)
    a = (np.c_[src, np.ones(len(src))] @ ts.T)[:, :2]
    b = (np.c_[dst, np.ones(len(dst))] @ td.T)[:, :2]
    rows = []
    for (x, y), (u, v) in zip(a, b):
        rows.append([x, y, 1, 0, 0, 0, -u * x, -u * y, -u])
        rows.append([0, 0, 0, x, y, 1, -v * x, -v * y, -v])
    h = np.linalg.svd(np.array(rows))[2][-1].reshape(3, 3)
    h = np.linalg.inv(td) @ h @ ts
    return h / h[2, 2] if abs(h[2, 2]) > _EPS else h


def _iterative_start(obj: np.ndarray, xn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = len(obj)
    mc = obj.mean(0)
    mm = (obj - mc).T @ (obj - mc)
    w, _, vt = jacobi_svd(mm)
    if w[2] / w[1] < 1e-3:  # the points lie on a plane: start from the plane's homography
        rt = vt.copy()
        if vt[0, 2] ** 2 + vt[1, 2] ** 2 < 1e-10:
            rt = np.eye(3)
        if np.linalg.det(rt) < 0:
            rt = -rt
        tt = -rt @ mc
        mxy = (obj @ rt.T + tt)[:, :2]
        h = _homography(mxy, xn)
        if not np.isfinite(h).all():
            return np.zeros(3), np.zeros(3)
        h1, h2 = h[:, 0], h[:, 1]
        n1, n2 = float(np.linalg.norm(h1)), float(np.linalg.norm(h2))
        h1, h2 = h1 / max(n1, _EPS), h2 / max(n2, _EPS)
        t = h[:, 2] * (2 / max(n1 + n2, _EPS))
        r = rodrigues_matrix(rodrigues_vector(np.stack([h1, h2, np.cross(h1, h2)], 1)))
        return rodrigues_vector(r @ rt), t + r @ tt
    if n < 6:
        raise ValueError(f"solvePnP (SOLVEPNP_ITERATIVE) needs at least 6 points off a plane for its DLT start, "
                         f"got {n}")
    rows = np.zeros((2 * n, 12))
    rows[0::2, 0:3], rows[0::2, 3] = obj, 1
    rows[1::2, 4:7], rows[1::2, 7] = obj, 1
    rows[0::2, 8:11], rows[0::2, 11] = -xn[:, :1] * obj, -xn[:, 0]
    rows[1::2, 8:11], rows[1::2, 11] = -xn[:, 1:] * obj, -xn[:, 1]
    p = np.linalg.svd(rows.T @ rows)[2][-1].reshape(3, 4)
    if np.linalg.det(p[:, :3]) < 0:
        p = -p
    sc = float(np.linalg.norm(p[:, :3]))
    if sc <= _EPS:
        raise ValueError("solvePnP: the DLT start is degenerate")
    u, _, vt = np.linalg.svd(p[:, :3])
    r = u @ vt
    return rodrigues_vector(r), p[:, 3] * (np.linalg.norm(r) / sc)


def _rotation_derivatives(rv: np.ndarray) -> np.ndarray:
    """dR/dr_i (3 x 3 x 3) of the rotation of a rotation vector (Gallego and Yezzi's formula)."""
    rv = np.asarray(rv, np.float64)
    theta2 = float(rv @ rv)
    eye = np.eye(3)

    def skew(v):
        return np.array([[0, -v[2], v[1]], [v[2], 0, -v[0]], [-v[1], v[0], 0]])
    if theta2 < _EPS:
        return np.stack([skew(eye[i]) for i in range(3)])
    r = rodrigues_matrix(rv)
    return np.stack([(rv[i] * skew(rv) + skew(np.cross(rv, (eye - r)[:, i]))) @ r / theta2 for i in range(3)])


def _jacobian(obj, k, dist, p: np.ndarray) -> np.ndarray:
    """d(pixel projections)/d(rvec, tvec), analytically (rows u0, v0, u1, v1, ...)."""
    rv, tv = p[:3], p[3:]
    r = rodrigues_matrix(rv)
    pc = obj @ r.T + tv
    dpc = np.empty((len(obj), 3, 6))
    dpc[:, :, :3] = np.einsum("kij,nj->nik", _rotation_derivatives(rv), obj)
    dpc[:, :, 3:] = np.eye(3)
    iz = 1 / pc[:, 2]
    x, y = pc[:, 0] * iz, pc[:, 1] * iz
    dx = (dpc[:, 0] - x[:, None] * dpc[:, 2]) * iz[:, None]
    dy = (dpc[:, 1] - y[:, None] * dpc[:, 2]) * iz[:, None]
    d = _dist12(dist)
    r2 = x * x + y * y
    num = 1 + ((d[4] * r2 + d[1]) * r2 + d[0]) * r2
    den = 1 + ((d[7] * r2 + d[6]) * r2 + d[5]) * r2
    radial = num / den
    drad = ((d[0] + (2 * d[1] + 3 * d[4] * r2) * r2) * den - (d[5] + (2 * d[6] + 3 * d[7] * r2) * r2) * num) / den ** 2
    dxd_dx = radial + x * drad * 2 * x + 2 * d[2] * y + 6 * d[3] * x + 2 * d[8] * x + 4 * d[9] * r2 * x
    dxd_dy = x * drad * 2 * y + 2 * d[2] * x + 2 * d[3] * y + 2 * d[8] * y + 4 * d[9] * r2 * y
    dyd_dx = y * drad * 2 * x + 2 * d[2] * x + 2 * d[3] * y + 2 * d[10] * x + 4 * d[11] * r2 * x
    dyd_dy = radial + y * drad * 2 * y + 6 * d[2] * y + 2 * d[3] * x + 2 * d[10] * y + 4 * d[11] * r2 * y
    jac = np.empty((len(obj), 2, 6))
    jac[:, 0] = k[0, 0] * (dxd_dx[:, None] * dx + dxd_dy[:, None] * dy)
    jac[:, 1] = k[1, 1] * (dyd_dx[:, None] * dx + dyd_dy[:, None] * dy)
    return jac.reshape(-1, 6)


def _levenberg_marquardt(obj, img, k, dist, rv, tv):
    """OpenCV 5's Levenberg-Marquardt on the squared reprojection error: damping lambda * diag(J'J)
    (clamped to [1e-6, 1e32]) from lambda = 1e-4, geodesic acceleration, lambda scaled by the step
    quality on success and by a doubling factor on failure; at most 20 trials, stopping on a small
    step (FLT_EPSILON), energy, gradient or relative energy change (1e-6)."""
    x = np.concatenate([rv, tv]).astype(np.float64)
    flt_eps = float(np.finfo(np.float32).eps)

    def residual(q):
        return (project(obj, q[:3], q[3:], k, dist) - img).ravel()

    b = residual(x)
    jac = _jacobian(obj, k, dist, x)
    old = float(b @ b)
    lam, up = 1e-4, 2.0
    trials, done = 0, False
    while not done:
        jtj, jtb = jac.T @ jac, jac.T @ b
        gmax = float(np.abs(jtb).max())
        diag = np.diag(jtj).copy()
        accepted = False
        while not accepted and not done:
            lm = np.clip(diag * lam, 1e-6, 1e32)
            a = jtj.copy()
            a[np.diag_indices(6)] = lm + diag
            step = svd_solve(a, -jtb)
            model_drop = -0.5 * float(np.sum(step * (jtb - lm * step)))
            step_sq = float(step @ step)
            h = 1e-4  # geodesic acceleration: the second directional derivative along the step
            jtrvv = (jac.T @ residual(x + step * h) + jtb * (h - 1.0) + lm * step * h) / (h * h)
            geo = svd_solve(a, -jtrvv)
            if math.sqrt(float(geo @ geo) / step_sq) < 1.0 if step_sq > 0 else False:
                step = step + geo * 0.5
            probe = x + step
            bp = residual(probe)
            energy = float(bp @ bp)
            if not np.isfinite(energy):
                return x[:3], x[3:]
            drop = old - energy
            if drop < 0:
                lam *= up
                up *= 2.0
            else:
                accepted = True
                quality = drop / model_drop if model_drop else 0.0
                lam *= max(1.0 / 3.0, 1.0 - (2.0 * quality - 1.0) ** 3)
                up = 2.0
                done = (gmax < 1e-6 or step_sq < flt_eps or (energy > 0 and drop / energy < 1e-6)
                        or energy < flt_eps * flt_eps)
                x, b, old = probe, bp, energy
            trials += 1
            done = done or trials >= 20 or lam >= 1e32
        if not done:
            jac = _jacobian(obj, k, dist, x)
    return x[:3], x[3:]


# -------------------------------------------------------------------------------------------------- EPnP
def _epnp(obj: np.ndarray, pix: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = len(obj)
    fu, fv, uc, vc = k[0, 0], k[1, 1], k[0, 2], k[1, 2]
    c0 = obj.mean(0)
    w, _, vt = jacobi_svd((obj - c0).T @ (obj - c0))
    cws = np.vstack([c0, c0 + np.sqrt(w / n)[:, None] * vt])  # the centroid and the principal axes
    cw, cu, cvt = jacobi_svd((cws[1:] - c0).T)
    keep = cw > cw.sum() * _EPS * 2  # the pseudo-inverse keeps an exactly planar cloud's zeros exact
    cc_inv = (cvt.T * np.where(keep, 1 / np.where(keep, cw, 1), 0.0)) @ cu.T
    alphas = np.empty((n, 4))
    alphas[:, 1:] = (obj - c0) @ cc_inv.T
    alphas[:, 0] = 1 - alphas[:, 1:].sum(1)
    m = np.zeros((2 * n, 12))
    m[0::2, 0::3] = alphas * fu
    m[0::2, 2::3] = alphas * (uc - pix[:, :1])
    m[1::2, 1::3] = alphas * fv
    m[1::2, 2::3] = alphas * (vc - pix[:, 1:])
    ut = jacobi_svd(m.T @ m)[1].T  # rows: left singular vectors, the null space last
    v = [ut[11 - i].reshape(4, 3) for i in range(4)]
    pairs = [(a, b) for a in range(4) for b in range(a + 1, 4)]
    dv = [np.array([vi[a] - vi[b] for a, b in pairs]) for vi in v]  # 6 x 3 each
    ls = np.empty((6, 10))
    cols = [(0, 0, 1), (0, 1, 2), (1, 1, 1), (0, 2, 2), (1, 2, 2), (2, 2, 1),  # beta products 11 12 22 13 23 33
            (0, 3, 2), (1, 3, 2), (2, 3, 2), (3, 3, 1)]  # 14 24 34 44
    for c, (i, j, f) in enumerate(cols):
        ls[:, c] = f * np.einsum("ij,ij->i", dv[i], dv[j])
    rho = np.array([np.sum((cws[a] - cws[b]) ** 2) for a, b in pairs])

    def refine(betas):
        step = np.zeros(4)
        for _ in range(5):  # Gauss-Newton on the distances between control points
            b = betas
            quad = np.array([b[0] * b[0], b[0] * b[1], b[1] * b[1], b[0] * b[2], b[1] * b[2], b[2] * b[2],
                             b[0] * b[3], b[1] * b[3], b[2] * b[3], b[3] * b[3]])
            jac = np.stack([2 * ls[:, 0] * b[0] + ls[:, 1] * b[1] + ls[:, 3] * b[2] + ls[:, 6] * b[3],
                            ls[:, 1] * b[0] + 2 * ls[:, 2] * b[1] + ls[:, 4] * b[2] + ls[:, 7] * b[3],
                            ls[:, 3] * b[0] + ls[:, 4] * b[1] + 2 * ls[:, 5] * b[2] + ls[:, 8] * b[3],
                            ls[:, 6] * b[0] + ls[:, 7] * b[1] + ls[:, 8] * b[2] + 2 * ls[:, 9] * b[3]], 1)
            step = householder_solve(jac, rho - ls @ quad, step)
            betas = betas + step
        return betas

    def pose(betas):
        ccs = sum(betas[i] * v[i] for i in range(4))
        pcs = alphas @ ccs
        if pcs[0, 2] < 0:
            pcs = -pcs
        p0, w0 = pcs.mean(0), obj.mean(0)
        _, u_, vt_ = jacobi_svd((pcs - p0).T @ (obj - w0))  # a planar cloud: OpenCV's vector for 0
        r = u_ @ vt_
        if np.linalg.det(r) < 0:
            r[2] = -r[2]
        t = p0 - r @ w0
        pc = obj @ r.T + t
        proj = np.stack([uc + fu * pc[:, 0] / pc[:, 2], vc + fv * pc[:, 1] / pc[:, 2]], 1)
        return r, t, float(np.mean(np.sqrt(((proj - pix) ** 2).sum(1))))

    b4 = svd_solve(ls[:, [0, 1, 3, 6]], rho)
    s0 = math.sqrt(abs(b4[0]))
    beta1 = np.array([s0, *(b4[1:] / s0 * (-1 if b4[0] < 0 else 1))]) if s0 else np.zeros(4)
    b3 = svd_solve(ls[:, :3], rho)
    beta2 = np.zeros(4)
    beta2[0] = math.sqrt(-b3[0]) if b3[0] < 0 else math.sqrt(b3[0])
    beta2[1] = (math.sqrt(-b3[2]) if b3[2] < 0 else 0.0) if b3[0] < 0 else (math.sqrt(b3[2]) if b3[2] > 0 else 0.0)
    if b3[1] < 0:
        beta2[0] = -beta2[0]
    b5 = svd_solve(ls[:, :5], rho)
    beta3 = np.zeros(4)
    beta3[0] = math.sqrt(-b5[0]) if b5[0] < 0 else math.sqrt(b5[0])
    beta3[1] = (math.sqrt(-b5[2]) if b5[2] < 0 else 0.0) if b5[0] < 0 else (math.sqrt(b5[2]) if b5[2] > 0 else 0.0)
    if b5[1] < 0:
        beta3[0] = -beta3[0]
    beta3[2] = b5[3] / beta3[0] if beta3[0] else 0.0
    best = None
    for betas in (beta1, beta2, beta3):  # the first of equal errors wins, as in OpenCV
        cand = pose(refine(betas))
        if best is None or cand[2] < best[2]:
            best = cand
    return rodrigues_vector(best[0]), best[1]


# ------------------------------------------------------------------------------------------------ SQPnP
def _nearest_rotation_svd(e: np.ndarray) -> np.ndarray:
    _, u, vt = jacobi_svd(e.reshape(3, 3))
    d = np.diag([1.0, 1.0, np.linalg.det(u) * np.linalg.det(vt)])
    return (u @ d @ vt).ravel()


def _nearest_rotation(e: np.ndarray) -> np.ndarray:
    """The rotation nearest to a 3x3 matrix (row-major 9-vector) in the Frobenius norm, by Markley's
    FOAM: Newton's method for the largest root of its characteristic polynomial (SVD when singular)."""
    m = e.reshape(3, 3)
    det = float(np.linalg.det(m))
    if abs(det) < 1e-4:
        return _nearest_rotation_svd(e)
    adj = np.array([[m[1, 1] * m[2, 2] - m[1, 2] * m[2, 1], m[0, 2] * m[2, 1] - m[0, 1] * m[2, 2],
                     m[0, 1] * m[1, 2] - m[0, 2] * m[1, 1]],
                    [m[1, 2] * m[2, 0] - m[1, 0] * m[2, 2], m[0, 0] * m[2, 2] - m[0, 2] * m[2, 0],
                     m[0, 2] * m[1, 0] - m[0, 0] * m[1, 2]],
                    [m[1, 0] * m[2, 1] - m[1, 1] * m[2, 0], m[0, 1] * m[2, 0] - m[0, 0] * m[2, 1],
                     m[0, 0] * m[1, 1] - m[0, 1] * m[1, 0]]])  # adj(m) = det(m) inv(m)
    e_sq, adj_sq = float(np.sum(m * m)), float(np.sum(adj * adj))
    lam = 0.5 * (e_sq + 3.0)
    if det < 0:
        lam = -lam
    prev = 0.0
    for _ in range(15):
        if abs(lam - prev) <= 1e-12 * abs(prev):
            break
        tmp = lam * lam - e_sq
        prev = lam
        lam -= (tmp * tmp - 8.0 * lam * det - 4.0 * adj_sq) / (8.0 * (0.5 * tmp * lam - det))
    r = ((lam * lam + e_sq) * m + 2.0 * (lam * adj.T - m @ m.T @ m)) / (lam * (lam * lam - e_sq) - 2.0 * det)
    return r.ravel()


def _det9(r: np.ndarray) -> float:
    return float(np.linalg.det(r.reshape(3, 3)))


def _row_and_null_space(r: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(H, N, K) at r: H an orthonormal basis of the constraint Jacobian's row space built column by
    column, K = J H (lower triangular), N three columns spanning its null space picked from the null
    space projector as SQPnP picks them."""
    r1, r2, r3 = r[0:3], r[3:6], r[6:9]
    h = np.zeros((9, 6))
    k = np.zeros((6, 6))
    n1 = math.sqrt(float(r1 @ r1))
    h[0:3, 0] = r1 * (1.0 / n1 if n1 > 1e-5 else 0.0)
    k[0, 0] = 2 * n1
    n2 = math.sqrt(float(r2 @ r2))
    h[3:6, 1] = r2 / n2
    k[1, 1] = 2 * n2
    n3 = math.sqrt(float(r3 @ r3))
    h[6:9, 2] = r3 / n3
    k[2, 2] = 2 * n3
    h[0:3, 3] = r2 - (r2 @ h[0:3, 0]) * h[0:3, 0]
    h[3:6, 3] = r1 - (r1 @ h[3:6, 1]) * h[3:6, 1]
    h[:, 3] /= math.sqrt(float(h[:, 3] @ h[:, 3]))
    k[3, 0], k[3, 1] = r2 @ h[0:3, 0], r1 @ h[3:6, 1]
    k[3, 3] = r2 @ h[0:3, 3] + r1 @ h[3:6, 3]
    d2, d3, d4 = r3 @ h[3:6, 1], r2 @ h[6:9, 2], r3 @ h[3:6, 3]
    h[0:3, 4] = -d4 * h[0:3, 3]
    h[3:6, 4] = r3 - d2 * h[3:6, 1] - d4 * h[3:6, 3]
    h[6:9, 4] = r2 - d3 * h[6:9, 2]
    h[:, 4] /= math.sqrt(float(h[:, 4] @ h[:, 4]))
    k[4, 1], k[4, 2], k[4, 3] = r3 @ h[3:6, 1], r2 @ h[6:9, 2], r3 @ h[3:6, 3]
    k[4, 4] = r3 @ h[3:6, 4] + r2 @ h[6:9, 4]
    e1, e3, e4 = r3 @ h[0:3, 0], r1 @ h[6:9, 2], r3 @ h[0:3, 3]
    e5 = r1 @ h[6:9, 4] + r3 @ h[0:3, 4]
    h[0:3, 5] = r3 - e1 * h[0:3, 0] - e4 * h[0:3, 3] - e5 * h[0:3, 4]
    h[3:6, 5] = -e5 * h[3:6, 4] - e4 * h[3:6, 3]
    h[6:9, 5] = r1 - e3 * h[6:9, 2] - e5 * h[6:9, 4]
    h[:, 5] /= math.sqrt(float(h[:, 5] @ h[:, 5]))
    k[5, 0], k[5, 2], k[5, 3] = r3 @ h[0:3, 0], r1 @ h[6:9, 2], r3 @ h[0:3, 3]
    k[5, 4] = r3 @ h[0:3, 4] + r1 @ h[6:9, 4]
    k[5, 5] = r3 @ h[0:3, 5] + r1 @ h[6:9, 5]
    pn = np.eye(9) - h @ h.T
    norms = np.sqrt(np.einsum("ij,ij->j", pn, pn))
    ok = norms >= 0.1
    i1, best = 0, np.finfo(np.float64).tiny
    for i in range(9):
        if ok[i] and best < norms[i]:
            best, i1 = norms[i], i
    v1 = pn[:, i1] / best
    i2, low = 0, np.inf
    for i in range(9):
        if i != i1 and ok[i]:
            cos1 = abs(pn[:, i] @ v1 / norms[i])
            if cos1 <= low:
                i2, low = i, cos1
    v2 = pn[:, i2] - (pn[:, i2] @ v1) * v1
    v2 /= math.sqrt(float(v2 @ v2))
    i3, low = 0, np.inf
    for i in range(9):
        if i not in (i1, i2) and ok[i]:
            cos1 = abs(pn[:, i] @ v1 / norms[i])
            cos2 = abs(pn[:, i] @ v2 / norms[i])
            if cos1 + cos2 <= low:
                i3, low = i, cos2 + cos2  # as SQPnP keeps its running minimum
    v3 = pn[:, i3]
    v3 = v3 - ((v3 @ v2) * v2 - (v3 @ v1) * v1)  # SQPnP's own update: still in the null space
    v3 /= math.sqrt(float(v3 @ v3))
    return h, np.stack([v1, v2, v3], 1), k


def _inverse_sym3(q: np.ndarray) -> np.ndarray | None:
    """The inverse of a symmetric 3x3 matrix from its lower triangle, None when |det| < 1e-8."""
    a, b, d, c, e, f = q[0, 0], q[1, 0], q[1, 1], q[2, 0], q[2, 1], q[2, 2]
    det = -a * d * f + a * e * e + b * b * f - 2.0 * b * c * e + c * c * d
    if abs(det) < 1e-8:
        return None
    t = 1.0 / det
    return np.array([[(-d * f + e * e) * t, (b * f - c * e) * t, (c * d - b * e) * t],
                     [(b * f - c * e) * t, -(a * f - c * c) * t, (a * e - b * c) * t],
                     [(c * d - b * e) * t, (a * e - b * c) * t, -(a * d - b * b) * t]])


def _sqp(omega: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Sequential quadratic programming for min r' omega r with r a rotation (row-major): each step
    meets the linearised orthogonality constraints in the row space and then minimises over the null
    space (skipped when that 3x3 system is singular)."""
    for _ in range(15):
        r1, r2, r3 = r[0:3], r[3:6], r[6:9]
        g = np.array([1 - r1 @ r1, 1 - r2 @ r2, 1 - r3 @ r3, -r1 @ r2, -r2 @ r3, -r1 @ r3])
        h, nsp, k = _row_and_null_space(r)
        x = np.zeros(6)
        x[0], x[1], x[2] = g[0] / k[0, 0], g[1] / k[1, 1], g[2] / k[2, 2]
        x[3] = (g[3] - k[3, 0] * x[0] - k[3, 1] * x[1]) / k[3, 3]
        x[4] = (g[4] - k[4, 1] * x[1] - k[4, 2] * x[2] - k[4, 3] * x[3]) / k[4, 4]
        x[5] = (g[5] - k[5, 0] * x[0] - k[5, 2] * x[2] - k[5, 3] * x[3] - k[5, 4] * x[4]) / k[5, 5]
        delta = h @ x
        nt_omega = nsp.T @ omega
        w_inv = _inverse_sym3(nt_omega @ nsp)
        if w_inv is not None:
            delta = delta + nsp @ (-w_inv @ nt_omega @ (delta + r))
        r = r + delta
        if delta @ delta <= 1e-10:
            break
    det = _det9(r)
    if det < 0:
        r, det = -r, -det
    return _nearest_rotation(r) if det > 1.001 else r


def _sqpnp(obj: np.ndarray, xn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = len(obj)
    x, y = xn[:, 0], xn[:, 1]
    sq = x * x + y * y
    a = np.zeros((n, 3, 9))  # per point: [x_i; y_i; 1] x (R P_i) linear in r, the t part kept apart
    a[:, 0, 0:3] = obj
    a[:, 0, 6:9] = -x[:, None] * obj
    a[:, 1, 3:6] = obj
    a[:, 1, 6:9] = -y[:, None] * obj
    q = np.array([[n, 0, -x.sum()], [0, n, -y.sum()], [-x.sum(), -y.sum(), sq.sum()]])
    qa = np.zeros((3, 9))
    qa[0, 0:3], qa[0, 6:9] = obj.sum(0), -(x[:, None] * obj).sum(0)
    qa[1, 3:6], qa[1, 6:9] = obj.sum(0), -(y[:, None] * obj).sum(0)
    qa[2, 0:3], qa[2, 3:6], qa[2, 6:9] = qa[0, 6:9], qa[1, 6:9], (sq[:, None] * obj).sum(0)
    # omega = sum_i A_i' Q_i A_i, with Q_i the projector [[1, 0, -x], [0, 1, -y], [-x, -y, x^2 + y^2]]
    outer = np.einsum("ni,nj->nij", obj, obj)
    omega = np.zeros((9, 9))
    omega[0:3, 0:3] = omega[3:6, 3:6] = outer.sum(0)
    omega[0:3, 6:9] = -(x[:, None, None] * outer).sum(0)
    omega[3:6, 6:9] = -(y[:, None, None] * outer).sum(0)
    omega[6:9, 6:9] = (sq[:, None, None] * outer).sum(0)
    omega[6:9, 0:3], omega[6:9, 3:6] = omega[0:3, 6:9].T, omega[3:6, 6:9].T
    det_q = n * (n * sq.sum() - (y.sum()) ** 2 - (x.sum()) ** 2)
    if det_q / n ** 3 < 1e-5:
        raise ValueError("solvePnP (SOLVEPNP_SQPNP): the image points are too close together")
    p = -np.linalg.inv(q) @ qa  # t = p r
    omega = omega + qa.T @ p
    s, _, vt = jacobi_svd(omega)
    u = vt.T
    if s[0] < 1e-7:
        raise ValueError("solvePnP (SOLVEPNP_SQPNP): degenerate points")
    nulls = 0
    while nulls < 9 and s[8 - nulls] < 1e-7:
        nulls += 1
    if nulls > 6:
        raise ValueError("solvePnP (SOLVEPNP_SQPNP): degenerate points")
    mean = obj.mean(0)
    best: list = []
    min_err = [np.inf]

    def check(r):
        t = p @ r
        depth_ok = r[6:9] @ mean + t[2] > 0 or np.count_nonzero(obj @ r[6:9] + t[2] > 0) * 2 >= n
        if not depth_ok:
            return
        err = float(r @ omega @ r)
        if abs(min_err[0] - err) > 1e-6:
            if min_err[0] > err:
                min_err[0] = err
                best[:] = [(r, t, err)]
        else:
            for i, (ri, _, ei) in enumerate(best):
                if float(np.sum((ri - r) ** 2)) < 1e-10:
                    if ei > err:
                        best[i] = (r, t, err)
                    break
            else:
                best.append((r, t, err))
            min_err[0] = min(min_err[0], err)

    eig = max(nulls, 1)
    for i in range(9 - eig, 9):
        e = math.sqrt(3) * u[:, i]
        m = e.reshape(3, 3)
        gram = m @ m.T - np.eye(3)
        if float(np.sum(gram * gram)) < 1e-8:  # already a rotation (up to sign)
            check(_det9(e) * e)
        else:
            check(_sqp(omega, _nearest_rotation(e)))
            check(_sqp(omega, _nearest_rotation(-e)))
    c = 1
    while (index := 9 - eig - c) > 0 and min_err[0] > 3 * s[index]:
        e = u[:, index]
        check(_sqp(omega, _nearest_rotation(e)))
        check(_sqp(omega, _nearest_rotation(-e)))
        c += 1
    if not best:
        raise ValueError("solvePnP (SOLVEPNP_SQPNP) found no pose with the points in front of the camera")
    r, t, _ = best[0]
    return rodrigues_vector(r.reshape(3, 3)), t


# ------------------------------------------------------------------------------------------------ public
def _array(v: Any, cols: int, name: str) -> np.ndarray:
    a = np.asarray(to_numpy(v), np.float64)
    if a.size % cols:
        raise ValueError(f"solvePnP: {name} must hold {cols} values per point, got shape {list(a.shape)}")
    a = a.reshape(-1, cols)
    if not np.isfinite(a).all():
        raise ValueError(f"solvePnP: {name} must be finite")
    return a


def solve_pnp(objectPoints: Any, imagePoints: Any, cameraMatrix: Any, distCoeffs: Any,
              flags: int = SOLVEPNP_ITERATIVE) -> tuple[np.ndarray, np.ndarray]:
    """(rvec, tvec) as float64 arrays of 3 values (see the module docstring for the methods)."""
    obj = _array(objectPoints, 3, "objectPoints")
    img = _array(imagePoints, 2, "imagePoints")
    k = _array(cameraMatrix, 9, "cameraMatrix").reshape(3, 3)
    dist = np.zeros(0) if distCoeffs is None else np.asarray(to_numpy(distCoeffs), np.float64).ravel()
    if dist.size not in (0, 4, 5, 8, 12):
        raise ValueError(f"solvePnP: distCoeffs must have 4, 5, 8 or 12 values, got {dist.size}")
    flags = int(flags)
    with np.errstate(all="ignore"):  # a diverging candidate (as in OpenCV) loses on its error, quietly
        rv, tv = _solve(obj, img, k, dist, flags)
    if not (np.isfinite(rv).all() and np.isfinite(tv).all()):
        raise ValueError("solvePnP found no finite pose for these points")
    return rv, tv


def _solve(obj, img, k, dist, flags):
    n = len(obj)
    if n != len(img):
        raise ValueError(f"solvePnP: {n} object points but {len(img)} image points")
    if n < (3 if flags == SOLVEPNP_SQPNP else 4):
        raise ValueError(f"solvePnP needs at least {3 if flags == SOLVEPNP_SQPNP else 4} points, got {n}")
    if flags == SOLVEPNP_ITERATIVE:
        xn = undistort(img, k, dist)
        rv, tv = _iterative_start(obj, xn)
        return _levenberg_marquardt(obj, img, k, dist, rv, tv)
    if flags == SOLVEPNP_EPNP:
        xn = undistort(img, k, dist)
        pix = np.stack([xn[:, 0] * k[0, 0] + k[0, 2], xn[:, 1] * k[1, 1] + k[1, 2]], 1)
        return _epnp(obj, pix, k)
    if flags == SOLVEPNP_SQPNP:
        return _sqpnp(obj, undistort(img, k, dist))
    raise ValueError(f"solvePnP: flags must be SOLVEPNP_ITERATIVE (0), SOLVEPNP_EPNP (1) or SOLVEPNP_SQPNP (8), "
                     f"got {flags}")


def solvePnP(objectPoints: Any, imagePoints: Any, cameraMatrix: Any, distCoeffs: Any,
             flags: int = SOLVEPNP_ITERATIVE):
    """Pose from 3-D/2-D correspondences: (True, rvec [3, 1], tvec [3, 1]) as float32 Vars, as MNN returns
    them (SOLVEPNP_ITERATIVE, SOLVEPNP_EPNP or SOLVEPNP_SQPNP, computed as OpenCV does)."""
    rv, tv = solve_pnp(objectPoints, imagePoints, cameraMatrix, distCoeffs, flags)
    return (True, image_var(np.asarray(rv, np.float64).reshape(3, 1).astype(np.float32)),
            image_var(np.asarray(tv, np.float64).reshape(3, 1).astype(np.float32)))
