"""fast/kernels/reductions.py computes the very quantities of the plain NumPy reductions it replaces.

Each helper is a faster route to ``.sum``, ``.mean``, ``.max`` or a product-and-sum;
these tests tie each to the plain form on shapes Hypothesis draws, in float32 and
float64. Tolerance: the helpers may add in another order than ``.sum`` (pairwise),
so sums agree to a few ulps of the row's absolute sum (rtol 1e-5 float32, 1e-12
float64, relative to Σ|a|); the maximum is exact.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from minitransformer.fast.kernels.reductions import col_dot, col_sum, row_dot, row_max, row_mean, row_sum
from strategies import normal_array, seeds, shapes

RTOL = {np.float32: 1e-5, np.float64: 1e-12}
dtypes = st.sampled_from([np.float32, np.float64])


def _close_sum(got, expected, scale, dtype):
    """|got - expected| <= rtol · scale elementwise, scale = the sum of absolute values."""
    assert got.dtype == dtype
    assert got.shape == expected.shape
    assert np.all(np.abs(got - expected) <= RTOL[dtype] * (scale + 1e-30))


@settings(max_examples=40)
@given(seeds, shapes(min_dims=1, max_dims=4, max_side=7), dtypes)
def test_row_reductions_match_the_plain_forms(seed, shape, dtype):
    a, b = normal_array(seed, shape, dtype=dtype), normal_array(seed + 1, shape, dtype=dtype)
    absum = np.abs(a).sum(-1, keepdims=True)
    _close_sum(row_sum(a), a.sum(-1, keepdims=True), absum, dtype)
    _close_sum(row_mean(a), a.mean(-1, keepdims=True), absum / shape[-1], dtype)
    _close_sum(row_dot(a, b), (a * b).sum(-1, keepdims=True), np.abs(a * b).sum(-1, keepdims=True), dtype)
    np.testing.assert_array_equal(row_max(a), a.max(-1, keepdims=True))


@settings(max_examples=40)
@given(seeds, shapes(min_dims=1, max_dims=4, max_side=7), dtypes)
def test_column_reductions_match_the_plain_forms(seed, shape, dtype):
    a, b = normal_array(seed, shape, dtype=dtype), normal_array(seed + 1, shape, dtype=dtype)
    rows = (-1, shape[-1])
    A, Bm = a.reshape(rows), b.reshape(rows)
    _close_sum(col_sum(a), A.sum(0), np.abs(A).sum(0), dtype)
    _close_sum(col_dot(a, b), (A * Bm).sum(0), np.abs(A * Bm).sum(0), dtype)


def test_row_max_of_masked_rows():
    """-inf entries (masked scores) are ignored unless the whole row is -inf; a NaN row stays NaN
    for the softmax after it (fmax skips a NaN here, but the NaN entry itself poisons the row's sum)."""
    a = np.array([[-np.inf, 1.0, -np.inf], [-np.inf, -np.inf, -np.inf]])
    np.testing.assert_array_equal(row_max(a), [[1.0], [-np.inf]])
    from minitransformer.functional.softmax import softmax_forward
    y, _ = softmax_forward(np.array([[0.0, np.nan, 1.0]]))
    assert np.isnan(y).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row_reductions_give_the_same_bits_on_any_block_of_rows(dtype):
    """What rowblocks relies on: a row's result does not depend on the rows around it."""
    a = normal_array(3, (37, 50), dtype=dtype)
    b = normal_array(4, (37, 50), dtype=dtype)
    blocks = (slice(0, 5), slice(5, 19), slice(19, 37))
    for f in (lambda r: row_sum(a[r]), lambda r: row_max(a[r]), lambda r: row_dot(a[r], b[r])):
        np.testing.assert_array_equal(np.concatenate([f(r) for r in blocks]), f(slice(0, 37)))
