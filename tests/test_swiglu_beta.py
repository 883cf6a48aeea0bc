"""SwiGLU with a general β, Swish_β(a) ⊙ b (the architecture deck's form): gradients for h and β,
β = 1 is the library's SwiGLU (SiLU), the product by hand, and the Module's learned β."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from minitransformer.functional.gated import swiglu_beta_backward, swiglu_beta_forward, swiglu_forward
from minitransformer.gradcheck import check_module, check_pair
from minitransformer.layers.activation import SwiGLUBeta
from strategies import activation_bounds, seeds, shapes, uniform_array

TOL = 1e-7  # float64 central differences land near 1e-9 for a correct backward, near 1 for a bug


@given(lead=shapes(min_dims=1, max_dims=3, max_side=4), F=st.integers(1, 4), bound=activation_bounds,
       per_unit=st.booleans(), seed=seeds)
def test_swiglu_beta_gradients_for_h_and_beta(lead, F, bound, per_unit, seed):
    h = uniform_array(seed, lead + (2 * F,), bound)
    beta = np.random.default_rng(seed + 1).uniform(0.2, 3.0, (F,) if per_unit else (1,))
    result = check_pair(swiglu_beta_forward, swiglu_beta_backward, {"h": h, "beta": beta}, seed=seed, tol=TOL)
    assert result.ok, str(result)


def test_beta_one_is_swiglu_and_the_product_by_hand():
    h = uniform_array(0, (3, 8), 4.0)
    a, b = h[:, :4], h[:, 4:]
    np.testing.assert_array_equal(swiglu_beta_forward(h, np.array([1.0]))[0], swiglu_forward(h)[0])
    for beta in (0.5, 2.0):
        np.testing.assert_allclose(swiglu_beta_forward(h, np.array([beta]))[0], a / (1 + np.exp(-beta * a)) * b,
                                   rtol=1e-14)
    np.testing.assert_allclose(swiglu_beta_forward(h, np.array([0.0]))[0], a / 2 * b, rtol=1e-15)   # β = 0


@given(seed=seeds)
def test_the_module_learns_beta(seed):
    module = SwiGLUBeta(beta=1.7, dtype=np.float64)
    result = check_module(module, uniform_array(seed, (2, 3, 6), 3.0), seed=seed, tol=TOL)
    assert result.ok, str(result)
    assert module.num_parameters() == 1 and module.beta[0] == 1.7


def test_swiglu_beta_entrances_name_the_argument():
    with pytest.raises(ValueError, match="h: expected an even size"):
        swiglu_beta_forward(np.zeros((2, 3)), np.ones(1))
    with pytest.raises(ValueError, match=r"beta: expected a shape broadcastable to \(2, 2\)"):
        swiglu_beta_forward(np.zeros((2, 4)), np.ones(3))
    with pytest.raises(TypeError, match="beta: expected dtype float64"):
        swiglu_beta_forward(np.zeros((2, 4)), np.ones(1, np.float32))
