"""Elementwise activations and their derivatives: ReLU, GELU (exact and tanh form), SiLU.

    relu(x) = max(x, 0)                        relu'(x) = [x > 0]      (0 at the kink x = 0)

    gelu(x) = x Φ(x)                           gelu'(x) = Φ(x) + x φ(x)
        Φ(x) = ½ erfc(-x/√2)   the standard normal CDF,   φ(x) = exp(-x²/2) / √(2π) its density

    gelu_tanh(x) = ½ x (1 + tanh u),  u = √(2/π) (x + 0.044715 x³)      (GPT-2's approximation)
                 = x σ(2u)                     because ½ (1 + tanh u) = σ(2u)
        gelu_tanh'(x) = σ(2u) + x σ(2u) (1 - σ(2u)) · 2u',   2u' = 2√(2/π) (1 + 3·0.044715 x²)

    silu(x) = x σ(x)      (Swish with β = 1)   silu'(x) = σ(x) (1 + x (1 - σ(x))) = σ + y (1 - σ)

GELU: Hendrycks & Gimpel (2016), "Gaussian Error Linear Units"; the tanh form is theirs
too, and GPT-2 uses it. SiLU: Elfwing et al. (2017); Swish: Ramachandran et al. (2017).

Precision. Φ is ½ erfc(-x/√2), not ½ (1 + erf(x/√2)), and in float64 the tanh form is
x σ(2u), not ½ x (1 + tanh u): the same numbers, but where x ≪ 0 the sums 1 + erf and
1 + tanh cancel (Φ(-6) = 1e-9 would keep only 7 of its 16 digits), and σ and erfc keep
every digit. Float64 gradient checks need those digits: a central difference of a value
that is all round-off is noise. σ is evaluated so that exp never overflows. In float32
(training) the tanh form takes σ(2u) = ½ + ½ tanh u: one tanh, cheaper than an exp, and
its left-tail error (below 1e-7·|x|) is under float32's resolution anyway.

Speed. These run on every FFN activation in training (float32, millions of
elements). Each forward computes the local derivative dy/dx while the pieces
(Φ, φ, σ) are at hand and caches it alone; the backward is then one multiply,
dx = dy ⊙ dy/dx. (A forward with no backward after it, in generation, pays a few
ops for nothing; training, the case that waits, saves recomputing Φ, φ or σ.)
Temporaries are fresh arrays updated in place (``*=``, ``out=``), and the choices
avoid ``xp.where``, several times slower than arithmetic on NumPy. The tanh form,
the one GPT-2 configs train with, runs its dozen passes block by block over the
rows (minitransformer/functional/_kernels/rowblocks.py: each block stays in cache for all of them);
the lines are the same as on the whole array.

Shapes: x (...) with any shape of at least one dimension; y, dy, dx like x.
"""
from __future__ import annotations

import math
from typing import NamedTuple

from ..backend import get_xp
from ..validate import check_choice, check_float, check_min_ndim, check_same_shape
from ._kernels.rowblocks import in_row_blocks
from .erf import erfc

GELU_APPROXIMATIONS = ("none", "tanh")
_GELU_K = 0.044715                       # the cubic coefficient of the tanh form
_SQRT_HALF = math.sqrt(0.5)              # 1/√2
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_C = math.sqrt(2.0 / math.pi)            # √(2/π): u = _C (x + k x³)
_TWO_C = 2.0 * _C                        # 2√(2/π): 2u' = _TWO_C (1 + 3k x²)


class ReluCache(NamedTuple):
    positive: object   # (...) bool [x > 0] = relu'(x), 1 byte per element; x is not kept


class GeluCache(NamedTuple):
    dydx: object       # (...) gelu'(x), computed in forward from Φ and φ; x is not kept


class SiluCache(NamedTuple):
    dydx: object       # (...) silu'(x) = σ + y(1 - σ), computed in forward; x is not kept


def _check_x(x) -> None:
    check_float("x", x)
    check_min_ndim("x", x, 1)


def _sigmoid(z):
    """σ(z) = 1 / (1 + exp(-z)), with no overflow and relative accuracy for z ≪ 0.

    With e = exp(-|z|) in (0, 1]: σ(z) = 1 / (1 + e) for z >= 0 and e / (1 + e) for
    z < 0. As e <= 1, the numerator is max(e, [z >= 0]): 1 or e, with no branch.
    """
    xp = get_xp(z)
    e = xp.abs(z)
    e *= -1.0
    xp.exp(e, out=e)                     # exp(-|z|): its argument is never positive
    s = xp.maximum(e, z >= 0)            # numerator: 1 for z >= 0, e for z < 0
    e += 1.0
    s /= e
    return s


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
    check_same_shape("dy", dy, cache.positive.shape)
    return dy * cache.positive


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
    Phi = erfc(x * -_SQRT_HALF)          # 2 Φ(x) = erfc(-x/√2)
    Phi *= 0.5                           # Φ(x)
    dydx = x * x
    dydx *= -0.5
    xp.exp(dydx, out=dydx)               # exp(-x²/2)
    dydx *= _INV_SQRT_2PI                # φ(x)
    dydx *= x
    dydx += Phi                          # Φ(x) + x φ(x)
    y = Phi
    y *= x                               # x Φ(x), in Φ's buffer (Φ itself is not needed again)
    return y, GeluCache(dydx)


def _gelu_tanh_forward(x):
    """y = x σ(2u), u = √(2/π)(x + 0.044715 x³); dydx = σ + y (1 - σ) 2u'."""
    xp = get_xp(x)
    y = xp.empty(x.shape, dtype=x.dtype)
    dydx = xp.empty(x.shape, dtype=x.dtype)
    in_row_blocks(_gelu_tanh_kernel, x, y, dydx)   # the lines below, block by block
    return y, GeluCache(dydx)


def _gelu_tanh_kernel(x, y, dydx):
    """Writes y = x σ(2u) and dydx = σ + y (1 - σ) 2u' for the rows of x."""
    xp = get_xp(x)
    x2 = x * x
    u = x2 * (_C * _GELU_K)
    u += _C
    u *= x                               # u = √(2/π)(x + k x³)
    s = _sigma_of_twice(u)               # σ(2u) = ½(1 + tanh u), in u's buffer
    xp.multiply(x, s, out=y)             # y = x σ(2u)
    x2 *= 3.0 * _TWO_C * _GELU_K
    x2 += _TWO_C                         # 2u' = 2√(2/π)(1 + 3k x²)
    xp.subtract(1.0, s, out=dydx)        # 1 - σ
    dydx *= y
    dydx *= x2
    dydx += s                            # σ + x σ (1 - σ) 2u'


def _sigma_of_twice(u):
    """σ(2u) = ½(1 + tanh u); float32 in u's buffer (u is overwritten either way).

    float64 (gradient checks): σ(2u) through exp(-|2u|) (``_sigmoid``), which keeps its
    relative accuracy in the left tail, where 1 + tanh u cancels. float32 (training):
    ½ + ½ tanh u, one tanh instead of an exp and five more passes; in the left tail its
    error is below 1e-7·|x| absolute, under the float32 resolution of the activations
    around it, and it is the formula GPT-2 and PyTorch evaluate.
    """
    xp = get_xp(u)
    if u.dtype.itemsize >= 8:
        u *= 2.0
        return _sigmoid(u)
    xp.tanh(u, out=u)
    u *= 0.5
    u += 0.5
    return u


def gelu_backward(dy, cache: GeluCache):
    """dx = dy ⊙ gelu'(x) (either form: the cache holds its derivative).

    Inputs: dy (...) like x. Returns: dx (...).
    """
    check_same_shape("dy", dy, cache.dydx.shape)
    return dy * cache.dydx


# ----------------------------------------------------------------------------- SiLU
def silu_forward(x):
    """y = x σ(x).

    Inputs: x (...) floating point.
    Returns: y (...) like x, SiluCache(dydx).
    """
    _check_x(x)
    s = _sigmoid(x)                      # σ(x)
    y = x * s
    dydx = 1.0 - s
    dydx *= y
    dydx += s                            # σ + x σ (1 - σ) = σ (1 + x (1 - σ))
    return y, SiluCache(dydx)


def silu_backward(dy, cache: SiluCache):
    """dx = dy ⊙ σ(x)(1 + x(1 - σ(x))). Inputs: dy (...) like x. Returns: dx (...)."""
    check_same_shape("dy", dy, cache.dydx.shape)
    return dy * cache.dydx
