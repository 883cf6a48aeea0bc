"""Linear: gradient check of the pair and the Module, shapes, errors, dtype."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from minitransformer.functional.linear import linear_backward, linear_forward
from minitransformer.gradcheck import check_module, check_pair
from minitransformer.layers import Linear
from strategies import normal_array, seeds, shapes

TOL = 1e-7  # float64 central differences land near 1e-9 for a correct backward


@given(lead=shapes(min_dims=1, max_dims=3), d_in=st.integers(1, 6), d_out=st.integers(1, 6),
       bias=st.booleans(), seed=seeds)
def test_linear_pair_gradients(lead, d_in, d_out, bias, seed):
    inputs = {"x": normal_array(seed, lead + (d_in,)), "W": normal_array(seed + 1, (d_in, d_out)),
              "b": normal_array(seed + 2, (d_out,)) if bias else None}
    wrt = ("x", "W", "b") if bias else ("x", "W")
    result = check_pair(linear_forward, linear_backward, inputs, wrt=wrt, seed=seed)
    assert result.ok, str(result)


@given(d_in=st.integers(1, 5), d_out=st.integers(1, 5), seed=seeds)
def test_linear_module_gradients_and_accumulation(d_in, d_out, seed):
    layer = Linear(d_in, d_out, rng=seed).astype(np.float64)
    x = normal_array(seed, (2, 3, d_in))
    result = check_module(layer, x, seed=seed)
    assert result.ok, str(result)
    # Gradients accumulate: two backward passes give twice the gradient.
    dy = normal_array(seed + 1, (2, 3, d_out))
    layer.zero_grad()
    layer.forward(x); layer.backward(dy)
    once = layer.grads["W"].copy()
    layer.forward(x); layer.backward(dy)
    np.testing.assert_allclose(layer.grads["W"], 2 * once, rtol=1e-12)


def test_linear_matches_definition_and_keeps_float32():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    W = rng.standard_normal((3, 2)).astype(np.float32)
    b = rng.standard_normal(2).astype(np.float32)
    y, _ = linear_forward(x, W, b)
    assert y.dtype == np.float32
    expected = np.array([[sum(x[i, k] * W[k, j] for k in range(3)) + b[j] for j in range(2)] for i in range(4)])
    np.testing.assert_allclose(y, expected, rtol=1e-5)


def test_linear_errors_name_the_argument():
    W = np.zeros((3, 2))
    with pytest.raises(ValueError, match=r"x: expected size 3"):
        linear_forward(np.zeros((4, 5)), W)
    with pytest.raises(ValueError, match=r"W: expected 2 dimensions"):
        linear_forward(np.zeros((4, 3)), np.zeros(3))
    with pytest.raises(ValueError, match=r"b: expected size 2"):
        linear_forward(np.zeros((4, 3)), W, np.zeros(3))


def test_backward_without_forward_is_a_clear_error():
    layer = Linear(3, 2, rng=0)
    with pytest.raises(RuntimeError, match="without a pending"):
        layer.backward(np.zeros((1, 2), np.float32))
