"""Scaled dot-product attention over heads, with a mask, an additive bias and dropout on P.

    scores = Q Kᵀ / √D + bias                 (B, H, T, S)
    scores = -inf where the mask is False     (the key is hidden from the query)
    P      = softmax(scores) over the keys    (B, H, T, S)
    P̃      = P ⊙ m / (1 - p_drop)             (B, H, T, S) attention dropout, training only
    out    = P̃ V                              (B, H, T, D)

Q holds T queries, K and V hold S keys and values, D is the head dim; every line runs
on all B·H (batch, head) pairs at once, as one batched matrix product. Dividing by
√D keeps the scores' variance near 1 when q and k have unit-variance entries, so
the softmax does not saturate (Vaswani et al. 2017, section 3.2.1). 1/√D multiplies
the keys (B, H, S, D), a smaller array than the scores. The bias is ALiBi's distance
penalty (functional/alibi.py) or any other additive score term.

A query whose every key is masked has no distribution to take: softmax_forward
returns a zero row for it (functional/softmax.py), so it outputs 0 and passes 0
gradient, without NaN.

Attention dropout (Vaswani et al. 2017, GPT-2's attn_pdrop): with p_drop > 0 in
training, each probability is dropped (m ~ Bernoulli(1 - p_drop), functional/dropout.py)
and the kept ones scaled by 1/(1 - p_drop), so a query reads a random subset of its
values; a row of P̃ no longer sums to 1, only in expectation. p_drop = 0 or
training=False: P̃ = P, the identity. The generator ``rng`` is passed in; ``drop_mask``
gives the keep-mask m instead (a gradient check replays one mask).

Grouped-query attention (fewer kv heads than query heads) is not this function's
business: the layer repeats each kv head for the query heads that share it before
calling it, and sums their gradients after (functional/repeat_kv.py).

Backward (each line reverses the forward line on its left):
    out = P̃ V                      dP̃ = dout Vᵀ,   dV = P̃ᵀ dout
    P̃ = P ⊙ m / (1 - p_drop)       dP = dP̃ ⊙ m / (1 - p_drop)             (dropout_backward)
    P = softmax(scores)            dscores = P ⊙ (dP - Σ_keys dP ⊙ P)     (softmax_backward)
    scores = ... + bias            dbias = dscores summed over bias's broadcast axes
    scores = Q (K/√D)ᵀ             dQ = dscores (K/√D),   d(K/√D) = dscoresᵀ Q
    K/√D = K · 1/√D                dK = d(K/√D) / √D

Where the mask was False, P = 0 exactly, hence dscores = 0 and dP's entry does not
matter: a hidden key receives exactly zero gradient. The mask's -inf is a constant:
it has no gradient of its own.

Shapes: B batch, H heads, T queries, S keys, D head dim, Dv value dim.

This is the plain form. The speed wing has a twin with the same arguments and
cache that overwrites the scores in place (minitransformer/fast/kernels/attention.py);
a test ties the two. With attention dropout on, the twin hands over to this form.
"""
from __future__ import annotations

from typing import NamedTuple

from .dropout import DropoutCache, dropout_backward, dropout_forward
from ..validate import (check_bool, check_broadcastable, check_dim, check_dtype_like,
                        check_float, check_ndim, check_same_shape, check_upstream)
from .masks import additive_mask
from .softmax import SoftmaxCache, softmax_backward, softmax_forward


class AttentionCache(NamedTuple):
    # Stored: P, because the softmax backward needs only its output (and the lecture
    # plots want it); Q, K/√D, V, for the matrix-product gradients (K/√D is what the
    # forward multiplied, and it is exactly what dQ needs). Not stored: the scores
    # (the softmax backward never reads them) and the mask (P is exactly 0 where it
    # was False, so the backward needs no mask).
    q: object                # (B, H, T, D) the queries
    k_scaled: object         # (B, H, S, D) the keys times 1/√D
    v: object                # (B, H, S, Dv)
    probs: object            # (B, H, T, S) the attention probabilities P
    scale: float             # 1/√D, a Python float (it never promotes float32)
    bias_shape: tuple | None  # the bias's shape, to reduce dbias to; None: no bias given
    dropout: DropoutCache | None = None  # attention dropout's keep-mask m (P̃ = P ⊙ m · scale is
    #                                      recomputed in backward, not stored); None: no dropout


def attention_forward(q, k, v, mask=None, bias=None, *, p_drop=0.0, rng=None, training=True,
                      drop_mask=None):
    """out = dropout(softmax(q kᵀ/√D + bias, -inf where mask is False)) v, per head.

    Inputs:
        q     (B, H, T, D) queries.
        k     (B, H, S, D) keys.
        v     (B, H, S, Dv) values (Dv is usually D).
        mask  bool broadcastable to (B, H, T, S), True = may attend; or None.
        bias  float broadcastable to (B, H, T, S), added to the scores; or None.
        p_drop, rng, training, drop_mask: attention dropout on P (functional/dropout.py);
              p_drop = 0 (the default) or training=False: none.
    Returns: out (B, H, T, Dv), AttentionCache (its ``probs`` field is P before dropout).
    """
    _check_inputs(q, k, v, mask, bias, drop_mask)
    scale = q.shape[-1] ** -0.5                            # 1/√D
    k_scaled = k * scale                                   # (B, H, S, D)
    scores = q @ k_scaled.swapaxes(-1, -2)                 # (B, H, T, S) Q Kᵀ/√D
    scores_biased = scores if bias is None else scores + bias                             # (B, H, T, S)
    scores_masked = scores_biased if mask is None else scores_biased + additive_mask(mask, q.dtype)  # (B, H, T, S) -inf where hidden
    P, _ = softmax_forward(scores_masked, axis=-1)         # (B, H, T, S)
    P_dropped, dropout = dropout_forward(P, p_drop, rng, training, drop_mask)  # (B, H, T, S) P̃
    out = P_dropped @ v                                    # (B, H, T, Dv)
    cache = AttentionCache(q, k_scaled, v, P, scale, None if bias is None else tuple(bias.shape),
                           None if dropout.identity else dropout)
    return out, cache


def attention_backward(dout, cache: AttentionCache):
    """Inputs: dout (B, H, T, Dv), the cache.

    Returns: dq (B, H, T, D), dk (B, H, S, D), dv (B, H, S, Dv), and, only when the
    forward had a bias, dbias of the bias's shape as a fourth item.
    """
    q, k_scaled, v, P, scale, bias_shape, dropout = cache
    check_upstream("dout", dout, P.shape[:3] + v.shape[-1:], v.dtype)  # the forward output's shape and dtype
    P_dropped = P if dropout is None else P * dropout.mask * dropout.scale  # (B, H, T, S) P̃, recomputed
    dv = P_dropped.swapaxes(-1, -2) @ dout                 # (B, H, S, Dv)  reverses: out = P_dropped @ v
    dP_dropped = dout @ v.swapaxes(-1, -2)                 # (B, H, T, S)   reverses: out = P_dropped @ v
    dP = dP_dropped if dropout is None else dropout_backward(dP_dropped, dropout)  # reverses: P_dropped = dropout(P)
    dscores = softmax_backward(dP, SoftmaxCache(P, -1))    # (B, H, T, S)   reverses: P = softmax(scores_masked)
    dbias = None if bias_shape is None else _sum_to_shape(dscores, bias_shape)  # reverses: scores_biased = scores + bias
    dq = dscores @ k_scaled                                # (B, H, T, D)   reverses: scores = q @ k_scaledᵀ
    dk_scaled = dscores.swapaxes(-1, -2) @ q               # (B, H, S, D)   reverses: scores = q @ k_scaledᵀ
    dk = dk_scaled * scale                                 # (B, H, S, D)   reverses: k_scaled = k * scale
    return (dq, dk, dv) if dbias is None else (dq, dk, dv, dbias)


def _sum_to_shape(x, shape):
    """Sum x over the axes that broadcasting added or stretched, so the result has ``shape``."""
    lead = x.ndim - len(shape)
    stretched = tuple(lead + a for a, n in enumerate(shape) if n == 1 and x.shape[lead + a] != 1)
    return x.sum(axis=tuple(range(lead)) + stretched, keepdims=True).reshape(shape)


def _check_inputs(q, k, v, mask, bias, drop_mask=None):
    """Shapes and dtypes, with messages naming the argument; returns B, H, T, D, S."""
    check_ndim("q", q, 4, "(B, H, T, D)")
    check_ndim("k", k, 4, "(B, H, S, D)")
    check_ndim("v", v, 4, "(B, H, S, Dv)")
    check_float("q", q)
    check_dtype_like("k", k, q, "q")
    check_dtype_like("v", v, q, "q")
    B, H, T, D = q.shape
    S = k.shape[2]
    check_dim("k", k, 0, B, "B, the batch of q")
    if k.shape[1] != H:
        raise ValueError(f"k: expected the H={H} heads of q (grouped kv heads are repeated first: "
                         f"functional/repeat_kv.py), got {k.shape[1]} (shape {tuple(k.shape)})")
    check_dim("k", k, 3, D, "D, the head dim of q")
    if S == 0:
        raise ValueError(f"k: expected at least one key (S >= 1), got shape {tuple(k.shape)}")
    check_same_shape("v", v, (B, H, S, v.shape[-1]))
    if mask is not None:
        check_bool("mask", mask)
        check_broadcastable("mask", mask, (B, H, T, S), "(B, H, T, S)")
    if bias is not None:
        check_float("bias", bias)
        check_dtype_like("bias", bias, q, "q")
        check_broadcastable("bias", bias, (B, H, T, S), "(B, H, T, S)")
    if drop_mask is not None:
        check_bool("drop_mask", drop_mask)
        check_same_shape("drop_mask", drop_mask, (B, H, T, S))
    return B, H, T, D, S
