"""Each fast twin (fast/kernels/) computes what its plain form computes.

The layers call ``twin_of(plain)``: the twin on the training path. These tests tie every
twin to its plain form on Hypothesis-drawn shapes, forward outputs and cache AND
backward gradients, and check that the caches are interchangeable (a fast forward
feeds a plain backward and the other way round).

Tolerances, relative to the largest entry of the plain result (so that entries that
cancel to near 0 are judged against the size of the quantity, not their own):
- float64: 1e-12. The two forms differ only in summation order (einsum, BLAS or
  pairwise sums) and in-place bracketing: a few ulps, 1e-15 in practice.
- float32: 1e-5 (5e-6 for softmax and GELU). The same re-orderings, at float32's
  ulp 6e-8, over sums of up to a few hundred terms; the tanh GELU twin also takes
  σ(2u) = 1 / (1 + exp(-2u)) in float32 (one exp, no sign branch; fast/kernels/gelu.py).
"""
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from minitransformer.fast.kernels import pairs, twin_of
from minitransformer.functional.activations import gelu_backward, gelu_forward
from minitransformer.functional.attention import attention_backward, attention_forward
from minitransformer.functional.cross_entropy import cross_entropy_backward, cross_entropy_forward
from minitransformer.functional.norm import (layernorm_backward, layernorm_forward, rmsnorm_backward,
                                             rmsnorm_forward)
from minitransformer.functional.softmax import (log_softmax_backward, log_softmax_forward,
                                                softmax_backward, softmax_forward)

from strategies import integer_ids, normal_array, seeds, shapes

TOL = {np.float64: 1e-12, np.float32: 1e-5}
dtypes = st.sampled_from([np.float64, np.float32])


def assert_twin(fast_value, plain_value, tol):
    """|fast - plain| <= tol · max|plain| elementwise (both arrays, same dtype and shape)."""
    fast_value, plain_value = np.asarray(fast_value), np.asarray(plain_value)
    assert fast_value.dtype == plain_value.dtype and fast_value.shape == plain_value.shape
    scale = max(float(np.max(np.abs(plain_value), initial=0.0)), np.finfo(plain_value.dtype).tiny)
    np.testing.assert_allclose(fast_value, plain_value, rtol=0, atol=tol * scale)


def assert_pair(plain_fwd, plain_bwd, args, dy, tol, **kwargs):
    """Forward outputs and caches, then backward gradients, fast against plain."""
    y_plain, cache_plain = plain_fwd(*args, **kwargs)
    y_fast, cache_fast = twin_of(plain_fwd)(*args, **kwargs)
    assert type(cache_fast) is type(cache_plain)
    assert_twin(y_fast, y_plain, tol)
    for field_fast, field_plain in zip(cache_fast, cache_plain):
        if hasattr(field_plain, "dtype") and field_plain.dtype.kind == "f":
            assert_twin(field_fast, field_plain, tol)
    grads_plain = plain_bwd(dy, cache_plain)
    grads_fast = twin_of(plain_bwd)(dy, cache_fast)
    if not isinstance(grads_plain, tuple):
        grads_plain, grads_fast = (grads_plain,), (grads_fast,)
    for g_fast, g_plain in zip(grads_fast, grads_plain):
        assert_twin(g_fast, g_plain, tol)
    return cache_plain, cache_fast


PLAINS_WITH_TWINS = [softmax_forward, softmax_backward, log_softmax_forward, layernorm_forward, layernorm_backward,
                     rmsnorm_forward, rmsnorm_backward, gelu_forward, attention_forward, attention_backward,
                     cross_entropy_forward, cross_entropy_backward]


def test_every_twin_is_a_different_function_with_the_plain_name():
    for plain, twin in pairs():
        assert twin is not plain and twin.__name__ == plain.__name__
        assert twin.__module__.startswith("minitransformer.fast.kernels.")
    assert all(twin_of(f) is not f for f in PLAINS_WITH_TWINS)
    assert twin_of(log_softmax_backward) is log_softmax_backward   # no twin: the plain form itself


def test_the_core_runs_plain_unless_the_wing_is_switched_on():
    from minitransformer import fast
    from minitransformer.functional.twins import twin
    assert not fast.is_enabled() and all(twin(f) is f for f in PLAINS_WITH_TWINS)   # the default
    with fast.enabled():
        assert all(twin(f) is twin_of(f) for f in PLAINS_WITH_TWINS)
    assert all(twin(f) is f for f in PLAINS_WITH_TWINS)            # off again after the block


@given(shape=shapes(max_dims=4, max_side=7), dtype=dtypes, seed=seeds, scale=st.sampled_from([1.0, 30.0]))
def test_softmax_twins(shape, dtype, seed, scale):
    x = normal_array(seed, shape, scale, dtype)
    dy = normal_array(seed + 1, shape, 1.0, dtype)
    tol = {np.float64: 1e-12, np.float32: 5e-6}[dtype]
    for axis in range(-len(shape), 0):
        assert_pair(softmax_forward, softmax_backward, (x,), dy, tol, axis=axis)
        z, _ = log_softmax_forward(x, axis=axis)
        z_fast, _ = twin_of(log_softmax_forward)(x, axis=axis)
        assert_twin(z_fast, z, tol)


@given(rows=st.integers(1, 6), n=st.integers(1, 9), dtype=dtypes, seed=seeds)
def test_softmax_twins_on_neg_inf_rows(rows, n, dtype, seed):
    """Rows with some -inf entries, and rows entirely -inf (y = 0, dx = 0, z = -inf, no NaN)."""
    x = normal_array(seed, (rows, n), 3.0, dtype)
    hidden = np.random.default_rng(seed + 2).random((rows, n)) < 0.4
    hidden[0] = True                                               # one row with nothing to attend
    x[hidden] = -np.inf
    dy = normal_array(seed + 1, (rows, n), 1.0, dtype)
    cache_plain, cache_fast = assert_pair(softmax_forward, softmax_backward, (x,), dy, TOL[dtype])  # dx cancels: dy - Σ dy·y
    assert np.all(cache_plain.y[0] == 0) and np.all(cache_fast.y[0] == 0)
    assert np.all(softmax_backward(dy, cache_plain)[0] == 0)
    z, z_fast = log_softmax_forward(x)[0], twin_of(log_softmax_forward)(x)[0]
    np.testing.assert_array_equal(np.isneginf(z), np.isneginf(z_fast))
    assert_twin(np.where(np.isneginf(z), 0, z_fast), np.where(np.isneginf(z), 0, z), TOL[dtype])


@given(shape=shapes(min_dims=1, max_dims=3, max_side=9), dtype=dtypes, seed=seeds)
def test_norm_twins(shape, dtype, seed):
    C = shape[-1]
    x = normal_array(seed, shape, 3.0, dtype) + dtype(1.5)
    gamma, beta = normal_array(seed + 1, (C,), 1.0, dtype), normal_array(seed + 2, (C,), 1.0, dtype)
    dy = normal_array(seed + 3, shape, 1.0, dtype)
    assert_pair(layernorm_forward, layernorm_backward, (x, gamma, beta), dy, TOL[dtype], eps=1e-5)
    assert_pair(rmsnorm_forward, rmsnorm_backward, (x, gamma), dy, TOL[dtype], eps=1e-6)


@given(shape=shapes(max_dims=3, max_side=9), dtype=dtypes, seed=seeds,
       approximate=st.sampled_from(["none", "tanh"]), scale=st.sampled_from([1.0, 5.0, 30.0]))
def test_gelu_twins(shape, dtype, seed, approximate, scale):
    x = normal_array(seed, shape, scale, dtype)
    dy = normal_array(seed + 1, shape, 1.0, dtype)
    tol = {np.float64: 1e-12, np.float32: 5e-6}[dtype]
    assert_pair(gelu_forward, gelu_backward, (x,), dy, tol, approximate=approximate)


def test_gelu_tanh_twin_float32_far_tails_quietly():
    """exp(-2u) overflows to inf far left: σ = 1 / inf = 0, y = 0 and dy/dx = 0 there, no warning, no NaN."""
    x = np.array([-1e4, -300.0, -60.0, -10.0, -1.0, 0.0, 1.0, 10.0, 60.0, 1e4], dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y, cache = twin_of(gelu_forward)(x, approximate="tanh")
    y_plain, cache_plain = gelu_forward(x, approximate="tanh")
    assert y.dtype == cache.dydx.dtype == np.float32
    np.testing.assert_array_equal(y[:3], 0.0)
    np.testing.assert_array_equal(cache.dydx[:3], 0.0)
    np.testing.assert_array_equal(y[-3:], x[-3:])                 # σ = 1: y = x
    assert_twin(y, y_plain, 5e-6)
    assert_twin(cache.dydx, cache_plain.dydx, 5e-6)


@given(B=st.integers(1, 2), H=st.integers(1, 4), T=st.integers(1, 6), S=st.integers(1, 7),
       D=st.integers(1, 5), dtype=dtypes, seed=seeds, with_bias=st.booleans())
def test_attention_twins_with_masked_rows(B, H, T, S, D, dtype, seed, with_bias):
    """A random mask with the first query of every head fully masked: its output and gradients are 0."""
    q = normal_array(seed, (B, H, T, D), 1.0, dtype)
    k = normal_array(seed + 1, (B, H, S, D), 1.0, dtype)
    v = normal_array(seed + 2, (B, H, S, D), 1.0, dtype)
    mask = np.random.default_rng(seed + 3).random((B, 1, T, S)) < 0.7
    mask[:, :, 0, :] = False                                       # query 0 sees no key
    bias = normal_array(seed + 4, (H, T, S), 1.0, dtype) if with_bias else None
    dout = normal_array(seed + 5, (B, H, T, D), 1.0, dtype)
    out_plain = attention_forward(q, k, v, mask, bias)[0]
    assert np.all(out_plain[:, :, 0] == 0)
    cache_plain, _ = assert_pair(attention_forward, attention_backward, (q, k, v, mask, bias), dout, TOL[dtype])
    dq = attention_backward(dout, cache_plain)[0]
    assert np.all(dq[:, :, 0] == 0) and np.all(np.isfinite(dq))


@given(shape=shapes(min_dims=2, max_dims=3, max_side=6), dtype=dtypes, seed=seeds,
       smoothing=st.sampled_from([0.0, 0.1, 1.0]))
def test_cross_entropy_twins(shape, dtype, seed, smoothing):
    V = shape[-1]
    logits = normal_array(seed, shape, 3.0, dtype)
    targets = integer_ids(seed + 1, shape[:-1], V)
    targets[np.random.default_rng(seed + 2).random(targets.shape) < 0.3] = -100
    dloss = 0.7
    assert_pair(cross_entropy_forward, cross_entropy_backward, (logits, targets), dloss, TOL[dtype],
                smoothing=smoothing)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_caches_are_interchangeable(dtype):
    """A fast forward feeds the plain backward, and a plain forward the fast backward."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 5, 8)).astype(dtype)
    gamma, beta = np.ones(8, dtype), np.zeros(8, dtype)
    dy = rng.standard_normal(x.shape).astype(dtype)
    pairs = [(layernorm_forward, layernorm_backward, (x, gamma, beta)),
             (rmsnorm_forward, rmsnorm_backward, (x, gamma)),
             (softmax_forward, softmax_backward, (x,)),
             (gelu_forward, gelu_backward, (x,))]
    for forward, backward, args in pairs:
        expected = backward(dy, forward(*args)[1])
        mixed = [twin_of(backward)(dy, forward(*args)[1]), backward(dy, twin_of(forward)(*args)[1])]
        for got in mixed:
            got = got if isinstance(got, tuple) else (got,)
            for g, e in zip(got, expected if isinstance(expected, tuple) else (expected,)):
                assert_twin(g, e, TOL[dtype])


@given(B=st.integers(1, 2), H=st.integers(1, 4), T=st.integers(1, 5), D=st.integers(1, 4), dtype=dtypes,
       seed=seeds)
def test_merge_heads_twin_reshapes_the_attention_twins_buffers_and_copies_anything_else(B, H, T, D,
                                                                                      dtype, seed):
    """The attention twin's gradients sit side by side in one buffer: the merge twin returns
    them without a copy; parts that do not tile one buffer in order go through the plain merge."""
    from minitransformer.functional.heads import merge_heads
    q = normal_array(seed, (B, H, T, D), 1.0, dtype)
    k, v = normal_array(seed + 1, (B, H, T, D), 1.0, dtype), normal_array(seed + 2, (B, H, T, D), 1.0, dtype)
    dout = normal_array(seed + 3, (B, H, T, D), 1.0, dtype)
    out, cache = twin_of(attention_forward)(q, k, v, np.tril(np.ones((T, T), bool)))
    dq, dk, dv = twin_of(attention_backward)(dout, cache)
    for parts in [(out,), (dq, dk, dv), (dq,), (dk, dv), (dv, dk, dq), (q, k, v), (q.copy(),)]:
        merged_fast, merged_plain = twin_of(merge_heads)(*parts), merge_heads(*parts)
        assert merged_fast.shape == merged_plain.shape and merged_fast.dtype == merged_plain.dtype
        np.testing.assert_array_equal(merged_fast, merged_plain)
    assert np.shares_memory(twin_of(merge_heads)(dq, dk, dv), dq)   # the twins' no-copy path
    assert np.shares_memory(twin_of(merge_heads)(out), out)
    assert not np.shares_memory(twin_of(merge_heads)(q, k, v), q)     # separate arrays: a fresh merge


@given(C=st.integers(1, 9), exponents=st.lists(st.integers(-30, 37), min_size=1, max_size=4),
       constant=st.booleans(), seed=seeds)
def test_norm_twins_on_huge_tiny_and_constant_rows(C, exponents, constant, seed):
    # The twins redo the rows whose Σ overflowed, or (LayerNorm) whose σ < |μ|/64, with the plain form.
    rng = np.random.default_rng(seed)
    rows = np.clip(rng.standard_normal((len(exponents), C)), -3, 3)
    if constant:
        rows[:, :] = rows[:, :1]
    x = (rows * 10.0 ** np.array(exponents)[:, None]).astype(np.float32)
    gamma, beta = rng.standard_normal(C).astype(np.float32), rng.standard_normal(C).astype(np.float32)
    dy = rng.standard_normal(x.shape).astype(np.float32)
    assert_pair(layernorm_forward, layernorm_backward, (x, gamma, beta), dy, TOL[np.float32], eps=1e-5)
    assert_pair(rmsnorm_forward, rmsnorm_backward, (x, gamma), dy, TOL[np.float32], eps=1e-6)
