"""Chinchilla's parametric law and its compute-optimal N, D; the power-law fit; a run's compute.

The closed form is checked against a direct search along the iso-FLOP curve, not against
numbers it computed itself; the constants are the paper's (Hoffmann et al. 2022, eq. 10).
"""
import math

import numpy as np
import pytest

from minitransformer.models import GPTConfig
from minitransformer.models.costs import flops_per_token
from minitransformer.models.scaling import (CHINCHILLA, chinchilla_loss, compute_optimal, fit_power_law,
                                            training_compute)


def test_the_published_constants():
    assert CHINCHILLA == (1.69, 406.4, 410.7, 0.34, 0.28)
    assert chinchilla_loss(1e60, 1e60) == pytest.approx(1.69, abs=1e-12)     # (nearly) infinite model and data: E


@pytest.mark.parametrize("C", [1e18, 5.76e23, 1e26])
def test_the_closed_form_is_the_minimum_along_the_iso_flop_curve(C):
    N_opt, D_opt = compute_optimal(C)
    assert 6 * N_opt * D_opt == pytest.approx(C, rel=1e-12)
    N = N_opt * np.exp(np.linspace(-3, 3, 6001))                          # a log grid around it
    losses = [chinchilla_loss(n, C / (6 * n)) for n in N]
    best = N[int(np.argmin(losses))]
    assert best == pytest.approx(N_opt, rel=2e-3)                          # the grid's step is 1e-3 in log N
    assert chinchilla_loss(N_opt, D_opt) <= min(losses) + 1e-12


def test_both_grow_nearly_as_the_square_root_of_the_budget():
    (N1, D1), (N10, D10) = compute_optimal(1e21), compute_optimal(1e22)
    a, b = 0.28 / 0.62, 0.34 / 0.62                                         # β/(α+β), α/(α+β)
    assert N10 / N1 == pytest.approx(10 ** a, rel=1e-12) and round(N10 / N1, 1) == 2.8   # scaling.py's docstring
    assert D10 / D1 == pytest.approx(10 ** b, rel=1e-12) and round(D10 / D1, 1) == 3.5


def test_the_power_law_fit_recovers_a_known_law_and_its_r2():
    C = np.array([1e12, 3e12, 1e13, 4e13, 1e14])
    fit = fit_power_law(C, 7.0 * C ** -0.05)
    assert fit.k == pytest.approx(7.0, rel=1e-10) and fit.gamma == pytest.approx(0.05, rel=1e-10)
    assert fit.r2 == pytest.approx(1.0) and fit(1e13) == pytest.approx(7.0 * 1e13 ** -0.05)
    noisy = 7.0 * C ** -0.05 * np.exp(np.array([0.01, -0.02, 0.0, 0.015, -0.01]))
    assert 0.0 < fit_power_law(C, noisy).r2 < 1.0


def test_a_runs_compute_is_flops_per_token_times_tokens():
    config = GPTConfig(vocab_size=50, block_size=16, n_layer=2, n_head=2, d_model=32)
    assert training_compute(config, 1000) == 1000 * flops_per_token(config, 16, training=True)
    assert training_compute(config, 0) == 0


def test_scaling_entrances_name_the_argument():
    with pytest.raises(ValueError, match=r"C: expected a number in \(0.0, inf\)"):
        compute_optimal(0.0)
    with pytest.raises(ValueError, match="N: expected a number"):
        chinchilla_loss(-1.0, 10.0)
    with pytest.raises(ValueError, match="compute, loss: expected two sequences of one length >= 2"):
        fit_power_law([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="compute: expected at least two distinct values"):
        fit_power_law([2.0, 2.0], [1.0, 3.0])
    with pytest.raises(ValueError, match=r"loss\[1\]: expected a number"):
        fit_power_law([1.0, 2.0], [1.0, 0.0])
    assert math.isfinite(chinchilla_loss(70e9, 1.4e12))
