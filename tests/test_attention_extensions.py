"""The attention extensions inside the models: sparse patterns (dilated, global +
sliding window), attention dropout, RoPE position interpolation, attention sinks.

Expected masks are written out by hand or by definition (loops); gradient checks use
the project's checker at 1e-7 (float64 central differences land near 1e-9 for a
correct backward, near 1 for a wrong one), whole models at 1e-6 as in test_models.py.
"""
import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from minitransformer.functional.attention import attention_backward, attention_forward
from minitransformer.functional.cross_entropy import cross_entropy_backward, cross_entropy_forward
from minitransformer.cli import main
from minitransformer.functional.masks import dilated_window_mask, global_window_mask
from minitransformer.functional.rope import rope_backward, rope_forward
from minitransformer.plots.context import interpolation_figure, sinks_figure
from minitransformer.training.context import position_losses
from minitransformer.fast.kernels import attention as fast_attention
from minitransformer.gradcheck import check_module, check_pair
from minitransformer.functional.softmax import log_softmax_forward
from minitransformer.generation.generate import generate
from minitransformer.generation.streaming import streaming_nll
from minitransformer.generation import SinkKVCache, rolling_cache
from minitransformer.layers import Causal, DilatedWindow, GlobalWindow, KVCache, MultiHeadAttention, RoPE
from minitransformer.models import GPT, EncoderConfig, GPTConfig
from minitransformer.optim import AdamW
from strategies import forward_in_chunks, normal_array, seeds

TOL = 1e-7
F64 = np.float64
TINY = dict(vocab_size=7, block_size=8, n_layer=2, n_head=2, d_model=8, d_ff=12, init_std=0.4)
PATTERNS = {"dilated": dict(window=3, dilation=2), "global": dict(window=2, global_positions=(0, 3))}
LAYER_PATTERNS = {"dilated": DilatedWindow(3, 2), "global": GlobalWindow(2, (0, 3))}   # the same, as objects


def mha(**kw):
    return MultiHeadAttention(8, 2, rng=0, init_std=0.5, **kw).astype(F64)


# ------------------------------------------------------------------ sparse patterns
@pytest.mark.parametrize("name", list(PATTERNS))
def test_pattern_reaches_the_attention_probabilities(name):
    T = 6
    expected = {"dilated": [[i - j in (0, 2, 4) for j in range(T)] for i in range(T)],
                "global": [[j <= i and (i - j < 2 or j in (0, 3) or i in (0, 3)) for j in range(T)]
                           for i in range(T)]}[name]
    layer = mha(pattern=LAYER_PATTERNS[name])
    layer.forward(normal_array(0, (1, T, 8)))
    P = layer.attention_probs()                                       # (1, H, T, T)
    np.testing.assert_array_equal(P[0] > 0, np.broadcast_to(expected, P[0].shape))


@given(i=st.integers(0, 5), seed=seeds, name=st.sampled_from(list(PATTERNS)))
def test_no_key_outside_the_pattern_gets_gradient(i, seed, name):
    """Upstream gradient on query i only: dK and dV vanish exactly outside row i of the pattern."""
    T, mask = 6, {"dilated": dilated_window_mask(6, 3, 2), "global": global_window_mask(6, 2, (0, 3))}[name]
    q, k, v = (normal_array(seed + n, (1, 2, T, 4)) for n in range(3))
    _, cache = attention_forward(q, k, v, mask)
    dout = np.zeros((1, 2, T, 4))
    dout[:, :, i] = normal_array(seed + 3, (1, 2, 4))
    _, dk, dv = attention_backward(dout, cache)
    hidden = ~mask[i]                                                 # (T,) keys outside row i
    assert np.all(dk[:, :, hidden] == 0) and np.all(dv[:, :, hidden] == 0)
    assert np.all(np.abs(dv[:, :, mask[i]]).sum(axis=-1) > 0)         # the visible keys do get some


@pytest.mark.parametrize("chunks", [[1] * 6, [2, 1, 3]])
@pytest.mark.parametrize("name", list(PATTERNS))
def test_pattern_with_kv_cache_matches_full_forward(name, chunks):
    layer = mha(positions=RoPE(), pattern=LAYER_PATTERNS[name])
    x = normal_array(1, (2, 6, 8))
    full = layer.forward(x)
    np.testing.assert_allclose(forward_in_chunks(layer, x, chunks, KVCache()), full, rtol=0, atol=1e-12)


@settings(max_examples=4)
@given(name=st.sampled_from(list(PATTERNS)), seed=seeds)
def test_gpt_with_a_pattern_gradients(name, seed):
    model = GPT(GPTConfig(**TINY, **PATTERNS[name]), rng=seed % 1000, dtype=F64)
    ids = np.random.default_rng(seed).integers(0, 7, (2, 6))
    result = check_module(model, ids, seed=seed, max_coords=12, tol=1e-6)
    assert result.ok, str(result)


def _train(config, steps=60, seed=0):
    """A few AdamW steps on a periodic sequence (period 4): the next token is predictable."""
    model = GPT(config, rng=seed)
    opt = AdamW(model.parameters(), 1e-2)
    rng = np.random.default_rng(seed)
    losses = []
    for _ in range(steps):
        start = rng.integers(0, 4, size=(8, 1))
        ids = (start + np.arange(config.block_size + 1)) % 4              # (8, T + 1)
        loss, cache = cross_entropy_forward(model.forward(ids[:, :-1]), ids[:, 1:])
        model.backward(cross_entropy_backward(1.0, cache))
        opt.step()
        model.zero_grad()
        losses.append(float(loss))
    return model, losses


@pytest.mark.parametrize("name", list(PATTERNS))
def test_gpt_with_a_pattern_trains(name):
    _, losses = _train(GPTConfig(vocab_size=4, block_size=8, n_layer=1, n_head=2, d_model=16,
                                 position="rope", **PATTERNS[name]))
    assert losses[0] > 1.2 and np.mean(losses[-5:]) < 0.2           # log 4 = 1.39 at the start


def test_pattern_config_round_trip_and_errors():
    config = GPTConfig(**TINY, window=2, global_positions=[0, 3])
    assert config.global_positions == [0, 3]
    assert GPTConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config   # as a checkpoint stores it
    with pytest.raises(ValueError, match="dilation, global_positions: a sparse pattern refines"):
        GPTConfig(**TINY, dilation=2)
    with pytest.raises(ValueError, match="expected one sparse pattern, got both"):
        GPTConfig(**TINY, window=2, dilation=2, global_positions=(0,))
    with pytest.raises(ValueError, match=r"global_positions\[0\]: expected an integer in \[0, 7\]"):
        GPTConfig(**TINY, window=2, global_positions=(9,))
    with pytest.raises(TypeError, match="global_positions: expected a list"):
        GPTConfig(**TINY, window=2, global_positions=3)
    with pytest.raises(ValueError, match="dilation: expected an integer in \\[2"):
        DilatedWindow(2, 0)
    with pytest.raises(ValueError, match="dilation, global_positions: the sparse patterns are causal"):
        EncoderConfig(**TINY, window=2, dilation=2)


# ------------------------------------------------------------------ attention dropout
def _qkv(seed, B=2, H=2, T=3, S=4, D=3):
    return normal_array(seed, (B, H, T, D)), normal_array(seed + 1, (B, H, S, D)), normal_array(seed + 2, (B, H, S, D))


@given(seed=seeds, p=st.sampled_from([0.1, 0.5]), causal=st.booleans())
def test_attention_dropout_gradients_with_a_fixed_mask(seed, p, causal):
    q, k, v = _qkv(seed)
    drop_mask = np.random.default_rng(seed).random((2, 2, 3, 4)) >= p
    mask = np.tril(np.ones((3, 4), bool), k=1) if causal else None
    inputs = {"q": q, "k": k, "v": v, "mask": mask}
    result = check_pair(attention_forward, attention_backward, inputs, wrt=("q", "k", "v"), seed=seed,
                        h=5e-5, tol=TOL, kwargs=dict(p_drop=p, drop_mask=drop_mask))
    assert result.ok, str(result)


def test_attention_dropout_drops_probabilities_and_scales_the_rest():
    q, k, v = _qkv(0)
    drop_mask = np.ones((2, 2, 3, 4), bool)
    drop_mask[:, :, :, 1] = False                                     # key 1 dropped for every query
    out, cache = attention_forward(q, k, v, p_drop=0.5, drop_mask=drop_mask)
    P = cache.probs                                                   # P before dropout: rows sum to 1
    np.testing.assert_allclose(P.sum(-1), 1.0, rtol=1e-12)
    P_dropped = P.copy()
    P_dropped[..., 1] = 0.0
    expected = 2.0 * np.einsum("bhts,bhsd->bhtd", P_dropped, v)       # 1 / (1 - 0.5) = 2
    np.testing.assert_allclose(out, expected, rtol=1e-12)
    _, dk, dv = attention_backward(np.ones_like(out), cache)[:3]
    assert np.all(dv[:, :, 1] == 0)                                   # a dropped key passes no value gradient


def test_attention_dropout_is_the_identity_in_eval_and_at_p_0():
    q, k, v = _qkv(1)
    plain = attention_forward(q, k, v)[0]
    rng = np.random.default_rng(0)
    np.testing.assert_array_equal(attention_forward(q, k, v, p_drop=0.3, rng=rng, training=False)[0], plain)
    np.testing.assert_array_equal(attention_forward(q, k, v, p_drop=0.0, rng=rng)[0], plain)
    with pytest.raises(ValueError, match="rng: dropout with p_drop=0.3 in training needs a generator"):
        attention_forward(q, k, v, p_drop=0.3)


def test_fast_twin_hands_attention_dropout_to_the_plain_form():
    q, k, v = _qkv(2)
    drop_mask = np.random.default_rng(3).random((2, 2, 3, 4)) >= 0.3
    out, cache = attention_forward(q, k, v, p_drop=0.3, drop_mask=drop_mask)
    out_fast, cache_fast = fast_attention.attention_forward(q, k, v, p_drop=0.3, drop_mask=drop_mask)
    np.testing.assert_array_equal(out_fast, out)
    dout = normal_array(4, out.shape)
    for a, b in zip(attention_backward(dout, cache), fast_attention.attention_backward(dout, cache_fast)):
        np.testing.assert_array_equal(a, b)


@settings(max_examples=4)
@given(seed=seeds)
def test_gpt_with_attention_dropout_gradients_with_its_generator_replayed(seed):
    model = GPT(GPTConfig(**TINY, attn_p_drop=0.3), rng=seed % 1000, dtype=F64)
    ids = np.random.default_rng(seed).integers(0, 7, (2, 6))
    result = check_module(model, ids, seed=seed, max_coords=12, tol=1e-6)
    assert result.ok, str(result)


def test_gpt_attention_dropout_in_train_and_eval_mode():
    ids = np.random.default_rng(0).integers(0, 7, (2, 6))
    without = GPT(GPTConfig(**TINY), rng=0, dtype=F64).eval().forward(ids)
    model = GPT(GPTConfig(**TINY, attn_p_drop=0.5), rng=0, dtype=F64)
    np.testing.assert_array_equal(model.eval().forward(ids), without)           # eval: the identity
    assert not np.allclose(model.train().forward(ids), without)                  # train: masks drawn
    layer = model.blocks[0].attn.sublayer
    assert layer.rng is model.embed.dropout.rng                                  # one dropout generator
    with pytest.raises(ValueError, match="attn_p_drop: expected"):
        GPTConfig(**TINY, attn_p_drop=1.0)


# ------------------------------------------------------------------ RoPE position interpolation
@given(m=st.integers(0, 50), s=st.sampled_from([2, 3, 4, 8]), seed=seeds, layout=st.sampled_from(["interleaved", "half"]))
def test_rope_scale_s_at_position_s_m_is_scale_1_at_m(m, s, seed, layout):
    x = normal_array(seed, (1, 2, 3, 6))
    scaled, _ = rope_forward(x, offset=s * m, layout=layout, scale=float(s))  # positions s·m, s·m+1, s·m+2
    plain, _ = rope_forward(x[:, :, :1], offset=m, layout=layout)          # position m
    np.testing.assert_array_equal(scaled[:, :, :1], plain)                   # (s·m)/s = m exactly in float64
    # and the next positions turn by 1/s of a plain step: position s·m + 1 is plain position m + 1/s
    theta = 10000.0 ** (-np.arange(0, 6, 2) / 6)
    angle = (s * m + 1) / s * theta
    a, b = (x[..., 1, 0::2], x[..., 1, 1::2]) if layout == "interleaved" else (x[..., 1, :3], x[..., 1, 3:])
    ya = scaled[..., 1, 0::2] if layout == "interleaved" else scaled[..., 1, :3]
    np.testing.assert_allclose(ya, a * np.cos(angle) - b * np.sin(angle), rtol=0, atol=1e-12)


@given(seed=seeds, offset=st.integers(0, 20), scale=st.sampled_from([0.5, 2.0, 3.7]))
def test_rope_with_scale_gradients(seed, offset, scale):
    inputs = {"x": normal_array(seed, (2, 2, 3, 4))}
    result = check_pair(rope_forward, rope_backward, inputs, seed=seed, tol=TOL,
                        kwargs=dict(offset=offset, scale=scale))
    assert result.ok, str(result)


def test_rope_scale_with_kv_cache_matches_full_forward():
    layer = mha(positions=RoPE(scale=2.5), pattern=Causal())
    x = normal_array(1, (2, 6, 8))
    full = layer.forward(x)
    np.testing.assert_allclose(forward_in_chunks(layer, x, [1] * 6, KVCache()), full, rtol=0, atol=1e-12)


def test_rope_scale_errors():
    with pytest.raises(ValueError, match="scale: expected a number in \\(0"):
        rope_forward(normal_array(0, (1, 1, 2, 4)), scale=0.0)
    with pytest.raises(ValueError, match="rope_scale: position interpolation scales RoPE's angles"):
        GPTConfig(**TINY, rope_scale=2.0)


def test_position_losses_are_the_per_position_cross_entropy():
    model = GPT(GPTConfig(**TINY, position="rope"), rng=0, dtype=F64).eval()
    ids = np.random.default_rng(0).integers(0, 7, 40)
    losses = position_losses(model, ids, 6, n_windows=3)
    starts = [0, 16, 33]                                         # linspace(0, 40 - 6 - 1, 3)
    logits = model.forward(np.stack([ids[o:o + 6] for o in starts]))  # (3, 6, V)
    expected = np.zeros(6)
    for w, o in enumerate(starts):
        for t in range(6):
            z = logits[w, t]
            expected[t] += (np.log(np.exp(z - z.max()).sum()) + z.max() - z[ids[o + t + 1]]) / 3
    np.testing.assert_allclose(losses, expected, rtol=1e-12)
    longer = position_losses(model, ids, 12, n_windows=3)        # past block_size = 8: runs
    assert longer.shape == (12,) and np.all(np.isfinite(longer))
    with pytest.raises(ValueError, match="model: learned positions have no rows past block_size"):
        position_losses(GPT(GPTConfig(**TINY), rng=0), ids, 12)


def test_interpolation_figure_data(tmp_path):
    losses = {"a": np.arange(8.0), "b": np.ones(8)}
    _, data = interpolation_figure(losses, 4, path=tmp_path / "i.png")
    assert data["mean_within"] == {"a": 1.5, "b": 1.0} and data["mean_beyond"] == {"a": 5.5, "b": 1.0}
    assert (tmp_path / "i.png").read_bytes().startswith(b"\x89PNG")
    with pytest.raises(ValueError, match="losses: expected 1-D curves of one nonzero length"):
        interpolation_figure({"a": np.ones(3), "b": np.ones(4)}, 2)


def test_figures_command_draws_the_interpolation_figure(tmp_path, capsys):
    assert main(["figures", "--out", str(tmp_path), "--only", "interpolation", "--steps", "1"]) == 0
    assert (tmp_path / "rope_interpolation.png").read_bytes().startswith(b"\x89PNG")


# ------------------------------------------------------------------ attention sinks
def _keys(positions):
    """(1, 1, T, 2) keys whose entries are their text positions, to read back after eviction."""
    p = np.asarray(positions, dtype=np.float64)
    return np.stack([p, -p], axis=-1)[None, None]


def test_sink_cache_keeps_the_sinks_and_the_recent_window():
    cache = SinkKVCache(n_sink=2, window=3)                 # keeps 2 sinks + the 2 most recent
    held = []
    for t in range(7):
        k, _ = cache.append(_keys([t]), _keys([t]))
        held.append(cache.positions.tolist())
        assert k[0, 0, -1, 0] == t                          # this step sees the new key last
    assert held == [[0], [0, 1], [0, 1, 2], [0, 1, 2, 3], [0, 1, 3, 4], [0, 1, 4, 5], [0, 1, 5, 6]]
    np.testing.assert_array_equal(cache.k[0, 0, :, 0], [0, 1, 5, 6])
    np.testing.assert_array_equal(cache.v[0, 0, :, 1], [0, -1, -5, -6])
    assert cache.length == 4 and cache.seen == 7


def test_sink_cache_prompt_in_one_step_then_single_tokens():
    cache = SinkKVCache(n_sink=1, window=3)
    k, v = cache.append(_keys(range(6)), _keys(range(6)))   # a 6-token prompt: all 6 seen this step
    assert k.shape == (1, 1, 6, 2) and cache.positions.tolist() == [0, 4, 5]
    # the prompt's queries see the sink and their own window of 3 (the mask of this step)
    np.testing.assert_array_equal(cache.step_mask(6, 6, np), np.array([[1, 0, 0, 0, 0, 0],
                                                                        [1, 1, 0, 0, 0, 0],
                                                                        [1, 1, 1, 0, 0, 0],
                                                                        [1, 1, 1, 1, 0, 0],
                                                                        [1, 0, 1, 1, 1, 0],
                                                                        [1, 0, 0, 1, 1, 1]], bool))
    k, _ = cache.append(_keys([6]), _keys([6]))
    np.testing.assert_array_equal(k[0, 0, :, 0], [0, 4, 5, 6])  # sink + window of 3, itself included
    assert cache.positions.tolist() == [0, 5, 6]
    plain = SinkKVCache(n_sink=0, window=2)                 # no sinks: a sliding window
    for t in range(4):
        plain.append(_keys([t]), _keys([t]))
    assert plain.positions.tolist() == [3]


def _streaming_model(position, n_layer=2, seed=0):
    config = GPTConfig(vocab_size=7, block_size=8, n_layer=n_layer, n_head=2, d_model=8, d_ff=12,
                       init_std=0.4, position=position)
    return GPT(config, rng=seed, dtype=F64).eval()


@pytest.mark.parametrize("position", ["rope", "alibi", "none"])
def test_streaming_with_everything_kept_is_the_full_forward(position):
    model = _streaming_model(position)
    ids = np.random.default_rng(0).integers(0, 7, (2, 8))
    logp = log_softmax_forward(model.forward(ids[:, :-1]))[0]               # (2, 7, V)
    expected = -np.take_along_axis(logp, ids[:, 1:, None], axis=-1)[..., 0]
    np.testing.assert_allclose(streaming_nll(model, ids, window=6, n_sink=2), expected, rtol=1e-10)


@pytest.mark.parametrize("position", ["rope", "alibi"])
def test_one_layer_streaming_is_a_fresh_forward_on_the_kept_tokens(position):
    """One layer: a key depends only on its token and its slot, so the step at text position t
    equals a forward from scratch over the sinks then the window, at slots 0, 1, ..."""
    model = _streaming_model(position, n_layer=1)
    ids = np.random.default_rng(1).integers(0, 7, (1, 20))
    nll = streaming_nll(model, ids, window=4, n_sink=2)                     # (1, 19)
    for t in (5, 11, 18):
        kept = np.concatenate([ids[:, :2], ids[:, t - 3:t + 1]], axis=1)    # sinks 0, 1 and t-3 .. t
        logp = log_softmax_forward(model.forward(kept)[:, -1])[0]           # (1, V)
        assert nll[0, t] == pytest.approx(-logp[0, ids[0, t + 1]], rel=1e-10)


@pytest.mark.parametrize("strategy", ["greedy", "beam"])
def test_generation_runs_past_block_size_with_a_rolling_cache(strategy):
    model = _streaming_model("rope")
    prompt = np.array([[1, 2, 3], [4, 5, 6]])
    out = generate(model, prompt, 30, strategy=strategy, beam_size=2, cache_window=5, n_sink=2)
    assert out.shape == (2, 33) and out.dtype == np.int64                   # block_size is 8
    np.testing.assert_array_equal(out[:, :3], prompt)
    with pytest.raises(ValueError, match="max_new_tokens: with use_cache a prompt of 3 tokens"):
        generate(model, prompt, 30)                                          # the plain cache cannot slide


def test_rolling_cache_refusals_are_clear():
    prompt = np.array([[1, 2, 3]])
    with pytest.raises(ValueError, match="learned absolute positions cannot go past block_size=8"):
        generate(_streaming_model("learned"), prompt, 10, cache_window=4)
    with pytest.raises(ValueError, match="cache_window: the cache slots n_sink \\+ cache_window must fit "
                                         "block_size=8, got n_sink=4 \\+ cache_window=6"):
        generate(_streaming_model("rope"), prompt, 10, cache_window=6, n_sink=4)
    with pytest.raises(ValueError, match="cache_window: a rolling cache needs use_cache=True"):
        generate(_streaming_model("rope"), prompt, 10, cache_window=4, use_cache=False)
    with pytest.raises(ValueError, match="window: the cache slots n_sink \\+ window must fit block_size=8"):
        rolling_cache(_streaming_model("rope"), n_sink=2, window=7)


def test_sinks_figure_data(tmp_path):
    _, data = sinks_figure({"sinks": np.full(10, np.log(3.0)), "window": np.full(10, np.log(5.0))}, 4,
                           smooth=2, path=tmp_path / "s.png")
    assert data["perplexity"]["sinks"] == pytest.approx(3.0) and data["perplexity"]["window"] == pytest.approx(5.0)
    assert (tmp_path / "s.png").read_bytes().startswith(b"\x89PNG")


def test_figures_command_draws_the_sinks_figure(tmp_path, capsys):
    assert main(["figures", "--out", str(tmp_path), "--only", "sinks", "--steps", "1"]) == 0
    assert (tmp_path / "attention_sinks.png").read_bytes().startswith(b"\x89PNG")
