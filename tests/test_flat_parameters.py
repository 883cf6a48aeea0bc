"""flatten_parameters and contiguous_runs (layers/flat_parameters.py), and what runs on them.

What they must keep: the model computes the same (same values, shapes, names, tied
weights still one array), and an optimizer that takes the parameters as one flat
array updates every number exactly as it does one parameter at a time (the update is
elementwise: bit for bit, not to a tolerance).
"""
import copy

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from minitransformer.functional.cross_entropy import cross_entropy_backward, cross_entropy_forward
from minitransformer.layers import Linear, ReLU, flatten_parameters
from minitransformer.layers.flat_parameters import contiguous_runs, views_of
from minitransformer.models import GPT, GPTConfig
from minitransformer.optim import SGD, Adam, AdamW, clip_grad_norm, optimizers

V, T = 13, 6


def _gpt(seed, tie_weights=True):
    config = GPTConfig(vocab_size=V, block_size=T, n_layer=2, n_head=2, d_model=8, p_drop=0.0,
                       tie_weights=tie_weights)
    return GPT(config, rng=seed).astype(np.float64)


def _loss_and_grads(model, ids):
    logits = model(ids[:, :-1])
    L, cache = cross_entropy_forward(logits, ids[:, 1:])
    model.backward(cross_entropy_backward(1.0, cache))
    return float(L), {name: g.copy() for name, _, g in model.parameters()}


def test_every_parameter_becomes_a_view_of_theta_in_order_with_its_values():
    model = _gpt(0)
    before = {name: (p.copy(), g.shape) for name, p, g in model.parameters()}
    theta, grad_theta = flatten_parameters(model)
    assert theta.shape == grad_theta.shape == (model.num_parameters(),)
    offset = 0
    for name, p, g in model.parameters():
        np.testing.assert_array_equal(p, before[name][0])            # the same values, shapes, names
        assert p.base is theta and g.base is grad_theta
        assert p.ctypes.data == theta.ctypes.data + offset * theta.itemsize   # o_i = sizes before i
        offset += p.size
    assert offset == theta.size and not grad_theta.any()


def test_a_tied_weight_stays_one_array_with_one_gradient():
    model = _gpt(1, tie_weights=True)
    holders = [(module, key) for _, module in model.named_modules() for key in module.params]
    groups = {}
    for module, key in holders:
        groups.setdefault(id(module.params[key]), []).append((module, key))
    tied = [group for group in groups.values() if len(group) > 1]
    assert len(tied) == 1                                             # the token table and the LM head
    flatten_parameters(model)
    (m1, k1), (m2, k2) = tied[0]
    assert m1.params[k1] is m2.params[k2] and m1.grads[k1] is m2.grads[k2]


@pytest.mark.parametrize("tie_weights", [False, True])
@settings(max_examples=5, deadline=None)
@given(seed=st.integers(0, 2**16))
def test_the_model_computes_the_same_loss_and_gradients_after_flattening(tie_weights, seed):
    model = _gpt(seed, tie_weights)
    ids = np.random.default_rng(seed).integers(0, V, (3, T + 1))
    twin = copy.deepcopy(model)
    flatten_parameters(twin)
    L, grads = _loss_and_grads(model, ids)
    L_flat, grads_flat = _loss_and_grads(twin, ids)
    assert L_flat == L                                               # the same arithmetic, bit for bit
    for name in grads:
        np.testing.assert_array_equal(grads_flat[name], grads[name], err_msg=name)


def _optimizer(kind, params, lr):
    if kind == "sgd":
        return SGD(params, lr, momentum=0.9, weight_decay=0.01)
    if kind == "adam":
        return Adam(params, lr, betas=(0.8, 0.95))
    return AdamW(params, lr, betas=(0.9, 0.99), weight_decay=0.1)


@pytest.mark.parametrize("unit_size", [optimizers.UNIT_SIZE, 100])   # the run whole, or in pieces of 100
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["sgd", "adam", "adamw"])     # each one always (not left to the draws)
@settings(max_examples=3, deadline=None)
@given(seed=st.integers(0, 2**16), n_steps=st.integers(1, 4))
def test_an_optimizer_on_one_flat_array_updates_every_number_as_one_parameter_at_a_time(kind, dtype, unit_size,
                                                                                        seed, n_steps):
    model = _gpt(seed).astype(dtype)
    twin = copy.deepcopy(model)
    flatten_parameters(twin)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(optimizers, "UNIT_SIZE", unit_size)
        opt, opt_flat = _optimizer(kind, model.parameters(), 1e-2), _optimizer(kind, twin.parameters(), 1e-2)
    P = model.num_parameters()
    assert len(opt_flat.grad_arrays()) == -(-P // unit_size)            # the one run, in pieces
    assert max(g.size for g in opt_flat.grad_arrays()) == min(P, unit_size)
    rng = np.random.default_rng(seed)
    for t in range(n_steps):
        for (_, _, g), (_, _, g_flat) in zip(model.parameters(), twin.parameters()):
            g[...] = g_flat[...] = rng.standard_normal(g.shape)
        opt.step(lr=1e-2 / (t + 1))
        opt_flat.step(lr=1e-2 / (t + 1))
    for (name, p, _), (_, p_flat, _) in zip(model.parameters(), twin.parameters()):
        np.testing.assert_array_equal(p_flat, p, err_msg=name)
    state, state_flat = opt.state_dict(), opt_flat.state_dict()
    assert state.keys() == state_flat.keys()                            # the same checkpoint, key for key
    for key in state:
        np.testing.assert_array_equal(state_flat[key], state[key], err_msg=key)


def test_an_optimizer_resumes_into_its_flat_state_buffers():
    model = _gpt(3)
    flatten_parameters(model)
    opt = AdamW(model.parameters(), 1e-3)
    for _, _, g in model.parameters():
        g[...] = 1.0
    opt.step()
    saved = opt.state_dict()
    fresh = AdamW(model.parameters(), 1e-3)
    fresh.load_state_dict(saved)
    for key, value in fresh.state_dict().items():
        assert np.array_equal(value, saved[key]) if isinstance(value, np.ndarray) else value == saved[key]
    m_views = list(fresh.state["m"].values())
    assert all(v.base is m_views[0].base for v in m_views)           # still views of one flat array


def test_contiguous_runs_merge_neighbours_only():
    flat = np.arange(10.0)
    a, b, c = views_of(flat[:9], [np.empty((2, 2)), np.empty(3), np.empty(2)])   # 0..3, 4..6, 7..8
    loose = np.ones(3)
    runs = contiguous_runs([a, b, loose, c])
    assert [(i, j) for i, j, _ in runs] == [(0, 2), (2, 3), (3, 4)]
    np.testing.assert_array_equal(runs[0][2][0], np.arange(7.0))     # a and b as one flat view
    assert runs[1][2][0] is loose and runs[2][2][0] is c             # others: the arrays themselves
    assert np.shares_memory(runs[0][2][0], flat)
    x, y = views_of(np.zeros(7), [a, b])
    assert [(i, j) for i, j, _ in contiguous_runs([a, b], [x, y])] == [(0, 2)]
    assert [(i, j) for i, j, _ in contiguous_runs([a, b], [y, x])] == [(0, 1), (1, 2)]   # y, x: not in order


def test_a_flat_gradient_norm_keeps_float32_precision():
    rng = np.random.default_rng(0)
    g = (rng.standard_normal(1_000_000) * rng.random(1_000_000) ** 4).astype(np.float32)
    exact = float(np.sqrt(np.dot(g.astype(np.float64), g.astype(np.float64))))
    assert clip_grad_norm([g], np.inf) == pytest.approx(exact, rel=1e-6)   # one float32 dot: ~1e-5 off


def test_flatten_names_a_model_it_cannot_flatten():
    layer = Linear(4, 3, rng=0)
    layer.params["b"] = layer.params["b"].astype(np.float64)          # W stays float32
    layer.grads["b"] = layer.grads["b"].astype(np.float64)
    with pytest.raises(ValueError, match="model: expected parameters of one dtype"):
        flatten_parameters(layer)
    with pytest.raises(ValueError, match="model: expected at least one parameter"):
        flatten_parameters(ReLU())
