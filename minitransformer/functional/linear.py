"""Linear (affine) map: y = x W + b.

Shapes: x (..., d_in), W (d_in, d_out), b (d_out,) or None, y (..., d_out).
Any number of leading dimensions; they are flattened to one row axis N, so every
product is a single 2-D matrix product (NumPy runs a 3-D @ 2-D product as one BLAS
call per leading index: smaller, slower calls; benchmarks/RESULTS.md).

Backward (each line reverses the forward line y = x @ W + b):
    dx = dy @ Wᵀ                       (..., d_in)
    dW = xᵀ dy   summed over the rows  (d_in, d_out)
    db = Σ_rows dy                     (d_out,)
"""
from __future__ import annotations

from typing import NamedTuple

from ..validate import check_dim, check_dtype_like, check_float, check_min_ndim, check_ndim, check_upstream


class LinearCache(NamedTuple):
    x: object        # the input, needed for dW; stored, not recomputed
    W: object        # the weight, needed for dx
    has_bias: bool   # whether a bias b was given: db is None without one


def linear_forward(x, W, b=None):
    """y = x @ W + b.

    Inputs: x (..., d_in); W (d_in, d_out); b (d_out,) or None.
    Returns: y (..., d_out), LinearCache.
    """
    check_min_ndim("x", x, 1)
    check_float("x", x)
    check_ndim("W", W, 2, "(d_in, d_out)")
    check_dim("x", x, -1, W.shape[0], "d_in, the rows of W")
    check_dtype_like("W", W, x, "x")             # mixing would promote: float16 stays float16 or is refused
    if b is not None:
        check_ndim("b", b, 1, "(d_out,)")
        check_dim("b", b, 0, W.shape[1], "d_out, the columns of W")
        check_dtype_like("b", b, x, "x")
    x_rows = x.reshape(-1, x.shape[-1])         # (N, d_in) a view of contiguous x
    h = x_rows @ W                              # (N, d_out) x W ...
    if b is not None:
        h += b                                  # (N, d_out) ... + b, in place on the fresh product (hot path)
    y = h.reshape(x.shape[:-1] + (W.shape[1],)) # (..., d_out)
    return y, LinearCache(x, W, b is not None)


def linear_backward(dy, cache: LinearCache):
    """Inputs: dy (..., d_out), the cache. Returns: dx (..., d_in), dW (d_in, d_out), db (d_out,) or None."""
    x, W, has_bias = cache
    check_upstream("dy", dy, x.shape[:-1] + W.shape[1:], x.dtype)   # the forward output's shape and dtype
    x_rows = x.reshape(-1, x.shape[-1])                     # (N, d_in)
    dh = dy.reshape(-1, dy.shape[-1])                       # (N, d_out)   reverses: y = h.reshape(...)
    db = dh.sum(axis=0) if has_bias else None              # (d_out,)     reverses: h += b (Σ over rows)
    dx_rows = dh @ W.T                                      # (N, d_in)    reverses: h = x_rows @ W
    dW = x_rows.T @ dh                                      # (d_in, d_out) reverses: h = x_rows @ W
    dx = dx_rows.reshape(x.shape)                           # (..., d_in)  reverses: x_rows = x.reshape(-1, d_in)
    return dx, dW, db
