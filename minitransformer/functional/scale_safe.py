"""Scale safety for the norms: huge rows and constant rows give the exact answer.

Both norms are scale invariant apart from eps:

    norm(x; eps) = norm(x / s; eps / s²)       for any s > 0 (exact),

so a row too large to square (max|x| > √(max_float / 4C), where Σ (x - μ)² could
overflow: |x| ≳ 1e18 in float32, 16 in float16) is divided by s, the power of 2 just
below max|x| (exact, no rounding), and its eps becomes eps / s². The norm computes
rstd on x / s and scales it back (rstd = rstd_s / s), so its backward is unchanged.
Every other row has s = 1 and is computed exactly as the equations read. Where
eps / s² underflows to 0 it is taken as the dtype's smallest subnormal instead (the
one deviation, visible only on an exactly constant row, whose xhat is 0 either way:
its rstd is then 1/(s·√tiny) rather than 1/√eps).

``row_mean`` corrects LayerNorm's mean once, μ += mean(x - μ): the rounding of the
first mean (about 1e-7·|x| in float32) would otherwise turn a constant row, whose
exact output is beta, into ±1 wherever it exceeds √eps.
"""
from __future__ import annotations

import math

from ..backend import get_xp


def scale_safe(x, eps: float):
    """Divide each row that is too large to square by a power of 2.

    Inputs: x (..., C) floating point; eps > 0, the norm's epsilon.
    Returns: xs = x / s (..., C), eps_s = eps / s² (..., 1) (at least the smallest
             subnormal), s (..., 1) of x's dtype: 1 on every ordinary row.
    """
    s = _row_scale(x)                                          # (..., 1) 1, or 2^k on a huge row
    xs = x / s                                                 # (..., C) exact: s is a power of 2
    return xs, _eps_scaled(eps, s), s


def row_mean(x):
    """μ (..., 1): the mean over the last axis, corrected once so that a constant row centres to 0."""
    mu = x.mean(axis=-1, keepdims=True)                        # (..., 1) rounded
    return mu + (x - mu).mean(axis=-1, keepdims=True)          # (..., 1) corrected


def _row_scale(x):
    """s (..., 1): 1 on a row that can be squared safely, else the power of 2 just below max|x|.

    Σ_c (x_c - μ)² ≤ 4C·max|x|², so rows with max|x| ≤ √(max_float / 4C) keep s = 1;
    a larger finite row gets s = 2^(e-1) for max|x| = f·2^e, f in [0.5, 1): x/s is in [1, 2).
    """
    xp = get_xp(x)
    big = math.sqrt(float(xp.finfo(x.dtype).max) / (4 * x.shape[-1]))
    m = xp.abs(x).max(axis=-1, keepdims=True)                  # (..., 1) max|x| of each row
    huge = (m > big) & xp.isfinite(m)                          # (..., 1) rows whose σ² could overflow
    _, e = xp.frexp(m)                                         # (..., 1) m = f · 2^e
    return xp.where(huge, xp.ldexp(xp.ones_like(m), e - 1), 1)  # (..., 1) of x's dtype


def _eps_scaled(eps: float, s):
    """eps / s² per row (..., 1), at least the smallest subnormal, so √(0 + eps/s²) is never 0."""
    xp = get_xp(s)
    return xp.maximum(eps / s / s, float(xp.finfo(s.dtype).smallest_subnormal))  # (..., 1)
