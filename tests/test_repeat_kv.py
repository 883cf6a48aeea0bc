"""repeat_kv: grouped kv heads repeated for their query heads, the gradient summed back.

Tolerances: the gradient check 1e-7 (a linear map: central differences are exact up
to round-off, ~1e-10; a wrong backward is off by O(1)); the copies and sums below
compare exactly, or to 1e-12 where two orders of the same sums meet.
"""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from minitransformer.functional.attention import attention_backward, attention_forward
from minitransformer.functional.masks import causal_mask
from minitransformer.functional.repeat_kv import repeat_kv_backward, repeat_kv_forward
from minitransformer.gradcheck import check_pair
from strategies import head_counts, normal_array, seeds


@given(seed=seeds, HG=head_counts(max_heads=6), S=st.integers(1, 4), D=st.integers(1, 3))
def test_repeat_kv_gradients(seed, HG, S, D):
    H, G = HG
    result = check_pair(repeat_kv_forward, repeat_kv_backward, {"x": normal_array(seed, (2, G, S, D))},
                        kwargs={"r": H // G}, seed=seed, tol=1e-7)
    assert result.ok, str(result)


@given(seed=seeds, HG=head_counts(max_heads=6))
def test_query_head_h_reads_kv_head_h_over_r(seed, HG):
    """The layout every checkpoint with grouped heads assumes (LLaMA's repeat_kv): head h of the
    result is kv head h // r, so the r query heads of a group are consecutive."""
    H, G = HG
    x = normal_array(seed, (2, G, 3, 2))
    out, _ = repeat_kv_forward(x, H // G)
    assert out.shape == (2, H, 3, 2)
    for h in range(H):
        np.testing.assert_array_equal(out[:, h], x[:, h // (H // G)])


@given(seed=seeds, HG=head_counts(max_heads=6))
def test_backward_sums_each_group(seed, HG):
    H, G = HG
    r = H // G
    _, cache = repeat_kv_forward(normal_array(seed, (2, G, 3, 2)), r)
    dout = normal_array(seed + 1, (2, H, 3, 2))
    dx = repeat_kv_backward(dout, cache)
    for g in range(G):
        np.testing.assert_allclose(dx[:, g], sum(dout[:, g * r + i] for i in range(r)), rtol=0, atol=1e-12)


@given(seed=seeds, HG=head_counts(max_heads=6), T=st.integers(1, 4))
def test_grouped_attention_is_one_kv_head_per_group_attended_by_each_query_head(seed, HG, T):
    """Grouped-query attention, repeat_kv then attention, equals a loop over the groups in which
    each query head attends its group's one kv head: the meaning of n_kv_head."""
    H, G = HG
    r = H // G
    q, dout = normal_array(seed, (2, H, T, 3)), normal_array(seed + 3, (2, H, T, 3))
    k, v = normal_array(seed + 1, (2, G, T, 3)), normal_array(seed + 2, (2, G, T, 3))
    k_rep, c_k = repeat_kv_forward(k, r)
    v_rep, c_v = repeat_kv_forward(v, r)
    out, cache = attention_forward(q, k_rep, v_rep, causal_mask(T))
    dq, dk_rep, dv_rep = attention_backward(dout, cache)
    dk, dv = repeat_kv_backward(dk_rep, c_k), repeat_kv_backward(dv_rep, c_v)
    dk_loop, dv_loop = np.zeros_like(k), np.zeros_like(v)
    for h in range(H):
        g = h // r
        one = (q[:, h:h + 1], k[:, g:g + 1], v[:, g:g + 1])
        out_h, cache_h = attention_forward(*one, causal_mask(T))
        np.testing.assert_allclose(out[:, h:h + 1], out_h, rtol=0, atol=1e-12)
        dq_h, dk_h, dv_h = attention_backward(dout[:, h:h + 1], cache_h)
        np.testing.assert_allclose(dq[:, h:h + 1], dq_h, rtol=0, atol=1e-12)
        dk_loop[:, g:g + 1] += dk_h
        dv_loop[:, g:g + 1] += dv_h
    np.testing.assert_allclose(dk, dk_loop, rtol=0, atol=1e-12)
    np.testing.assert_allclose(dv, dv_loop, rtol=0, atol=1e-12)


def test_float32_stays_float32_and_errors_name_the_argument():
    x = np.zeros((1, 2, 3, 4), np.float32)
    out, cache = repeat_kv_forward(x, 2)
    assert out.dtype == repeat_kv_backward(out, cache).dtype == np.float32
    with pytest.raises(ValueError, match=r"x: expected 4 dimensions \(B, G, S, D\)"):
        repeat_kv_forward(x[0], 2)
    with pytest.raises(ValueError, match="r: expected"):
        repeat_kv_forward(x, 0)
    with pytest.raises(ValueError, match=r"dout: expected shape \(1, 4, 3, 4\)"):
        repeat_kv_backward(np.zeros((1, 2, 3, 4), np.float32), cache)
