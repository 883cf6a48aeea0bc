"""MultiHeadAttention: gradients in every variant, causality, padding, equivariance,
grouped-query heads, the KV cache, and errors.

Tolerances: gradient checks 1e-7 (float64 central differences land near 1e-9 for a
correct backward, near 1 for a wrong one); float64 comparisons of two computations
of the same function 1e-12 (sums in another order: a few ulps of O(1) values).
init_std=0.5 in the gradient checks: with the default 0.02 every score is near 0 and
the softmax near uniform, which would leave most of its gradient untested.
"""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from minitransformer.functional import masks
from minitransformer.functional.alibi import alibi_slopes
from minitransformer.gradcheck import check_module
from minitransformer.layers import (ALiBi, Causal, Full, KVCache, MultiHeadAttention, NoPositions, RoPE,
                                    SlidingWindow, T5Bias)
from strategies import forward_in_chunks, head_counts, normal_array, seeds

TOL = 1e-7
layouts = st.sampled_from(["interleaved", "half"])


def mha(C, H, seed=0, **kw):
    return MultiHeadAttention(C, H, rng=seed, init_std=0.5, **kw).astype(np.float64)


@st.composite
def mha_variants(draw):
    """(C, H, keyword arguments) over every variant: self/cross, bias, kv heads, positions, window."""
    H, K = draw(head_counts())
    C = H * draw(st.sampled_from([2, 4]))
    kw = {"n_kv_head": K, "bias": draw(st.booleans()), "cross": draw(st.booleans())}
    if not kw["cross"]:
        causal = draw(st.booleans())
        kw["pattern"] = (SlidingWindow(draw(st.integers(1, 3))) if draw(st.booleans()) else Causal()) \
            if causal else Full()
        position = draw(st.sampled_from(["none", "rope", "alibi"]))
        kw["positions"] = {"none": NoPositions(), "rope": RoPE(draw(layouts)), "alibi": ALiBi()}[position]
    return C, H, kw


# ---------------------------------------------------------------- gradients
VARIANTS = {
    "self": {}, "no-bias": {"bias": False}, "causal": {"pattern": Causal()}, "gqa": {"n_kv_head": 2},
    "mqa": {"n_kv_head": 1, "pattern": Causal()}, "rope": {"pattern": Causal(), "positions": RoPE()},
    "rope-half": {"pattern": Causal(), "positions": RoPE("half")},
    "alibi": {"pattern": Causal(), "positions": ALiBi()}, "window": {"pattern": SlidingWindow(2)},
    "cross": {"cross": True}, "cross-mqa-no-bias": {"cross": True, "n_kv_head": 1, "bias": False},
}


def check_variant(C, H, kw, padded, seed):
    layer = mha(C, H, seed, **kw)
    B, T, S = 2, 3, 4 if kw.get("cross") else 3
    x = normal_array(seed, (B, T, C))
    inputs = (x, normal_array(seed + 1, (B, S, C))) if kw.get("cross") else (x,)
    lengths = np.random.default_rng(seed).integers(1, S + 1, size=B)
    kpm = (np.arange(S) < lengths[:, None]) if padded else None      # (B, S) True = real token
    return check_module(layer, *inputs, seed=seed, tol=TOL, forward_kwargs={"key_padding_mask": kpm})


@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "padded"])
@pytest.mark.parametrize("name", list(VARIANTS))
def test_mha_gradients_each_named_variant(name, padded):
    result = check_variant(8, 4, VARIANTS[name], padded, seed=0)
    assert result.ok, str(result)


@given(variant=mha_variants(), padded=st.booleans(), seed=seeds)
def test_mha_gradients_drawn_variants(variant, padded, seed):
    C, H, kw = variant
    result = check_variant(C, H, kw, padded, seed)
    assert result.ok, str(result)


# ---------------------------------------------------------------- causality
CAUSAL_VARIANTS = [{}, {"positions": RoPE()}, {"positions": RoPE("half")}, {"positions": ALiBi()},
                   {"pattern": SlidingWindow(2)}, {"n_kv_head": 2},
                   {"n_kv_head": 1, "positions": RoPE(), "pattern": SlidingWindow(3)}]


@given(variant=st.sampled_from(CAUSAL_VARIANTS), t=st.integers(0, 4), seed=seeds)
def test_no_causal_leak(variant, t, seed):
    """Changing the input after position t changes no output at or before t, and the
    outputs at or before t send exactly zero gradient to the positions after t."""
    layer = mha(8, 4, seed, **{"pattern": Causal(), **variant})
    x = normal_array(seed, (2, 6, 8))
    changed = x.copy()
    changed[:, t + 1:] = normal_array(seed + 1, changed[:, t + 1:].shape)
    np.testing.assert_array_equal(layer.forward(changed)[:, :t + 1], layer.forward(x)[:, :t + 1])
    dy = normal_array(seed + 2, (2, 6, 8))
    dy[:, t + 1:] = 0
    dx = layer.backward(dy)
    assert np.all(dx[:, t + 1:] == 0)


# ------------------------------------------------------------------ padding
@given(seed=seeds, KH=head_counts())
def test_cross_attention_ignores_padded_memory(seed, KH):
    """Padded memory positions change no output and receive exactly zero gradient."""
    H, K = KH
    layer = mha(2 * H, H, seed, n_kv_head=K, cross=True)
    x, memory = normal_array(seed, (2, 3, 2 * H)), normal_array(seed + 1, (2, 5, 2 * H))
    kpm = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 0]], bool)
    changed = memory.copy()
    changed[~kpm] = 100.0
    np.testing.assert_array_equal(layer.forward(x, changed, key_padding_mask=kpm),
                                  layer.forward(x, memory, key_padding_mask=kpm))
    _, dmemory = layer.backward(normal_array(seed + 2, (2, 3, 2 * H)))
    assert np.all(dmemory[~kpm] == 0)


# -------------------------------------------------------------- equivariance
@given(seed=seeds, KH=head_counts(), perm_seed=seeds)
def test_self_attention_without_positions_is_permutation_equivariant(seed, KH, perm_seed):
    H, K = KH
    layer = mha(2 * H, H, seed, n_kv_head=K)
    x = normal_array(seed, (2, 5, 2 * H))
    perm = np.random.default_rng(perm_seed).permutation(5)
    np.testing.assert_allclose(layer.forward(x[:, perm]), layer.forward(x)[:, perm], rtol=0, atol=1e-12)


# ------------------------------------------------------- heads and weights
def reference_mha(x, W_q, W_k, W_v, W_o, H, slopes=None):
    """Causal multi-head attention head by head, from separate W_q, W_k, W_v (no biases),
    with ALiBi's -slope_h · (i - j) added to head h's scores when slopes are given."""
    T, C = x.shape[1], x.shape[2]
    D = C // H
    i_minus_j = np.subtract.outer(np.arange(T), np.arange(T))
    heads = []
    for h in range(H):
        cols = slice(h * D, (h + 1) * D)
        q, k, v = x @ W_q[:, cols], x @ W_k[:, cols], x @ W_v[:, cols]     # (B, T, D)
        scores = q @ k.transpose(0, 2, 1) / np.sqrt(D)
        if slopes is not None:
            scores -= slopes[h] * i_minus_j
        scores[:, i_minus_j < 0] = -np.inf
        w = np.exp(scores - scores.max(axis=-1, keepdims=True))
        heads.append((w / w.sum(axis=-1, keepdims=True)) @ v)
    return np.concatenate(heads, axis=-1) @ W_o


@given(seed=seeds, H=st.integers(1, 4), alibi=st.booleans())
def test_fused_weight_blocks_are_q_k_v(seed, H, alibi):
    """With n_kv_head = n_head the layer is plain multi-head attention whose W_q, W_k, W_v
    are the three column blocks of W_qkv; with ALiBi, head h gets the h-th slope."""
    layer = mha(2 * H, H, seed, pattern=Causal(), bias=False, positions=ALiBi() if alibi else None)
    x = normal_array(seed, (2, 4, 2 * H))
    W_q, W_k, W_v = np.split(layer.W_qkv, 3, axis=1)
    expected = reference_mha(x, W_q, W_k, W_v, layer.W_o, H, alibi_slopes(H) if alibi else None)
    np.testing.assert_allclose(layer.forward(x), expected, rtol=0, atol=1e-12)


def split_kv_heads(W, H, K, D):
    """W_qkv-shaped (.., (H + 2K)·D) -> the q block and the k, v blocks as (.., K, D)."""
    q, k, v = np.split(W, [H * D, (H + K) * D], axis=-1)
    return q, k.reshape(*k.shape[:-1], K, D), v.reshape(*v.shape[:-1], K, D)


@given(seed=seeds, KH=head_counts(max_heads=6))
def test_grouped_query_equals_mha_with_repeated_kv_weights(seed, KH):
    """GQA = MHA whose kv head j is copied to its G query heads; the gradient of a shared
    kv weight is the sum of the copies' gradients."""
    H, K = KH
    G, D = H // K, 2
    gqa = mha(H * D, H, seed, n_kv_head=K, pattern=Causal(), positions=RoPE())
    plain = mha(H * D, H, seed, pattern=Causal(), positions=RoPE())
    for name in ("W_qkv", "b_qkv"):
        q, k, v = split_kv_heads(gqa.params[name], H, K, D)
        rep = [np.repeat(a, G, axis=-2).reshape(*q.shape[:-1], H * D) for a in (k, v)]
        plain.params[name][...] = np.concatenate([q, *rep], axis=-1)
    plain.W_o[...] = gqa.W_o
    x, dy = normal_array(seed, (2, 3, H * D)), normal_array(seed + 1, (2, 3, H * D))
    np.testing.assert_allclose(plain.forward(x), gqa.forward(x), rtol=0, atol=1e-12)
    np.testing.assert_allclose(plain.backward(dy), gqa.backward(dy), rtol=0, atol=1e-12)
    _, dk, dv = split_kv_heads(gqa.grads["W_qkv"], H, K, D)
    _, dk_plain, dv_plain = split_kv_heads(plain.grads["W_qkv"], H, H, D)
    np.testing.assert_allclose(dk, dk_plain.reshape(H * D, K, G, D).sum(axis=2), rtol=0, atol=1e-12)
    np.testing.assert_allclose(dv, dv_plain.reshape(H * D, K, G, D).sum(axis=2), rtol=0, atol=1e-12)


def test_parameters_and_initialisation():
    layer = MultiHeadAttention(64, 4, n_kv_head=2, rng=0, init_std=0.02, out_std=0.005)
    assert {k: v.shape for k, v in layer.params.items()} == {
        "W_qkv": (64, (4 + 2 * 2) * 16), "b_qkv": (128,), "W_o": (64, 64), "b_o": (64,)}
    assert layer.W_qkv.std() == pytest.approx(0.02, rel=0.05)      # 8192 draws: ~1% sampling error
    assert layer.W_o.std() == pytest.approx(0.005, rel=0.05)
    assert not layer.b_qkv.any() and not layer.b_o.any()
    cross = MultiHeadAttention(64, 4, n_kv_head=2, cross=True, bias=False, rng=0)
    assert {k: v.shape for k, v in cross.params.items()} == {
        "W_q": (64, 64), "W_kv": (64, 64), "W_o": (64, 64)}


# ------------------------------------------------------------------ KV cache
CACHE_VARIANTS = {  # learned (or no) positions: added outside attention, so the same as none here
    "none": {"pattern": Causal()}, "rope": {"pattern": Causal(), "positions": RoPE()},
    "rope-half": {"pattern": Causal(), "positions": RoPE("half")},
    "alibi": {"pattern": Causal(), "positions": ALiBi()}, "window": {"pattern": SlidingWindow(2)},
    "gqa": {"pattern": Causal(), "n_kv_head": 2, "positions": RoPE()},
    "mqa": {"pattern": Causal(), "n_kv_head": 1, "positions": ALiBi()},
}


@pytest.mark.parametrize("chunks", [[1] * 6, [2, 1, 3]])
@pytest.mark.parametrize("name", list(CACHE_VARIANTS))
def test_kv_cache_matches_full_forward(name, chunks):
    layer = mha(8, 4, **CACHE_VARIANTS[name])
    x = normal_array(1, (2, 6, 8))
    full = layer.forward(x)
    cache = KVCache()
    streamed = forward_in_chunks(layer, x, chunks, cache)
    assert cache.length == 6
    np.testing.assert_allclose(streamed, full, rtol=0, atol=1e-12)


def test_cross_attention_kv_cache_projects_the_memory_once():
    layer = mha(8, 4, n_kv_head=2, cross=True)
    x, memory = normal_array(0, (2, 4, 8)), normal_array(1, (2, 5, 8))
    kpm = np.array([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]], bool)
    full = layer.forward(x, memory, key_padding_mask=kpm)
    cache = KVCache()
    steps = [layer.forward(x[:, t:t + 1], memory if t == 0 else None, key_padding_mask=kpm, kv_cache=cache)
             for t in range(4)]
    assert cache.length == 5                                # the memory, stored once
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, rtol=0, atol=1e-12)


def test_kv_cache_append_and_reorder():
    cache = KVCache()
    pieces = [normal_array(i, (3, 2, n, 4)) for i, n in enumerate([2, 1, 1, 5])]
    for p in pieces:
        k, v = cache.append(p, 2 * p)
    np.testing.assert_array_equal(k, np.concatenate(pieces, axis=2))
    np.testing.assert_array_equal(v, 2 * k)
    cache.reorder(np.array([2, 2, 0]))                      # e.g. beams 2, 2 and 0 survive
    np.testing.assert_array_equal(cache.k, k[[2, 2, 0]])
    with pytest.raises(ValueError, match="kv_cache: holds keys"):
        cache.append(normal_array(0, (3, 1, 1, 4)), normal_array(0, (3, 1, 1, 4)))


def test_kv_cache_grows_by_doubling():
    """64 one-token appends fill 7 buffers (capacities 1, 2, 4, ..., 64), not 64."""
    cache, buffers = KVCache(), []
    for t in range(64):
        k, _ = cache.append(normal_array(t, (1, 1, 1, 2)), normal_array(t, (1, 1, 1, 2)))
        if not any(k.base is b for b in buffers):
            buffers.append(k.base)
    assert len(buffers) == 7


def test_bad_padding_mask_leaves_the_kv_cache_unchanged():
    layer, cache = mha(8, 2, pattern=Causal()), KVCache()
    layer.forward(normal_array(0, (1, 2, 8)), kv_cache=cache)
    with pytest.raises(ValueError, match="key_padding_mask: expected shape \\(1, 3\\)"):  # 2 cached + 1 new
        layer.forward(normal_array(1, (1, 1, 8)), key_padding_mask=np.ones((1, 1), bool), kv_cache=cache)
    assert cache.length == 2


def test_backward_after_cached_forward_is_a_clear_error():
    layer = mha(8, 2, pattern=Causal())
    layer.forward(normal_array(0, (1, 2, 8)), kv_cache=KVCache())
    assert layer.attention_probs() is None
    with pytest.raises(RuntimeError, match="kv_cache"):
        layer.backward(normal_array(0, (1, 2, 8)))


# ------------------------------------------------------- probs, dtype, masks
def test_attention_probs_of_the_pending_forward():
    layer = mha(8, 2, pattern=Causal())
    assert layer.attention_probs() is None
    x = normal_array(0, (3, 4, 8))
    layer.forward(x)
    P = layer.attention_probs()
    assert P.shape == (3, 2, 4, 4)
    np.testing.assert_allclose(P.sum(axis=-1), 1.0, rtol=1e-12)
    assert np.all(P[..., np.triu(np.ones((4, 4), bool), 1)] == 0)
    layer.backward(x)
    assert layer.attention_probs() is None                  # consumed by backward


def test_float32_stays_float32_and_astype_rebuilds_the_alibi_bias():
    layer = MultiHeadAttention(8, 4, n_kv_head=2, pattern=Causal(), positions=ALiBi(), rng=0)
    x = np.random.default_rng(0).standard_normal((2, 3, 8)).astype(np.float32)
    y = layer.forward(x)
    assert y.dtype == layer.attention_probs().dtype == np.float32
    assert layer.backward(y).dtype == np.float32
    assert all(g.dtype == np.float32 for g in layer.grads.values())
    layer.astype(np.float64)
    assert layer.forward(x.astype(np.float64)).dtype == np.float64


def test_causal_mask_is_built_once_per_shape_for_every_layer_sharing_the_pattern(monkeypatch):
    calls = []
    build = masks.causal_mask
    monkeypatch.setattr(masks, "causal_mask", lambda *a, **kw: calls.append(a) or build(*a, **kw))
    pattern = Causal()
    layers = [mha(8, 2, seed, pattern=pattern) for seed in range(2)]
    for T in (3, 3, 3, 2):
        for layer in layers:
            layer.forward(normal_array(T, (1, T, 8)))
    assert calls == [(3, 3), (2, 2)]


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match="d_model: expected a multiple of n_head=3"):
        MultiHeadAttention(8, 3)
    with pytest.raises(ValueError, match="n_kv_head: expected a divisor of n_head=4"):
        MultiHeadAttention(8, 4, n_kv_head=3)
    with pytest.raises(ValueError, match="positions: RoPE rotates pairs, .* must be even"):
        MultiHeadAttention(6, 2, positions=RoPE())
    with pytest.raises(ValueError, match="cross: .* expected no positions and no pattern"):
        MultiHeadAttention(8, 2, cross=True, positions=RoPE())
    with pytest.raises(ValueError, match="cross: .* expected no positions and no pattern"):
        MultiHeadAttention(8, 2, cross=True, pattern=Causal())
    with pytest.raises(TypeError, match="positions: expected a position hook"):
        MultiHeadAttention(8, 2, positions="rope")
    with pytest.raises(TypeError, match="pattern: expected an attention pattern"):
        MultiHeadAttention(8, 2, pattern="causal")
    with pytest.raises(ValueError, match="positions: T5's buckets must look the pattern's way"):
        MultiHeadAttention(8, 2, positions=T5Bias(bidirectional=True), pattern=Causal())
    layer, cross = MultiHeadAttention(8, 2, rng=0), MultiHeadAttention(8, 2, cross=True, rng=0)
    x = np.zeros((2, 3, 8), np.float32)
    with pytest.raises(ValueError, match="x: expected size 8 \\(C = d_model\\)"):
        layer.forward(x[..., :4])
    with pytest.raises(TypeError, match="x: expected dtype float32"):
        layer.forward(x.astype(np.float64))
    with pytest.raises(ValueError, match="memory: expected None for self-attention"):
        layer.forward(x, x)
    with pytest.raises(ValueError, match="memory: cross-attention expected the memory"):
        cross.forward(x)
    with pytest.raises(ValueError, match="key_padding_mask: expected shape \\(2, 3\\)"):
        layer.forward(x, key_padding_mask=np.ones((2, 4), bool))
    with pytest.raises(TypeError, match="key_padding_mask: expected a boolean array"):
        layer.forward(x, key_padding_mask=np.ones((2, 3)))
