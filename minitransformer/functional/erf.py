"""The error function and its complement, from array operations only.

    erf(x)  = 2/√π ∫₀ˣ exp(-s²) ds            erfc(x) = 1 - erf(x)

NumPy has no erf and ``math.erf`` takes one Python float, so both are built here
from what every array module has (+, ×, /, exp, expm1, abs, minimum, copysign);
the same lines run on CuPy. The exact GELU needs them: Φ(x) = ½ erfc(-x/√2).

Method. For a = |x|, everything goes through ONE smooth function

    S(a) = (1 - erfcx(a)) / a,        erfcx(a) = exp(a²) erfc(a)   (the scaled complement)

which falls from S(0) = 2/√π to S(a) ≈ 1/a for large a. Then, exactly,

    erfc(a) = exp(-a²) · (1 - a S(a))
    erf(a)  = a S(a) - expm1(-a²) · (1 - a S(a))         (= 1 - erfc(a), regrouped)

Both terms of erf(a) are >= 0 (expm1(-a²) <= 0), so nothing cancels: erf keeps its
RELATIVE accuracy near 0 (erf(1e-300) is 1.128e-300, not 0) where ``1 - erfc`` would
be all round-off; erfc keeps its relative accuracy in the right tail where ``1 - erf``
would be 0. Negative arguments use erf(-a) = -erf(a) and erfc(-a) = 2 - erfc(a).

S is a rational function P(a) / Q(a), deg Q = deg P + 1 (so S ≈ 1/a at infinity),
fitted once, offline, in 45-digit arithmetic (mpmath, by the script
docs/derivations/fit_erf_coefficients.py): linearised least squares
(P - S·Q) on 300-400 nodes, iteratively reweighted (Lawson) towards the smallest
maximum of the relative errors of erf and erfc over [0, A]. Its error there is
below 5e-17 (float64 table, deg 9/10) and 5e-9 (float32 table, deg 4/5: float32
runs do half the work, at their own precision). All coefficients are positive, so
Horner's rule for a >= 0 adds no cancellation. A = 27.5 (float64) and 10.5 (float32)
lie past the point where exp(-a²) underflows to 0.

Regions, all in one branch-free pass: a in [0, A] the formulas above; a > A (±inf
included) is clipped to A, where exp(-A²) = 0 gives erf = ±1, erfc = 0 or 2 from the
same formulas, with nothing overflowing. NaN stays NaN. The dtype is kept.

Measured against mpmath (650,000 points on [-30, 30], [-10, 10], [-6, 6] and
±10^[-300, 0]):
    float64  erf   max abs error 2.2e-16 (2 ulps of values just below 1), max relative 4.7e-16
             erfc  max relative 4.8e-15 on |x| <= 4, 1.3e-14 at x ≈ 6, 1.1e-13 at x ≈ 25;
                   the growth is exp(-a²) inheriting the rounding of a² (≈ a²·2⁻⁵³):
                   against math.erfc it stays below 5.5e-16·(1 + x²)
    float32  erf   max abs error 1.2e-7 (2 float32 ulps of values just below 1)
             erfc  max relative 2e-6 on |x| <= 4, 8e-6 at x ≈ 9 (a² rounded to float32)
"""
from __future__ import annotations

from ..backend import get_xp
from ..validate import check_float

# S(a) = P(a) / Q(a); coefficients from degree 0 up. float64 table: deg 9 / 10 on [0, 27.5].
_P64 = (1.1283791670955126, 2.6987523904814643, 3.104013001352963, 2.2287781815028236,
        1.0959550026868627, 0.38235930520129213, 0.09481692156331595, 0.016188925783383233,
        0.001740923985358102, 9.11205954845338e-05)
_Q64 = (1.0, 3.277933959027416, 4.989186566434263, 4.6545788632914284, 2.955983570703662,
        1.3398412679787794, 0.4408088898576239, 0.10449535760658206, 0.017200141548239806,
        0.001792333276174475, 9.112059548455068e-05)
_A64 = 27.5
# float32 table: deg 4 / 5 on [0, 10.5].
_P32 = (1.1283791718260323, 1.5909440203682832, 0.99612890931333, 0.3212710834620476,
        0.046154442986390334)
_Q32 = (1.0, 2.296164744655061, 2.2510470082717178, 1.192025306289806, 0.34731379693915143,
        0.04615437591675645)
_A32 = 10.5


def _horner(coeffs, b):
    """c₀ + c₁ b + ... + cₙ bⁿ by Horner's rule, in place on one fresh array."""
    p = b * coeffs[-1]
    p += coeffs[-2]
    for c in coeffs[-3::-1]:
        p *= b
        p += c
    return p


def _clipped_abs(x, xp):
    """a = min(|x|, A), a fresh array, and the table (P, Q) of x's dtype.

    At A, exp(-A²) is already 0 in the dtype, so clipping changes no result, and
    nothing downstream overflows (a², aⁿ) or turns inf into NaN.
    """
    P, Q, A = (_P64, _Q64, _A64) if x.dtype.itemsize >= 8 else (_P32, _Q32, _A32)
    a = xp.abs(x)
    xp.minimum(a, A, out=a)              # NaN passes through
    return a, P, Q


def _scaled_parts(a, P, Q, xp):
    """(a S(a), erfcx(a) = 1 - a S(a)): two fresh arrays, for 0 <= a <= A."""
    t = _horner(P, a)
    u = _horner(Q, a)
    t /= u                               # S(a)
    t *= a                               # a S(a)
    return t, xp.subtract(1.0, t, out=u)


def _minus_square(a):
    """-a², in place (the callers are done with a itself)."""
    a *= a
    a *= -1.0
    return a


def erf(x):
    """erf(x) elementwise: a S(a) - expm1(-a²)(1 - a S(a)), a = |x|, with the sign of x.

    Inputs: x (...) floating point array.
    Returns: erf(x) of x's shape and dtype, in [-1, 1].
    """
    check_float("x", x)
    if x.ndim == 0:                      # ufuncs hand back scalars for 0-d input: use 1 element
        return erf(x.reshape(1)).reshape(())
    xp = get_xp(x)
    a, P, Q = _clipped_abs(x, xp)        # (...)
    t, u = _scaled_parts(a, P, Q, xp)    # a S(a), erfcx(a)
    em1 = xp.expm1(_minus_square(a), out=a)   # exp(-a²) - 1, in [-1, 0]
    u *= em1
    t -= u                               # a S(a) - expm1(-a²) erfcx(a) = erf(a) >= 0
    return xp.copysign(t, x, out=t)      # erf(-a) = -erf(a)


def erfc(x):
    """erfc(x) = 1 - erf(x) elementwise: exp(-a²)(1 - a S(a)) for x = a >= 0, 2 - that for x < 0.

    Accurate RELATIVE to erfc(x) in the right tail (erfc(20) = 5.4e-176), where
    1 - erf(x) is 0.
    Inputs: x (...) floating point array.
    Returns: erfc(x) of x's shape and dtype, in [0, 2].
    """
    check_float("x", x)
    if x.ndim == 0:
        return erfc(x.reshape(1)).reshape(())
    xp = get_xp(x)
    a, P, Q = _clipped_abs(x, xp)        # (...)
    flip, E = _scaled_parts(a, P, Q, xp)   # (a S(a): its buffer is reused below), erfcx(a)
    E *= xp.exp(_minus_square(a), out=a)   # exp(-a²) erfcx(a) = erfc(a)
    # erfc(-a) = 2 - erfc(a). Arithmetic instead of xp.where (several times slower on
    # NumPy); for x >= 0 the added term is exactly 0, so E keeps its last bit.
    xp.multiply(E, -2.0, out=flip)
    flip += 2.0                          # 2 - 2 erfc(a)
    flip *= x < 0
    E += flip
    return E
