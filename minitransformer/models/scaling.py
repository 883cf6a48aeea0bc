"""Compute-optimal scaling: Chinchilla's fitted law, and a power law of loss against compute.

The survey deck's one line on Chinchilla (Hoffmann et al. 2022, "Training Compute-Optimal
Large Language Models"): "we need to train bigger models longer". Their third approach fits
the final loss of 400-odd training runs by one formula in the parameters N and the training
tokens D (their eq. 10, with the constants of their section 3.3):

    L(N, D) = E + A / N^α + B / D^β          E = 1.69, A = 406.4, B = 410.7, α = 0.34, β = 0.28

E is the loss of an ideal model (the entropy of text); A / N^α what a finite model leaves;
B / D^β what finite data leaves. Training costs C ≈ 6 N D FLOPs (2 per parameter per token
forward, 4 backward: costs.py). For a budget C, minimise L on the curve N D = C / 6: with
D = C / (6N), dL/dN = −α A N^(−α−1) + β B (C/6)^(−β) N^(β−1) = 0 gives

    N_opt(C) = G (C/6)^a,   D_opt(C) = G⁻¹ (C/6)^b,   G = (α A / (β B))^(1/(α+β)),
    a = β / (α + β),         b = α / (α + β)                 (a + b = 1: N_opt D_opt = C/6)

so both grow with the budget, nearly as its square root each (a ≈ 0.45, b ≈ 0.55 with
these constants): a 10× budget buys a ~2.8× larger model trained on ~3.5× more tokens.

``fit_power_law`` fits L = k · C^(−γ) to measured (compute, loss) points by least squares
on log L = log k − γ log C, the straight line of a log-log plot, as Kaplan et al. (2020)
did for loss against compute; ``training_compute`` is the C of a run (costs.py's FLOPs per
token, training, times the tokens seen).
"""
from __future__ import annotations

import math
from typing import NamedTuple

from ..validate import check_int, check_number
from .costs import flops_per_token


class ChinchillaFit(NamedTuple):
    E: float          # the irreducible loss (nats per token)
    A: float
    B: float
    alpha: float      # α, the exponent of N
    beta: float       # β, the exponent of D


CHINCHILLA = ChinchillaFit(E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28)   # Hoffmann et al. 2022, eq. 10


class PowerLaw(NamedTuple):
    k: float          # L = k · C^(−γ)
    gamma: float      # γ, the exponent (positive: the loss falls with compute)
    r2: float         # R² of the straight line in log-log coordinates

    def __call__(self, C):
        return self.k * C ** (-self.gamma)


def chinchilla_loss(N: float, D: float, fit: ChinchillaFit = CHINCHILLA) -> float:
    """L(N, D) = E + A / N^α + B / D^β, for N parameters trained on D tokens (N, D > 0)."""
    N = check_number("N", N, low=0.0, low_open=True, finite=True)
    D = check_number("D", D, low=0.0, low_open=True, finite=True)
    return fit.E + fit.A / N ** fit.alpha + fit.B / D ** fit.beta


def compute_optimal(C: float, fit: ChinchillaFit = CHINCHILLA) -> tuple[float, float]:
    """(N_opt, D_opt): the parameters and tokens that minimise L(N, D) for C = 6 N D FLOPs (C > 0)."""
    C = check_number("C", C, low=0.0, low_open=True, finite=True)
    G = (fit.alpha * fit.A / (fit.beta * fit.B)) ** (1.0 / (fit.alpha + fit.beta))
    a = fit.beta / (fit.alpha + fit.beta)
    b = fit.alpha / (fit.alpha + fit.beta)
    N_opt = G * (C / 6.0) ** a
    D_opt = (C / 6.0) ** b / G
    return N_opt, D_opt


def fit_power_law(compute, loss) -> PowerLaw:
    """L = k C^(−γ) by least squares on (log C, log L).

    Inputs: compute, loss: sequences of the same length >= 2 of positive numbers, at least two
            compute values distinct.
    Returns: PowerLaw(k, γ, R²).
    """
    C, L = _positive_numbers("compute", compute), _positive_numbers("loss", loss)
    if len(C) != len(L) or len(C) < 2:
        raise ValueError(f"compute, loss: expected two sequences of one length >= 2, got {len(C)} and {len(L)}")
    x = [math.log(c) for c in C]
    y = [math.log(v) for v in L]
    x_mean, y_mean = sum(x) / len(x), sum(y) / len(y)
    sxx = sum((xi - x_mean) ** 2 for xi in x)
    if sxx == 0:
        raise ValueError("compute: expected at least two distinct values to fit a slope, got one value")
    slope = sum((xi - x_mean) * (yi - y_mean) for xi, yi in zip(x, y)) / sxx
    intercept = y_mean - slope * x_mean
    residual = sum((yi - (intercept + slope * xi)) ** 2 for xi, yi in zip(x, y))
    total = sum((yi - y_mean) ** 2 for yi in y)
    return PowerLaw(k=math.exp(intercept), gamma=-slope, r2=1.0 - residual / total if total > 0 else 1.0)


def _positive_numbers(name: str, values) -> list:
    """``values`` as a list of positive finite floats, or an error naming ``name`` (or ``name[i]``)."""
    if isinstance(values, (str, bytes, dict)):
        raise TypeError(f"{name}: expected a sequence of positive numbers, got {type(values).__name__}")
    try:
        items = list(values)
    except TypeError:
        raise TypeError(f"{name}: expected a sequence of positive numbers, got {type(values).__name__}") from None
    return [check_number(f"{name}[{i}]", v, low=0.0, low_open=True, finite=True) for i, v in enumerate(items)]


def training_compute(config, tokens: int) -> int:
    """C of a run: ``flops_per_token(config, block_size, training=True)`` (about 6 N) times the
    ``tokens`` the model was trained on (a decoder's config; tokens >= 0)."""
    tokens = check_int("tokens", tokens, low=0)
    return flops_per_token(config, config.block_size, training=True) * tokens
