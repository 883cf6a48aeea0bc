"""Fast twin of functional/attention.py.

The same equations and cache; the (B, H, T, S) scores are the largest arrays, so
this form never allocates a second one: the bias and the mask are added in
place, the softmax overwrites the scores with P, and its backward overwrites dP
with dscores (the fast softmax, softmax.py here).
"""
from __future__ import annotations

from ...validate import check_upstream
from ..attention import AttentionCache, _check_inputs, _sum_to_shape
from ..masks import additive_mask
from ..softmax import SoftmaxCache
from .softmax import softmax_backward_into, softmax_into


def attention_forward(q, k, v, mask=None, bias=None):
    """Twin of functional.attention.attention_forward."""
    B, H, T, D, n_kv_head, S = _check_inputs(q, k, v, mask, bias)
    r = H // n_kv_head                                     # query heads per kv head
    q_grouped = q.reshape(B, n_kv_head, r * T, D)          # (B, G, r·T, D)
    scale = D ** -0.5
    k_scaled = k * scale                                   # (B, G, S, D)
    scores = q_grouped @ k_scaled.swapaxes(-1, -2)         # (B, G, r·T, S) a fresh array
    s = scores.reshape(B, H, T, S)                         # (B, H, T, S) view
    if bias is not None:
        s += bias
    if mask is not None:
        s += additive_mask(mask, s.dtype)                  # -inf where hidden
    P, _ = softmax_into(s, -1, s)                          # (B, H, T, S) P overwrites the scores
    out = P.reshape(B, n_kv_head, r * T, S) @ v            # (B, G, r·T, Dv)
    cache = AttentionCache(q_grouped, k_scaled, v, P, scale, None if bias is None else tuple(bias.shape))
    return out.reshape(B, H, T, v.shape[-1]), cache        # (B, H, T, Dv)


def attention_backward(dout, cache: AttentionCache):
    """Twin of functional.attention.attention_backward."""
    q_grouped, k_scaled, v, P, scale, bias_shape = cache
    B, n_kv_head, rT, D = q_grouped.shape
    H, T, S = P.shape[1:]
    check_upstream("dout", dout, (B, H, T, v.shape[-1]), v.dtype)  # the forward output's shape and dtype
    P_grouped = P.reshape(B, n_kv_head, rT, S)             # (B, G, r·T, S)
    dout_grouped = dout.reshape(B, n_kv_head, rT, v.shape[-1])  # (B, G, r·T, Dv)
    dv = P_grouped.swapaxes(-1, -2) @ dout_grouped         # (B, G, S, Dv)
    dP = dout_grouped @ v.swapaxes(-1, -2)                 # (B, G, r·T, S)
    dscores = softmax_backward_into(dP, SoftmaxCache(P_grouped, -1), dP)  # in place of dP
    dbias = None
    if bias_shape is not None:
        dbias = _sum_to_shape(dscores.reshape(B, H, T, S), bias_shape)
    dq = (dscores @ k_scaled).reshape(B, H, T, D)          # (B, H, T, D)
    dk = dscores.swapaxes(-1, -2) @ q_grouped              # (B, G, S, D)
    dk *= scale
    return (dq, dk, dv) if dbias is None else (dq, dk, dv, dbias)
