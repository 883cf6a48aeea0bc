"""Scaled dot-product attention: gradients, the lecture's worked example, masks, errors.

Tolerances: gradient checks 1e-7 (float64 central differences land near 1e-9 for a
correct backward, near 1 for a wrong one); comparisons with the loop reference
below 1e-12 (the same sums in a different order, a few ulps).
"""
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, strategies as st

from minitransformer.functional.attention import attention_backward, attention_forward
from minitransformer.functional.masks import causal_mask, key_padding_mask
from minitransformer.gradcheck import check_pair
from strategies import normal_array, seeds

TOL = 1e-7


def reference_attention(q, k, v, mask=None, bias=None):
    """Loops over batch and heads, one softmax per query with Python's math: no shared code."""
    B, H, T, D = q.shape
    S = k.shape[2]
    mask = np.broadcast_to(True if mask is None else mask, (B, H, T, S))
    bias = np.broadcast_to(0.0 if bias is None else bias, (B, H, T, S))
    out = np.zeros((B, H, T, v.shape[-1]))
    for b in range(B):
        for h in range(H):
            for i in range(T):
                keys = [j for j in range(S) if mask[b, h, i, j]]
                if not keys:
                    continue                                # nothing to attend: output 0
                s = {j: float(q[b, h, i] @ k[b, h, j]) / math.sqrt(D) + bias[b, h, i, j] for j in keys}
                top = max(s.values())
                w = {j: math.exp(s[j] - top) for j in keys}
                total = sum(w.values())
                out[b, h, i] = sum(w[j] / total * v[b, h, j] for j in keys)
    return out


MASK_KINDS = ["none", "causal", "padding", "random"]


@st.composite
def attention_case(draw, kind=None):
    """q, k, v, mask, bias with drawn B, H, T <= S, D, mask kind (unless given) and bias shape."""
    B, H = draw(st.integers(1, 2)), draw(st.integers(1, 4))
    T, D = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    S = T + draw(st.integers(0, 2))
    seed = draw(seeds)
    rng = np.random.default_rng(seed)
    q = normal_array(seed, (B, H, T, D))
    k, v = normal_array(seed + 1, (B, H, S, D)), normal_array(seed + 2, (B, H, S, D))
    kind = kind or draw(st.sampled_from(MASK_KINDS))
    mask = {"none": None,
            "causal": causal_mask(T, S),
            "padding": key_padding_mask(rng.integers(0, S + 1, size=B), S),  # length 0: rows fully masked
            "random": rng.random((B, H, T, S)) < 0.6}[kind]
    bias_shape = draw(st.sampled_from([None, (H, T, S), (1, 1, T, S), (B, H, T, S), (S,)]))
    bias = None if bias_shape is None else normal_array(seed + 3, bias_shape)
    return q, k, v, mask, bias


@given(case=attention_case(), seed=seeds)
def test_attention_gradients(case, seed):
    """Step h = 5e-5, not the checker's default 1e-6: where a softmax row nearly saturates
    a whole tensor's gradient can be ~1e-4, while the round-off of the difference quotient
    stays near eps·|L|/h ≈ 1e-10 at h = 1e-6. Attention is smooth, so the larger step costs
    only a truncation error of order h² ≈ 1e-9. Measured over 1500 random cases: largest
    relative error 9.5e-7 at h = 1e-6 (0.3 % of cases over 1e-7), 7.2e-9 at h = 5e-5."""
    q, k, v, mask, bias = case
    wrt = ("q", "k", "v") if bias is None else ("q", "k", "v", "bias")
    inputs = {"q": q, "k": k, "v": v, "mask": mask, "bias": bias}
    result = check_pair(attention_forward, attention_backward, inputs, wrt=wrt, seed=seed, h=5e-5, tol=TOL)
    assert result.ok, str(result)


@pytest.mark.parametrize("kind", MASK_KINDS)       # each mask for sure (the draws had missed 'padding')
@given(data=st.data())
def test_attention_matches_loop_reference(kind, data):
    case = data.draw(attention_case(kind))
    q, k, v, mask, bias = case
    out, cache = attention_forward(q, k, v, mask, bias)
    np.testing.assert_allclose(out, reference_attention(q, k, v, mask, bias), rtol=0, atol=1e-12)
    assert cache.probs.shape == q.shape[:3] + (k.shape[2],)


def test_lecture_worked_example():
    """The lecture's weights are softmax(q·k), not divided by √D: q is multiplied by √3
    (D = 3) here so that attention's 1/√3 cancels. Then each query picks its keys:
    [0,10,0] matches key 1 only, [0,0,10] keys 2 and 3 equally, [10,10,0] keys 0 and 1.
    The other weights are e^-100 ≈ 4e-44, far below the tolerance."""
    keys = np.array([[10, 0, 0], [0, 10, 0], [0, 0, 10], [0, 0, 10]], float)
    values = np.array([[1, 0, 1], [10, 0, 2], [100, 5, 0], [1000, 6, 0]], float)
    queries = np.array([[0, 10, 0], [0, 0, 10], [10, 10, 0]], float)
    out, cache = attention_forward(queries[None, None] * math.sqrt(3), keys[None, None], values[None, None])
    np.testing.assert_allclose(out[0, 0], [[10, 0, 2], [550, 5.5, 0], [5.5, 0, 1.5]], atol=1e-10)
    np.testing.assert_allclose(cache.probs[0, 0], [[0, 1, 0, 0], [0, 0, .5, .5], [.5, .5, 0, 0]],
                               atol=1e-12)


@given(seed=seeds)
def test_fully_masked_rows_output_zero_without_nan_or_warning(seed):
    q, k, v = (normal_array(seed + i, (2, 2, 3, 4)) for i in range(3))
    mask = np.ones((2, 1, 3, 3), bool)
    mask[0, :, 1] = False                                   # batch 0, query 1: no key at all
    with warnings.catch_warnings():
        warnings.simplefilter("error")                      # a RuntimeWarning fails the test
        out, cache = attention_forward(q, k, v, mask)
        dq, dk, dv = attention_backward(normal_array(seed + 3, out.shape), cache)
    assert np.all(out[0, :, 1] == 0) and np.all(dq[0, :, 1] == 0)
    assert all(np.isfinite(a).all() for a in (out, dq, dk, dv))


@given(seed=seeds, lengths=st.lists(st.integers(0, 5), min_size=2, max_size=2), H=st.integers(1, 4))
def test_padded_keys_receive_exactly_zero_gradient(seed, lengths, H):
    q = normal_array(seed, (2, H, 3, 4))
    k, v = normal_array(seed + 1, (2, H, 5, 4)), normal_array(seed + 2, (2, H, 5, 4))
    out, cache = attention_forward(q, k, v, key_padding_mask(np.array(lengths), 5))
    _, dk, dv = attention_backward(normal_array(seed + 3, out.shape), cache)
    for b, n in enumerate(lengths):
        assert np.all(dk[b, :, n:] == 0) and np.all(dv[b, :, n:] == 0)


def test_float32_stays_float32():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 4, 5, 8)).astype(np.float32) for _ in range(3))
    bias = rng.standard_normal((4, 5, 5)).astype(np.float32)
    out, cache = attention_forward(q, k, v, causal_mask(5), bias)
    grads = attention_backward(out, cache)
    assert out.dtype == cache.probs.dtype == np.float32
    assert all(g.dtype == np.float32 for g in grads)


def test_errors_name_the_argument():
    q, k = np.zeros((1, 4, 2, 3)), np.zeros((1, 4, 5, 3))
    with pytest.raises(ValueError, match=r"q: expected 4 dimensions \(B, H, T, D\)"):
        attention_forward(q[0], k, k)
    with pytest.raises(ValueError, match="k: expected size 3 \\(D, the head dim of q\\)"):
        attention_forward(q, k[..., :2], k[..., :2])
    with pytest.raises(ValueError, match="k: expected the H=4 heads of q \\(grouped kv heads are repeated first"):
        attention_forward(q, np.zeros((1, 2, 5, 3)), np.zeros((1, 2, 5, 3)))
    with pytest.raises(ValueError, match="v: expected shape \\(1, 4, 5, 3\\)"):
        attention_forward(q, k, k[:, :, :4])
    with pytest.raises(TypeError, match="mask: expected a boolean array"):
        attention_forward(q, k, k, mask=np.ones((2, 5)))
    with pytest.raises(ValueError, match="mask: expected a shape broadcastable to \\(1, 4, 2, 5\\)"):
        attention_forward(q, k, k, mask=np.ones((3, 5), bool))
    with pytest.raises(TypeError, match="bias: expected dtype float64"):
        attention_forward(q, k, k, bias=np.zeros((2, 5), np.float32))
    with pytest.raises(TypeError, match="k: expected dtype float64"):
        attention_forward(q, k.astype(np.float32), k)
