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


class SoftmaxCache(NamedTuple):
    y: object    # the output; the backward needs only y, so x is not kept
    axis: int


class LogSoftmaxCache(NamedTuple):
    z: object    # log-probabilities; softmax is recomputed as exp(z) in backward
    axis: int


def _shifted(x, axis):
    """x - max(x) along axis, with all -inf rows shifted by 0 instead of -inf (no NaN)."""
    xp = get_xp(x)
    m = x.max(axis=axis, keepdims=True)
    m = xp.where(xp.isneginf(m), xp.zeros_like(m), m)
    return x - m


def softmax_forward(x, axis: int = -1):
    """Inputs: x (..., n, ...). Returns: y of x's shape (each slice along axis sums to 1, or is 0), cache."""
    xp = get_xp(x)
    e = _shifted(x, axis)
    xp.exp(e, out=e)                                  # in place: e is a fresh array
    total = e.sum(axis=axis, keepdims=True)
    total[total == 0] = 1                             # all-masked rows: 0 / 1 = 0
    e /= total
    return e, SoftmaxCache(e, axis)


def softmax_backward(dy, cache: SoftmaxCache):
    """dx = y * (dy - Σ dy·y). Inputs: dy like y. Returns: dx like y."""
    y, axis = cache
    dx = dy * y
    dx -= y * dx.sum(axis=axis, keepdims=True)        # y*dy - y*Σ(dy*y)
    return dx


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
    s = _shifted(x, axis)
    total = xp.exp(s).sum(axis=axis, keepdims=True)
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
