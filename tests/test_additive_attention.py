"""Bahdanau's additive attention: gradients of the pair and the Module, the energy
e_ij = vᵀ tanh(W s_i + U h_j) against a loop written here, masks, errors.

Tolerances: gradient checks 1e-7 (float64 central differences land near 1e-9 for a
correct backward, near 1 for a wrong one); the loop reference 1e-12 (the same sums in
another order).
"""
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, strategies as st

from minitransformer.functional.additive_attention import (additive_attention_backward,
                                                           additive_attention_forward)
from minitransformer.functional.masks import key_padding_mask
from minitransformer.gradcheck import check_module, check_pair
from minitransformer.layers.additive_attention import AdditiveAttention
from strategies import normal_array, seeds

TOL = 1e-7


def reference_additive_attention(s, h, W, U, v, mask=None):
    """Loops over batch, query and key, with Python's math for the softmax: no shared code."""
    B, T, _ = s.shape
    S = h.shape[1]
    mask = np.broadcast_to(True if mask is None else mask, (B, T, S))
    c = np.zeros((B, T, h.shape[-1]))
    for b in range(B):
        for i in range(T):
            keys = [j for j in range(S) if mask[b, i, j]]
            if not keys:
                continue                                    # nothing to attend: context 0
            e = {j: float(v @ np.tanh(W.T @ s[b, i] + U.T @ h[b, j])) for j in keys}
            top = max(e.values())
            w = {j: math.exp(e[j] - top) for j in keys}
            total = sum(w.values())
            c[b, i] = sum(w[j] / total * h[b, j] for j in keys)
    return c


@st.composite
def additive_case(draw):
    """s, h, W, U, v and a mask (none, padding with empty rows possible, or random)."""
    B, T, S = draw(st.integers(1, 2)), draw(st.integers(1, 3)), draw(st.integers(1, 4))
    Cs, Ch, A = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 4))
    seed = draw(seeds)
    rng = np.random.default_rng(seed)
    kind = draw(st.sampled_from(["none", "padding", "random"]))
    mask = {"none": None,
            "padding": key_padding_mask(rng.integers(0, S + 1, size=B), S)[:, 0],  # (B, 1, S)
            "random": rng.random((B, T, S)) < 0.6}[kind]
    inputs = {"s": normal_array(seed + 1, (B, T, Cs)), "h": normal_array(seed + 2, (B, S, Ch)),
              "W": normal_array(seed + 3, (Cs, A)), "U": normal_array(seed + 4, (Ch, A)),
              "v": normal_array(seed + 5, (A,))}
    return inputs, mask


@given(case=additive_case(), seed=seeds)
def test_additive_attention_pair_gradients(case, seed):
    """h = 5e-5 as for dot-product attention (tests/test_attention.py): a nearly saturated
    softmax row has tiny gradients, and attention is smooth (truncation ~h² = 2.5e-9)."""
    inputs, mask = case
    result = check_pair(additive_attention_forward, additive_attention_backward, {**inputs, "mask": mask},
                        wrt=("s", "h", "W", "U", "v"), seed=seed, h=5e-5, tol=TOL)
    assert result.ok, str(result)


@given(case=additive_case())
def test_additive_attention_matches_the_loop_reference(case):
    inputs, mask = case
    c, cache = additive_attention_forward(**inputs, mask=mask)
    np.testing.assert_allclose(c, reference_additive_attention(**inputs, mask=mask), rtol=0, atol=1e-12)
    assert cache.alpha.shape == c.shape[:2] + (inputs["h"].shape[1],)


def test_energy_is_v_dot_tanh_and_the_context_a_convex_mix_of_the_keys():
    # One query, two keys, A = 1: e_j = v tanh(w s + u h_j) by hand; α = softmax(e).
    s = np.array([[[0.5]]])                                  # (1, 1, 1)
    h = np.array([[[1.0, 2.0], [-1.0, 0.0]]])                # (1, 2, 2)
    W, U, v = np.array([[2.0]]), np.array([[1.0], [0.5]]), np.array([3.0])
    e = 3.0 * np.tanh(np.array([1.0 + 1.0 + 1.0, 1.0 - 1.0 + 0.0]))  # [3 tanh 3, 0]
    alpha = np.exp(e) / np.exp(e).sum()
    c, cache = additive_attention_forward(s, h, W, U, v)
    np.testing.assert_allclose(cache.alpha[0, 0], alpha, rtol=1e-14)
    np.testing.assert_allclose(c[0, 0], alpha[0] * h[0, 0] + alpha[1] * h[0, 1], rtol=1e-14)


@given(seed=seeds)
def test_fully_masked_rows_output_zero_and_pass_zero_gradient_without_nan(seed):
    s, h = normal_array(seed, (2, 3, 4)), normal_array(seed + 1, (2, 5, 3))
    W, U, v = normal_array(seed + 2, (4, 6)), normal_array(seed + 3, (3, 6)), normal_array(seed + 4, (6,))
    mask = np.ones((2, 3, 5), bool)
    mask[0, 1] = False                                       # batch 0, query 1: no key at all
    mask[1, :, 4] = False                                    # batch 1, key 4: hidden from every query
    with warnings.catch_warnings():
        warnings.simplefilter("error")                       # a RuntimeWarning fails the test
        c, cache = additive_attention_forward(s, h, W, U, v, mask)
        ds, dh, dW, dU, dv = additive_attention_backward(normal_array(seed + 5, c.shape), cache)
    assert np.all(c[0, 1] == 0) and np.all(ds[0, 1] == 0)
    assert np.all(dh[1, 4] == 0)                             # a hidden key receives exactly 0
    assert all(np.isfinite(a).all() for a in (c, ds, dh, dW, dU, dv))


@given(seed=seeds)
def test_module_gradients_and_accumulation(seed):
    layer = AdditiveAttention(4, 3, 5, rng=seed, dtype=np.float64)
    s, h = normal_array(seed + 1, (2, 3, 4)), normal_array(seed + 2, (2, 4, 3))
    mask = key_padding_mask(np.array([4, 2]), 4)[:, 0]       # (B, 1, S)
    result = check_module(layer, s, h, forward_kwargs={"mask": mask}, seed=seed, h=5e-5, tol=TOL)
    assert result.ok, str(result)
    assert set(layer.params) == {"W", "U", "v"} and layer.num_parameters() == 4 * 5 + 3 * 5 + 5
    dc = normal_array(seed + 3, (2, 3, 3))
    layer.zero_grad()
    layer.forward(s, h, mask); layer.backward(dc)
    once = {k: g.copy() for k, g in layer.grads.items()}
    layer.forward(s, h, mask); layer.backward(dc)
    for k, g in layer.grads.items():
        np.testing.assert_allclose(g, 2 * once[k], rtol=1e-12)
    np.testing.assert_array_equal(layer.alpha[1, :, 2:], 0.0)  # padded keys get no weight


def test_float32_in_float32_out():
    layer = AdditiveAttention(4, 3, 5, rng=0)
    s, h = np.ones((1, 2, 4), np.float32), np.ones((1, 3, 3), np.float32)
    c = layer.forward(s, h)
    grads = layer.backward(np.ones_like(c))
    assert c.dtype == np.float32 and {g.dtype for g in grads} == {np.dtype(np.float32)}
    assert {g.dtype for g in layer.grads.values()} == {np.dtype(np.float32)}


def test_errors_name_the_argument():
    s, h, W, U, v = np.zeros((1, 2, 4)), np.zeros((1, 3, 3)), np.zeros((4, 5)), np.zeros((3, 5)), np.zeros(5)
    with pytest.raises(ValueError, match=r"W: expected size 4"):
        additive_attention_forward(s, h, np.zeros((3, 5)), U, v)
    with pytest.raises(ValueError, match=r"U: expected size 5"):
        additive_attention_forward(s, h, W, np.zeros((3, 4)), v)
    with pytest.raises(ValueError, match=r"v: expected size 5"):
        additive_attention_forward(s, h, W, U, np.zeros(4))
    with pytest.raises(ValueError, match=r"h: expected size 1"):
        additive_attention_forward(s, np.zeros((2, 3, 3)), W, U, v)
    with pytest.raises(ValueError, match=r"mask: expected a shape broadcastable to \(1, 2, 3\)"):
        additive_attention_forward(s, h, W, U, v, np.ones((2, 3), bool)[None, None])
    with pytest.raises(TypeError, match=r"mask: expected a boolean array"):
        additive_attention_forward(s, h, W, U, v, np.ones((2, 3)))
    with pytest.raises(TypeError, match=r"h: expected dtype float64"):
        additive_attention_forward(s, h.astype(np.float32), W, U, v)
    with pytest.raises(ValueError, match=r"d_attn: expected an integer in \[1"):
        AdditiveAttention(4, 3, 0)
    with pytest.raises(RuntimeError, match="without a pending"):
        AdditiveAttention(4, 3, 2).backward(np.zeros((1, 2, 3), np.float32))
