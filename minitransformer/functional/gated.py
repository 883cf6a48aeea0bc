"""Gated feed-forward units (Shazeer, 2020, "GLU Variants Improve Transformer").

The FFN's first layer makes two projections of x, a = x W and b = x V, and the unit
lets one gate the other:

    GEGLU(a, b)  = GELU(a) ⊙ b            SwiGLU(a, b) = SiLU(a) ⊙ b

The caller fuses the two projections into ONE matrix product, h = x [W | V], so the
input here is h (..., 2F) = [a | b]: a = h[..., :F], b = h[..., F:]. The output is
(..., F). GELU is the exact (erf) form; the paper's Swish has β = 1, i.e. SiLU.

Backward of y = act(a) ⊙ b:
    da = act'(a) ⊙ (dy ⊙ b)     (the activation's own backward, applied to dy ⊙ b)
    db = dy ⊙ act(a)
    dh = [da | db]              (..., 2F)

The activations are the pairs of activations.py, called, not re-derived.

SwiGLU with a general β. The architecture deck writes SwiGLU(x, W, V, b, c, β) =
Swish_β(xW + b) ⊗ (xV + c), Swish_β(a) = a σ(β a); the paper and LLaMA fix β = 1 (SiLU),
and ``swiglu_beta_forward`` keeps β as an input (a learned parameter of the Module
``SwiGLUBeta``), whose gradient sums over every entry it scales:

    y = Swish_β(a) ⊙ b:   da = Swish_β'(a) ⊙ (dy ⊙ b),   db = dy ⊙ Swish_β(a),
                          dβ = Σ (dy ⊙ b) ⊙ ∂Swish_β(a)/∂β        (swish_backward's dβ)
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

from ..backend import get_xp
from ..validate import check_even, check_float, check_min_ndim, check_upstream
from .activations import gelu_backward, gelu_forward, silu_backward, silu_forward, swish_backward, swish_forward


class GatedCache(NamedTuple):
    act: object         # (..., F) act(a): db = dy ⊙ act(a) needs it (stored, the forward has it)
    b: object           # (..., F) the gate values, a view into h (no copy)
    act_cache: object   # the activation's cache for a (it holds act'(a))


def _halves(h):
    """a = h[..., :F], b = h[..., F:], both views, after checking h."""
    check_float("h", h)
    check_min_ndim("h", h, 1)
    check_even("h", h, -1, "2F: the halves [x W | x V]")
    F = h.shape[-1] // 2
    return h[..., :F], h[..., F:]       # (..., F), (..., F)


def _gated_forward(h, act_forward):
    a, b = _halves(h)
    act, act_cache = act_forward(a)     # (..., F)
    y = act * b                         # (..., F)
    return y, GatedCache(act, b, act_cache)


def _gated_backward(dy, cache: GatedCache, act_backward):
    xp = get_xp(dy)
    act, b, act_cache = cache
    check_upstream("dy", dy, act.shape, act.dtype)               # the forward output's shape and dtype
    dact = dy * b                                                # (..., F)  reverses: y = act * b
    da = act_backward(dact, act_cache)                           # (..., F)  reverses: act = act_forward(a)
    db = dy * act                                                # (..., F)  reverses: y = act * b
    dh = xp.concatenate([da, db], axis=-1)                       # (..., 2F) reverses: a, b = h[..., :F], h[..., F:]
    return dh


def geglu_forward(h):
    """y = GELU(a) ⊙ b, [a | b] = h.

    Inputs: h (..., 2F) floating point, the two projections side by side.
    Returns: y (..., F), GatedCache.
    """
    return _gated_forward(h, gelu_forward)


def geglu_backward(dy, cache: GatedCache):
    """Inputs: dy (..., F). Returns: dh (..., 2F) = [da | db]."""
    return _gated_backward(dy, cache, gelu_backward)


def swiglu_forward(h):
    """y = SiLU(a) ⊙ b, [a | b] = h.

    Inputs: h (..., 2F) floating point, the two projections side by side.
    Returns: y (..., F), GatedCache.
    """
    return _gated_forward(h, silu_forward)


def swiglu_backward(dy, cache: GatedCache):
    """Inputs: dy (..., F). Returns: dh (..., 2F) = [da | db]."""
    return _gated_backward(dy, cache, silu_backward)


def swiglu_beta_forward(h, beta):
    """y = Swish_β(a) ⊙ b, [a | b] = h, Swish_β(a) = a σ(β a) (β = 1: ``swiglu_forward``).

    Inputs: h (..., 2F) floating point, the two projections side by side; beta, an array of h's
            dtype of shape (1,) (one β) or (F,) (one per unit).
    Returns: y (..., F), GatedCache (its act_cache is Swish's, with ∂/∂β).
    """
    return _gated_forward(h, partial(swish_forward, beta=beta))


def swiglu_beta_backward(dy, cache: GatedCache):
    """Inputs: dy (..., F). Returns: dh (..., 2F) = [da | db], dbeta of β's shape."""
    xp = get_xp(dy)
    act, b, act_cache = cache
    check_upstream("dy", dy, act.shape, act.dtype)               # the forward output's shape and dtype
    dact = dy * b                                                # (..., F)  reverses: y = act * b
    da, dbeta = swish_backward(dact, act_cache)                  # (..., F), β's shape  reverses: act = Swish_β(a)
    db = dy * act                                                # (..., F)  reverses: y = act * b
    dh = xp.concatenate([da, db], axis=-1)                       # (..., 2F) reverses: a, b = h[..., :F], h[..., F:]
    return dh, dbeta
