"""Fast twins of functional/norm.py: LayerNorm and RMSNorm over the last axis.

The same equations; every mean over the features is one einsum pass and every
sum over the rows one BLAS product (reductions.py), and the elementwise steps
update arrays this module just allocated, why: fewer passes over (B, T, C).
"""
from __future__ import annotations

from ...backend import get_xp
from ...validate import check_upstream
from ..norm import LayerNormCache, RMSNormCache, _check_norm_inputs
from .reductions import col_dot, col_sum, row_dot, row_mean


def layernorm_forward(x, gamma, beta, eps: float = 1e-5):
    """Twin of functional.norm.layernorm_forward."""
    xp = get_xp(x, gamma, beta)
    eps = _check_norm_inputs(x, gamma, beta, eps)
    mu = row_mean(x)                                           # (..., 1)
    xhat = x - mu                                              # (..., C) x - μ for now
    var = row_dot(xhat, xhat)                                  # (..., 1) Σ (x - μ)² ...
    var *= 1.0 / x.shape[-1]                                   # ... / C: σ², biased
    var += eps
    rstd = 1.0 / xp.sqrt(var)                                  # (..., 1)
    xhat *= rstd                                               # (..., C) xhat = (x - μ) · rstd
    y = xhat * gamma                                           # (..., C)
    y += beta
    return y, LayerNormCache(xhat, rstd, gamma)


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
    eps = _check_norm_inputs(x, gamma, None, eps)
    ms = row_dot(x, x)                                         # (..., 1)
    ms *= 1.0 / x.shape[-1]                                    # mean(x²)
    ms += eps
    rstd = 1.0 / xp.sqrt(ms)                                   # (..., 1)
    xhat = x * rstd                                            # (..., C)
    y = xp.multiply(xhat, gamma)                               # (..., C)
    return y, RMSNormCache(xhat, rstd, gamma)


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
