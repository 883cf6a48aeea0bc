"""The [CLS] token: one learned vector put in front of every sequence.

    x' = [cls ; x_1 ; ... ; x_N]            x (B, N, C), cls (C,), x' (B, 1 + N, C)

After the encoder, the hidden state at position 0 summarises the sequence and
feeds the classifier (BERT's [CLS], ViT's "class token", FT-Transformer's [CLS]).
The same vector starts every row of the batch, so its gradient is the sum over
the batch of the gradients at position 0:

    dx   = dx'[:, 1:]                       (B, N, C)   reverses x'[:, 1:] = x
    dcls = Σ_b dx'[b, 0]                    (C,)        reverses x'[:, 0] = cls (broadcast over B)
"""
from __future__ import annotations

from typing import NamedTuple

from ..backend import get_xp
from ..validate import check_dim, check_dtype_like, check_float, check_ndim, check_upstream


class ClsCache(NamedTuple):
    x_shape: tuple       # (B, N, C): nothing else is needed, the backward only slices
    dtype: object


def prepend_cls_forward(x, cls):
    """x' = [cls ; x].

    Inputs: x (B, N, C) floating; cls (C,) of x's dtype.
    Returns: x' (B, 1 + N, C), ClsCache.
    """
    xp = get_xp(x, cls)
    check_ndim("x", x, 3, "(B, N, C)")
    check_float("x", x)
    check_ndim("cls", cls, 1, "(C,)")
    check_dim("cls", cls, 0, x.shape[2], "C, the width of x")
    check_dtype_like("cls", cls, x, "x")
    B, N, C = x.shape
    out = xp.empty((B, 1 + N, C), dtype=x.dtype)                  # (B, 1 + N, C)
    out[:, 0] = cls                                               # (B, C) the same row for every b
    out[:, 1:] = x                                                # (B, N, C)
    return out, ClsCache(tuple(x.shape), x.dtype)


def prepend_cls_backward(dout, cache: ClsCache):
    """Inputs: dout (B, 1 + N, C), the cache. Returns: dx (B, N, C), dcls (C,)."""
    B, N, C = cache.x_shape
    check_upstream("dout", dout, (B, 1 + N, C), cache.dtype)
    dx = dout[:, 1:].copy()                                       # (B, N, C)  reverses out[:, 1:] = x
    dcls = dout[:, 0].sum(axis=0)                                 # (C,)       reverses out[:, 0] = cls
    return dx, dcls
