"""mnnjit.numpy: MNN.numpy - numpy-style functions that build lazy Vars.

Dtypes are MNN's (``float32`` is ``dtype.float``...); results narrow to 32-bit types; full
reductions return Python scalars; comparisons give int32 0/1. Every function builds nodes of
registered ops (see ``mnnjit/ops/``), so the compiler can fuse what they produce.

The functions live in topic modules (``_creation``, ``_math``, ``_stats``, ``_shape``, ``_sort``,
``_indexing``, ``_products``, ``_iter``) and are re-exported here.
"""
from __future__ import annotations

import numpy as _np

from .._dtypes import dtype as _dtype
from ..ops.build import AxisError  # noqa: F401  (numpy's exception type, re-exported)
from ..var import Var
from . import linalg, random  # noqa: F401
from ._creation import (  # noqa: F401
    arange, array, asanyarray, asarray, asarray_chkfinite, ascontiguousarray, asfarray, asfortranarray,
    asmatrix, asscalar, bmat, copy, diag, diagflat, diagonal, empty, empty_like, eye, frombuffer, fromfile,
    fromfunction, fromiter, fromstring, full, full_like, geomspace, identity, linspace, loadtxt, logspace, mat,
    matrix, meshgrid, ones, ones_like, require, tri, tril, triu, vander, zeros, zeros_like,
)
from ._indexing import (  # noqa: F401
    choose, copyto, diag_indices, diag_indices_from, fill, fill_diagonal, indices, ix_, mask_indices, place,
    put, put_along_axis, putmask, ravel_multi_index, select, take, take_along_axis, tril_indices,
    tril_indices_from, triu_indices, triu_indices_from, unravel_index,
)
from ._iter import (  # noqa: F401
    base_repr, binary_repr, flatiter, ndenumerate, ndindex, nditer, nested_iters, packbits, unpackbits,
)
from ._math import *  # noqa: F401,F403
from ._math import around, divmod, round, round_  # noqa: F401,A004
from ._products import cross, dot, inner, matmul, outer, tensordot, vdot  # noqa: F401
from ._shape import (  # noqa: F401
    append, array_split, atleast_1d, atleast_2d, atleast_3d, block, broadcast, broadcast_arrays,
    broadcast_shapes, broadcast_to, column_stack, concatenate, delete, dsplit, dstack, expand_dims, flip, fliplr,
    flipud, hsplit, hstack, insert, moveaxis, pad, ravel, repeat, repmat, reshape, resize, roll, rollaxis, rot90,
    row_stack, shape, split, squeeze, stack, swapaxes, tile, transpose, trim_zeros, vsplit, vstack,
)
from ._sort import (  # noqa: F401
    argpartition, argsort, argwhere, compress, count_nonzero, digitize, extract, flatnonzero, lexsort, msort,
    nonzero, partition, searchsorted, sort, sort_complex, topk, unique,
)
from ._stats import (  # noqa: F401,A004
    all, amax, amin, any, argmax, argmin, array_equal, array_equiv, average, bincount, convolve, corrcoef,
    correlate, cov, cumprod, cumsum, diff, ediff1d, gradient, histogram, histogram2d, histogram_bin_edges,
    histogramdd, interp, max, mean, median, min, nanargmax, nanargmin, nancumprod, nancumsum, nanmax, nanmean,
    nanmedian, nanmin, nanpercentile, nanprod, nanquantile, nanstd, nansum, nanvar, percentile, prod, ptp,
    quantile, std, sum, trace, trapezoid, trapz, var,
)

float32 = _dtype.float
float64 = _dtype.double
double = _dtype.double
int32 = _dtype.int
int64 = _dtype.int64
uint8 = _dtype.uint8
int8 = _dtype.int8
pi = _np.pi
e = _np.e
inf = _np.inf
nan = _np.nan
newaxis = None
ndarray = Var
LinAlgError = _np.linalg.LinAlgError


def where(condition, x=None, y=None):
    """``x`` where ``condition`` else ``y``; with one argument the indices of the non-zero elements."""
    from ..ops import build as _B
    if x is None and y is None:
        return nonzero(condition)
    if x is None or y is None:
        raise ValueError("either both or neither of x and y should be given")
    return _B.select(condition, x, y)
