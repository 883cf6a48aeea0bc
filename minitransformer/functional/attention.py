"""Scaled dot-product attention, with a mask, an additive bias and grouped-query heads.

    scores = Q Kᵀ / √D + bias                 (B, H, T, S)
    scores = -inf where the mask is False     (the key is hidden from the query)
    P      = softmax(scores) over the keys    (B, H, T, S)
    out    = P V                              (B, H, T, D)

Q holds T queries, K and V hold S keys and values, D is the head dim. Dividing by
√D keeps the scores' variance near 1 when q and k have unit-variance entries, so
the softmax does not saturate (Vaswani et al. 2017, section 3.2.1). The bias is
ALiBi's distance penalty (functional/alibi.py) or any other additive score term.

A query whose every key is masked has no distribution to take: softmax_forward
returns a zero row for it (functional/softmax.py), so it outputs 0 and passes 0
gradient, without NaN.

Grouped-query attention (GQA, Ainslie et al. 2023): K and V may have K <= H heads
with H % K == 0; query head h reads kv head h // G, G = H / K (K = 1 is multi-query
attention). No repeated copy of K and V is made: Q (B, H, T, D) is viewed as
(B, K, G·T, D), the G query heads of a group stacked along the query axis, and one
batched matrix product over (B, K) meets them all with their shared keys. With
K = H (G = 1) this is ordinary multi-head attention.

Backward (each line reverses the forward line on its left):
    out = P V                      dP = dout Vᵀ,   dV = Pᵀ dout
    P = softmax(scores)            dscores = P ⊙ (dP - Σ_keys dP ⊙ P)     (softmax_backward)
    scores = ... + bias            dbias = dscores summed over bias's broadcast axes
    scores = Q Kᵀ / √D             dQ = dscores K / √D,   dK = dscoresᵀ Q / √D

Where the work goes. The (B, H, T, S) scores are the largest arrays here (S keys
per query, against D numbers per query in Q), so the code never makes a pass over
them that a smaller array can make instead: 1/√D multiplies the keys,
K/√D (B, K, S, D), once in forward, and the backward reuses that product for dQ
and scales dK (B, K, S, D) rather than dscores; the softmax runs in place on the
scores, and its backward in place on dP. Every line still computes the equation
on its left above; only the bracketing of the scalar 1/√D moves.
In the grouped view, Pᵀ dout and dscoresᵀ Q multiply over the G·T rows of a group,
so the sum over the G query heads that share a kv head happens inside the matrix
product. Where the mask was False, P = 0 exactly, hence dscores = 0 and dP's row
does not matter: a hidden key receives exactly zero gradient.
"""
from __future__ import annotations

from typing import NamedTuple

from ..validate import (check_bool, check_broadcastable, check_dim, check_dtype_like,
                        check_float, check_ndim, check_same_shape)
from .masks import additive_mask
from .softmax import SoftmaxCache, softmax_backward, softmax_forward


class AttentionCache(NamedTuple):
    # Stored: P, because the softmax backward needs only its output (and the lecture
    # plots want it); Q, K/√D, V, for the matrix-product gradients (K/√D is what the
    # forward multiplied, and it is exactly what dQ needs). Not stored: the scores
    # (the softmax backward never reads them; P overwrote them) and the mask (P is
    # exactly 0 where it was False, so the backward needs no mask).
    q: object                # (B, K, G·T, D) queries grouped by kv head
    k_scaled: object         # (B, K, S, D) the keys times 1/√D
    v: object                # (B, K, S, Dv)
    probs: object            # (B, H, T, S) the attention probabilities P
    scale: float             # 1/√D, a Python float (it never promotes float32)
    bias_shape: tuple | None  # the bias's shape, to reduce dbias to; None: no bias given


def attention_forward(q, k, v, mask=None, bias=None):
    """out = softmax(q kᵀ/√D + bias, -inf where mask is False) v, per head.

    Inputs:
        q     (B, H, T, D) queries.
        k     (B, K, S, D) keys, K dividing H (K = H: multi-head; K < H: grouped-query).
        v     (B, K, S, Dv) values (Dv is usually D).
        mask  bool broadcastable to (B, H, T, S), True = may attend; or None.
        bias  float broadcastable to (B, H, T, S), added to the scores; or None.
    Returns: out (B, H, T, Dv), AttentionCache (its ``probs`` field is P, (B, H, T, S)).
    """
    B, H, T, D, K, S = _check_inputs(q, k, v, mask, bias)
    G = H // K                                             # query heads per kv head
    q_grouped = q.reshape(B, K, G * T, D)                  # (B, K, G·T, D) view (copy: strided q, G > 1)
    scale = D ** -0.5
    k_scaled = k * scale                                   # (B, K, S, D) K/√D: smaller than the scores
    scores = q_grouped @ k_scaled.swapaxes(-1, -2)         # (B, K, G·T, S) Q Kᵀ/√D, a fresh array
    s = scores.reshape(B, H, T, S)                         # (B, H, T, S) view, for mask and bias
    if bias is not None:
        s += bias
    if mask is not None:
        s += additive_mask(mask, s.dtype)                  # -inf where hidden; see masks.additive_mask
    P, _ = softmax_forward(s, axis=-1, out=s)              # (B, H, T, S) in place: P overwrites the scores
    out = P.reshape(B, K, G * T, S) @ v                    # (B, K, G·T, Dv)
    cache = AttentionCache(q_grouped, k_scaled, v, P, scale, None if bias is None else tuple(bias.shape))
    return out.reshape(B, H, T, v.shape[-1]), cache        # (B, H, T, Dv)


def attention_backward(dout, cache: AttentionCache):
    """Inputs: dout (B, H, T, Dv), the cache.

    Returns: dq (B, H, T, D), dk (B, K, S, D), dv (B, K, S, Dv), and, only when the
    forward had a bias, dbias of the bias's shape as a fourth item.
    """
    q_grouped, k_scaled, v, P, scale, bias_shape = cache
    B, K, GT, D = q_grouped.shape
    H, T, S = P.shape[1:]
    check_same_shape("dout", dout, (B, H, T, v.shape[-1]))
    P_grouped = P.reshape(B, K, GT, S)                     # (B, K, G·T, S) view
    dout_grouped = dout.reshape(B, K, GT, v.shape[-1])     # (B, K, G·T, Dv)
    # out = P V
    dv = P_grouped.swapaxes(-1, -2) @ dout_grouped         # (B, K, S, Dv), summed over the group
    dP = dout_grouped @ v.swapaxes(-1, -2)                 # (B, K, G·T, S)
    # P = softmax(scores)
    dscores = softmax_backward(dP, SoftmaxCache(P_grouped, -1), out=dP)  # (B, K, G·T, S) in place of dP
    # scores = ... + bias
    dbias = None
    if bias_shape is not None:
        dbias = _sum_to_shape(dscores.reshape(B, H, T, S), bias_shape)
    # scores = Q (K/√D)ᵀ
    dq = (dscores @ k_scaled).reshape(B, H, T, D)          # (B, H, T, D) dscores K/√D
    dk = dscores.swapaxes(-1, -2) @ q_grouped              # (B, K, S, D), summed over the group ...
    dk *= scale                                            # ... dscoresᵀ Q/√D
    return (dq, dk, dv) if dbias is None else (dq, dk, dv, dbias)


def _sum_to_shape(x, shape):
    """Sum x over the axes that broadcasting added or stretched, so the result has ``shape``."""
    lead = x.ndim - len(shape)
    stretched = tuple(lead + a for a, n in enumerate(shape) if n == 1 and x.shape[lead + a] != 1)
    return x.sum(axis=tuple(range(lead)) + stretched, keepdims=True).reshape(shape)


def _check_inputs(q, k, v, mask, bias):
    """Shapes and dtypes, with messages naming the argument; returns B, H, T, D, K, S."""
    check_ndim("q", q, 4, "(B, H, T, D)")
    check_ndim("k", k, 4, "(B, K, S, D)")
    check_ndim("v", v, 4, "(B, K, S, Dv)")
    check_float("q", q)
    check_dtype_like("k", k, q, "q")
    check_dtype_like("v", v, q, "q")
    B, H, T, D = q.shape
    K, S = k.shape[1], k.shape[2]
    check_dim("k", k, 0, B, "B, the batch of q")
    check_dim("k", k, 3, D, "D, the head dim of q")
    if K == 0 or H % K:
        raise ValueError(f"k: expected a number of kv heads K dividing the H={H} heads of q, "
                         f"got K={K} (shape {tuple(k.shape)})")
    if S == 0:
        raise ValueError(f"k: expected at least one key (S >= 1), got shape {tuple(k.shape)}")
    check_same_shape("v", v, (B, K, S, v.shape[-1]))
    if mask is not None:
        check_bool("mask", mask)
        check_broadcastable("mask", mask, (B, H, T, S), "(B, H, T, S)")
    if bias is not None:
        check_float("bias", bias)
        check_dtype_like("bias", bias, q, "q")
        check_broadcastable("bias", bias, (B, H, T, S), "(B, H, T, S)")
    return B, H, T, D, K, S
