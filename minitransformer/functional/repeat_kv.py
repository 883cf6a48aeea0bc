"""Grouped-query heads: each key/value head repeated for the query heads that share it.

    K_rep[:, h] = K[:, h // r]        (B, G, S, D) -> (B, H, S, D),  r = H / G
    dK[:, g]    = Σ_{i < r} dK_rep[:, g·r + i]       the gradient sums each group

Grouped-query attention (GQA, Ainslie et al. 2023) keeps G <= H key/value heads
(G = 1 is multi-query attention, Shazeer 2019); query head h reads kv head h // r.
A smaller KV cache is the point: the layer projects and caches G heads, and
repeats them only for the product with the queries. After the repetition, grouped
attention IS ordinary multi-head attention on (B, H, ·, D) (functional/attention.py):
this is how LLaMA's reference code writes it (``repeat_kv``).

Backward: the r copies of kv head g all fed the loss, so its gradient is the sum of
theirs: reshape (B, H, S, D) into (B, G, r, S, D) and sum over r. That is the
adjoint of the copy, exactly as a fan-out in any network adds its gradients.

Shapes: B batch, H query heads, G kv heads, r = H / G, S positions, D head dim.
"""
from __future__ import annotations

from typing import NamedTuple

from ..backend import get_xp
from ..validate import check_int, check_ndim, check_upstream


class RepeatKVCache(NamedTuple):
    r: int                   # query heads per kv head (how many copies were made)
    shape: tuple             # (B, G, S, D) the input's shape, to check dout against
    dtype: object            # the input's dtype


def repeat_kv_forward(x, r: int):
    """x (B, G, S, D) -> (B, G·r, S, D), head h of the result a copy of head h // r of x.

    Inputs: x (B, G, S, D) keys or values of G kv heads; r >= 1, query heads per kv head.
    Returns: out (B, G·r, S, D), RepeatKVCache.
    """
    check_ndim("x", x, 4, "(B, G, S, D)")
    r = check_int("r", r, low=1)
    out = get_xp(x).repeat(x, r, axis=1)                   # (B, H, S, D) heads g, g, ..., g (r times), g+1, ...
    return out, RepeatKVCache(r, tuple(x.shape), x.dtype)


def repeat_kv_backward(dout, cache: RepeatKVCache):
    """dout (B, H, S, D) -> dx (B, G, S, D): each kv head's gradient is the sum over its r copies."""
    r, (B, G, S, D), dtype = cache
    check_upstream("dout", dout, (B, G * r, S, D), dtype)
    dout_groups = dout.reshape(B, G, r, S, D)              # (B, G, r, S, D) the copies of head g side by side
    dx = dout_groups.sum(axis=2)                           # (B, G, S, D)    reverses: out = repeat(x, r, axis=1)
    return dx
