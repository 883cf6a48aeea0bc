"""Fast twin of functional/attention.py.

The same equations and cache; the (B, H, T, S) scores are the largest arrays, so
this form never allocates a second one: the bias and the mask are added in
place, the softmax overwrites the scores with P, and its backward overwrites dP
with dscores (the fast softmax, softmax.py here). Attention dropout (p_drop > 0 in
training) is computed by the plain form: this twin hands such a call, and the
backward of its cache, over to it.

The products write their results in the layout that merging the heads produces:
out into a (B, T, H, Dv) buffer, and dq, dk, dv side by side into one (B, T, 3H, D)
buffer (the fused W_qkv's columns when the heads are not grouped). The
(B, H, T, D) results are views of those buffers, so merge_heads (heads.py here)
is a reshape instead of a copy; a matrix product writes through such a view
(ldc = H·D) at no extra cost.

Under a causal-shaped mask, from T = 128 queries on (no bias), the work runs in
blocks of query rows that skip the keys past each block's causal edge
(attention_blocks.py); the backward does the same whenever P is exactly 0 there.

Grouped kv heads arrive repeated (functional/repeat_kv.py), as in the plain form. The
earlier form that multiplied the shared keys without the copy (the queries of a group
stacked as (B, G, r·T, D)) is not here: it took 6-10% off a grouped-query model's step
and nothing off the default run, whose heads are not grouped (benchmarks/RESULTS.md,
docs/speed.md).
"""
from __future__ import annotations

import numpy

from ...backend import get_xp
from ...validate import check_flag, check_number, check_upstream
from ...functional import attention as plain
from ...functional.attention import AttentionCache, _check_inputs, _sum_to_shape
from ...functional.masks import additive_mask
from ...functional.softmax import SoftmaxCache
from .attention_blocks import (blocked_backward, blocked_forward, mask_hides_past_edges, probs_zero_past_edges,
                               query_blocks)
from .softmax import softmax_backward_into, softmax_into


def attention_forward(q, k, v, mask=None, bias=None, *, p_drop=0.0, rng=None, training=True,
                      drop_mask=None):
    """Twin of functional.attention.attention_forward."""
    p_drop = check_number("p_drop", p_drop, low=0.0, high=1.0, high_open=True)
    if p_drop != 0.0 and check_flag("training", training):  # attention dropout: the plain form
        return plain.attention_forward(q, k, v, mask, bias, p_drop=p_drop, rng=rng, training=training,
                                       drop_mask=drop_mask)
    B, H, T, D, S = _check_inputs(q, k, v, mask, bias)
    blocks = query_blocks(T, S) if bias is None and isinstance(q, numpy.ndarray) else None
    if blocks is not None and mask_hides_past_edges(mask, blocks):
        return _forward_in_blocks(q, k, v, mask, blocks)  # causal-shaped mask: skip the hidden keys
    scale = D ** -0.5
    k_scaled = k * scale                                   # (B, H, S, D)
    s = q @ k_scaled.swapaxes(-1, -2)                      # (B, H, T, S) a fresh array
    if bias is not None:
        s += bias
    if mask is not None:
        s += additive_mask(mask, s.dtype)                  # -inf where hidden
    P, _ = softmax_into(s, -1, s)                          # (B, H, T, S) P overwrites the scores
    cache = AttentionCache(q, k_scaled, v, P, scale, None if bias is None else tuple(bias.shape))
    if isinstance(q, numpy.ndarray):
        return numpy.matmul(P, v, out=_merged_heads_output(B, H, T, v.shape[-1], q.dtype)), cache
    return P @ v, cache                                    # (B, H, T, Dv)


def attention_backward(dout, cache: AttentionCache):
    """Twin of functional.attention.attention_backward."""
    if cache.dropout is not None:                          # attention dropout: the plain form
        return plain.attention_backward(dout, cache)
    q, k_scaled, v, P, scale, bias_shape = cache[:6]
    B, H, T, D = q.shape
    S = P.shape[-1]
    check_upstream("dout", dout, (B, H, T, v.shape[-1]), v.dtype)  # the forward output's shape and dtype
    blocks = query_blocks(T, S) if bias_shape is None and isinstance(P, numpy.ndarray) else None
    if blocks is not None and probs_zero_past_edges(P, blocks):
        return _backward_in_blocks(dout, cache, blocks)    # P = 0 past the causal edges: skip those keys
    xp = get_xp(dout, v)
    dq, dk, dv = _gradient_buffers(q, k_scaled, v)
    dv = xp.matmul(P.swapaxes(-1, -2), dout, out=dv)       # (B, H, S, Dv)
    dP = dout @ v.swapaxes(-1, -2)                         # (B, H, T, S)
    dscores = softmax_backward_into(dP, SoftmaxCache(P, -1), dP)  # in place of dP
    dbias = None if bias_shape is None else _sum_to_shape(dscores, bias_shape)
    dq = xp.matmul(dscores, k_scaled, out=dq)              # (B, H, T, D)
    dk = xp.matmul(dscores.swapaxes(-1, -2), q, out=dk)    # (B, H, S, D)
    dk *= scale
    return (dq, dk, dv) if dbias is None else (dq, dk, dv, dbias)


def _forward_in_blocks(q, k, v, mask, blocks):
    """attention_forward for no bias and a mask with a causal shape: the work in query
    blocks that skip the hidden keys (attention_blocks.py), out in the merged-heads layout."""
    B, H, T, D = q.shape
    S, Dv = k.shape[2], v.shape[-1]
    scale = D ** -0.5
    k_scaled = k * scale                                   # (B, H, S, D)
    P = numpy.empty((B, H, T, S), dtype=q.dtype)           # (B, H, T, S) written block by block
    out = _merged_heads_output(B, H, T, Dv, q.dtype)      # (B, H, T, Dv)
    blocked_forward(q, k_scaled, v, additive_mask(mask, q.dtype), blocks, out, P)
    return out, AttentionCache(q, k_scaled, v, P, scale, None)


def _merged_heads_output(B, H, T, Dv, dtype):
    """An empty (B, H, T, Dv) output that is a view of a (B, T, H, Dv) buffer: merging its heads
    is then a reshape (heads.py here)."""
    return numpy.empty((B, T, H, Dv), dtype=dtype).transpose(0, 2, 1, 3)


def _backward_in_blocks(dout, cache, blocks):
    """attention_backward for no bias and P = 0 past the blocks' causal edges: the same blocks."""
    q, k_scaled, v, P, scale = cache[:5]
    dq, dk, dv = _gradient_buffers(q, k_scaled, v)
    if dq is None:
        dq, dk, dv = (numpy.empty(a.shape, dtype=a.dtype) for a in (q, k_scaled, v))
    blocked_backward(dout, q, k_scaled, v, P, blocks, dq, dk, dv)
    dk *= scale                                            # dK = dscoresᵀ Q / √D
    return dq, dk, dv


def _gradient_buffers(q, k_scaled, v):
    """dq (B, H, T, D), dk (B, H, S, D), dv (B, H, S, Dv) as views of one (B, T, 3H, D) buffer,
    heads in the order q, k, v (what merge_heads(dq, dk, dv) produces), when S = T and Dv = D;
    else (None, None, None): the products allocate their own results."""
    B, H, T, D = q.shape
    S = k_scaled.shape[2]
    if S != T or v.shape[-1] != D or not isinstance(k_scaled, numpy.ndarray):
        return None, None, None
    heads = numpy.empty((B, T, 3 * H, D), dtype=k_scaled.dtype).transpose(0, 2, 1, 3)  # (B, 3H, T, D)
    return heads[:, :H], heads[:, H:2 * H], heads[:, 2 * H:]
