"""Fast twins of functional/softmax.py: softmax and log-softmax over rows.

The same equations as the plain forms; the differences are bookkeeping only:
one-pass row reductions (reductions.py), in-place updates of arrays this module
allocated, and softmax rows processed in cache-sized blocks (rowblocks.py), why:
fewer passes over the (B, H, T, S) attention scores. ``softmax_into`` also lets
attention overwrite its scores with P.
"""
from __future__ import annotations

from ...backend import get_xp
from ...validate import check_upstream
from ...functional.softmax import LogSoftmaxCache, SoftmaxCache, check_softmax_inputs
from .reductions import row_dot, row_max, row_sum
from .rowblocks import in_row_blocks


def _row_max(x, axis, xp):
    """max of x along axis (keepdims), with all -inf rows shifted by 0 instead of -inf (no NaN)."""
    m = row_max(x) if axis in (-1, x.ndim - 1) else x.max(axis=axis, keepdims=True)
    return xp.where(xp.isneginf(m), xp.zeros_like(m), m)           # m is small: one entry per row


def softmax_forward(x, axis: int = -1):
    """Twin of functional.softmax.softmax_forward."""
    axis = check_softmax_inputs(x, axis)
    xp = get_xp(x)
    return softmax_into(x, axis, xp.empty(x.shape, dtype=x.dtype))


def softmax_into(x, axis, out):
    """softmax_forward writing y into ``out`` (C-contiguous, x's shape; it may be x itself)."""
    xp = get_xp(x)
    xt, yt = xp.moveaxis(x, axis, -1), xp.moveaxis(out, axis, -1)    # views: the softmax axis last
    in_row_blocks(_softmax_kernel, xt, yt)
    return out, SoftmaxCache(out, axis)


def _softmax_kernel(x, y, z=None):
    """y = softmax of x over the last axis; y may be x itself. ``z`` (x's shape; default y, and
    it may be x) holds exp(x - max) on the way: a contiguous z where y is a strided view makes
    the exp and the row sums one loop each instead of one per row (attention_blocks.py)."""
    xp = get_xp(x)
    z = y if z is None else z
    m = _row_max(x, -1, xp)                           # (..., 1)
    xp.subtract(x, m, out=z)                          # x - max: every exponent <= 0
    xp.exp(z, out=z)
    total = row_sum(z)                                # (..., 1)
    total[total == 0] = 1                             # all-masked rows: 0 / 1 = 0
    xp.divide(z, total, out=y)


def softmax_backward(dy, cache: SoftmaxCache):
    """Twin of functional.softmax.softmax_backward."""
    check_upstream("dy", dy, cache.y.shape, cache.y.dtype)
    xp = get_xp(dy)
    return softmax_backward_into(dy, cache, xp.empty(dy.shape, dtype=dy.dtype))


def softmax_backward_into(dy, cache: SoftmaxCache, out):
    """softmax_backward writing dx into ``out`` (C-contiguous, y's shape; it may be dy itself)."""
    xp = get_xp(dy)
    y, axis = cache
    check_upstream("dy", dy, y.shape, y.dtype)
    last = [xp.moveaxis(a, axis, -1) for a in (dy, y, out)]         # views: the softmax axis last
    in_row_blocks(_softmax_backward_kernel, *last)
    return out


def _softmax_backward_kernel(dy, y, dx):
    """dx = y * (dy - Σ dy·y) over the last axis; dx may be dy itself."""
    xp = get_xp(dy)
    s = row_dot(dy, y)                                # (..., 1) Σ_j dy_j y_j
    xp.subtract(dy, s, out=dx)                        # dy - Σ dy·y
    dx *= y                                           # y * (dy - Σ dy·y)


def log_softmax_forward(x, axis: int = -1):
    """Twin of functional.softmax.log_softmax_forward."""
    axis = check_softmax_inputs(x, axis)
    xp = get_xp(x)
    s = x - _row_max(x, axis, xp)
    e = xp.exp(s)
    total = row_sum(e) if axis in (-1, x.ndim - 1) else e.sum(axis=axis, keepdims=True)
    total[total == 0] = 1                             # all -inf rows stay -inf
    s -= xp.log(total)
    return s, LogSoftmaxCache(s, axis)
