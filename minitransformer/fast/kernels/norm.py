"""Fast twins of functional/norm.py: LayerNorm and RMSNorm over the last axis.

The same equations; every mean over the features is one einsum pass and every
sum over the rows one BLAS product (reductions.py), and the elementwise steps
update arrays this module just allocated, why: fewer passes over (B, T, C).

Scale safety costs the common case one test of the (..., 1) statistics: a row whose Σ
overflowed (|x| ≳ 1e18 in float32), or, in LayerNorm, whose σ is below |μ|/64 (where
the rounding of μ shows; a constant row's output is exactly beta), is computed again by
the plain form, which rescales it and corrects μ (functional/norm.py, "Scale safety").
No other row is touched.
"""
from __future__ import annotations

import numpy as np

from ...backend import get_xp
from ...validate import check_upstream
from ...functional import norm as plain
from ...functional.norm import LayerNormCache, RMSNormCache, _check_norm_inputs
from .reductions import col_dot, col_sum, row_dot, row_mean


def _redo_rows(xp, bad, plain_forward, x, y, cache, *args):
    """The rows where ``bad`` (..., 1) is True, again through the plain form."""
    if not bool(bad.any()):                                    # the common case: one tiny test
        return
    bad = bad[..., 0]                                          # (...,)
    y_bad, cache_bad = plain_forward(x[bad], *args)            # rescaled there; NaN rows stay NaN
    y[bad] = y_bad
    cache.xhat[bad] = cache_bad.xhat
    cache.rstd[bad] = cache_bad.rstd


def layernorm_forward(x, gamma, beta, eps: float = 1e-5):
    """Twin of functional.norm.layernorm_forward."""
    xp = get_xp(x, gamma, beta)
    eps = _check_norm_inputs(x, gamma, beta, eps)
    with np.errstate(over="ignore", invalid="ignore"):         # overflowed rows are redone below
        mu = row_mean(x)                                       # (..., 1)
        xhat = x - mu                                          # (..., C) x - μ for now
        var = row_dot(xhat, xhat)                              # (..., 1) Σ (x - μ)² ...
        var *= 1.0 / x.shape[-1]                               # ... / C: σ², biased
        var += eps
        rstd = 1.0 / xp.sqrt(var)                              # (..., 1)
        xhat *= rstd                                           # (..., C) xhat = (x - μ) · rstd
        y = xhat * gamma                                       # (..., C)
        bad = ~xp.isfinite(var) | (var - eps < (mu * (1 / 64)) ** 2)  # (..., 1) overflowed, or σ < |μ|/64
    y += beta
    cache = LayerNormCache(xhat, rstd, gamma)
    _redo_rows(xp, bad, plain.layernorm_forward, x, y, cache, gamma, beta, eps)
    return y, cache


def layernorm_backward(dy, cache: LayerNormCache):
    """Twin of functional.norm.layernorm_backward."""
    xhat, rstd, gamma = cache
    check_upstream("dy", dy, xhat.shape, xhat.dtype)
    dbeta = col_sum(dy)                                        # (C,)
    dgamma = col_dot(dy, xhat)                                 # (C,)
    dxhat = dy * gamma                                         # (..., C)
    mean_dxhat = row_mean(dxhat)                               # (..., 1)
    mean_dxhat_xhat = row_dot(dxhat, xhat)                     # (..., 1)
    mean_dxhat_xhat *= 1.0 / xhat.shape[-1]
    dx = dxhat                                                 # dxhat's buffer becomes dx
    dx -= mean_dxhat
    dx -= xhat * mean_dxhat_xhat                               # (..., C)
    dx *= rstd                                                 # (..., C)
    return dx, dgamma, dbeta


def rmsnorm_forward(x, gamma, eps: float = 1e-6):
    """Twin of functional.norm.rmsnorm_forward."""
    xp = get_xp(x, gamma)
    eps = _check_norm_inputs(x, gamma, plain.NO_BETA, eps)
    with np.errstate(over="ignore", invalid="ignore"):         # overflowed rows are redone below
        ms = row_dot(x, x)                                     # (..., 1)
        ms *= 1.0 / x.shape[-1]                                # mean(x²)
        ms += eps
        rstd = 1.0 / xp.sqrt(ms)                               # (..., 1)
        xhat = x * rstd                                        # (..., C)
        y = xp.multiply(xhat, gamma)                           # (..., C)
    cache = RMSNormCache(xhat, rstd, gamma)
    _redo_rows(xp, ~xp.isfinite(ms), plain.rmsnorm_forward, x, y, cache, gamma, eps)
    return y, cache


def rmsnorm_backward(dy, cache: RMSNormCache):
    """Twin of functional.norm.rmsnorm_backward."""
    xhat, rstd, gamma = cache
    check_upstream("dy", dy, xhat.shape, xhat.dtype)
    dgamma = col_dot(dy, xhat)                                 # (C,)
    dxhat = dy * gamma                                         # (..., C)
    mean_dxhat_xhat = row_dot(dxhat, xhat)                     # (..., 1)
    mean_dxhat_xhat *= 1.0 / xhat.shape[-1]
    dx = dxhat                                                 # dxhat's buffer becomes dx
    dx -= xhat * mean_dxhat_xhat                               # (..., C)
    dx *= rstd                                                 # (..., C)
    return dx, dgamma
