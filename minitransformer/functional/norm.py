"""Layer normalisation and RMS normalisation over the last axis (the features, C).

LayerNorm (Ba et al., 2016), per row x of C features:

    μ    = mean(x)                       σ² = mean((x - μ)²)      (biased: / C)
    rstd = 1 / √(σ² + eps)               eps INSIDE the root (PyTorch's convention;
    xhat = (x - μ) · rstd                σ + eps, as some code has it, is another
    y    = gamma ⊙ xhat + beta           function): rstd stays finite on a constant row

RMSNorm (Zhang & Sennrich, 2019): no centring and no bias,

    rstd = 1 / √(mean(x²) + eps),        xhat = x · rstd,          y = gamma ⊙ xhat

Shapes: x (..., C) with any leading dimensions, gamma and beta (C,), y like x.

Scale safety (functional/scale_safe.py): a row too large to square is divided by a
power of 2 s first (eps becomes eps / s², exact), and LayerNorm's mean is corrected
once, so huge rows stay finite and a constant row gives exactly beta; every ordinary
row has s = 1 and is computed exactly as the equations read.

Both backward passes are the fused one-line formulas; the docstrings show how
they follow from the chain rule (the lecture does it step by step).

Stored vs recomputed: the cache keeps xhat (dgamma and dx both need it; storing
it saves recomputing (x - μ)·rstd), rstd (one number a row), and a reference to
gamma; x, μ and σ² are not kept.

This is the plain form. The speed wing has a fused twin with the same arguments
and cache (minitransformer/fast/kernels/norm.py); a test ties the two.
"""
from __future__ import annotations

from typing import NamedTuple

from ..backend import get_xp
from ..validate import (check_upstream, check_dim, check_dtype_like, check_float, check_min_ndim, check_ndim,
                        check_number)
from .scale_safe import row_mean, scale_safe


NO_BETA = object()   # RMSNorm's beta in _check_norm_inputs: absent, not checked


class LayerNormCache(NamedTuple):
    xhat: object    # (..., C) the normalised input: dgamma and dx both need it.
                    # Stored instead of x, so backward does not recompute (x - μ)·rstd.
    rstd: object    # (..., 1) 1/√(σ² + eps); μ and σ² themselves are not needed again
    gamma: object   # (C,) the scale, a reference (no copy), for dxhat = dy ⊙ gamma


class RMSNormCache(NamedTuple):
    xhat: object    # (..., C) x · rstd, needed by dgamma and dx (stored, not recomputed)
    rstd: object    # (..., 1) 1/√(mean(x²) + eps)
    gamma: object   # (C,) the scale, a reference


def _check_norm_inputs(x, gamma, beta, eps) -> float:
    """Validate the arguments of a norm's forward; returns eps as a Python float.
    RMSNorm passes beta=NO_BETA (it has none); None is refused like any non-array."""
    check_min_ndim("x", x, 1)
    check_float("x", x)
    if x.shape[-1] == 0:
        raise ValueError(f"x: expected at least 1 feature on the last axis, got shape {tuple(x.shape)}")
    for name, v in (("gamma", gamma), ("beta", beta)):
        if v is NO_BETA:
            continue
        check_ndim(name, v, 1, "(C,)")
        check_dim(name, v, 0, x.shape[-1], "C, the last axis of x")
        check_dtype_like(name, v, x, "x")
    return check_number("eps", eps, low=0.0, low_open=True, finite=True)


def _sum_rows(a):
    """Σ over every row (all axes but the last).  (..., C) -> (C,)"""
    return a.reshape(-1, a.shape[-1]).sum(axis=0)                # (C,)


def layernorm_forward(x, gamma, beta, eps: float = 1e-5):
    """y = gamma ⊙ (x - μ)/√(σ² + eps) + beta, μ and σ² (biased) over the last axis.

    Inputs: x (..., C) floating point; gamma (C,), beta (C,) of x's dtype;
            eps > 0, added to the variance inside the square root.
    Returns: y (..., C) of x's dtype, LayerNormCache(xhat, rstd, gamma).
    """
    xp = get_xp(x, gamma, beta)
    eps = _check_norm_inputs(x, gamma, beta, eps)
    xs, eps_s, s = scale_safe(x, eps)                          # x/s (..., C), eps/s², s (..., 1): s = 1 unless huge
    mu = row_mean(xs)                                          # (..., 1) μ / s (a constant row centres to 0)
    xc = xs - mu                                               # (..., C) centred, (x - μ) / s
    xc2 = xc * xc                                              # (..., C)
    var = xc2.mean(axis=-1, keepdims=True)                     # (..., 1) σ² / s², biased: / C
    std = xp.sqrt(var + eps_s)                                 # (..., 1) √(σ² + eps) / s, eps inside the root
    rstd_s = 1.0 / std                                         # (..., 1)
    xhat = xc * rstd_s                                         # (..., C)
    rstd = rstd_s / s                                          # (..., 1) 1/√(σ² + eps), for the backward
    gamma_xhat = gamma * xhat                                  # (..., C)
    y = gamma_xhat + beta                                      # (..., C)
    return y, LayerNormCache(xhat, rstd, gamma)


def layernorm_backward(dy, cache: LayerNormCache):
    """Gradients of y = gamma ⊙ xhat + beta, xhat = (x - μ) · rstd.

        dbeta  = Σ_rows dy                        dgamma = Σ_rows dy ⊙ xhat
        dxhat  = dy ⊙ gamma
        dx     = rstd/C · (C·dxhat - Σ_c dxhat - xhat · Σ_c (dxhat ⊙ xhat))

    How dx follows, within one row: ∂μ/∂x_i = 1/C, ∂σ²/∂x_i = 2(x_i - μ)/C, hence
    ∂rstd/∂x_i = -rstd³ (x_i - μ)/C = -rstd² xhat_i / C and

        ∂xhat_j/∂x_i = rstd (δ_ij - 1/C) - rstd xhat_j xhat_i / C.

    Summing dxhat_j ∂xhat_j/∂x_i over j gives the line above. The code evaluates
    it with 1/C moved inside: dx = rstd · (dxhat - mean(dxhat) - xhat · mean(dxhat ⊙ xhat)).
    The last three lines together reverse the forward lines from mu to xhat.

    Inputs: dy (..., C), the cache. Returns: dx (..., C), dgamma (C,), dbeta (C,).
    """
    xhat, rstd, gamma = cache
    check_upstream("dy", dy, xhat.shape, xhat.dtype)  # the forward output's shape and dtype
    dbeta = _sum_rows(dy)                                      # (C,)     reverses: y = gamma_xhat + beta
    dgamma = _sum_rows(dy * xhat)                              # (C,)     reverses: gamma_xhat = gamma * xhat
    dxhat = dy * gamma                                         # (..., C) reverses: gamma_xhat = gamma * xhat
    mean_dxhat = dxhat.mean(axis=-1, keepdims=True)            # (..., 1) reverses: xc = x - mu (through mu)
    mean_dxhat_xhat = (dxhat * xhat).mean(axis=-1, keepdims=True)  # (..., 1) reverses: var = mean(xc2), rstd = 1 / std
    dx = rstd * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat)  # (..., C) reverses: xhat = xc * rstd
    return dx, dgamma, dbeta


def rmsnorm_forward(x, gamma, eps: float = 1e-6):
    """y = x / √(mean(x²) + eps) ⊙ gamma, the mean over the last axis.

    Inputs: x (..., C) floating point; gamma (C,) of x's dtype; eps > 0.
    Returns: y (..., C) of x's dtype, RMSNormCache(xhat, rstd, gamma).
    """
    xp = get_xp(x, gamma)
    eps = _check_norm_inputs(x, gamma, NO_BETA, eps)
    xs, eps_s, s = scale_safe(x, eps)                          # x/s (..., C), eps/s², s (..., 1): s = 1 unless huge
    x2 = xs * xs                                               # (..., C)
    ms = x2.mean(axis=-1, keepdims=True)                       # (..., 1) mean(x²) / s²
    rms = xp.sqrt(ms + eps_s)                                  # (..., 1) √(mean(x²) + eps) / s
    rstd_s = 1.0 / rms                                         # (..., 1)
    xhat = xs * rstd_s                                         # (..., C)
    rstd = rstd_s / s                                          # (..., 1) 1/√(mean(x²) + eps), for the backward
    y = gamma * xhat                                           # (..., C)
    return y, RMSNormCache(xhat, rstd, gamma)


def rmsnorm_backward(dy, cache: RMSNormCache):
    """Gradients of y = gamma ⊙ xhat, xhat = x · rstd, rstd = (mean(x²) + eps)^(-1/2).

        dgamma = Σ_rows dy ⊙ xhat          dxhat = dy ⊙ gamma
        dx     = rstd/C · (C·dxhat - xhat · Σ_c (dxhat ⊙ xhat))

    How dx follows: ∂rstd/∂x_i = -rstd³ x_i / C, so
    ∂xhat_j/∂x_i = rstd (δ_ij - xhat_j xhat_i / C); LayerNorm's formula without the
    mean terms, since nothing is centred. Evaluated as rstd · (dxhat - xhat · mean(dxhat ⊙ xhat)).

    Inputs: dy (..., C), the cache. Returns: dx (..., C), dgamma (C,).
    """
    xhat, rstd, gamma = cache
    check_upstream("dy", dy, xhat.shape, xhat.dtype)  # the forward output's shape and dtype
    dgamma = _sum_rows(dy * xhat)                              # (C,)     reverses: y = gamma * xhat
    dxhat = dy * gamma                                         # (..., C) reverses: y = gamma * xhat
    mean_dxhat_xhat = (dxhat * xhat).mean(axis=-1, keepdims=True)  # (..., 1) reverses: ms = mean(x2), rstd = 1 / rms
    dx = rstd * (dxhat - xhat * mean_dxhat_xhat)               # (..., C) reverses: xhat = x * rstd
    return dx, dgamma
