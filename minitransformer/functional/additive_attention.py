"""Additive attention (Bahdanau, Cho & Bengio 2015, "Neural Machine Translation by Jointly
Learning to Align and Translate", section 3.1 and appendix A.1.2): the attention that came
before the Transformer's dot product.

A query s_i (a decoder state) scores every key h_j (an encoder state) with a one-hidden-layer
network, and the context is the probability-weighted sum of the keys themselves:

    e_ij  = vᵀ tanh(W s_i + U h_j)            the energy, a number per (query, key) pair
    α_ij  = softmax_j(e_ij)                    -inf where the mask is False (True = may attend)
    c_i   = Σ_j α_ij h_j                       the context vector

The paper's s_{i-1} is the query here; its W_a, U_a, v_a are W, U, v. The code writes
W s as s @ W (the project's linear convention, W of shape (d_in, d_out)). Where the
Transformer computes one matrix product Q Kᵀ, this computes a (T, S, A) tensor of hidden
units: T·S·A tanh's, which is why the dot product (with its √D) replaced it.

A query whose every key is masked has no distribution: softmax_forward gives a zero row
(functional/softmax.py), so c_i = 0 and the query passes 0 gradient, never NaN.

Backward (each line reverses the forward line on its right):
    dα  = dc hᵀ,   dh = αᵀ dc                             c = α h
    de  = α ⊙ (dα - Σ_j dα ⊙ α)                           α = softmax(e)     (softmax_backward)
    dv  = Σ_{b,i,j} de_ij a_ij,   da = de ⊗ v             e = a v
    dz  = da ⊙ (1 - a²)                                   a = tanh(z)
    dWs = Σ_j dz_ij,   dUh = Σ_i dz_ij                    z = Ws_i + Uh_j (broadcast)
    ds  = dWs Wᵀ,  dW = sᵀ dWs;   dh += dUh Uᵀ,  dU = hᵀ dUh     Ws = s W,  Uh = h U

Shapes: B batch, T queries, S keys, Cs query width, Ch key width, A the hidden (attention)
width. s (B, T, Cs), h (B, S, Ch), W (Cs, A), U (Ch, A), v (A,), mask broadcastable to
(B, T, S); e, α (B, T, S); c (B, T, Ch).

Stored vs recomputed: the cache keeps a = tanh(z) (tanh' = 1 - a² needs nothing else), α
(the softmax backward needs only its output; a plot of the alignment wants it too) and
references to s, h, W, U, v for the matrix-product gradients; z and e are not kept.
"""
from __future__ import annotations

from typing import NamedTuple

from ..backend import get_xp
from ..validate import (check_bool, check_broadcastable, check_dim, check_dtype_like, check_float,
                        check_ndim, check_upstream)
from .masks import additive_mask
from .softmax import SoftmaxCache, softmax_backward, softmax_forward


class AdditiveAttentionCache(NamedTuple):
    s: object        # (B, T, Cs) the queries, for dW = sᵀ dWs
    h: object        # (B, S, Ch) the keys (and values), for dα = dc hᵀ and dU = hᵀ dUh
    W: object        # (Cs, A), for ds = dWs Wᵀ
    U: object        # (Ch, A), for dh = dUh Uᵀ
    v: object        # (A,), for da = de ⊗ v
    a: object        # (B, T, S, A) tanh(z), stored: tanh' = 1 - a²
    alpha: object    # (B, T, S) the attention weights α (0 where masked)


def additive_attention_forward(s, h, W, U, v, mask=None):
    """c_i = Σ_j softmax_j(vᵀ tanh(W s_i + U h_j)) h_j, -inf energies where mask is False.

    Inputs: s (B, T, Cs) queries; h (B, S, Ch) keys = values; W (Cs, A); U (Ch, A); v (A,),
            all one floating dtype; mask bool broadcastable to (B, T, S), True = may attend, or None.
    Returns: c (B, T, Ch), AdditiveAttentionCache (its ``alpha`` field holds α (B, T, S)).
    """
    _check_inputs(s, h, W, U, v, mask)
    Ws = s @ W                                             # (B, T, A)
    Uh = h @ U                                             # (B, S, A)
    z = Ws[:, :, None, :] + Uh[:, None, :, :]              # (B, T, S, A) W s_i + U h_j
    a = get_xp(z).tanh(z)                                  # (B, T, S, A)
    e = a @ v                                              # (B, T, S) energies vᵀ a_ij
    e_masked = e if mask is None else e + additive_mask(mask, e.dtype)  # (B, T, S) -inf where hidden
    alpha, _ = softmax_forward(e_masked, axis=-1)          # (B, T, S)
    c = alpha @ h                                          # (B, T, Ch)
    return c, AdditiveAttentionCache(s, h, W, U, v, a, alpha)


def additive_attention_backward(dc, cache: AdditiveAttentionCache):
    """Inputs: dc (B, T, Ch), the cache.

    Returns: ds (B, T, Cs), dh (B, S, Ch), dW (Cs, A), dU (Ch, A), dv (A,).
    """
    s, h, W, U, v, a, alpha = cache
    check_upstream("dc", dc, (s.shape[0], s.shape[1], h.shape[-1]), h.dtype)
    A = v.shape[0]
    dalpha = dc @ h.swapaxes(-1, -2)                       # (B, T, S)   reverses: c = alpha @ h
    dh_values = alpha.swapaxes(-1, -2) @ dc                # (B, S, Ch)  reverses: c = alpha @ h
    de = softmax_backward(dalpha, SoftmaxCache(alpha, -1))  # (B, T, S)  reverses: alpha = softmax(e_masked)
    dv = (de[..., None] * a).reshape(-1, A).sum(axis=0)    # (A,)        reverses: e = a @ v
    da = de[..., None] * v                                 # (B, T, S, A)
    dz = da * (1 - a * a)                                  # (B, T, S, A) reverses: a = tanh(z)
    dWs = dz.sum(axis=2)                                   # (B, T, A)   reverses: z = Ws[:, :, None] + ...
    dUh = dz.sum(axis=1)                                   # (B, S, A)   reverses: z = ... + Uh[:, None]
    ds = dWs @ W.T                                         # (B, T, Cs)  reverses: Ws = s @ W
    dW = s.reshape(-1, s.shape[-1]).T @ dWs.reshape(-1, A)  # (Cs, A)
    dh_keys = dUh @ U.T                                    # (B, S, Ch)  reverses: Uh = h @ U
    dU = h.reshape(-1, h.shape[-1]).T @ dUh.reshape(-1, A)  # (Ch, A)
    dh = dh_values + dh_keys                               # (B, S, Ch)  h is both the keys and the values
    return ds, dh, dW, dU, dv


def _check_inputs(s, h, W, U, v, mask) -> None:
    """Shapes and dtypes, with messages naming the argument."""
    check_ndim("s", s, 3, "(B, T, Cs)")
    check_ndim("h", h, 3, "(B, S, Ch)")
    check_ndim("W", W, 2, "(Cs, A)")
    check_ndim("U", U, 2, "(Ch, A)")
    check_ndim("v", v, 1, "(A,)")
    check_float("s", s)
    for name, x in (("h", h), ("W", W), ("U", U), ("v", v)):
        check_dtype_like(name, x, s, "s")
    check_dim("h", h, 0, s.shape[0], "B, the batch of s")
    if h.shape[1] == 0:
        raise ValueError(f"h: expected at least one key (S >= 1), got shape {tuple(h.shape)}")
    check_dim("W", W, 0, s.shape[-1], "Cs, the last axis of s")
    check_dim("U", U, 0, h.shape[-1], "Ch, the last axis of h")
    check_dim("U", U, 1, W.shape[1], "A, the hidden width of W")
    check_dim("v", v, 0, W.shape[1], "A, the hidden width of W")
    if mask is not None:
        check_bool("mask", mask)
        check_broadcastable("mask", mask, (s.shape[0], s.shape[1], h.shape[1]), "(B, T, S)")
