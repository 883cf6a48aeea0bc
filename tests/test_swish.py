"""Swish with a learned β, y = x σ(βx): gradients for x and β, SiLU at β = 1, the limits
β -> ∞ (ReLU) and β = 0 (x/2), the Module and the config option."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from minitransformer.functional.activations import silu_forward, swish_backward, swish_forward
from minitransformer.gradcheck import check_module, check_pair
from minitransformer.layers.activation import Swish, make_activation
from minitransformer.models import GPT, GPTConfig
from minitransformer.models.presets import count_parameters
from strategies import activation_bounds, normal_array, seeds, shapes, uniform_array

TOL = 1e-7  # float64 central differences land near 1e-9 for a correct backward, near 1 for a bug


@given(lead=shapes(min_dims=1, max_dims=3, max_side=4), C=st.integers(1, 4), bound=activation_bounds,
       per_feature=st.booleans(), seed=seeds)
def test_swish_pair_gradients_for_x_and_beta(lead, C, bound, per_feature, seed):
    x = uniform_array(seed + 1, lead + (C,), bound)
    beta = np.random.default_rng(seed + 2).uniform(0.2, 3.0, (C,) if per_feature else (1,))
    result = check_pair(swish_forward, swish_backward, {"x": x, "beta": beta}, seed=seed, tol=TOL)
    assert result.ok, str(result)


def test_swish_is_x_times_sigmoid_of_beta_x_and_silu_at_beta_1():
    x = np.linspace(-6, 6, 25)
    for b in (0.5, 1.0, 2.0):
        y, _ = swish_forward(x, np.array([b]))
        np.testing.assert_allclose(y, x / (1 + np.exp(-b * x)), rtol=1e-14)
    np.testing.assert_array_equal(swish_forward(x, np.array([1.0]))[0], silu_forward(x)[0])
    np.testing.assert_allclose(swish_forward(x, np.array([0.0]))[0], x / 2, rtol=1e-15)      # β = 0: x/2
    np.testing.assert_allclose(swish_forward(x, np.array([200.0]))[0], np.maximum(x, 0), atol=1e-30)


def test_dbeta_is_summed_per_feature_by_hand():
    # dβ_c = Σ_rows dy · x² σ(β_c x)(1 - σ(β_c x)), written out here
    x, dy, beta = normal_array(0, (3, 2)), normal_array(1, (3, 2)), np.array([0.5, 2.0])
    sig = 1 / (1 + np.exp(-beta * x))
    _, cache = swish_forward(x, beta)
    dx, dbeta = swish_backward(dy, cache)
    np.testing.assert_allclose(dbeta, (dy * x * x * sig * (1 - sig)).sum(axis=0), rtol=1e-13)
    np.testing.assert_allclose(dx, dy * (sig + beta * x * sig * (1 - sig)), rtol=1e-13)


@given(seed=seeds)
def test_swish_module_learns_beta_and_counts_it(seed):
    module = Swish(beta=1.5, dtype=np.float64)
    result = check_module(module, uniform_array(seed, (2, 3, 4), 5.0), seed=seed, tol=TOL)
    assert result.ok, str(result)
    assert module.num_parameters() == 1 and module.beta[0] == 1.5
    config = GPTConfig(vocab_size=11, block_size=6, n_layer=2, n_head=2, d_model=8, activation="swish")
    assert count_parameters(config) == GPT(config).num_parameters()
    assert count_parameters(config) == count_parameters(GPTConfig(**{**config.to_dict(), "activation": "silu"})) + 2


def test_swish_refuses_a_beta_it_cannot_broadcast():
    x = np.zeros((2, 3))
    with pytest.raises(ValueError, match=r"beta: expected a shape broadcastable to \(2, 3\)"):
        swish_forward(x, np.ones(2))
    with pytest.raises(TypeError, match=r"beta: expected dtype float64"):
        swish_forward(x, np.ones(3, np.float32))
    with pytest.raises(ValueError, match=r"beta: expected at least 1 dimensions"):
        swish_forward(x, np.float64(1.0))
    assert isinstance(make_activation("swish"), Swish)
