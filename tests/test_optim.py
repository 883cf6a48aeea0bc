"""Optimizers, clipping and schedules against hand-written reference formulas.

The references below loop over scalars with Python floats: they restate the
update rules of the papers and share no code with minitransformer.optim.
Tolerance for float64 comparisons with them: rtol 1e-12, because the two sides
evaluate the same formula with a different association of the operations
(e.g. √v / √(1-β2^t) against √(v / (1-β2^t))), a few ulps per step.
"""
import json
import math
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from minitransformer.layers import Linear
from minitransformer.optim import (SGD, Adam, AdamW, clip_grad_norm, constant_schedule,
                                   default_no_decay, noam_schedule, warmup_cosine_schedule)
from strategies import normal_array, seeds, shapes

RTOL = 1e-12


def make_params(seed, shape_list, dtype=np.float64):
    """[(name, param, grad)] with random params and zero grads, like model.parameters()."""
    return [(f"p{i}", normal_array(seed + i, s, dtype=dtype), np.zeros(s, dtype))
            for i, s in enumerate(shape_list)]


def run(opt, params, grad_seqs, lr=None):
    """Set each step's gradients in place (as backward does) and step."""
    for step_grads in grad_seqs:
        for (_, _, g), new in zip(params, step_grads):
            g[...] = new
        opt.step(lr=lr)


def random_grads(seed, params, n_steps):
    return [[normal_array(seed + 100 * t + i, p.shape) for i, (_, p, _) in enumerate(params)]
            for t in range(n_steps)]


# ------------------------------------------------------------- scalar references
def reference_sgd(p, grads, lr, momentum, weight_decay):
    p, b = float(p), 0.0
    for g in grads:
        d = g + weight_decay * p
        b = momentum * b + d
        p = p - lr * b
    return p


def reference_adam(p, grads, lr, beta1, beta2, eps, weight_decay=0.0):
    p, m, v = float(p), 0.0, 0.0
    for t, g in enumerate(grads, start=1):
        p = p - lr * weight_decay * p                      # AdamW: decoupled, before the Adam step
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        m_hat, v_hat = m / (1 - beta1 ** t), v / (1 - beta2 ** t)
        p = p - lr * m_hat / (math.sqrt(v_hat) + eps)
    return p


def reference_result(params0, grad_seqs, fn):
    """Apply the scalar reference to every coordinate of every parameter."""
    out = []
    for i, p0 in enumerate(params0):
        flat = [fn(p0.flat[j], [float(gs[i].flat[j]) for gs in grad_seqs]) for j in range(p0.size)]
        out.append(np.array(flat).reshape(p0.shape))
    return out


hyper_lr = st.sampled_from([1e-3, 0.1, 0.5])


@given(shape_list=st.lists(shapes(max_dims=2, max_side=4), min_size=1, max_size=3), seed=seeds,
       lr=hyper_lr, momentum=st.sampled_from([0.0, 0.5, 0.9]), wd=st.sampled_from([0.0, 0.1]))
def test_sgd_matches_reference(shape_list, seed, lr, momentum, wd):
    params = make_params(seed, shape_list)
    params0 = [p.copy() for _, p, _ in params]
    grads = random_grads(seed, params, 4)
    run(SGD(params, lr, momentum=momentum, weight_decay=wd), params, grads)
    expected = reference_result(params0, grads, lambda p, g: reference_sgd(p, g, lr, momentum, wd))
    for (_, p, _), e in zip(params, expected):
        np.testing.assert_allclose(p, e, rtol=RTOL, atol=1e-14)


@given(shape_list=st.lists(shapes(max_dims=2, max_side=4), min_size=1, max_size=3), seed=seeds,
       lr=hyper_lr, betas=st.sampled_from([(0.9, 0.999), (0.8, 0.95), (0.0, 0.5)]),
       eps=st.sampled_from([1e-8, 1e-3]), decoupled=st.booleans())
def test_adam_and_adamw_match_reference(shape_list, seed, lr, betas, eps, decoupled):
    params = make_params(seed, shape_list)
    params0 = [p.copy() for _, p, _ in params]
    grads = random_grads(seed, params, 4)
    if decoupled:   # every parameter decayed here; the default rule is tested below
        opt = AdamW(params, lr, betas=betas, eps=eps, weight_decay=0.1, no_decay=lambda n, p: False)
    else:
        opt = Adam(params, lr, betas=betas, eps=eps)
    run(opt, params, grads)
    wd = 0.1 if decoupled else 0.0
    expected = reference_result(params0, grads, lambda p, g: reference_adam(p, g, lr, *betas, eps, wd))
    for (_, p, _), e in zip(params, expected):
        np.testing.assert_allclose(p, e, rtol=RTOL, atol=1e-14)


def test_sgd_momentum_with_constant_gradient_follows_the_geometric_series():
    # With g constant, b_k = g (1 - μ^k) / (1 - μ): p moves by lr · Σ_k b_k.
    p, g = np.array([1.0, -2.0]), np.array([0.5, 0.25])
    opt = SGD([("w", p, g.copy())], lr=0.1, momentum=0.9)
    for _ in range(5):
        opt.step()
    travelled = 0.1 * sum((1 - 0.9 ** k) / (1 - 0.9) for k in range(1, 6))
    np.testing.assert_allclose(p, np.array([1.0, -2.0]) - travelled * g, rtol=RTOL)


def test_adamw_default_skips_biases_norms_and_embeddings():
    # Zero gradients: Adam's own step is 0 / (0 + eps) = 0, so only the decay moves p.
    names = {"blocks.0.attn.W_qkv": (3, 4), "blocks.0.attn.b_qkv": (4,), "blocks.0.ln_1.gamma": (3,),
             "tok_emb.W": (5, 3), "embed.pos.W": (6, 3), "head.W": (5, 3)}
    params = [(n, normal_array(i, s), np.zeros(s)) for i, (n, s) in enumerate(names.items())]
    before = {n: p.copy() for n, p, _ in params}
    opt = AdamW(params, lr=0.1, weight_decay=0.5)
    for _ in range(3):
        opt.step()
    decayed = {n for n, p, _ in params if not np.array_equal(p, before[n])}
    assert decayed == {"blocks.0.attn.W_qkv", "head.W"}
    for n, p, _ in params:
        if n in decayed:   # three times p = p - lr·λ·p
            np.testing.assert_allclose(p, before[n] * (1 - 0.1 * 0.5) ** 3, rtol=RTOL)


def test_default_no_decay_rule():
    W, b = np.zeros((2, 2)), np.zeros(2)
    assert default_no_decay("blocks.0.ln_1.beta", b) and default_no_decay("x.b", b)
    assert default_no_decay("tok_emb.W", W) and default_no_decay("pos.W", W)
    assert not default_no_decay("blocks.0.ffn.fc_in.W", W)


@pytest.mark.parametrize("make", [
    lambda ps: SGD(ps, lr=0.1, momentum=0.9),
    lambda ps: Adam(ps, lr=0.1),
    lambda ps: AdamW(ps, lr=0.1, weight_decay=0.0),
])
def test_a_quadratic_converges(make):
    # f(p) = ½ Σ a (p - c)², g = a (p - c); the lr decays to 0 so Adam settles instead of hovering.
    a, c = np.array([1.0, 3.0, 0.5]), np.array([2.0, -1.0, 0.5])
    p, g = np.zeros(3), np.zeros(3)
    opt, schedule = make([("p", p, g)]), warmup_cosine_schedule(0.1, 10, 400)
    for step in range(1, 401):
        g[...] = a * (p - c)
        opt.step(lr=schedule(step))
    np.testing.assert_allclose(p, c, atol=1e-3)


def test_optimizer_trains_a_real_module_in_place():
    # The Module contract: the optimizer updates the very arrays the layer uses.
    rng = np.random.default_rng(0)
    layer = Linear(4, 2, rng=rng).astype(np.float64)
    x, W_true = rng.standard_normal((64, 4)), rng.standard_normal((4, 2))
    y_true = x @ W_true
    opt = AdamW(layer.parameters(), lr=0.05)

    def loss_and_backward():
        layer.zero_grad()
        y = layer.forward(x)
        layer.backward((y - y_true) / len(x))   # gradient of ½ mean-over-rows squared error
        return 0.5 * float(((y - y_true) ** 2).sum()) / len(x)
    first = loss_and_backward()
    for _ in range(200):
        opt.step()
        last = loss_and_backward()
    assert last < 1e-2 * first


@pytest.mark.parametrize("make", [
    lambda ps: SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01),
    lambda ps: Adam(ps, lr=0.01),
    lambda ps: AdamW(ps, lr=0.01),
])
def test_float32_params_keep_float32_state_and_follow_float64(make):
    params32 = make_params(0, [(4, 3), (3,)], dtype=np.float32)
    params64 = [(n, p.astype(np.float64), g.astype(np.float64)) for n, p, g in params32]
    grads = random_grads(7, params64, 5)
    opt32, opt64 = make(params32), make(params64)
    run(opt32, params32, grads)
    run(opt64, params64, grads)
    assert all(p.dtype == np.float32 and g.dtype == np.float32 for _, p, g in params32)
    assert all(v.dtype == np.float32 for v in opt32.state_dict().values() if hasattr(v, "dtype"))
    for (_, p32, _), (_, p64, _) in zip(params32, params64):
        np.testing.assert_allclose(p32, p64, rtol=1e-5, atol=1e-6)   # float32 rounding over 5 steps


@pytest.mark.parametrize("make", [
    lambda ps: SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01),
    lambda ps: AdamW(ps, lr=0.01),
])
def test_step_allocates_no_arrays(make):
    # NumPy reports its array buffers to tracemalloc: one step must not allocate
    # anything near the size of a parameter (400 kB here), only Python objects and, on
    # NumPy 1.x, the reduction's fixed 32 kB ufunc buffer (8192 float32) of the finite check.
    params = make_params(0, [(1000, 100), (100,)], dtype=np.float32)
    opt = make(params)
    opt.step()
    tracemalloc.start()
    opt.step()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < params[0][1].nbytes // 10                     # 40 kB: a tenth of the weight


@pytest.mark.parametrize("make", [
    lambda ps: SGD(ps, lr=0.1, momentum=0.9),
    lambda ps: Adam(ps, lr=0.01, betas=(0.8, 0.99)),
    lambda ps: AdamW(ps, lr=0.01, weight_decay=0.1),
])
def test_state_dict_round_trip_resumes_bit_for_bit(make, tmp_path):
    params = make_params(3, [(4, 3), (3,)], dtype=np.float32)
    grads = random_grads(5, params, 6)
    opt = make(params)
    run(opt, params, grads[:3], lr=0.02)
    saved_params = [p.copy() for _, p, _ in params]
    state = opt.state_dict()
    run(opt, params, grads[3:])                      # the uninterrupted run

    # As a checkpoint stores it: arrays in an .npz, the rest as JSON.
    np.savez(tmp_path / "opt.npz", **{k: v for k, v in state.items() if hasattr(v, "shape")})
    (tmp_path / "opt.json").write_text(json.dumps({k: v for k, v in state.items() if not hasattr(v, "shape")}))
    with np.load(tmp_path / "opt.npz") as f:
        loaded = {**json.loads((tmp_path / "opt.json").read_text()), **{k: f[k] for k in f.files}}
    resumed = [(n, p.copy(), np.zeros_like(p)) for (n, _, _), p in zip(params, saved_params)]
    opt2 = make(resumed)
    opt2.load_state_dict(loaded)
    assert opt2.t == 3 and opt2.lr == 0.02
    run(opt2, resumed, grads[3:])
    for (_, p, _), (_, q, _) in zip(params, resumed):
        assert np.array_equal(p, q)


def test_state_dict_is_a_copy():
    params = make_params(0, [(3,)])
    opt = Adam(params, lr=0.1)
    run(opt, params, random_grads(0, params, 1))
    state = opt.state_dict()
    m = state["m/p0"].copy()
    run(opt, params, random_grads(1, params, 1))
    assert np.array_equal(state["m/p0"], m)


def test_load_state_dict_refuses_a_mismatch_and_changes_nothing():
    params = make_params(0, [(3,)])
    opt = AdamW(params, lr=0.1)
    run(opt, params, random_grads(0, params, 2))
    state = opt.state_dict()
    other = AdamW(make_params(0, [(3,)]), lr=0.1, betas=(0.9, 0.95))
    with pytest.raises(ValueError, match=r"state\['betas'\]: expected \(0.9, 0.95\)"):
        other.load_state_dict(state)
    assert other.t == 0 and not other.state["m"]["p0"].any()
    with pytest.raises(ValueError, match=r"state\['type'\]: expected 'Adam', got 'AdamW'"):
        Adam(make_params(0, [(3,)]), lr=0.1).load_state_dict(state)
    with pytest.raises(ValueError, match=r"missing buffers \['m/p1', 'v/p1'\]"):
        AdamW(make_params(0, [(3,), (2,)]), lr=0.1).load_state_dict(state)
    with pytest.raises(ValueError, match=r"state\['m/p0'\]: expected shape \(4,\)"):
        AdamW(make_params(0, [(4,)]), lr=0.1).load_state_dict(state)


def test_step_lr_overrides_and_is_stored():
    p, g = np.zeros(1), np.ones(1)
    opt = SGD([("p", p, g)], lr=1.0)
    opt.step(lr=0.25)
    assert p[0] == -0.25 and opt.lr == 0.25
    opt.step()
    assert p[0] == -0.5


def test_optimizer_errors_name_the_argument():
    layer = Linear(2, 2, rng=0)
    with pytest.raises(TypeError, match=r"params: expected the iterable model.parameters\(\)"):
        AdamW(layer, lr=0.1)
    params = layer.parameters()
    list(params)
    with pytest.raises(ValueError, match=r"params: expected at least one"):
        AdamW(params, lr=0.1)
    with pytest.raises(ValueError, match=r"lr: expected a number in \[0.0, inf\), got -1.0"):
        SGD(layer.parameters(), lr=-1)
    with pytest.raises(ValueError, match=r"momentum: expected a number in \[0.0, 1.0\)"):
        SGD(layer.parameters(), lr=0.1, momentum=1.0)
    with pytest.raises(ValueError, match=r"betas\[1\]"):
        Adam(layer.parameters(), lr=0.1, betas=(0.9, 1.5))
    with pytest.raises(ValueError, match=r"eps: expected a number in \(0.0, inf\)"):
        Adam(layer.parameters(), lr=0.1, eps=0)
    with pytest.raises(TypeError, match=r"param 'w': expected a floating point array"):
        SGD([("w", np.zeros(2, np.int64), np.zeros(2, np.int64))], lr=0.1)
    with pytest.raises(ValueError, match=r"grad of 'w': expected shape \(2,\)"):
        SGD([("w", np.zeros(2), np.zeros(3))], lr=0.1)


# ---------------------------------------------------------------------- clipping
@given(shape_list=st.lists(shapes(max_dims=2), min_size=1, max_size=4), seed=seeds,
       max_norm=st.sampled_from([1e-3, 1.0, 1e3]))
def test_clip_grad_norm_scales_to_max_norm_and_reports_the_pre_clip_norm(shape_list, seed, max_norm):
    grads = [normal_array(seed + i, s) for i, s in enumerate(shape_list)]
    before = [g.copy() for g in grads]
    norm_before = math.sqrt(sum(float(x) ** 2 for g in before for x in g.flat))
    total = clip_grad_norm(grads, max_norm)
    assert isinstance(total, float) and math.isclose(total, norm_before, rel_tol=RTOL)
    norm_after = math.sqrt(sum(float(x) ** 2 for g in grads for x in g.flat))
    assert math.isclose(norm_after, min(norm_before, max_norm), rel_tol=RTOL)
    scale = min(1.0, max_norm / norm_before)        # one factor for all: the direction is kept
    for g, g0 in zip(grads, before):
        np.testing.assert_allclose(g, g0 * scale, rtol=RTOL)


def test_clip_grad_norm_on_parameters_and_a_known_case():
    g1, g2 = np.array([3.0]), np.array([[4.0]])
    params = [("a", np.zeros(1), g1), ("b", np.zeros((1, 1)), g2)]
    assert clip_grad_norm(params, 1.0) == 5.0
    np.testing.assert_allclose([g1[0], g2[0, 0]], [0.6, 0.8], rtol=RTOL)


def test_clip_grad_norm_leaves_non_finite_gradients_to_the_caller():
    g = np.array([1.0, np.inf])
    assert clip_grad_norm([g], 1.0) == math.inf
    assert g[0] == 1.0      # not scaled to NaN
    with pytest.raises(ValueError, match="max_norm"):
        clip_grad_norm([g], 0.0)


# --------------------------------------------------------------------- schedules
def test_warmup_cosine_endpoints_midpoint_and_floor():
    lr = warmup_cosine_schedule(max_lr=1.0, warmup_steps=10, total_steps=110, min_lr=0.1)
    assert lr(1) == pytest.approx(0.1) and lr(5) == pytest.approx(0.5) and lr(10) == 1.0
    assert lr(60) == pytest.approx((1.0 + 0.1) / 2, rel=1e-12)       # halfway through the decay
    assert lr(110) == pytest.approx(0.1, rel=1e-12) and lr(111) == 0.1 and lr(10_000) == 0.1
    values = [lr(s) for s in range(1, 120)]
    assert all(a < b for a, b in zip(values[:9], values[1:10]))       # rises during warmup
    assert all(a >= b for a, b in zip(values[9:], values[10:]))       # never rises after


def test_warmup_cosine_without_warmup_starts_near_max():
    lr = warmup_cosine_schedule(max_lr=2.0, warmup_steps=0, total_steps=4)
    assert [lr(s) for s in (1, 2, 3, 4, 5)] == pytest.approx(
        [1.0 + math.cos(math.pi * k / 4) for k in (1, 2, 3, 4, 4)], abs=1e-15)


@given(d_model=st.integers(1, 1024), warmup=st.integers(1, 4000), factor=st.sampled_from([0.5, 1.0, 2.0]))
@settings(max_examples=25)
def test_noam_peaks_at_warmup(d_model, warmup, factor):
    lr = noam_schedule(d_model, warmup, factor)
    peak = factor * d_model ** -0.5 * warmup ** -0.5
    assert lr(warmup) == pytest.approx(peak, rel=1e-12)
    assert lr(1) == pytest.approx(factor * d_model ** -0.5 * warmup ** -1.5, rel=1e-12)
    assert lr(4 * warmup) == pytest.approx(peak / 2, rel=1e-12)      # then decays as 1/√step
    if warmup > 1:
        assert lr(warmup - 1) < lr(warmup) and lr(warmup + 1) < lr(warmup)


def test_constant_schedule_and_step_errors():
    assert constant_schedule(0.3)(1) == 0.3 and constant_schedule(0.3)(10**6) == 0.3
    with pytest.raises(ValueError, match=r"step: expected an integer in \[1, inf\], got 0"):
        noam_schedule(64, 10)(0)
    with pytest.raises(TypeError, match="step: expected an integer"):
        constant_schedule(0.1)(1.5)
    with pytest.raises(ValueError, match="total_steps"):
        warmup_cosine_schedule(1.0, warmup_steps=10, total_steps=5)
    with pytest.raises(ValueError, match="min_lr"):
        warmup_cosine_schedule(1.0, 1, 5, min_lr=2.0)
