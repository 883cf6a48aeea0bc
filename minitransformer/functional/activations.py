"""Elementwise activations and their derivatives: ReLU, GELU (exact and tanh form), SiLU, Swish.

    relu(x) = max(x, 0)                        relu'(x) = [x > 0]      (0 at the kink x = 0)

    gelu(x) = x Φ(x)                           gelu'(x) = Φ(x) + x φ(x)
        Φ(x) = ½ erfc(-x/√2)   the standard normal CDF,   φ(x) = exp(-x²/2) / √(2π) its density

    gelu_tanh(x) = ½ x (1 + tanh u),  u = √(2/π) (x + 0.044715 x³)      (GPT-2's approximation)
                 = x σ(2u)                     because ½ (1 + tanh u) = σ(2u)
        gelu_tanh'(x) = σ(2u) + x σ(2u) (1 - σ(2u)) · 2u',   2u' = 2√(2/π) (1 + 3·0.044715 x²)

    silu(x) = x σ(x)      (Swish with β = 1)   silu'(x) = σ(x) (1 + x (1 - σ(x))) = σ + y (1 - σ)

    swish(x; β) = x σ(βx)                      ∂y/∂x = σ(βx) + β y (1 - σ(βx))
                                               ∂y/∂β = x y (1 - σ(βx))
        β = 1 is SiLU; β -> ∞ tends to ReLU, β = 0 is x/2 (Ramachandran et al. 2017 learn β)

GELU: Hendrycks & Gimpel (2016), "Gaussian Error Linear Units"; the tanh form is theirs
too, and GPT-2 uses it. SiLU: Elfwing et al. (2017); Swish: Ramachandran et al. (2017).

Precision. Φ is ½ erfc(-x/√2), not ½ (1 + erf(x/√2)), and the tanh form is computed
as x σ(2u), not ½ x (1 + tanh u): the same numbers, but where x ≪ 0 the sums 1 + erf and
1 + tanh cancel (Φ(-6) = 1e-9 would keep only 7 of its 16 digits), and σ and erfc keep
every digit. Float64 gradient checks need those digits: a central difference of a value
that is all round-off is noise. σ is evaluated so that exp never overflows. The same
formulas serve float32 and float64.

Stored vs recomputed: each forward computes the local derivative dy/dx while the
pieces (Φ, φ, σ) are at hand and caches it alone (x is not kept); the backward is
then one multiply, dx = dy ⊙ dy/dx, reversing y = f(x). ReLU keeps the boolean
[x > 0] (1 byte an element). Swish multiplies β and x by the bounded y (1 - σ) = x σ (1 - σ),
never by y first: β y and x y overflow float16 (at |x| ≥ 6550 for β = 10, at |x| ≥ 256)
where the derivatives are 0 or small, and inf · 0 would be NaN.

This is the plain form. The speed wing has a fused twin of gelu_forward with the
same arguments and cache (minitransformer/fast/kernels/gelu.py); a test ties the two.

Shapes: x (...) with any shape of at least one dimension; y, dy, dx like x.
"""
from __future__ import annotations

import math
from typing import NamedTuple

from ..backend import get_xp
from ..validate import (check_broadcastable, check_choice, check_dtype_like, check_float, check_min_ndim,
                        check_real_finite, check_same_shape, check_upstream)
from .erf import erfc

GELU_APPROXIMATIONS = ("none", "tanh")
_GELU_K = 0.044715                       # the cubic coefficient of the tanh form
_SQRT_HALF = math.sqrt(0.5)              # 1/√2
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_C = math.sqrt(2.0 / math.pi)            # √(2/π): u = _C (x + k x³)
_TWO_C = 2.0 * _C                        # 2√(2/π): 2u' = _TWO_C (1 + 3k x²)
_X_CLIP = 100.0  # tanh-GELU computes u and 2u' from x clipped to ±100: beyond, σ(2u) is exactly
                 # 0 or 1 even in float64 (|2u| > 7e4), so y and dydx do not change, but x³ and
                 # 2u' stay finite and σ + y (1 - σ) 2u' never meets 0 · ∞ (NaN at |x| = 1e20 in float32)


class ReluCache(NamedTuple):
    positive: object   # (...) bool [x > 0] = relu'(x), 1 byte per element; x is not kept


class GeluCache(NamedTuple):
    dydx: object       # (...) gelu'(x), computed in forward from Φ and φ; x is not kept


class SiluCache(NamedTuple):
    dydx: object       # (...) silu'(x) = σ + y(1 - σ), computed in forward; x is not kept


class SwishCache(NamedTuple):
    dydx: object       # (...) ∂y/∂x = σ(βx) + β y (1 - σ(βx)), computed in forward
    dydbeta: object    # (...) ∂y/∂β = x y (1 - σ(βx)), per element; summed to β's shape in backward
    beta_shape: tuple  # β's shape, to sum dβ back to


def _check_x(x) -> None:
    check_float("x", x)
    check_min_ndim("x", x, 1)


def _sigmoid(z):
    """σ(z) = 1 / (1 + exp(-z)), with no overflow and relative accuracy for z ≪ 0.

    With e = exp(-|z|) in (0, 1]: σ(z) = 1 / (1 + e) for z >= 0 and e / (1 + e) for z < 0.
    """
    xp = get_xp(z)
    e = xp.exp(-xp.abs(z))                     # (...) exp(-|z|): its argument is never positive
    numerator = xp.maximum(e, z >= 0)          # (...) 1 for z >= 0, e for z < 0 (as e <= 1)
    return numerator / (1.0 + e)               # (...)


# ----------------------------------------------------------------------------- ReLU
def relu_forward(x):
    """y = max(x, 0).

    Inputs: x (...) floating point.
    Returns: y (...) like x, ReluCache(positive).
    """
    _check_x(x)
    xp = get_xp(x)
    return xp.maximum(x, 0), ReluCache(x > 0)


def relu_backward(dy, cache: ReluCache):
    """dx = dy ⊙ [x > 0]. Inputs: dy (...) like x. Returns: dx (...)."""
    check_float("dy", dy)                      # the cache keeps no dtype: the Module checks it
    check_same_shape("dy", dy, cache.positive.shape)
    dx = dy * cache.positive                   # (...) reverses: y = max(x, 0)
    return dx


# ----------------------------------------------------------------------------- GELU
def gelu_forward(x, approximate: str = "none"):
    """y = x Φ(x) (approximate="none", Φ through erfc) or the tanh form x σ(2u) ("tanh").

    Inputs: x (...) floating point; approximate in ("none", "tanh").
    Returns: y (...) like x, GeluCache(dydx).
    """
    check_choice("approximate", approximate, GELU_APPROXIMATIONS)
    _check_x(x)
    if approximate == "tanh":
        return _gelu_tanh_forward(x)
    xp = get_xp(x)
    z = x * -_SQRT_HALF                        # (...) -x/√2
    Phi = 0.5 * erfc(z)                        # (...) Φ(x) = ½ erfc(-x/√2)
    x2 = x * x                                 # (...)
    phi = _INV_SQRT_2PI * xp.exp(-0.5 * x2)    # (...) φ(x) = exp(-x²/2) / √(2π)
    y = x * Phi                                # (...)
    dydx = Phi + x * phi                       # (...) gelu'(x) = Φ(x) + x φ(x)
    return y, GeluCache(dydx)


def _gelu_tanh_forward(x):
    """y = x σ(2u), u = √(2/π)(x + 0.044715 x³); dydx = σ(2u) + y (1 - σ(2u)) 2u'."""
    xp = get_xp(x)
    xc = xp.clip(x, -_X_CLIP, _X_CLIP)         # (...) x, clipped where nothing changes: see _X_CLIP
    x2 = xc * xc                               # (...)
    x3 = x2 * xc                               # (...)
    u = _C * (xc + _GELU_K * x3)                # (...) u = √(2/π)(x + k x³)
    s = _sigmoid(2.0 * u)                      # (...) σ(2u) = ½ (1 + tanh u)
    y = x * s                                  # (...)
    du2 = _TWO_C * (1.0 + 3.0 * _GELU_K * x2)  # (...) 2u' = 2√(2/π)(1 + 3k x²)
    dydx = s + y * (1.0 - s) * du2             # (...) gelu_tanh'(x)
    return y, GeluCache(dydx)


def gelu_backward(dy, cache: GeluCache):
    """dx = dy ⊙ gelu'(x) (either form: the cache holds its derivative).

    Inputs: dy (...) like x. Returns: dx (...).
    """
    check_upstream("dy", dy, cache.dydx.shape, cache.dydx.dtype)  # the forward output's shape and dtype
    dx = dy * cache.dydx                       # (...) reverses: y = x * Phi (or y = x * s), through dydx
    return dx


# ----------------------------------------------------------------------------- SiLU
def silu_forward(x):
    """y = x σ(x).

    Inputs: x (...) floating point.
    Returns: y (...) like x, SiluCache(dydx).
    """
    _check_x(x)
    s = _sigmoid(x)                            # (...) σ(x)
    y = x * s                                  # (...)
    dydx = s + y * (1.0 - s)                   # (...) σ + x σ (1 - σ) = σ (1 + x (1 - σ))
    return y, SiluCache(dydx)


def silu_backward(dy, cache: SiluCache):
    """dx = dy ⊙ σ(x)(1 + x(1 - σ(x))). Inputs: dy (...) like x. Returns: dx (...)."""
    check_upstream("dy", dy, cache.dydx.shape, cache.dydx.dtype)  # the forward output's shape and dtype
    dx = dy * cache.dydx                       # (...) reverses: y = x * s, through dydx
    return dx


# ---------------------------------------------------------------------------- Swish
def swish_forward(x, beta):
    """y = x σ(β x), β a learnable slope (β = 1: SiLU).

    Inputs: x (...) floating point; beta, an array of x's dtype broadcastable to x's
            trailing axes: (1,) one β for all, (C,) one per feature.
    Returns: y (...) like x, SwishCache(dydx, dydbeta, beta_shape).
    """
    _check_x(x)
    check_float("beta", beta)
    check_dtype_like("beta", beta, x, "x")
    check_min_ndim("beta", beta, 1)
    check_broadcastable("beta", beta, x.shape, "(the trailing axes of x)")
    check_real_finite("beta", beta)            # β = ±inf: βx = inf · 0 is NaN at x = 0
    z = beta * x                               # (...) βx
    s = _sigmoid(z)                            # (...) σ(βx)
    y = x * s                                  # (...)
    one_minus_s = 1.0 - s                      # (...)
    y_one_minus_s = y * one_minus_s            # (...) x σ (1 - σ): at most |x|/4, and 0 where σ is 1
    dydx = s + beta * y_one_minus_s            # (...) σ + β x σ (1 - σ)
    dydbeta = x * y_one_minus_s                # (...) x² σ (1 - σ)
    return y, SwishCache(dydx, dydbeta, tuple(beta.shape))


def swish_backward(dy, cache: SwishCache):
    """dx = dy ⊙ ∂y/∂x;  dβ = Σ (dy ⊙ ∂y/∂β) over the axes β was broadcast along.

    Inputs: dy (...) like x. Returns: dx (...), dbeta of β's shape.
    """
    check_upstream("dy", dy, cache.dydx.shape, cache.dydx.dtype)  # the forward output's shape and dtype
    dx = dy * cache.dydx                       # (...) reverses: y = x * s, through dydx
    dbeta_each = dy * cache.dydbeta            # (...) reverses: z = beta * x, through dydbeta
    lead = dy.ndim - len(cache.beta_shape)
    dbeta = dbeta_each.reshape((-1,) + dy.shape[lead:]).sum(axis=0)           # β's trailing shape
    dbeta = dbeta.sum(axis=tuple(a for a, n in enumerate(cache.beta_shape) if n == 1), keepdims=True)
    return dx, dbeta.reshape(cache.beta_shape)
