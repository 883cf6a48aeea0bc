"""The sparse mixture-of-experts FFN: router (top-k, capacity, load balancing), the MoE pair,
its Module, and a GPT with ffn="moe" that trains with the ordinary loop.

Tolerance 1e-7 for the pairs (float64 central differences land near 1e-9 for a correct
backward, near 1 for a bug); 1e-6 through a whole model. The choice of experts is piecewise
constant in the router logits, so every check draws inputs whose k-th and (k+1)-th router
probabilities are apart: a central difference never crosses a change of route.
"""
import math

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from minitransformer.functional.activations import gelu_forward, relu_forward
from minitransformer.functional.moe import EXPERT_ACTIVATIONS, GATED_EXPERT_ACTIVATIONS, moe_backward, moe_forward
from minitransformer.functional.router import (capacity_mask, expert_capacity, load_balancing_backward,
                                               load_balancing_forward, top_k_backward, top_k_forward)
from minitransformer.functional.softmax import softmax_forward
from minitransformer.gradcheck import check_module, check_pair
from minitransformer.layers.moe import MoEFeedForward
from minitransformer.models import GPT, GPTConfig
from minitransformer.models.costs import active_parameters, flops_per_token, matmul_parameters
from minitransformer.models.presets import count_parameters, ffn_parameters
from minitransformer.training import TrainConfig, train
from minitransformer.training.loss import task_loss, task_loss_backward
from minitransformer.training.tasks import LanguageModelTask
from strategies import normal_array, seeds

TOL = 1e-7
TOL_MODEL = 1e-6
F64 = np.float64


def _moe_inputs(seed, N, C, E, F, activation, bias):
    width = 2 * F if activation in GATED_EXPERT_ACTIVATIONS else F
    inputs = {"x": normal_array(seed, (N, C)), "W_r": normal_array(seed + 1, (C, E)),
              "W_in": normal_array(seed + 2, (E, C, width), 0.5), "b_in": normal_array(seed + 3, (E, width), 0.1),
              "W_out": normal_array(seed + 4, (E, F, C), 0.5), "b_out": normal_array(seed + 5, (E, C), 0.1)}
    if not bias:
        inputs["b_in"] = inputs["b_out"] = None
    return inputs


def _route_margin(x, W_r, k):
    """The smallest gap between the k-th and (k+1)-th router probability of any token."""
    p = np.sort(softmax_forward(x @ W_r)[0], axis=1)[:, ::-1]
    return np.inf if k == p.shape[1] else float((p[:, k - 1] - p[:, k]).min())


@given(N=st.integers(1, 7), C=st.integers(1, 4), E=st.integers(1, 4), F=st.integers(1, 4), k=st.integers(1, 4),
       activation=st.sampled_from(list(EXPERT_ACTIVATIONS)), bias=st.booleans(),
       capacity_factor=st.sampled_from([None, 0.5, 1.0, 2.0]), seed=seeds)
def test_moe_pair_gradients_for_x_and_every_weight(N, C, E, F, k, activation, bias, capacity_factor, seed):
    k = min(k, E)
    inputs = _moe_inputs(seed % 2**30, N, C, E, F, activation, bias)
    assume(_route_margin(inputs["x"], inputs["W_r"], k) > 1e-3)
    options = dict(top_k=k, capacity_factor=capacity_factor, activation=activation)
    wrt = [name for name, a in inputs.items() if a is not None]
    result = check_pair(lambda **kw: moe_forward(**kw, **options), moe_backward, inputs, wrt=wrt, seed=seed, tol=TOL)
    assert result.ok, str(result)


@given(N=st.integers(2, 7), E=st.integers(2, 4), k=st.integers(1, 2), daux=st.floats(0.1, 3.0), seed=seeds)
def test_the_load_balancing_loss_gradient_reaches_the_router_and_x(N, E, k, daux, seed):
    # One objective for both outputs: Σ y ⊙ dy + daux · aux; its gradient is moe_backward(dy, cache, daux).
    k = min(k, E)
    inputs = _moe_inputs(seed % 2**30, N, 3, E, 2, "gelu", True)
    assume(_route_margin(inputs["x"], inputs["W_r"], k) > 1e-3)

    def forward(**kw):
        y, cache = moe_forward(**kw, top_k=k, capacity_factor=1.0)
        return np.concatenate([y.ravel(), [cache.aux]]), cache

    def backward(g, cache):
        return moe_backward(g[:-1].reshape(cache.x.shape), cache, float(g[-1]))

    result = check_pair(forward, backward, inputs, seed=seed, tol=TOL)
    assert result.ok, str(result)


def test_the_balance_gradient_alone_moves_tokens_off_the_overloaded_expert():
    inputs = _moe_inputs(11, 12, 3, 3, 2, "gelu", True)
    inputs["W_r"][:, 0] += 2.0 * np.sign(inputs["x"].sum(axis=0))    # most tokens prefer expert 0
    _, cache = moe_forward(**inputs, top_k=1)
    load = np.bincount(cache.expert[:, 0], minlength=3)
    assert load[0] > 12 / 3                                          # overloaded
    dW_r = moe_backward(np.zeros_like(inputs["x"]), cache, 1.0)[1]   # no task gradient: the balance alone
    P_before = softmax_forward(inputs["x"] @ inputs["W_r"])[0].mean(axis=0)
    P_after = softmax_forward(inputs["x"] @ (inputs["W_r"] - 0.1 * dW_r))[0].mean(axis=0)
    assert P_after[0] < P_before[0]                                  # a descent step lowers its probability


def test_each_token_output_is_its_gated_experts_by_hand():
    inputs = _moe_inputs(3, 6, 4, 3, 5, "relu", True)
    y, cache = moe_forward(**inputs, top_k=2, activation="relu")
    p = softmax_forward(inputs["x"] @ inputs["W_r"])[0]
    for n in range(6):
        chosen = np.argsort(-p[n], kind="stable")[:2]
        expected = sum(p[n, i] * (relu_forward(inputs["x"][n] @ inputs["W_in"][i] + inputs["b_in"][i])[0]
                                  @ inputs["W_out"][i] + inputs["b_out"][i]) for i in chosen)
        np.testing.assert_allclose(y[n], expected, rtol=1e-12, atol=1e-14)
        np.testing.assert_array_equal(cache.expert[n], chosen)


def test_one_expert_with_k_1_is_the_dense_ffn():
    inputs = _moe_inputs(5, 5, 4, 1, 6, "gelu", True)
    y, cache = moe_forward(**inputs, top_k=1)
    h = inputs["x"] @ inputs["W_in"][0] + inputs["b_in"][0]
    np.testing.assert_allclose(y, gelu_forward(h)[0] @ inputs["W_out"][0] + inputs["b_out"][0], rtol=1e-13)
    assert float(cache.aux) == pytest.approx(1.0)               # E = 1: f = P = 1, aux = 1


def test_top_k_takes_the_largest_and_breaks_ties_by_the_lower_id():
    p = np.array([[0.1, 0.4, 0.4, 0.1], [0.7, 0.1, 0.1, 0.1]])
    gate, cache = top_k_forward(p, 2)
    np.testing.assert_array_equal(cache.expert, [[1, 2], [0, 1]])
    np.testing.assert_array_equal(gate, [[0.4, 0.4], [0.7, 0.1]])
    dp = top_k_backward(np.array([[1.0, 2.0], [3.0, 4.0]]), cache)
    np.testing.assert_array_equal(dp, [[0, 1, 2, 0], [3, 4, 0, 0]])


def test_capacity_keeps_first_choices_first_then_token_order():
    expert = np.array([[0, 1], [0, 1], [0, 2], [1, 0]])          # 4 tokens, k = 2, E = 3
    kept = capacity_mask(expert, 3, 2)
    # expert 0: first choices of tokens 0, 1, 2 -> slots for 0 and 1 only; token 3's second choice comes later
    # expert 1: first choice of token 3, then the second choices of tokens 0, 1 -> token 3 and token 0
    np.testing.assert_array_equal(kept, [[True, True], [True, False], [False, True], [True, False]])
    assert expert_capacity(8, 4, 2, 1.25) == math.ceil(1.25 * 8 * 2 / 4) == 5
    assert expert_capacity(8, 4, 2, None) == 8
    assert capacity_mask(expert, 3, 0).sum() == 0


def test_a_dropped_token_gets_zero_so_the_residual_passes_it_on():
    inputs = _moe_inputs(7, 8, 3, 2, 4, "gelu", True)
    y, cache = moe_forward(**inputs, top_k=1, capacity_factor=0.25)   # c = ⌈0.25 · 8 / 2⌉ = 1 slot per expert
    dropped = ~cache.kept[:, 0]
    assert dropped.sum() >= 6                                   # 8 tokens, 2 slots
    np.testing.assert_array_equal(y[dropped], 0.0)
    for i in range(2):
        assert ((cache.expert == i) & cache.kept).sum() <= 1
    dx = moe_backward(np.ones_like(y), cache)[0]
    # a dropped token's x still reaches the loss through its router logits (the gate of a kept token does not
    # depend on it), so its gradient is only the softmax's, which is zero here: dgate is zero on dropped rows
    np.testing.assert_allclose(dx[dropped], 0.0, atol=1e-15)


def test_load_balancing_is_one_when_even_and_E_when_all_go_to_one_expert():
    E, N = 4, 8
    uniform = np.full((N, E), 1 / E)
    even = np.arange(N)[:, None] % E                                # (N, 1) each expert twice
    assert float(load_balancing_forward(uniform, even)[0]) == pytest.approx(1.0)
    collapsed = np.zeros((N, E)); collapsed[:, 2] = 1.0
    assert float(load_balancing_forward(collapsed, np.full((N, 1), 2))[0]) == pytest.approx(E)
    p = softmax_forward(normal_array(0, (N, E)))[0]
    expert = top_k_forward(p, 2)[1].expert
    f = np.bincount(expert.ravel(), minlength=E) / expert.size      # by hand
    aux, cache = load_balancing_forward(p, expert)
    assert float(aux) == pytest.approx(E * (f * p.mean(axis=0)).sum(), rel=1e-14)
    np.testing.assert_allclose(load_balancing_backward(2.0, cache), np.broadcast_to(2.0 * E * f / N, (N, E)))


@given(seed=seeds, k=st.integers(1, 2), bias=st.booleans())
def test_moe_module_gradients_without_and_with_capacity(seed, k, bias):
    layer = MoEFeedForward(4, 3, 3, k, capacity_factor=1.0, bias=bias, aux_weight=0.0, rng=seed % 1000,
                           init_std=0.5, dtype=F64)
    x = normal_array(seed % 2**30, (2, 3, 4))
    assume(_route_margin(x.reshape(6, 4), layer.W_router, k) > 1e-3)
    result = check_module(layer, x, seed=seed, tol=TOL)
    assert result.ok, str(result)
    assert layer.routing.expert.shape == (2, 3, k)


def test_the_module_adds_the_weighted_balance_gradient_in_training_only():
    layer = MoEFeedForward(4, 3, 3, 2, aux_weight=0.5, rng=0, init_std=0.5, dtype=F64)
    x = normal_array(1, (2, 3, 4))
    y = layer.forward(x)
    assert layer.aux_loss == pytest.approx(0.5 * layer.routing.aux)
    layer.backward(np.zeros_like(y))
    _, cache = moe_forward(x.reshape(6, 4), layer.W_router, layer.W_in, layer.b_in, layer.W_out, layer.b_out,
                           top_k=2, capacity_factor=None)
    np.testing.assert_allclose(layer.grads["W_router"], moe_backward(np.zeros((6, 4)), cache, 0.5)[1], rtol=1e-13)
    layer.zero_grad()
    layer.eval()
    layer.backward(np.zeros_like(layer.forward(x)))
    assert layer.aux_loss == 0.0 and np.all(layer.grads["W_router"] == 0)


MOE_GPT = dict(vocab_size=7, block_size=6, n_layer=2, n_head=2, d_model=8, d_ff=6, init_std=0.4,
               ffn="moe", n_experts=3, top_k=2, capacity_factor=None)


def test_a_moe_gpt_counts_its_parameters_and_what_a_token_uses():
    config = GPTConfig(**MOE_GPT)
    model = GPT(config, rng=0)
    assert count_parameters(config) == model.num_parameters()
    one_expert = 8 * 4 * 6 // 4 + 6 + 6 * 8 + 8                     # W_in (8, 6), b_in, W_out (6, 8), b_out
    assert ffn_parameters(config) == one_expert == 8 * 6 + 6 + 6 * 8 + 8
    assert active_parameters(config) == matmul_parameters(config) - 2 * (3 - 2) * one_expert
    dense = GPTConfig(**{**MOE_GPT, "ffn": "dense"})
    assert count_parameters(config) - count_parameters(dense) == 2 * (8 * 3 + 2 * one_expert)   # router + 2 more
    assert flops_per_token(config, 6) - flops_per_token(dense, 6) == 2 * 2 * (8 * 3 + one_expert)


@settings(max_examples=3)
@given(seed=seeds)
def test_moe_gpt_gradients_through_the_whole_model(seed):
    model = GPT(GPTConfig(**{**MOE_GPT, "moe_aux_weight": 0.0}), rng=seed % 1000, dtype=F64)
    ids = np.random.default_rng(seed).integers(0, 7, (2, 5))
    result = check_module(model, ids, seed=seed, max_coords=12, tol=TOL_MODEL)
    assert result.ok, str(result)


def test_the_training_loss_adds_the_balance_losses_and_its_gradient_matches():
    # task_loss = CE + Σ α aux in training; its gradient by central differences on the router and an embedding
    model = GPT(GPTConfig(**{**MOE_GPT, "moe_aux_weight": 0.3}), rng=2, dtype=F64)
    ids = np.random.default_rng(0).integers(0, 7, 200)
    task = LanguageModelTask(ids, ids, block_size=5, batch_size=2)
    batch = task.batch("train", np.random.default_rng(1))
    ce = float(cache_free_ce(model, task, batch))
    L, cache = task_loss(model, task, batch)
    layers = [b.ffn.sublayer for b in model.blocks]
    assert L == pytest.approx(ce + 0.3 * sum(m.routing.aux for m in layers), rel=1e-14)
    assert L > ce                                                    # aux > 0: the balance loss is in it
    task_loss_backward(model, 0.5, cache)                           # an upstream weight, as a data-parallel part
    for name in ("blocks.0.ffn.sublayer.W_router", "embed.tok.W"):
        param, grad = next((p, g) for n, p, g in model.parameters() if n == name)
        for index in [(0, 0), (1, 2), (3, 1)]:
            old = param[index]
            param[index] = old + 1e-6
            up = task_loss(model, task, batch)[0]
            param[index] = old - 1e-6
            down = task_loss(model, task, batch)[0]
            param[index] = old
            assert grad[index] == pytest.approx(0.5 * (up - down) / 2e-6, rel=1e-5, abs=1e-9), (name, index)
    model.eval()
    assert task_loss(model, task, batch)[0] == pytest.approx(float(cache_free_ce(model, task, batch)))


def cache_free_ce(model, task, batch):
    """The cross-entropy alone (the loss's own pair), for comparing with task_loss."""
    from minitransformer.functional.cross_entropy import cross_entropy_forward
    logits, targets = task.forward(model, batch)
    model.release_caches()
    return cross_entropy_forward(logits, targets)[0]


def test_a_moe_gpt_trains_with_the_ordinary_loop_and_generates():
    from minitransformer.generation.generate import generate
    text_ids = np.random.default_rng(0).integers(0, 7, 3000) // 2 * 2    # even ids only: learnable
    config = GPTConfig(**{**MOE_GPT, "init_std": 0.02, "capacity_factor": 1.25})
    model = GPT(config, rng=0)
    task = LanguageModelTask(text_ids, text_ids, block_size=6, batch_size=8)
    result = train(model, task, TrainConfig(steps=30, lr=1e-2, warmup_steps=3, eval_interval=30,
                                            log_interval=30, final_eval_batches=2), log=lambda *_: None)
    losses = [loss for _, loss in result.history]
    assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 0.3
    model.eval()
    out = generate(model, np.array([[0, 2]]), max_new_tokens=4)
    full = model.forward(out[:, :-1])                                 # eval: no capacity, the same routes
    assert out[0, -1] == full[0, -1].argmax()


def test_moe_entrances_name_the_argument():
    inputs = _moe_inputs(0, 3, 2, 2, 2, "gelu", True)
    with pytest.raises(ValueError, match=r"k: expected at most E = 2 experts \(the columns of p\), got 3"):
        moe_forward(**inputs, top_k=3)
    with pytest.raises(ValueError, match=r"W_in: expected size 2 \(E, the columns of W_r\)"):
        moe_forward(**{**inputs, "W_in": inputs["W_in"][:1]})
    with pytest.raises(ValueError, match="b_in, b_out: expected both biases or neither"):
        moe_forward(**{**inputs, "b_in": None})
    with pytest.raises(ValueError, match=r"capacity_factor: expected a number in \(0.0, inf\)"):
        moe_forward(**inputs, capacity_factor=0.0)
    with pytest.raises(ValueError, match="activation"):
        moe_forward(**inputs, activation="swish")
    p = np.full((4, 3), 1 / 3)
    with pytest.raises(ValueError, match=r"expert: expected ids in \[0, E, the columns of p = 3\), got ids from 0 to 5"):
        load_balancing_forward(p, np.array([[5], [1], [0], [1]]))       # an id past E counted for no expert
    with pytest.raises(TypeError, match="expert: expected integer expert ids, got dtype float64"):
        load_balancing_forward(p, np.array([[0.5], [1.0], [0.0], [1.0]]))
    with pytest.raises(ValueError, match=r"top_k: expected an integer in \[1, 2\], got 3"):
        GPTConfig(ffn="moe", n_experts=2, top_k=3)
    with pytest.raises(ValueError, match="ffn: expected one of"):
        GPTConfig(ffn="sparse")
    with pytest.raises(ValueError, match="activation: the experts take one of"):
        GPTConfig(ffn="moe", activation="swish")
    with pytest.raises(ValueError, match=r"x: expected 3 dimensions \(B, T, C\)"):
        MoEFeedForward(4, 3, 2).forward(np.zeros((2, 4), np.float32))
