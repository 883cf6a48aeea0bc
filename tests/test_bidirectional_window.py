"""Bidirectional (encoder) sliding windows, Longformer's local attention: the mask against
its definition, the encoder that uses it, its gradients, and what it refuses."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from minitransformer.functional.masks import bidirectional_window_mask, sliding_window_mask
from minitransformer.gradcheck import check_module
from minitransformer.layers import BidirectionalWindow, Full, MultiHeadAttention
from minitransformer.models import Encoder, EncoderConfig, Seq2Seq, Seq2SeqConfig
from strategies import integer_ids, normal_array, seeds

TOL = 1e-7  # float64 central differences land near 1e-9 for a correct backward, near 1 for a bug


def test_window_2_on_five_positions():
    expected = np.array([[1, 1, 0, 0, 0],
                         [1, 1, 1, 0, 0],
                         [0, 1, 1, 1, 0],
                         [0, 0, 1, 1, 1],
                         [0, 0, 0, 1, 1]], bool)
    np.testing.assert_array_equal(bidirectional_window_mask(5, 2), expected)


@given(T=st.integers(1, 7), extra=st.integers(0, 3), window=st.integers(1, 9))
def test_mask_is_the_distance_rule_both_ways_and_contains_the_causal_window(T, extra, window):
    S = T + extra
    mask = bidirectional_window_mask(T, window, S)
    for i in range(T):
        for j in range(S):
            assert mask[i, j] == (abs(i + S - T - j) < window)      # query i sits at i + S - T
    assert np.all(mask >= sliding_window_mask(T, window, S))        # the causal half is inside
    if window >= S:
        assert mask.all()


def test_encoder_with_a_window_attends_only_near_keys():
    # Changing token 7 changes the outputs within reach only: one layer with window 2 reaches
    # |i - 7| <= 1; two layers reach |i - 7| <= 2 (each layer widens the receptive field).
    for n_layer, reach in ((1, 1), (2, 2)):
        config = EncoderConfig(vocab_size=9, block_size=12, n_layer=n_layer, n_head=2, d_model=8, window=2,
                               position="none", mlm_head=False)
        model = Encoder(config, rng=0, dtype=np.float64)
        ids = np.arange(12)[None] % 9
        changed = ids.copy()
        changed[0, 7] = (changed[0, 7] + 1) % 9
        moved = np.abs(model.forward(changed) - model.forward(ids)).max(axis=-1)[0]   # (12,)
        near = np.abs(np.arange(12) - 7) <= reach
        assert np.all(moved[near] > 0) and np.all(moved[~near] == 0), (n_layer, moved)


@settings(max_examples=5)
@given(window=st.integers(1, 4), seed=seeds)
def test_windowed_encoder_gradients(window, seed):
    layer = MultiHeadAttention(8, 2, pattern=BidirectionalWindow(window), rng=seed, init_std=0.4).astype(np.float64)
    result = check_module(layer, normal_array(seed + 1, (2, 5, 8)), seed=seed, h=5e-5, tol=TOL)
    assert result.ok, str(result)
    config = EncoderConfig(vocab_size=9, block_size=6, n_layer=1, n_head=2, d_model=8, window=window,
                           init_std=0.4)
    model = Encoder(config, rng=seed).astype(np.float64)
    result = check_module(model, integer_ids(seed, (2, 6), 9), forward_kwargs={"head": "mlm"}, seed=seed,
                          max_coords=8, tol=TOL)
    assert result.ok, str(result)


def test_seq2seq_encoder_keeps_full_attention_and_encoders_refuse_causal_patterns():
    model = Seq2Seq(Seq2SeqConfig(vocab_size=9, block_size=6, n_head=2, d_model=8, window=2), rng=0)
    assert type(model.encoder.blocks[0].attn.sublayer.pattern) is Full     # the decoder's window only
    assert model.decoder.blocks[0].attn.sublayer.pattern.window == 2
    with pytest.raises(ValueError, match="dilation, global_positions: the sparse patterns are causal"):
        EncoderConfig(window=2, dilation=2)
    with pytest.raises(ValueError, match=r"window: expected an integer in \[1"):
        bidirectional_window_mask(4, 0)
