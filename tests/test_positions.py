"""Positions: sinusoidal table, RoPE, ALiBi, learned positions.

Tolerances: gradient checks 1e-7 (float64 central differences land near 1e-9 for a
correct backward); float64 identities 1e-12 (a few roundings of O(1) values).
"""
import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

from minitransformer.functional.masks import causal_mask
from minitransformer.functional.positions import (alibi_bias, alibi_slopes, rope_backward,
                                                  rope_forward, sinusoidal_table)
from minitransformer.gradcheck import check_module, check_pair
from minitransformer.layers.positions import LearnedPositionEmbedding
from strategies import normal_array, seeds

TOL = 1e-7
layouts = st.sampled_from(["interleaved", "half"])


# ---------------------------------------------------------------- sinusoidal
@pytest.mark.parametrize("d", [4, 5])
def test_sinusoidal_table_is_the_formula(d):
    PE = sinusoidal_table(6, d, dtype=np.float64)
    for pos in range(6):
        for c in range(d):
            angle = pos / 10000 ** ((c - c % 2) / d)        # column 2i and 2i+1 share 2i
            expected = math.sin(angle) if c % 2 == 0 else math.cos(angle)
            assert PE[pos, c] == pytest.approx(expected, abs=1e-14)  # vectorised sin/cos: a few ulps


def test_sinusoidal_rows_are_distinct_and_dtype_kept():
    PE = sinusoidal_table(64, 16)
    assert PE.dtype == np.float32
    distances = np.linalg.norm(PE[:, None] - PE[None, :], axis=-1)
    assert np.all(distances[~np.eye(64, dtype=bool)] > 1e-3)


# ---------------------------------------------------------------------- RoPE
@given(shape=st.tuples(st.integers(1, 2), st.integers(1, 3), st.integers(1, 4), st.integers(1, 3)),
       offset=st.integers(0, 50), layout=layouts, seed=seeds)
def test_rope_gradients(shape, offset, layout, seed):
    x = normal_array(seed, shape[:3] + (2 * shape[3],))
    result = check_pair(rope_forward, rope_backward, {"x": x},
                        kwargs={"offset": offset, "layout": layout}, seed=seed, tol=TOL)
    assert result.ok, str(result)


def rope_at(x, m, layout):
    """One vector x (D,) rotated as if it sat at position m."""
    return rope_forward(x[None, None, None], m, layout=layout)[0][0, 0, 0]


@given(m=st.integers(0, 200), n=st.integers(0, 200), shift=st.integers(0, 200), layout=layouts, seed=seeds)
def test_rope_scores_depend_only_on_relative_position(m, n, shift, layout, seed):
    q, k = normal_array(seed, (8,)), normal_array(seed + 1, (8,))
    score = rope_at(q, m, layout) @ rope_at(k, n, layout)
    shifted = rope_at(q, m + shift, layout) @ rope_at(k, n + shift, layout)
    assert shifted == pytest.approx(score, abs=1e-12)


@given(offset=st.integers(0, 1000), layout=layouts, seed=seeds)
def test_rope_keeps_norms_and_is_undone_by_its_backward(offset, layout, seed):
    """A rotation: norms kept, and the backward (the inverse rotation) gives x back."""
    x = normal_array(seed, (2, 3, 4, 6))
    y, cache = rope_forward(x, offset, layout=layout)
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-12)
    np.testing.assert_allclose(rope_backward(y, cache), x, rtol=0, atol=1e-12)


@given(offset=st.integers(0, 100), seed=seeds)
def test_rope_layouts_differ_by_a_permutation(offset, seed):
    """Reordering the head dim as (evens, odds) turns interleaved pairs into half-split pairs."""
    x = normal_array(seed, (1, 2, 3, 8))
    perm = np.r_[0:8:2, 1:8:2]                              # [0, 2, 4, 6, 1, 3, 5, 7]
    interleaved = rope_forward(x, offset, layout="interleaved")[0]
    half = rope_forward(x[..., perm], offset, layout="half")[0]
    np.testing.assert_allclose(half, interleaved[..., perm], rtol=0, atol=1e-12)


@pytest.mark.parametrize("layout, pair", [("interleaved", lambda j: (2 * j, 2 * j + 1)),
                                          ("half", lambda j: (j, j + 3))])
def test_rope_rotates_pair_j_by_m_theta_j(layout, pair):
    """x = (1, 0) in every pair: at position m pair j becomes (cos mθ_j, sin mθ_j), θ_j = 10000^(-2j/D)."""
    D = 6
    x = np.zeros((1, 1, 3, D))
    for j in range(D // 2):
        x[..., pair(j)[0]] = 1.0
    y = rope_forward(x, offset=5, layout=layout)[0][0, 0]
    for t, m in enumerate((5, 6, 7)):
        for j in range(D // 2):
            angle = m * 10000 ** (-2 * j / D)
            a, b = pair(j)
            assert (y[t, a], y[t, b]) == pytest.approx((math.cos(angle), math.sin(angle)), abs=1e-14)
    np.testing.assert_array_equal(rope_forward(x, layout=layout)[0][0, 0, 0], x[0, 0, 0])  # m = 0: identity


def test_rope_with_offset_is_a_slice_of_the_full_sequence():
    x = normal_array(0, (1, 2, 6, 4))
    full = rope_forward(x)[0]
    np.testing.assert_allclose(rope_forward(x[:, :, 4:], offset=4)[0], full[:, :, 4:], rtol=0, atol=1e-15)


def test_rope_errors():
    with pytest.raises(ValueError, match="head dim D must be even"):
        rope_forward(np.zeros((1, 1, 2, 3)))
    with pytest.raises(ValueError, match="layout: expected one of"):
        rope_forward(np.zeros((1, 1, 2, 4)), layout="pairs")
    with pytest.raises(ValueError, match="offset: expected an integer in \\[0"):
        rope_forward(np.zeros((1, 1, 2, 4)), offset=-1)


# --------------------------------------------------------------------- ALiBi
def test_alibi_slopes_power_of_two_and_standard_rule():
    assert alibi_slopes(8) == [2.0 ** -h for h in range(1, 9)]
    # H = 6: the 4 slopes of 4 heads, then every other slope of 8 heads, two of them.
    assert alibi_slopes(6) == [2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8, 2 ** -1, 2 ** -3]
    assert alibi_slopes(1) == [2 ** -8]


def test_alibi_bias_is_the_formula():
    slopes = [0.5, 0.25]
    T, S = 2, 4                                             # queries at positions 2 and 3
    bias = alibi_bias(slopes, T, S, dtype=np.float64)
    for h in range(2):
        for i in range(T):
            for j in range(S):
                assert bias[h, i, j] == -slopes[h] * ((i + S - T) - j)


def test_alibi_bias_penalises_only_the_past_under_a_causal_mask():
    bias = alibi_bias(alibi_slopes(4), 5, 5)
    visible = np.broadcast_to(causal_mask(5), bias.shape)
    assert bias.dtype == np.float32
    assert np.all(bias[visible] <= 0) and np.all(np.diagonal(bias, axis1=1, axis2=2) == 0)


# ---------------------------------------------------------- learned positions
@given(max_len=st.integers(1, 6), d=st.integers(1, 4), data=st.data(), seed=seeds)
def test_learned_positions_gradients(max_len, d, data, seed):
    T = data.draw(st.integers(1, max_len))
    offset = data.draw(st.integers(0, max_len - T))
    layer = LearnedPositionEmbedding(max_len, d, rng=seed).astype(np.float64)
    result = check_module(layer, T, offset, seed=seed, tol=TOL)
    assert result.ok, str(result)


def test_learned_positions_rows_and_accumulation():
    layer = LearnedPositionEmbedding(5, 3, rng=0)
    P = layer.forward(2, offset=1)
    np.testing.assert_array_equal(P, layer.W[1:3])
    dP = np.ones((2, 3), np.float32)
    assert layer.backward(dP) is None
    layer.forward(2, offset=2)
    layer.backward(dP)
    np.testing.assert_array_equal(layer.grads["W"][:, 0], [0, 1, 2, 1, 0])  # row 2 used twice
    P[...] = 7                                              # the result is a copy
    assert not np.any(layer.W == 7)


def test_learned_positions_errors():
    layer = LearnedPositionEmbedding(4, 2, rng=0)
    with pytest.raises(ValueError, match="T: expected offset \\+ T <= max_len=4"):
        layer.forward(3, offset=2)
    with pytest.raises(RuntimeError, match="without a pending"):
        layer.backward(np.zeros((1, 2), np.float32))
