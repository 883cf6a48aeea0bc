"""erf and erfc from array operations: accuracy against the math module, tails,
special values, symmetry, dtype, errors."""
import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

from minitransformer.functional.erf import erf, erfc
from strategies import seeds, shapes, uniform_array


def _math(fn, x):
    return np.array([fn(float(v)) for v in x.ravel()]).reshape(x.shape)


# ------------------------------------------------------------------------ float64
def test_erf_float64_within_1e_15_absolute_on_a_dense_grid():
    # The promise of the module: 1e-15 absolute everywhere (observed: 2.2e-16, one unit
    # in the last place of values near 1). [-10, 10] covers the whole curve: past
    # |x| = 6 erf is ±1 in float64.
    x = np.linspace(-10.0, 10.0, 200_001)
    assert np.max(np.abs(erf(x) - _math(math.erf, x))) <= 1e-15


def test_erf_keeps_relative_accuracy_near_zero():
    # erf(x) ≈ 2x/√π for tiny x; 1 - erfc(x) would lose every digit there. 1e-15
    # relative is a few units in the last place (observed 4.2e-16).
    t = np.logspace(-300, 0, 3001)
    x = np.concatenate([t, -t])
    expected = _math(math.erf, x)
    assert np.max(np.abs(erf(x) - expected) / np.abs(expected)) <= 1e-15


def test_erf_tails_and_special_values():
    big = np.array([6.0, 10.0, 27.0, 1e3, 1e150, 1e300, np.inf])
    np.testing.assert_array_equal(erf(big), np.ones_like(big))
    np.testing.assert_array_equal(erf(-big), -np.ones_like(big))
    assert np.isnan(erf(np.array([np.nan, -np.nan]))).all()
    zero = erf(np.array([0.0, -0.0]))
    np.testing.assert_array_equal(zero, [0.0, 0.0])
    assert np.signbit(zero).tolist() == [False, True]        # the sign of zero is kept


def test_erfc_relative_accuracy_into_the_right_tail():
    # erfc(26.5) = 1.5e-307: erfc is accurate RELATIVE to its value, where 1 - erf is 0.
    # exp(-a²) inherits the rounding of a² (relative error up to a²·2⁻⁵³), hence a bound
    # that grows with x²; observed: at most 5.5e-16·(1 + x²).
    x = np.linspace(-10.0, 26.5, 100_001)
    expected = _math(math.erfc, x)
    rel = np.abs(erfc(x) - expected) / expected
    assert np.all(rel <= 1e-15 * (1.0 + x * x))


def test_erfc_tails_and_special_values():
    np.testing.assert_array_equal(erfc(np.array([27.5, 1e3, 1e300, np.inf])), 0.0)
    np.testing.assert_array_equal(erfc(np.array([-6.0, -27.5, -1e300, -np.inf])), 2.0)
    assert erfc(np.array([0.0]))[0] == 1.0
    assert np.isnan(erfc(np.array([np.nan]))).all()


@given(shape=shapes(max_dims=3), bound=st.sampled_from([0.5, 3.0, 30.0]), seed=seeds)
def test_symmetries(shape, bound, seed):
    # The identities hold to a rounding of the sum: observed 2.2e-16 on 2M points of
    # [-30, 30]; 4.5e-16 is two units in the last place of 1.
    x = uniform_array(seed, shape, bound)
    np.testing.assert_array_equal(erf(-x), -erf(x))                   # odd, exactly
    np.testing.assert_allclose(erfc(x) + erfc(-x), 2.0, rtol=0, atol=4.5e-16)
    np.testing.assert_allclose(erf(x) + erfc(x), 1.0, rtol=0, atol=4.5e-16)


# ------------------------------------------------------------------------ float32
def test_float32_in_float32_out_and_accurate_to_float32():
    # float32 uses its own shorter table; 2e-7 is under two float32 units in the last
    # place of values in [1, 2) (ulp 1.2e-7) — observed 1.1e-7 for erf, 1.9e-7 for erfc.
    x = np.linspace(-10.0, 10.0, 20_001).astype(np.float32)
    y, c = erf(x), erfc(x)
    assert y.dtype == np.float32 and c.dtype == np.float32
    assert np.max(np.abs(y - _math(math.erf, x))) <= 2e-7
    assert np.max(np.abs(c - _math(math.erfc, x))) <= 2e-7
    np.testing.assert_array_equal(erf(np.array([-np.inf, 1e30, np.inf], np.float32)), [-1, 1, 1])


# ------------------------------------------------------------------------- shapes
def test_shapes_views_and_zero_dimensional_input():
    x = np.linspace(-3, 3, 24).reshape(2, 3, 4)
    np.testing.assert_array_equal(erf(x[:, ::2, 1:]), erf(x)[:, ::2, 1:])   # strided view
    before = x.copy()
    erf(x); erfc(x)
    np.testing.assert_array_equal(x, before)                                # input untouched
    scalar = erf(np.array(0.5))
    assert scalar.shape == () and abs(float(scalar) - math.erf(0.5)) <= 1e-16


def test_integer_input_is_a_type_error_naming_x():
    with pytest.raises(TypeError, match=r"x: expected a floating point array, got int64"):
        erf(np.arange(3))
    with pytest.raises(TypeError, match=r"x: expected a floating point array"):
        erfc([0.5])
