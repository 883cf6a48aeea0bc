"""Fast reductions over the last axis (rows) and over all rows (columns).

Softmax, attention and the norms reduce the same way again and again: a sum, a
mean, a maximum or a dot product along the last axis, or a sum over every row.
NumPy's ``.sum(axis=-1)`` and ``.max(axis=-1)`` are correct but slow for the
short rows of a Transformer (64 to 1536 entries): they reduce row by row through
a generic loop. Each helper here computes exactly the same quantity through a
faster route, the same on every array module:

    row_sum(a)     Σ_j a_j          einsum "...j->..."           one pass
    row_mean(a)    Σ_j a_j / n      row_sum, then · 1/n on the (..., 1) result
    row_dot(a, b)  Σ_j a_j b_j      einsum "...j,...j->..."      one pass, no (..., n) temporary
    row_max(a)     max_j a_j        fmax.reduce                  a SIMD loop; see below
    col_sum(a)     Σ_rows a_row     (1, ..., 1) @ a              one BLAS matrix-vector product
    col_dot(a, b)  Σ_rows a ⊙ b     einsum "nj,nj->j"            one pass, no (N, n) temporary

(Timings: benchmarks/RESULTS.md, "Kernel timings".)

The row reductions use einsum, not a BLAS product with a vector of ones (as fast,
and col_sum does use it): einsum reduces each row on its own, in the same order
whatever the rows around it, so a kernel run on blocks of rows
(fast/kernels/rowblocks.py) gives the very same bits as one run on the whole
array. A BLAS product groups rows into its own tiles, and its last bits change
with the blocking.

``row_max`` uses ``fmax``, which skips a NaN where ``max`` would return it. In a
softmax that does not hide a NaN: the NaN entry itself still turns its row's sum,
and so the whole row, into NaN. The row results keep the last axis (keepdims),
so they broadcast back against their rows. On another array module (CuPy, whose
``ufunc.reduce`` knows only add and multiply) ``row_max`` is ``max``: a NaN row
stays a NaN row either way.
"""
from __future__ import annotations

import numpy as np

from ...backend import get_xp


def row_sum(a):
    """Σ over the last axis, kept as a size-1 axis.  (..., n) -> (..., 1)"""
    xp = get_xp(a)
    return xp.einsum("...j->...", a, optimize=False)[..., None]          # (..., 1)


def row_mean(a):
    """Mean over the last axis, kept as a size-1 axis.  (..., n) -> (..., 1)"""
    total = row_sum(a)
    total *= 1.0 / a.shape[-1]
    return total


def row_dot(a, b):
    """Σ_j a_j b_j over the last axis, kept as a size-1 axis.  (..., n), (..., n) -> (..., 1)

    One product-and-sum pass: no (..., n) array of products is made. (einsum has
    no contraction order to choose here, so it skips the path search.)
    """
    xp = get_xp(a)
    return xp.einsum("...j,...j->...", a, b, optimize=False)[..., None]  # (..., 1)


def row_max(a):
    """max over the last axis, kept as a size-1 axis (fmax: a NaN entry is skipped).  (..., n) -> (..., 1)"""
    xp = get_xp(a)
    if xp is not np:                       # CuPy's ufuncs reduce only with add and multiply
        return a.max(axis=-1, keepdims=True)                              # (..., 1)
    return np.fmax.reduce(a, axis=-1, keepdims=True)                     # (..., 1)


def col_sum(a):
    """Σ over every row (all axes but the last): ones @ a.  (..., n) -> (n,)"""
    xp = get_xp(a)
    a2 = a.reshape(-1, a.shape[-1])                                       # (N, n)
    return xp.ones(a2.shape[0], dtype=a.dtype) @ a2                       # (n,)


def col_dot(a, b):
    """Σ over every row of a ⊙ b, with no temporary product array.  (..., n), (..., n) -> (n,)"""
    xp = get_xp(a)
    n = a.shape[-1]
    return xp.einsum("ij,ij->j", a.reshape(-1, n), b.reshape(-1, n), optimize=False)  # (n,)
