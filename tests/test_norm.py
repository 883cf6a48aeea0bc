"""LayerNorm and RMSNorm: gradient checks, the invariants that pin their meaning,
the fused backward against the step-by-step chain rule, dtype, errors."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from minitransformer.functional.norm import (layernorm_backward, layernorm_forward,
                                             rmsnorm_backward, rmsnorm_forward)
from minitransformer.gradcheck import check_module, check_pair
from minitransformer.layers.norm import LayerNorm, RMSNorm, make_norm
from strategies import normal_array, seeds, shapes

TOL = 1e-7  # float64 central differences land near 1e-9 for a correct backward, near 1 for a bug

# C >= 3: with C = 2 a layer-normalised row is (±1, ∓1) whatever x, so its gradient
# is ~eps/σ², and the checker would compare round-off with round-off.
features = st.integers(3, 6)
# A norm divides by the scale of x, so its gradient grows like 1/scale; with the
# checker's fixed step h = 1e-6, inputs at 1e-3 give truncation errors ~(h/scale)² = 1e-6.
# The regime where eps matters is reached instead with eps up to 1 (eps/σ² from 1e-5 to 100).
norm_scales = st.sampled_from([0.1, 1.0, 3.0])
epsilons = st.sampled_from([1e-5, 1e-2, 1.0])
# The checker draws its upstream gradient g from `seed`, so the data use seed + 1, ...:
# were x drawn from the same stream, g would equal x (up to shift and scale), a direction
# a norm ignores; dx would be ~eps/σ² and the check would compare round-off.


def _row_params(seed, lead):
    """A positive scale a and a shift b per row, shaped (..., 1) to broadcast over C."""
    rng = np.random.default_rng(seed)
    return rng.uniform(0.5, 4.0, lead + (1,)), rng.normal(0, 3, lead + (1,))


# ----------------------------------------------------------------- gradient checks
@given(lead=shapes(min_dims=1, max_dims=3, max_side=4), C=features, scale=norm_scales, eps=epsilons,
       seed=seeds)
def test_layernorm_pair_gradients(lead, C, scale, eps, seed):
    inputs = {"x": normal_array(seed + 1, lead + (C,), scale) + 0.5,
              "gamma": normal_array(seed + 2, (C,)), "beta": normal_array(seed + 3, (C,))}
    result = check_pair(layernorm_forward, layernorm_backward, inputs, kwargs={"eps": eps}, seed=seed, tol=TOL)
    assert result.ok, str(result)


@given(lead=shapes(min_dims=1, max_dims=3, max_side=4), C=features, scale=norm_scales, eps=epsilons,
       seed=seeds)
def test_rmsnorm_pair_gradients(lead, C, scale, eps, seed):
    inputs = {"x": normal_array(seed + 1, lead + (C,), scale), "gamma": normal_array(seed + 2, (C,))}
    result = check_pair(rmsnorm_forward, rmsnorm_backward, inputs, kwargs={"eps": eps}, seed=seed, tol=TOL)
    assert result.ok, str(result)


@given(C=features, kind=st.sampled_from(["layernorm", "rmsnorm"]), seed=seeds)
def test_norm_modules_gradients_and_accumulation(C, kind, seed):
    norm = make_norm(kind, C).astype(np.float64)
    for p in norm.params.values():          # move off gamma = 1, beta = 0 so errors can show
        p[...] = normal_array(seed + 1, p.shape)
    x = normal_array(seed + 2, (2, 3, C))
    result = check_module(norm, x, seed=seed, tol=TOL)
    assert result.ok, str(result)
    # Two backward passes accumulate twice the gradient.
    dy = normal_array(seed + 2, x.shape)
    norm.zero_grad()
    norm.forward(x); norm.backward(dy)
    once = {k: g.copy() for k, g in norm.grads.items()}
    norm.forward(x); norm.backward(dy)
    for k, g in norm.grads.items():
        np.testing.assert_allclose(g, 2 * once[k], rtol=1e-12)


# ------------------------------------------------------------------ what they mean
def test_layernorm_matches_definition_eps_inside_the_root():
    # eps = 0.5 is large on purpose: eps outside the root, or an unbiased variance,
    # would change y by far more than the tolerance.
    rng = np.random.default_rng(0)
    x, gamma, beta = rng.normal(size=(3, 4, 5)), rng.normal(size=5), rng.normal(size=5)
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).sum(axis=-1, keepdims=True) / 5
    expected = gamma * (x - mu) / np.sqrt(var + 0.5) + beta
    y, _ = layernorm_forward(x, gamma, beta, eps=0.5)
    np.testing.assert_allclose(y, expected, rtol=1e-12)


def test_rmsnorm_matches_definition():
    rng = np.random.default_rng(1)
    x, gamma = rng.normal(size=(3, 4, 5)), rng.normal(size=5)
    expected = x / np.sqrt((x ** 2).sum(axis=-1, keepdims=True) / 5 + 0.5) * gamma
    y, _ = rmsnorm_forward(x, gamma, eps=0.5)
    np.testing.assert_allclose(y, expected, rtol=1e-12)


@given(lead=shapes(min_dims=1, max_dims=2), C=st.integers(4, 8), seed=seeds)
def test_layernorm_ignores_shift_and_positive_scale_of_each_row(lead, C, seed):
    # With eps = 1e-12 and rows of variance ~ 1, eps moves y by ~1e-12: tolerance 1e-9.
    x = normal_array(seed, lead + (C,))
    a, b = _row_params(seed + 1, lead)
    gamma, beta = normal_array(seed + 2, (C,)), normal_array(seed + 3, (C,))
    y, _ = layernorm_forward(x, gamma, beta, eps=1e-12)
    y_moved, _ = layernorm_forward(a * x + b, gamma, beta, eps=1e-12)
    np.testing.assert_allclose(y_moved, y, atol=1e-9)


@given(lead=shapes(min_dims=1, max_dims=2), C=st.integers(4, 8), seed=seeds)
def test_layernorm_rows_have_mean_0_and_variance_1(lead, C, seed):
    # gamma = 1, beta = 0: y is xhat. Its biased variance is σ²/(σ² + eps) = 1 - 1e-12/σ².
    x = normal_array(seed, lead + (C,), 3.0) + 7.0
    y, _ = layernorm_forward(x, np.ones(C), np.zeros(C), eps=1e-12)
    np.testing.assert_allclose(y.mean(axis=-1), 0.0, atol=1e-12)
    np.testing.assert_allclose(y.var(axis=-1), 1.0, rtol=1e-8)


@given(lead=shapes(min_dims=1, max_dims=2), C=st.integers(2, 8), seed=seeds)
def test_rmsnorm_ignores_positive_scale_of_each_row_and_has_unit_rms(lead, C, seed):
    x = normal_array(seed, lead + (C,))
    a, _ = _row_params(seed + 1, lead)
    y, _ = rmsnorm_forward(x, np.ones(C), eps=1e-12)
    y_scaled, _ = rmsnorm_forward(a * x, np.ones(C), eps=1e-12)
    np.testing.assert_allclose(y_scaled, y, atol=1e-9)
    np.testing.assert_allclose((y ** 2).mean(axis=-1), 1.0, rtol=1e-8)


def test_fused_layernorm_backward_equals_the_step_by_step_chain_rule():
    # The lecture's unfused backward, one forward line reversed at a time (float64).
    rng = np.random.default_rng(2)
    x, gamma, beta, dy = rng.normal(size=(4, 6)), rng.normal(size=6), rng.normal(size=6), rng.normal(size=(4, 6))
    eps, C = 1e-5, 6
    mu = x.mean(-1, keepdims=True)
    xc = x - mu
    var = (xc ** 2).mean(-1, keepdims=True)
    rstd = (var + eps) ** -0.5
    xhat = xc * rstd
    dxhat = dy * gamma                                       # y = gamma * xhat + beta
    dxc = dxhat * rstd                                       # xhat = xc * rstd
    drstd = (dxhat * xc).sum(-1, keepdims=True)
    dvar = drstd * -0.5 * (var + eps) ** -1.5                # rstd = (var + eps)^(-1/2)
    dxc += dvar * 2 * xc / C                                 # var = mean(xc²)
    dx_ref = dxc - dxc.mean(-1, keepdims=True)               # xc = x - mean(x)
    _, cache = layernorm_forward(x, gamma, beta, eps)
    dx, dgamma, dbeta = layernorm_backward(dy, cache)
    np.testing.assert_allclose(dx, dx_ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dgamma, (dy * xhat).sum(0), rtol=1e-12)
    np.testing.assert_allclose(dbeta, dy.sum(0), rtol=1e-12)


# -------------------------------------------------------------------- dtype, errors
def test_float32_in_float32_out():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 3, 8)).astype(np.float32)
    dy = rng.normal(size=x.shape).astype(np.float32)
    g, b = np.ones(8, np.float32), np.zeros(8, np.float32)
    y, cache = layernorm_forward(x, g, b)
    grads = layernorm_backward(dy, cache)
    assert {a.dtype for a in (y, cache.xhat, cache.rstd, *grads)} == {np.dtype(np.float32)}
    y, cache = rmsnorm_forward(x, g)
    grads = rmsnorm_backward(dy, cache)
    assert {a.dtype for a in (y, cache.xhat, cache.rstd, *grads)} == {np.dtype(np.float32)}
    assert LayerNorm(8).forward(x).dtype == np.float32 and RMSNorm(8).forward(x).dtype == np.float32


def test_make_norm_builds_the_named_norm_with_its_default_eps():
    ln, rms = make_norm("layernorm", 4), make_norm("rmsnorm", 4)
    assert isinstance(ln, LayerNorm) and ln.eps == 1e-5 and set(ln.params) == {"gamma", "beta"}
    assert isinstance(rms, RMSNorm) and rms.eps == 1e-6 and set(rms.params) == {"gamma"}
    assert make_norm("rmsnorm", 4, eps=1e-5).eps == 1e-5
    np.testing.assert_array_equal(ln.gamma, 1.0)
    np.testing.assert_array_equal(ln.beta, 0.0)
    with pytest.raises(ValueError, match=r"name: expected one of \('layernorm', 'rmsnorm'\)"):
        make_norm("batchnorm", 4)


def test_errors_name_the_argument():
    x, g = np.zeros((2, 4)), np.ones(4)
    with pytest.raises(ValueError, match=r"gamma: expected size 4"):
        layernorm_forward(x, np.ones(3), np.zeros(4))
    with pytest.raises(ValueError, match=r"beta: expected 1 dimensions"):
        layernorm_forward(x, g, np.zeros((1, 4)))
    with pytest.raises(ValueError, match=r"x: expected at least 1 dimensions"):
        rmsnorm_forward(np.float64(1.0), g)
    with pytest.raises(TypeError, match=r"x: expected a floating point array"):
        layernorm_forward(np.zeros((2, 4), np.int64), g, g)
    with pytest.raises(TypeError, match=r"gamma: expected dtype float32"):
        rmsnorm_forward(x.astype(np.float32), g)
    with pytest.raises(ValueError, match=r"eps: expected a number in \(0"):
        layernorm_forward(x, g, g, eps=0.0)
    with pytest.raises(ValueError, match=r"d_model: expected an integer in \[1"):
        LayerNorm(0)


def test_backward_without_forward_is_a_clear_error():
    with pytest.raises(RuntimeError, match="without a pending"):
        RMSNorm(3).backward(np.zeros((1, 3), np.float32))


# ------------------------------------------------------------------ scale safety
# σ² of a float32 row overflows at |x| ≳ 1e19 (Σ (x - μ)² > 3.4e38): the norms rescale such a
# row by a power of 2 (norm(x; eps) = norm(x/s; eps/s²)). Reference: the equations in long double
# (80-bit on x86: nothing overflows below 1e2466) written out here, no code under test.
def _reference(x, gamma, beta, eps, kind):
    x = x.astype(np.longdouble)
    if kind == "layernorm":
        xc = x - x.mean(axis=-1, keepdims=True)
        return gamma * xc / np.sqrt((xc ** 2).mean(axis=-1, keepdims=True) + eps) + beta
    return gamma * x / np.sqrt((x ** 2).mean(axis=-1, keepdims=True) + eps)


def _norm_pairs():
    from minitransformer.fast.kernels import twin_of
    plain = [(layernorm_forward, layernorm_backward, "layernorm"), (rmsnorm_forward, rmsnorm_backward, "rmsnorm")]
    return plain + [(twin_of(f), twin_of(b), k) for f, b, k in plain]


def _run_norm(fwd, bwd, kind, x, gamma, beta, eps, dy):
    args = (x, gamma, beta) if kind == "layernorm" else (x, gamma)
    y, cache = fwd(*args, eps=eps)
    return y, cache, bwd(dy, cache)


@given(C=st.integers(1, 12), exponents=st.lists(st.integers(-30, 37), min_size=1, max_size=5), seed=seeds)
def test_float32_norms_match_float64_at_any_scale_with_finite_gradients(C, exponents, seed):
    rng = np.random.default_rng(seed)
    rows = np.clip(rng.standard_normal((len(exponents), C)), -3, 3) * 10.0 ** np.array(exponents)[:, None]
    x = rows.astype(np.float32)                                 # mixed tiny/huge rows in one tensor
    gamma, beta = rng.standard_normal(C).astype(np.float32), rng.standard_normal(C).astype(np.float32)
    dy = rng.standard_normal(x.shape).astype(np.float32)
    for fwd, bwd, kind in _norm_pairs():
        y, cache, grads = _run_norm(fwd, bwd, kind, x, gamma, beta, 1e-5, dy)
        ref = _reference(x, gamma.astype(np.float64), beta.astype(np.float64), 1e-5, kind)
        np.testing.assert_allclose(y, ref, rtol=0, atol=2e-5 * C, err_msg=f"{fwd.__module__} {kind}")
        assert all(np.isfinite(g).all() for g in grads), (fwd.__module__, kind)
        assert np.isfinite(cache.rstd).all() and (cache.rstd >= 0).all()
        # dx against the float64 backward, row by row relative to the size of its terms,
        # rstd·|dy ⊙ gamma| (dx is their difference, which cancels at C = 1 or 2)
        _, ref_cache, ref_grads = _run_norm(fwd, bwd, kind, x.astype(np.float64), gamma.astype(np.float64),
                                            beta.astype(np.float64), 1e-5, dy.astype(np.float64))
        scale = ref_cache.rstd * np.abs(dy * gamma).max(axis=-1, keepdims=True)
        tiny_row = scale < 1e-30        # float32 gradients of a 1e30+ row are subnormal or 0
        err = np.abs(grads[0] - ref_grads[0])
        assert np.all((err <= 1e-3 * scale + 1e-37) | tiny_row), (fwd.__module__, kind)


@pytest.mark.parametrize("value", [1.7, 1e5, 1e19, 1e30, 1e38, 3.4e38, -3e38, 2.0 ** 127])
@pytest.mark.parametrize("C", [1, 2, 8, 64])
def test_float32_constant_and_huge_rows_stay_finite(value, C):
    x = np.full((2, C), value, np.float32)
    x[1, 0] = -x[1, 0]                                          # second row: not constant (when C > 1)
    gamma, beta = np.full(C, 2.0, np.float32), np.full(C, 0.5, np.float32)
    dy = np.random.default_rng(0).standard_normal(x.shape).astype(np.float32)
    for fwd, bwd, kind in _norm_pairs():
        y, cache, grads = _run_norm(fwd, bwd, kind, x, gamma, beta, 1e-5, dy)
        assert np.isfinite(y).all() and all(np.isfinite(g).all() for g in grads), (fwd.__module__, kind)
        ref = _reference(x, 2.0, 0.5, 1e-5, kind)
        # a constant row of C = 2^k equal values has an exact mean: LayerNorm gives exactly beta there
        np.testing.assert_allclose(y, ref, rtol=0, atol=1e-5, err_msg=f"{fwd.__module__} {kind}")


@pytest.mark.parametrize("dtype, value", [(np.float16, 300.0), (np.float16, 6e4), (np.float64, 1e200),
                                          (np.float64, 1e307)])
@pytest.mark.skipif(np.finfo(np.longdouble).maxexp < 2000, reason="needs an 80-bit long double reference")
def test_other_dtypes_rescale_their_huge_rows(dtype, value):
    rng = np.random.default_rng(1)
    x = (np.clip(rng.standard_normal((3, 16)), -1, 1) * value).astype(dtype)
    gamma, beta = np.ones(16, dtype), np.zeros(16, dtype)
    dy = rng.standard_normal(x.shape).astype(dtype)
    tol = 1e-2 if dtype == np.float16 else 1e-12
    for fwd, bwd, kind in _norm_pairs():
        y, cache, grads = _run_norm(fwd, bwd, kind, x, gamma, beta, 1e-5, dy)
        assert y.dtype == dtype and all(np.isfinite(g).all() for g in grads)
        ref = _reference(x, 1.0, 0.0, 1e-5, kind).astype(np.float64)
        np.testing.assert_allclose(y.astype(np.float64), ref, rtol=0, atol=tol)


def test_rescaling_keeps_eps_exact():
    # eps matters here (σ² ~ eps): a row and the same row times 2^70 give the norm with eps and
    # with eps·2^140, i.e. norm(x·2^70; eps·2^140) = norm(x; eps) exactly, as the docstring says.
    x = np.array([[1e-3, -2e-3, 3e-3, 0.0]], np.float64)
    gamma, beta = np.ones(4), np.zeros(4)
    s = 2.0 ** 500                                              # forces the rescaling in float64
    for eps in (1e-5, 1e-6, 1.0):
        for fwd, bwd, kind in _norm_pairs():
            args = (gamma, beta) if kind == "layernorm" else (gamma,)
            small = fwd(x, *args, eps=eps)[0]
            huge = fwd(x * s, *args, eps=eps * s * s)[0]
            np.testing.assert_allclose(huge, small, rtol=1e-12, atol=0)
            np.testing.assert_allclose(small, _reference(x, 1.0, 0.0, eps, kind), rtol=1e-12)
