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

Stored: y (softmax) or z (log-softmax), the only thing each backward needs; x is
not kept. The subtraction of m needs no backward line: its gradient is zero
(softmax is unchanged by a shift of the row).

Shapes: x (..., n, ...), the n entries along ``axis`` (the last by default);
y, z, dy, dz, dx like x. In comments, "(..., n, ...)" is x's shape and
"(..., 1, ...)" one entry per row.

This is the plain form. The speed wing has a fused twin with the same arguments
and cache (minitransformer/fast/kernels/softmax.py); a test ties the two.
"""
from __future__ import annotations

from typing import NamedTuple

from ..backend import get_xp
from ..validate import check_float, check_int, check_min_ndim, check_upstream


class SoftmaxCache(NamedTuple):
    y: object    # the output; the backward needs only y, so x is not kept
    axis: int    # the axis the softmax ran over


class LogSoftmaxCache(NamedTuple):
    z: object    # log-probabilities; softmax is recomputed as exp(z) in backward
    axis: int    # the axis the log-softmax ran over


def check_softmax_inputs(x, axis) -> int:
    """x a floating point array of at least 1 dimension, axis an integer axis of x; returns axis."""
    check_float("x", x)
    check_min_ndim("x", x, 1)
    axis = check_int("axis", axis, low=-x.ndim, high=x.ndim - 1)
    if x.shape[axis] == 0:
        raise ValueError(f"x: expected at least one entry on axis {axis} (a softmax over none has no "
                         f"value), got shape {tuple(x.shape)}")
    return axis


def _safe_max(x, axis):
    """m = max of x along axis (keepdims), 0 instead of -inf on an all -inf row (so x - m is not NaN)."""
    xp = get_xp(x)
    m = x.max(axis=axis, keepdims=True)                      # (..., 1, ...)
    return xp.where(xp.isneginf(m), xp.zeros_like(m), m)     # (..., 1, ...)


def softmax_forward(x, axis: int = -1):
    """y = exp(x - m) / Σ exp(x - m) along ``axis``, m the row max.

    Inputs: x (..., n, ...) floating point; axis, the axis of the n entries.
    Returns: y of x's shape (each slice along axis sums to 1, or is 0), SoftmaxCache(y, axis).
    """
    axis = check_softmax_inputs(x, axis)
    xp = get_xp(x)
    m = _safe_max(x, axis)                                   # (..., 1, ...)
    shifted = x - m                                          # (..., n, ...) every exponent <= 0
    e = xp.exp(shifted)                                      # (..., n, ...)
    total = e.sum(axis=axis, keepdims=True)                  # (..., 1, ...)
    denom = xp.where(total == 0, xp.ones_like(total), total) # (..., 1, ...) an all -inf row: 0 / 1 = 0
    y = e / denom                                            # (..., n, ...)
    return y, SoftmaxCache(y, axis)


def softmax_backward(dy, cache: SoftmaxCache):
    """dx = y ⊙ (dy - Σ_j dy_j y_j). Inputs: dy like y, the cache. Returns: dx like y."""
    y, axis = cache
    check_upstream("dy", dy, y.shape, y.dtype)  # the forward output's shape and dtype
    dy_y = dy * y                                            # (..., n, ...)
    s = dy_y.sum(axis=axis, keepdims=True)                   # (..., 1, ...) Σ_j dy_j y_j
    dx = y * (dy - s)                                        # (..., n, ...) reverses: y = e / denom
    return dx


def softmax_backward_jacobian(dy, cache: SoftmaxCache):
    """The same gradient through the full Jacobian J = diag(y) - y yᵀ (teaching form).

    Builds an (n, n) matrix per row: fine for lectures, too slow for training.
    """
    xp = get_xp(dy)
    y, axis = cache
    check_upstream("dy", dy, y.shape, y.dtype)  # the forward output's shape and dtype
    y_last = xp.moveaxis(y, axis, -1)                                  # (..., n)
    dy_last = xp.moveaxis(dy, axis, -1)                                # (..., n)
    n = y_last.shape[-1]
    J = y_last[..., :, None] * (xp.eye(n, dtype=y.dtype) - y_last[..., None, :])  # (..., n, n)
    dx_last = (J @ dy_last[..., :, None])[..., 0]                     # (..., n) J is symmetric: Jᵀ dy = J dy
    return xp.moveaxis(dx_last, -1, axis)


def log_softmax_forward(x, axis: int = -1):
    """z = (x - m) - log Σ exp(x - m) along ``axis``, m the row max.

    Inputs: x (..., n, ...) floating point; axis. Returns: z of x's shape, LogSoftmaxCache(z, axis).
    An all -inf row gives all -inf (log 0), consistent with softmax's zeros.
    """
    axis = check_softmax_inputs(x, axis)
    xp = get_xp(x)
    m = _safe_max(x, axis)                                   # (..., 1, ...)
    shifted = x - m                                          # (..., n, ...)
    e = xp.exp(shifted)                                      # (..., n, ...)
    total = e.sum(axis=axis, keepdims=True)                  # (..., 1, ...)
    denom = xp.where(total == 0, xp.ones_like(total), total) # (..., 1, ...) all -inf rows stay -inf
    log_denom = xp.log(denom)                                # (..., 1, ...)
    z = shifted - log_denom                                  # (..., n, ...)
    return z, LogSoftmaxCache(z, axis)


def log_softmax_backward(dz, cache: LogSoftmaxCache):
    """dx = dz - softmax(x) Σ_j dz_j. Inputs: dz like z, the cache. Returns: dx like z."""
    xp = get_xp(dz)
    z, axis = cache
    check_upstream("dz", dz, z.shape, z.dtype)  # the forward output's shape and dtype
    p = xp.exp(z)                                            # (..., n, ...) softmax, recomputed: cheaper than storing both
    dz_sum = dz.sum(axis=axis, keepdims=True)                # (..., 1, ...)
    dx = dz - p * dz_sum                                     # (..., n, ...) reverses: z = shifted - log Σ exp(shifted)
    return dx
