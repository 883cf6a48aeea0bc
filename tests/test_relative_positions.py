"""Relative positions: Shaw et al. (2018) tables and T5's bucketed bias.

Gradients (float64, random upstream, masks drawn), the invariants that pin the
meaning (scores depend only on the clipped distance; far distances share a row; a
row no pair uses gets no gradient; T5 buckets computed by hand), the KV cache
equal to the full forward, tiny models that learn, and the errors.

Tolerances: gradient checks 1e-7 with step h = 5e-5 (the attention tests' reason:
a nearly saturated softmax row makes gradients ~1e-4, and the larger step keeps
the difference quotient's round-off below them; attention is smooth, so the
truncation error is ~h² = 2.5e-9). Module and model checks 1e-6 as in
test_models.py. Invariants of float64 arithmetic that differ only in the order of
the sums: 1e-12.
"""
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from minitransformer.functional.attention import attention_backward, attention_forward
from minitransformer.functional.masks import causal_mask, key_padding_mask
from minitransformer.functional.shaw import relative_index, shaw_attention_backward, shaw_attention_forward
from minitransformer.functional.t5_bias import relative_position_bucket, t5_bias_backward, t5_bias_forward
from minitransformer.generation.generate import LogitsStep
from minitransformer.gradcheck import check_module, check_pair
from minitransformer.layers import Causal, MultiHeadAttention, Shaw, T5Bias
from minitransformer.layers.kv_cache import KVCache
from minitransformer.training.checkpoint import load_checkpoint
from minitransformer.models import GPT, Encoder, EncoderConfig, GPTConfig, Seq2Seq, Seq2SeqConfig
from strategies import head_counts, integer_ids, normal_array, seeds

TOL = 1e-7
MODEL_TOL = 1e-6
EXACT = 1e-12
F64 = np.float64


# ----------------------------------------------------------------- Shaw et al.
@st.composite
def shaw_case(draw):
    """q, k, v, table_K, table_V, mask: drawn B, H, T <= S, D, Dv, clip k and mask kind."""
    B, H = draw(st.integers(1, 2)), draw(st.integers(1, 4))
    T, D, Dv = draw(st.integers(1, 4)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    S = T + draw(st.integers(0, 2))
    clip = draw(st.integers(0, 3))
    seed = draw(seeds)
    rng = np.random.default_rng(seed)
    kind = draw(st.sampled_from(["none", "causal", "padding", "random"]))
    mask = {"none": None,
            "causal": causal_mask(T, S),
            "padding": key_padding_mask(rng.integers(0, S + 1, size=B), S),  # length 0: rows fully masked
            "random": rng.random((B, H, T, S)) < 0.6}[kind]
    return dict(q=normal_array(seed, (B, H, T, D)), k=normal_array(seed + 1, (B, H, S, D)),
                v=normal_array(seed + 2, (B, H, S, Dv)), table_K=normal_array(seed + 3, (2 * clip + 1, D)),
                table_V=normal_array(seed + 4, (2 * clip + 1, Dv)), mask=mask)


@given(case=shaw_case(), seed=seeds)
def test_shaw_gradients_of_inputs_and_both_tables(case, seed):
    result = check_pair(shaw_attention_forward, shaw_attention_backward, case,
                        wrt=("q", "k", "v", "table_K", "table_V"), seed=seed, h=5e-5, tol=TOL)
    assert result.ok, str(result)


def test_shaw_clip_index_by_hand():
    """T = S = 5, k = 2: r_ij = clip(j - i, -2, 2) + 2, written out by hand."""
    expected = np.array([[2, 3, 4, 4, 4],
                         [1, 2, 3, 4, 4],
                         [0, 1, 2, 3, 4],
                         [0, 0, 1, 2, 3],
                         [0, 0, 0, 1, 2]])
    np.testing.assert_array_equal(relative_index(5, 5, 2), expected)
    # two new queries after 3 cached positions: they sit at positions 3 and 4
    np.testing.assert_array_equal(relative_index(2, 5, 2), expected[3:])


def test_shaw_with_zero_tables_is_plain_attention():
    """a^K = a^V = 0: the formula reduces to softmax(q kᵀ/√D + mask) v."""
    rng = np.random.default_rng(0)
    q, k, v = rng.standard_normal((2, 4, 5, 3)), rng.standard_normal((2, 4, 5, 3)), rng.standard_normal((2, 4, 5, 3))
    mask = causal_mask(5)
    zeros = np.zeros((5, 3))
    o, _ = shaw_attention_forward(q, k, v, zeros, zeros, mask)
    o_plain, _ = attention_forward(q, k, v, mask)
    np.testing.assert_allclose(o, o_plain, atol=EXACT, rtol=0)


def test_shaw_scores_depend_only_on_the_clipped_distance():
    """Put the same 4 queries, keys and values at positions 0..3 alone, and at positions 3..6
    of a 9-position sequence with random vectors around them: within the block,
    log P_ij - log P_ij' = e_ij - e_ij' is the same in both, since every j - i is."""
    rng = np.random.default_rng(1)
    D, clip = 4, 2
    q, k, v = (rng.standard_normal((1, 1, 4, D)) for _ in range(3))
    tables = rng.standard_normal((2 * clip + 1, D)), rng.standard_normal((2 * clip + 1, D))
    junk = lambda n: rng.standard_normal((1, 1, n, D))                              # noqa: E731
    _, alone = shaw_attention_forward(q, k, v, *tables)
    place = lambda x: np.concatenate([junk(3), x, junk(2)], axis=2)                # positions 3..6 of 9
    _, shifted = shaw_attention_forward(place(q), place(k), place(v), *tables)
    log_alone = np.log(alone.probs[0, 0])                                          # (4, 4)
    log_shifted = np.log(shifted.probs[0, 0, 3:7, 3:7])                            # (4, 4) the same block
    np.testing.assert_allclose(log_alone - log_alone[:, :1], log_shifted - log_shifted[:, :1],
                               atol=1e-12, rtol=0)


def test_shaw_far_distances_share_the_edge_row():
    """T = S = 4 has distances -3..3. With k = 1 the three rows [a, b, c] mean the same as
    the k = 3 table [a, a, a, b, c, c, c]: same output, and the k = 1 gradient of an edge
    row is the sum of the gradients of the k = 3 rows it stands for."""
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((2, 2, 4, 3)) for _ in range(3))
    small_K, small_V = rng.standard_normal((3, 3)), rng.standard_normal((3, 3))
    spread = [0, 0, 0, 1, 2, 2, 2]
    big_K, big_V = small_K[spread], small_V[spread]
    do = rng.standard_normal((2, 2, 4, 3))
    o_small, c_small = shaw_attention_forward(q, k, v, small_K, small_V)
    o_big, c_big = shaw_attention_forward(q, k, v, big_K, big_V)
    np.testing.assert_allclose(o_small, o_big, atol=EXACT, rtol=0)
    g_small, g_big = shaw_attention_backward(do, c_small), shaw_attention_backward(do, c_big)
    for d_small, d_big in ((g_small[3], g_big[3]), (g_small[4], g_big[4])):
        regrouped = np.stack([d_big[0:3].sum(0), d_big[3], d_big[4:7].sum(0)])
        np.testing.assert_allclose(d_small, regrouped, atol=EXACT, rtol=0)


def test_shaw_rows_no_pair_uses_get_no_gradient():
    """T = S = 3 has distances -2..2; with k = 4 rows 0, 1 (-4, -3) and 7, 8 (3, 4) are unused."""
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((1, 2, 3, 2)) for _ in range(3))
    o, cache = shaw_attention_forward(q, k, v, rng.standard_normal((9, 2)), rng.standard_normal((9, 2)))
    _, _, _, dtable_K, dtable_V = shaw_attention_backward(rng.standard_normal(o.shape), cache)
    for dtable in (dtable_K, dtable_V):
        assert np.all(dtable[[0, 1, 7, 8]] == 0.0)
        assert np.all(np.abs(dtable[2:7]).sum(axis=1) > 0)


def test_shaw_fully_masked_row_outputs_zero_and_passes_zero_gradient():
    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal((2, 1, 3, 2)) for _ in range(3))
    mask = key_padding_mask(np.array([3, 0]), 3)               # sequence 1: every key is padding
    o, cache = shaw_attention_forward(q, k, v, rng.standard_normal((3, 2)), rng.standard_normal((3, 2)), mask)
    assert np.all(o[1] == 0.0) and np.all(np.isfinite(o))
    dq, dk, dv, _, _ = shaw_attention_backward(rng.standard_normal(o.shape), cache)
    assert np.all(dq[1] == 0.0) and np.all(dk[1] == 0.0) and np.all(dv[1] == 0.0)


# ------------------------------------------------------------------------- T5
def test_t5_buckets_by_hand():
    """T5's rule, n = i - j (how far back the key is), computed by hand:

    bidirectional, 32 buckets, max_distance 128: half = 16, max_exact = 8, keys after the
    query (n < 0) get +16 and n := |n|; n >= 8 -> 8 + floor(ln(n/8) / ln(128/8) · 8), at most 15.
        n = 20:   ln(2.5)/ln(16)·8 = 2.64  -> 10;    n = 100: ln(12.5)/ln(16)·8 = 7.29 -> 15
        n = 1000: 8 + floor(13.9) = 21 -> capped at 15
    causal, 32 buckets, max_distance 128: half = 32, max_exact = 16, n := max(n, 0);
    n >= 16 -> 16 + floor(ln(n/16) / ln(8) · 16), at most 31.
        n = 20:  ln(1.25)/ln(8)·16 = 1.72 -> 17;   n = 100: ln(6.25)/ln(8)·16 = 14.1 -> 30
        n = 127: 15.94 -> 31;   n = 128: 16 -> 32, capped at 31
    """
    j_minus_i = np.array([0, -3, 3, -20, 20, -100, -1000])
    np.testing.assert_array_equal(relative_position_bucket(j_minus_i, True, 32, 128),
                                  [0, 3, 19, 10, 26, 15, 15])
    j_minus_i = np.array([0, 5, -5, -20, -100, -127, -128])
    np.testing.assert_array_equal(relative_position_bucket(j_minus_i, False, 32, 128),
                                  [0, 0, 5, 17, 30, 31, 31])


@given(n_buckets=st.integers(4, 40), extra=st.integers(1, 200), bidirectional=st.booleans())
def test_t5_buckets_grow_with_distance_and_stay_in_range(n_buckets, extra, bidirectional):
    half = n_buckets // 2 if bidirectional else n_buckets
    max_distance = half // 2 + extra
    back = relative_position_bucket(-np.arange(0, 3 * max_distance), bidirectional, n_buckets, max_distance)
    assert np.all(np.diff(back) >= 0) and back.min() == 0 and back.max() <= half - 1
    np.testing.assert_array_equal(back[:half // 2], np.arange(half // 2))          # exact small distances
    ahead = relative_position_bucket(np.arange(1, 3 * max_distance), bidirectional, n_buckets, max_distance)
    if bidirectional:
        assert np.all(np.diff(ahead) >= 0) and ahead.min() >= half and ahead.max() <= 2 * half - 1
    else:
        assert np.all(ahead == 0)                                                  # the future: bucket 0


@given(H=st.integers(1, 3), T=st.integers(1, 4), extra=st.integers(0, 3), bidirectional=st.booleans(),
       n_buckets=st.integers(4, 9), batch=st.booleans(), seed=seeds)
def test_t5_bias_gradient_of_the_table(H, T, extra, bidirectional, n_buckets, batch, seed):
    """The table's gradient, from a (H, T, S) dbias or a (B, H, T, S) one summed over B."""
    table = normal_array(seed, (n_buckets, H))
    max_exact = (n_buckets // 2 if bidirectional else n_buckets) // 2
    kwargs = dict(T=T, S=T + extra, bidirectional=bidirectional, max_distance=max_exact + 1)

    def forward(table):
        bias, cache = t5_bias_forward(table, **kwargs)
        return (np.stack([bias, 2 * bias]) if batch else bias), cache   # a batch of 2: dbias summed over B

    def backward(dout, cache):
        return t5_bias_backward(dout[0] + 2 * dout[1] if batch else dout, cache)

    result = check_pair(forward, backward, {"table": table}, seed=seed, tol=TOL)
    assert result.ok, str(result)
    dbias = normal_array(seed + 1, (2, H, T, T + extra))
    np.testing.assert_allclose(t5_bias_backward(dbias, t5_bias_forward(table, **kwargs)[1]),
                               t5_bias_backward(dbias.sum(0), t5_bias_forward(table, **kwargs)[1]),
                               atol=EXACT, rtol=0)


def test_t5_bias_reads_the_table_by_bucket():
    """bias[h, i, j] = table[bucket(j - i), h]; causal, 4 buckets, max_distance 3: max_exact 2,
    distances 0, 1 exact, 2 -> 2 + floor(ln(2/2)/ln(3/2)·2) = 2, 3 and beyond -> min(2 + 3, 3) = 3."""
    table = np.arange(8.0).reshape(4, 2)                       # row m = (2m, 2m + 1)
    bias, _ = t5_bias_forward(table, 5, 5, False, 3)
    expected_rows = np.array([[0, 0, 0, 0, 0],
                              [1, 0, 0, 0, 0],
                              [2, 1, 0, 0, 0],
                              [3, 2, 1, 0, 0],
                              [3, 3, 2, 1, 0]])
    np.testing.assert_array_equal(bias[0], 2 * expected_rows)
    np.testing.assert_array_equal(bias[1], 2 * expected_rows + 1)


def test_attention_returns_the_bias_gradient_the_t5_table_needs():
    """Through attention: the composite table -> bias -> attention -> o is checked end to end."""
    rng = np.random.default_rng(5)
    q, k, v = rng.standard_normal((2, 3, 4, 2)), rng.standard_normal((2, 3, 6, 2)), rng.standard_normal((2, 3, 6, 2))

    def forward(table):
        bias, t5 = t5_bias_forward(table, 4, 6, True, 4)
        o, attn = attention_forward(q, k, v, causal_mask(4, 6), bias)
        return o, (t5, attn)

    def backward(do, cache):
        t5, attn = cache
        return t5_bias_backward(attention_backward(do, attn)[3], t5)

    result = check_pair(forward, backward, {"table": rng.standard_normal((6, 3))}, h=5e-5, tol=TOL)
    assert result.ok, str(result)


# --------------------------------------------------------- the Module and models
@settings(max_examples=12)
@given(relative=st.sampled_from(["shaw", "t5"]), causal=st.booleans(), heads=head_counts(),
       padded=st.booleans(), seed=seeds)
def test_mha_gradients_with_relative_positions(relative, causal, heads, padded, seed):
    H, G = heads
    positions = Shaw(2) if relative == "shaw" else T5Bias(not causal, n_buckets=6, max_distance=4)
    mha = MultiHeadAttention(2 * H, H, n_kv_head=G, positions=positions, pattern=Causal() if causal else None,
                             rng=seed % 1000, init_std=0.5, dtype=F64)
    x = normal_array(seed, (2, 5, 2 * H))
    mask = np.array([[True] * 5, [True] * 3 + [False] * 2]) if padded else None
    result = check_module(mha, x, forward_kwargs={"key_padding_mask": mask}, seed=seed, h=5e-5,
                          tol=MODEL_TOL)
    assert result.ok, str(result)


@pytest.mark.parametrize("relative", ["shaw", "t5"])
def test_mha_kv_cache_equals_the_full_forward(relative):
    """Causal: 3 tokens, then 1, then 2 through the cache give the rows of one 6-token forward."""
    positions = Shaw(2) if relative == "shaw" else T5Bias(False, n_buckets=6, max_distance=4)
    mha = MultiHeadAttention(8, 4, n_kv_head=2, positions=positions, pattern=Causal(), rng=0, init_std=0.5,
                             dtype=F64)
    x = np.random.default_rng(6).standard_normal((2, 6, 8))
    full = mha.forward(x)
    cache = KVCache()
    steps = [mha.forward(x[:, a:b], kv_cache=cache) for a, b in ((0, 3), (3, 4), (4, 6))]
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, atol=EXACT, rtol=0)


TINY = dict(vocab_size=9, block_size=8, n_layer=2, n_head=2, d_model=8, d_ff=12, init_std=0.4,
            relative_clip=2, relative_buckets=6, relative_max_distance=4)


@pytest.mark.parametrize("position", ["shaw", "t5"])
def test_gpt_and_seq2seq_cached_logits_equal_the_full_rerun(position):
    ids = integer_ids(7, (2, 8), 9)
    gpt = GPT(GPTConfig(**TINY, position=position), rng=0, dtype=F64).eval()
    cached, rerun = LogitsStep(gpt, use_cache=True), LogitsStep(gpt, use_cache=False)
    np.testing.assert_allclose(cached(ids[:, :3]), rerun(ids[:, :3]), atol=EXACT, rtol=EXACT)
    for t in range(3, 8):
        np.testing.assert_allclose(cached(ids[:, t:t + 1]), rerun(ids[:, t:t + 1]), atol=EXACT, rtol=EXACT)
    model = Seq2Seq(Seq2SeqConfig(**TINY, position=position), rng=0, dtype=F64).eval()
    src = ids[:, :5] + (ids[:, :5] == 0)                      # no PAD in the source
    memory, mask = model.encode(src), model.source_mask(src)
    cached = LogitsStep(model.decoder, memory, mask, use_cache=True)
    rerun = LogitsStep(model.decoder, memory, mask, use_cache=False)
    for t in range(6):
        np.testing.assert_allclose(cached(ids[:, t:t + 1]), rerun(ids[:, t:t + 1]), atol=EXACT, rtol=EXACT)


@pytest.mark.parametrize("position", ["shaw", "t5"])
def test_every_family_gets_its_tables_and_keeps_float32(position):
    names = {"shaw": ("rel_K", "rel_V"), "t5": ("rel_bias",)}[position]
    models = [GPT(GPTConfig(**TINY, position=position)),
              Encoder(EncoderConfig(**TINY, position=position)),
              Seq2Seq(Seq2SeqConfig(**TINY, position=position))]
    for model in models:
        params = {n: p for n, p, _ in model.parameters()}
        relative = [n for n in params if n.rsplit(".", 1)[-1] in names]
        assert relative and not any("cross_attn" in n for n in relative)
        assert all(params[n].dtype == np.float32 for n in relative)
    shapes = {n.rsplit(".", 1)[-1]: p.shape for n, p, _ in models[0].parameters() if "rel_" in n}
    assert shapes == ({"rel_K": (5, 4), "rel_V": (5, 4)} if position == "shaw" else {"rel_bias": (6, 2)})


@pytest.mark.parametrize("position", ["shaw", "t5"])
def test_tiny_gpt_learns_with_the_command(position, tmp_path):
    """`train --position shaw|t5` for 60 steps: the mean loss of the last 10 steps is at least
    0.5 nats below that of the first 10 (at the start it is near ln V ≈ 4.6 for the
    character vocabulary; both schemes end near 3.7)."""
    out = subprocess.run([sys.executable, "-m", "minitransformer", "train", "--position", position,
                          "--steps", "60", "--n-layer", "1", "--d-model", "32", "--block-size", "32",
                          "--eval-interval", "1000", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    meta = load_checkpoint(tmp_path / "checkpoint.npz")[2]
    assert meta["config"]["position"] == position
    losses = [loss for _, loss in meta["history"]]                 # (step, training loss) per step
    assert len(losses) == 60
    assert np.mean(losses[-10:]) < np.mean(losses[:10]) - 0.5, losses


# ------------------------------------------------------------------- bad input
def test_errors_name_the_argument():
    q = np.zeros((1, 1, 2, 2))
    with pytest.raises(ValueError, match="table_K: expected an odd number of rows"):
        shaw_attention_forward(q, q, q, np.zeros((4, 2)), np.zeros((4, 2)))
    with pytest.raises(ValueError, match="table_V: expected size 2"):
        shaw_attention_forward(q, q, q, np.zeros((3, 2)), np.zeros((3, 5)))
    with pytest.raises(TypeError, match="table_K: expected dtype"):
        shaw_attention_forward(q, q, q, np.zeros((3, 2), np.float32), np.zeros((3, 2)))
    with pytest.raises(TypeError, match="relative_position: expected an integer array"):
        relative_position_bucket(np.zeros(3), True, 32, 128)
    with pytest.raises(ValueError, match="n_buckets: expected an integer in \\[4, inf\\]"):
        relative_position_bucket(np.zeros(3, int), True, 3, 128)
    with pytest.raises(ValueError, match="max_distance: expected an integer in \\[9, inf\\]"):
        relative_position_bucket(np.zeros(3, int), True, 32, 8)
    with pytest.raises(ValueError, match="dbias: expected shape \\(2, 3, 3\\)"):
        t5_bias_backward(np.zeros((2, 3, 4)), t5_bias_forward(np.zeros((4, 2)), 3, 3, True, 3)[1])
    with pytest.raises(ValueError, match="position: expected one of"):
        GPTConfig(position="t6")
    with pytest.raises(ValueError, match="cross: cross-attention has no shared time axis"):
        MultiHeadAttention(8, 2, cross=True, positions=Shaw(2))
    with pytest.raises(ValueError, match="relative_clip: expected an integer in \\[0, inf\\]"):
        GPTConfig(position="shaw", relative_clip=-1)
    with pytest.raises(ValueError, match="relative_buckets: expected an integer in \\[4, inf\\]"):
        EncoderConfig(position="t5", relative_buckets=3)
    with pytest.raises(ValueError, match="relative_max_distance"):
        Seq2SeqConfig(position="t5", relative_buckets=32, relative_max_distance=8)
    assert GPTConfig(position="t5", relative_buckets=3, relative_max_distance=2).relative_buckets == 3


# --------------------------------------------------------------------- figure
def test_relative_positions_figure_draws_the_index_and_the_buckets(tmp_path):
    from minitransformer.plots.positions import relative_positions
    _, data = relative_positions(T=6, clip=1, n_buckets=8, max_distance=5, path=tmp_path / "rel.png")
    assert (tmp_path / "rel.png").stat().st_size > 0
    d = data["distance"]
    np.testing.assert_array_equal(data["shaw"], np.where(d > 0, 2, np.where(d < 0, 0, 1)))
    assert np.all(data["t5_causal"][d > 0] == 0)               # the future: bucket 0
    assert np.all(data["t5_bidirectional"][d > 0] >= 4)        # keys after the query: upper half
    np.testing.assert_array_equal(np.diag(data["t5_bidirectional"], -1), 1)   # one back: exact bucket 1
