"""Dropout: gradient checks (fixed mask, and the Module replaying its generator),
identity in eval and at p = 0, unbiasedness and drop rate (with statistical
tolerances), dtype, errors."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from minitransformer.functional.dropout import dropout_backward, dropout_forward
from minitransformer.gradcheck import check_module, check_pair
from minitransformer.layers.dropout import Dropout
from strategies import normal_array, seeds, shapes

TOL = 1e-7  # float64 central differences land near 1e-9 for a correct backward, near 1 for a bug
Z = 5.0     # statistical tests allow 5 standard deviations: a false alarm has odds ~1e-6

probabilities = st.sampled_from([0.1, 0.5, 0.9])


def _mask(seed, shape, p):
    return np.random.default_rng(seed).random(shape) >= p


@given(shape=shapes(max_dims=3), p=probabilities, seed=seeds)
def test_dropout_pair_gradients_with_a_fixed_mask(shape, p, seed):
    inputs = {"x": normal_array(seed + 1, shape)}       # seed itself feeds the checker's upstream
    kwargs = {"p_drop": p, "mask": _mask(seed + 2, shape, p)}
    result = check_pair(dropout_forward, dropout_backward, inputs, kwargs=kwargs, seed=seed, tol=TOL)
    assert result.ok, str(result)


@given(shape=shapes(max_dims=3), p=probabilities, seed=seeds)
def test_dropout_module_gradients_with_its_generator_replayed(shape, p, seed):
    # The checker resets module.rng before every forward, so every evaluation sees one mask.
    result = check_module(Dropout(p, rng=seed + 1), normal_array(seed + 2, shape), seed=seed, tol=TOL)
    assert result.ok, str(result)


def test_mask_zeroes_dropped_entries_and_scales_kept_ones_by_1_over_1_minus_p():
    x, mask = np.arange(1.0, 7.0).reshape(2, 3), np.array([[True, False, True], [False, True, True]])
    y, cache = dropout_forward(x, 0.25, mask=mask)
    np.testing.assert_allclose(y, [[1 / 0.75, 0, 3 / 0.75], [0, 5 / 0.75, 6 / 0.75]], rtol=1e-15)
    dx = dropout_backward(np.ones_like(x), cache)
    np.testing.assert_allclose(dx, mask / 0.75, rtol=1e-15)


def test_identity_in_eval_and_with_p_zero():
    x, dy = normal_array(0, (3, 4)), normal_array(1, (3, 4))
    for p, training in [(0.5, False), (0.0, True)]:
        y, cache = dropout_forward(x, p, rng=np.random.default_rng(0), training=training)
        assert y is x and cache.identity
        assert dropout_backward(dy, cache) is dy
    layer = Dropout(0.5, rng=0).eval()
    assert layer.forward(x) is x and layer.backward(dy) is dy
    assert Dropout(0.0, rng=0).forward(x) is x


@given(p=probabilities, seed=seeds)
def test_dropout_is_unbiased_entry_by_entry(p, seed):
    # K independent draws of each entry: the mean of y_i has standard deviation
    # |x_i| √(p / ((1-p) K)), so |mean - x_i| stays within Z of those.
    K, x = 4000, normal_array(seed, (32,))
    y, _ = dropout_forward(np.tile(x, (K, 1)), p, rng=np.random.default_rng(seed))
    sd = np.abs(x) * np.sqrt(p / ((1 - p) * K))
    assert np.all(np.abs(y.mean(axis=0) - x) <= Z * sd)


@given(p=probabilities, seed=seeds)
def test_dropout_drops_a_fraction_p(p, seed):
    # n Bernoulli(p) drops: the fraction has standard deviation √(p(1-p)/n).
    n = 100_000
    y, cache = dropout_forward(np.ones(n), p, rng=np.random.default_rng(seed))
    dropped = np.mean(y == 0)
    assert abs(dropped - p) <= Z * np.sqrt(p * (1 - p) / n)
    np.testing.assert_array_equal(y == 0, ~cache.mask)


def test_same_generator_state_gives_the_same_mask():
    x = np.ones((5, 7))
    y1, _ = dropout_forward(x, 0.5, rng=np.random.default_rng(7))
    y2, _ = dropout_forward(x, 0.5, rng=np.random.default_rng(7))
    np.testing.assert_array_equal(y1, y2)
    layer = Dropout(0.5, rng=7)
    assert isinstance(layer.rng, np.random.Generator)
    np.testing.assert_array_equal(layer.forward(x), y1)


def test_float32_in_float32_out():
    x = normal_array(0, (4, 8), dtype=np.float32)
    y, cache = dropout_forward(x, 0.3, rng=np.random.default_rng(0))
    assert y.dtype == np.float32 and cache.mask.dtype == bool
    assert dropout_backward(x, cache).dtype == np.float32


def test_errors_name_the_argument():
    x, rng = np.zeros((2, 3)), np.random.default_rng(0)
    for p in (1.0, -0.1, 1.5):
        with pytest.raises(ValueError, match=r"p_drop: expected a number in \[0.0, 1.0\)"):
            dropout_forward(x, p, rng=rng)
    with pytest.raises(TypeError, match=r"p_drop: expected a real number"):
        dropout_forward(x, "0.1", rng=rng)
    with pytest.raises(ValueError, match=r"rng: dropout with p_drop=0.1 in training needs a generator"):
        dropout_forward(x, 0.1)
    with pytest.raises(ValueError, match=r"mask: expected shape \(2, 3\)"):
        dropout_forward(x, 0.1, mask=np.ones((3, 2), bool))
    with pytest.raises(TypeError, match=r"mask: expected a boolean array"):
        dropout_forward(x, 0.1, mask=np.ones((2, 3)))
    with pytest.raises(TypeError, match=r"x: expected a floating point array"):
        dropout_forward(np.zeros((2, 3), np.int32), 0.1, rng=rng)
    with pytest.raises(ValueError, match=r"p: expected a number in \[0.0, 1.0\)"):
        Dropout(1.0)


def test_backward_without_forward_is_a_clear_error():
    with pytest.raises(RuntimeError, match="without a pending"):
        Dropout(0.1, rng=0).backward(np.zeros(3))
