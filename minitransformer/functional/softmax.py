"""Softmax and log-softmax along an axis, the numerically stable way.

    softmax(x)_i     = exp(x_i - m) / Σ_j exp(x_j - m),     m = max_j x_j
    log_softmax(x)_i = (x_i - m) - log Σ_j exp(x_j - m)

Subtracting the row max m changes nothing mathematically (the factor exp(-m)
cancels) but keeps exp from overflowing: every exponent is <= 0.

A row that is entirely -inf (a query with no key to attend to) has no
distribution; by the project's convention its softmax is all zeros and it passes
zero gradient, never NaN.

Backward of y = softmax(x), with the Jacobian ∂y_i/∂x_j = y_i (δ_ij - y_j):
    dx = y * (dy - Σ_j dy_j y_j)          (efficient form, O(n) per row)
    dx = J dy,  J = diag(y) - y yᵀ        (full Jacobian, for teaching; O(n²))
Backward of z = log_softmax(x), with ∂z_i/∂x_j = δ_ij - softmax(x)_j:
    dx = dz - softmax(x) * Σ_j dz_j
"""
from __future__ import annotations

from typing import NamedTuple

from ..backend import get_xp
from ._kernels.rowblocks import in_row_blocks
from ._kernels.reductions import row_dot, row_max, row_sum


class SoftmaxCache(NamedTuple):
    y: object    # the output; the backward needs only y, so x is not kept
    axis: int


class LogSoftmaxCache(NamedTuple):
    z: object    # log-probabilities; softmax is recomputed as exp(z) in backward
    axis: int


def _row_max(x, axis, xp):
    """max of x along axis (keepdims), with all -inf rows shifted by 0 instead of -inf (no NaN)."""
    m = row_max(x) if axis in (-1, x.ndim - 1) else x.max(axis=axis, keepdims=True)
    return xp.where(xp.isneginf(m), xp.zeros_like(m), m)           # m is small: one entry per row


def softmax_forward(x, axis: int = -1, out=None):
    """Inputs: x (..., n, ...); out: None, or a C-contiguous array of x's shape and dtype to
    write y into (it may be x itself: attention overwrites its scores so).

    Returns: y of x's shape (each slice along axis sums to 1, or is 0), cache.
    """
    xp = get_xp(x)
    y = xp.empty(x.shape, dtype=x.dtype) if out is None else out
    xt, yt = xp.moveaxis(x, axis, -1), xp.moveaxis(y, axis, -1)      # views: the softmax axis last
    in_row_blocks(_softmax_kernel, xt, yt)                           # rows in cache-sized blocks
    return y, SoftmaxCache(y, axis)


def _softmax_kernel(x, y):
    """y = softmax of x over the last axis; y may be x itself."""
    xp = get_xp(x)
    m = _row_max(x, -1, xp)                           # (..., 1)
    xp.subtract(x, m, out=y)                          # x - max: every exponent <= 0
    xp.exp(y, out=y)
    total = row_sum(y)                                # (..., 1)
    total[total == 0] = 1                             # all-masked rows: 0 / 1 = 0
    y /= total


def softmax_backward(dy, cache: SoftmaxCache, out=None):
    """dx = y * (dy - Σ dy·y). Inputs: dy like y; out: None, or a C-contiguous array like y
    to write dx into (it may be dy itself). Returns: dx like y.

    The row sums Σ dy·y come from one product-and-sum pass (reductions.row_dot);
    then two in-place passes finish dx, with no temporary of y's size.
    """
    xp = get_xp(dy)
    y, axis = cache
    dx = xp.empty(dy.shape, dtype=dy.dtype) if out is None else out
    last = [xp.moveaxis(a, axis, -1) for a in (dy, y, dx)]          # views: the softmax axis last
    in_row_blocks(_softmax_backward_kernel, *last)                   # rows in cache-sized blocks
    return dx


def _softmax_backward_kernel(dy, y, dx):
    """dx = y * (dy - Σ dy·y) over the last axis; dx may be dy itself."""
    xp = get_xp(dy)
    s = row_dot(dy, y)                                # (..., 1) Σ_j dy_j y_j
    xp.subtract(dy, s, out=dx)                        # dy - Σ dy·y
    dx *= y                                           # y * (dy - Σ dy·y)


def softmax_backward_jacobian(dy, cache: SoftmaxCache):
    """The same gradient through the full Jacobian J = diag(y) - y yᵀ (teaching form).

    Builds an (n, n) matrix per row: fine for lectures, too slow for training.
    """
    xp = get_xp(dy)
    y, axis = cache
    y_last = xp.moveaxis(y, axis, -1)                                  # (..., n)
    dy_last = xp.moveaxis(dy, axis, -1)                                # (..., n)
    n = y_last.shape[-1]
    J = y_last[..., :, None] * (xp.eye(n, dtype=y.dtype) - y_last[..., None, :])  # (..., n, n)
    dx_last = (J @ dy_last[..., :, None])[..., 0]                     # J is symmetric: Jᵀ dy = J dy
    return xp.moveaxis(dx_last, -1, axis)


def log_softmax_forward(x, axis: int = -1):
    """Inputs: x. Returns: z = log softmax(x) of x's shape, cache.

    An all -inf row gives all -inf (log 0), consistent with softmax's zeros.
    """
    xp = get_xp(x)
    s = x - _row_max(x, axis, xp)
    e = xp.exp(s)
    total = row_sum(e) if axis in (-1, x.ndim - 1) else e.sum(axis=axis, keepdims=True)
    total[total == 0] = 1                             # all -inf rows stay -inf
    s -= xp.log(total)
    return s, LogSoftmaxCache(s, axis)


def log_softmax_backward(dz, cache: LogSoftmaxCache):
    """dx = dz - softmax(x) Σ dz. Inputs: dz like z. Returns: dx like z."""
    xp = get_xp(dz)
    z, axis = cache
    p = xp.exp(z)                                     # softmax, recomputed (cheaper than storing both)
    dx = dz - p * dz.sum(axis=axis, keepdims=True)
    return dx
