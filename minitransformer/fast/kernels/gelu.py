"""Fast twin of functional.activations.gelu_forward (both forms).

The same equations, as in-place passes over arrays this module allocated; the
tanh form runs block by block over the rows (rowblocks.py), why: each block
stays in cache for its dozen passes. In float32 σ(2u) is evaluated as
1 / (1 + exp(-2u)) with one exp and no branch on the sign (exp overflows to inf
for u < -44, and 1 / inf = 0 is σ's value in float32 there). One exp, why: where
NumPy has a SIMD exp and no SIMD tanh, float32 exp is several times cheaper than
tanh, and it is the dearest pass of the kernel (benchmarks/RESULTS.md). Float64
(gradient checks) takes the plain form's overflow-free σ(2u).
"""
from __future__ import annotations

import numpy

from ...backend import get_xp
from ...functional.activations import (_C, _GELU_K, _INV_SQRT_2PI, _SQRT_HALF, _TWO_C, GELU_APPROXIMATIONS,
                           GeluCache, _X_CLIP, _check_x, _sigmoid)
from ...functional.erf import erfc
from ...validate import check_choice
from .rowblocks import in_row_blocks


def gelu_forward(x, approximate: str = "none"):
    """Twin of functional.activations.gelu_forward."""
    check_choice("approximate", approximate, GELU_APPROXIMATIONS)
    _check_x(x)
    xp = get_xp(x)
    if approximate == "tanh":
        y = xp.empty(x.shape, dtype=x.dtype)
        dydx = xp.empty(x.shape, dtype=x.dtype)
        with numpy.errstate(over="ignore"):
            in_row_blocks(_gelu_tanh_kernel, x, y, dydx)
        return y, GeluCache(dydx)
    Phi = erfc(x * -_SQRT_HALF)          # 2 Φ(x)
    Phi *= 0.5                           # Φ(x)
    dydx = x * x
    dydx *= -0.5
    xp.exp(dydx, out=dydx)               # exp(-x²/2)
    dydx *= _INV_SQRT_2PI                # φ(x)
    dydx *= x
    dydx += Phi                          # Φ(x) + x φ(x)
    y = Phi
    y *= x                               # x Φ(x), in Φ's buffer
    return y, GeluCache(dydx)


def _gelu_tanh_kernel(x, y, dydx):
    """Writes y = x σ(2u) and dydx = σ + y (1 - σ) 2u' for the rows of x."""
    xp = get_xp(x)
    x2 = x * x
    if x.dtype.itemsize >= 8:
        u = x2 * (_C * _GELU_K)
        u += _C
        u *= x                           # u = √(2/π)(x + k x³)
        u *= 2.0
        s = _sigmoid(u)                  # σ(2u), overflow-free
    else:
        s = x2 * (-2.0 * _C * _GELU_K)
        s -= 2.0 * _C
        s *= x                           # -2u
        xp.exp(s, out=s)                 # exp(-2u), inf far left (gelu_forward quiets the overflow)
        s += 1.0
        xp.divide(1.0, s, out=s)         # σ(2u) = 1 / (1 + exp(-2u))
    xp.multiply(x, s, out=y)             # y = x σ(2u)
    xp.minimum(x2, _X_CLIP * _X_CLIP, out=x2)   # x² capped as the plain form clips x: no 0 · ∞ in dydx
    x2 *= 3.0 * _TWO_C * _GELU_K
    x2 += _TWO_C                         # 2u' = 2√(2/π)(1 + 3k x²), in x²'s buffer
    xp.subtract(1.0, s, out=dydx)        # 1 - σ
    dydx *= y
    dydx *= x2
    dydx += s                            # σ + x σ (1 - σ) 2u'

