"""BERT's pooler: a dense layer with tanh on the first ([CLS]) token's hidden state.

    pooled = tanh(h[:, 0] W + b)             h (B, S, C), W (C, C), b (C,), pooled (B, C)

BERT pre-trains it on next-sentence prediction and fine-tunes its classifiers on
``pooled`` (Devlin et al. 2019, section 3; Hugging Face's ``BertPooler``). Only
position 0 is read, so only position 0 receives a gradient.

Backward (tanh' = 1 - tanh², from the stored output):
    dz            = dpooled ⊙ (1 - pooled²)             reverses pooled = tanh(z)
    dh0, dW, db   = linear_backward(dz)                 reverses z = h0 W + b
    dh[:, 0]      = dh0,  dh[:, 1:] = 0                 reverses h0 = h[:, 0]
"""
from __future__ import annotations

from typing import NamedTuple

from ..backend import get_xp
from ..validate import check_dtype_like, check_float, check_ndim, check_upstream
from .linear import LinearCache, linear_backward, linear_forward


class PoolerCache(NamedTuple):
    linear: LinearCache      # h0 and W for the dense layer's backward
    pooled: object           # (B, C) tanh(z), stored: tanh' = 1 - pooled² needs nothing else
    h_shape: tuple           # (B, S, C), to place dh0 at position 0


def pooler_forward(h, W, b):
    """pooled = tanh(h[:, 0] W + b).

    Inputs: h (B, S, C) floating; W (C, C); b (C,) or None.
    Returns: pooled (B, C), PoolerCache.
    """
    xp = get_xp(h, W)
    check_ndim("h", h, 3, "(B, S, C)")
    check_float("h", h)
    if h.shape[1] == 0:
        raise ValueError(f"h: expected at least one position (the [CLS] token at 0), got shape {tuple(h.shape)}")
    check_dtype_like("W", W, h, "h")
    if b is not None:
        check_dtype_like("b", b, h, "h")
    h0 = h[:, 0]                                                  # (B, C) the [CLS] position
    z, linear_cache = linear_forward(h0, W, b)                    # (B, C)
    pooled = xp.tanh(z)                                           # (B, C)
    return pooled, PoolerCache(linear_cache, pooled, tuple(h.shape))


def pooler_backward(dpooled, cache: PoolerCache):
    """Inputs: dpooled (B, C), the cache. Returns: dh (B, S, C), dW (C, C), db (C,) or None."""
    linear_cache, pooled, h_shape = cache
    check_upstream("dpooled", dpooled, pooled.shape, pooled.dtype)
    xp = get_xp(dpooled)
    dz = dpooled * (1 - pooled * pooled)                          # (B, C)    reverses pooled = tanh(z)
    dh0, dW, db = linear_backward(dz, linear_cache)               # (B, C)    reverses z = h0 W + b
    dh = xp.zeros(h_shape, dtype=dpooled.dtype)                   # (B, S, C) reverses h0 = h[:, 0]
    dh[:, 0] = dh0
    return dh, dW, db
