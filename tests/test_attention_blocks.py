"""The attention twin's query-block path (fast/kernels/attention_blocks.py).

Under a causal-shaped mask the twin computes each block of query rows only over the
keys that block can see. In training it runs from T = 256 (2 blocks of 128 rows); here
the block sizes are made small (MIN_BLOCK_ROWS, BATCH_BYTES patched) so that Hypothesis
can draw many shapes quickly, and every test first asserts that the path was taken.
Tolerances as in test_kernels.py: 1e-12 (float64), 1e-5 (float32) of the largest entry.
"""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from minitransformer.functional import masks
from minitransformer.fast.kernels import attention_blocks, twin_of
from minitransformer.functional.attention import attention_backward, attention_forward
from minitransformer.functional.heads import merge_heads

from strategies import normal_array, seeds
from test_kernels import TOL, assert_pair, assert_twin

dtypes = st.sampled_from([np.float64, np.float32])


def small_blocks(mp, batch_bytes=64):
    """Blocks of one row at least, a few batch rows per step: the path runs from T = 2."""
    mp.setattr(attention_blocks, "MIN_BLOCK_ROWS", 1)
    mp.setattr(attention_blocks, "BATCH_BYTES", batch_bytes)


def test_query_blocks_and_their_causal_edges_by_hand(monkeypatch):
    small_blocks(monkeypatch)
    assert attention_blocks.query_blocks(8, 8) == ((0, 2, 2), (2, 4, 4), (4, 6, 6), (6, 8, 8))
    # a KV cache of 3 earlier keys: query i sits at i + 3 and sees keys 0..i + 3
    assert attention_blocks.query_blocks(8, 11) == ((0, 2, 5), (2, 4, 7), (4, 6, 9), (6, 8, 11))
    assert attention_blocks.query_blocks(1, 1) is None                      # one row: nothing to cut


def test_masks_without_a_causal_shape_take_the_whole_path(monkeypatch):
    small_blocks(monkeypatch)
    blocks = attention_blocks.query_blocks(8, 8)
    assert attention_blocks.mask_hides_past_edges(masks.causal_mask(8), blocks)
    assert attention_blocks.mask_hides_past_edges(masks.sliding_window_mask(8, 3), blocks)
    assert not attention_blocks.mask_hides_past_edges(masks.causal_mask(8)[::-1], blocks)
    assert not attention_blocks.mask_hides_past_edges(np.ones((8, 8), bool), blocks)      # bidirectional
    assert not attention_blocks.mask_hides_past_edges(np.ones((2, 1, 1, 8), bool), blocks)  # padding only
    assert not attention_blocks.mask_hides_past_edges(None, blocks)
    rows_only = np.arange(8)[:, None] % 2 == 0                     # (T, 1): even queries see every key
    assert not attention_blocks.mask_hides_past_edges(rows_only, blocks)
    P = np.tril(np.ones((1, 1, 8, 8)))
    assert attention_blocks.probs_zero_past_edges(P, blocks)
    P[0, 0, 1, 2] = 1e-30                                          # one entry past the first edge
    assert not attention_blocks.probs_zero_past_edges(P, blocks)
    P[0, 0, 1, 2] = np.nan
    assert not attention_blocks.probs_zero_past_edges(P, blocks)


def test_training_sizes_take_the_path_and_short_sequences_do_not():
    """With the shipped constants: T = 128 (config b) in 2 blocks of 64 rows, T = 256 (config c) and
    longer in 4; T = 64 (config a) and shorter whole (blocks of fewer rows are no faster in a
    training step: benchmarks/RESULTS.md)."""
    assert [b[:2] for b in attention_blocks.query_blocks(128, 128)] == [(0, 64), (64, 128)]
    assert [b[:2] for b in attention_blocks.query_blocks(256, 256)] == [(0, 64), (64, 128), (128, 192), (192, 256)]
    assert len(attention_blocks.query_blocks(1024, 1024)) == 4
    assert attention_blocks.query_blocks(64, 64) is None


@st.composite
def causal_shaped_masks(draw, B, T, S):
    """A causal or sliding-window mask (T, S), optionally with key padding per batch row."""
    window = draw(st.one_of(st.none(), st.integers(1, S)))
    time_mask = masks.causal_mask(T, S) if window is None else masks.sliding_window_mask(T, window, S)
    if not draw(st.booleans()):
        return time_mask
    lengths = draw(st.lists(st.integers(1, S), min_size=B, max_size=B))   # real keys per batch row
    padding = np.arange(S)[None, :] >= np.array(lengths)[:, None]        # (B, S) True = padding
    return masks.combine_masks(time_mask, masks.key_padding_mask(padding=padding))


@given(data=st.data(), B=st.integers(1, 3), H=st.integers(1, 3), T=st.integers(2, 13),
       offset=st.integers(0, 4), D=st.integers(1, 4), dtype=dtypes, seed=seeds,
       batch_bytes=st.sampled_from([64, 10**6]))
def test_block_path_equals_the_plain_form(data, B, H, T, offset, D, dtype, seed, batch_bytes):
    """Output, P, and dq, dk, dv equal the plain form's; caches feed either backward."""
    S = T + offset
    mask = data.draw(causal_shaped_masks(B, T, S))
    q, k, v = (normal_array(seed + i, (B, H, n, D), 1.0, dtype) for i, n in enumerate((T, S, S)))
    dout = normal_array(seed + 3, (B, H, T, D), 1.0, dtype)
    with pytest.MonkeyPatch.context() as mp:
        small_blocks(mp, batch_bytes)
        blocks = attention_blocks.query_blocks(T, S)
        assert attention_blocks.mask_hides_past_edges(mask, blocks)            # the forward takes the path
        cache_plain, cache_fast = assert_pair(attention_forward, attention_backward, (q, k, v, mask), dout,
                                              TOL[dtype])
        assert attention_blocks.probs_zero_past_edges(cache_fast.probs, blocks)  # and the backward
        expected = attention_backward(dout, cache_plain)
        for mixed in (attention_backward(dout, cache_fast), twin_of(attention_backward)(dout, cache_plain)):
            for g_mixed, g_plain in zip(mixed, expected):          # either cache, either backward
                assert_twin(g_mixed, g_plain, TOL[dtype])


@given(B=st.integers(1, 3), T=st.integers(4, 12), dtype=dtypes, seed=seeds)
def test_keys_no_query_sees_get_zero_gradient_and_nothing_leaks(B, T, dtype, seed):
    """Padding the last keys of every batch row: their dk, dv are exactly 0; output row i
    does not change when keys past i change (no leak past the causal edge)."""
    H, D, n_pad = 2, 3, 2
    q, k, v, dout = (normal_array(seed + i, (B, H, T, D), 1.0, dtype) for i in range(4))
    padding = np.zeros((B, T), bool)
    padding[:, T - n_pad:] = True
    mask = masks.combine_masks(masks.causal_mask(T), masks.key_padding_mask(padding=padding))
    with pytest.MonkeyPatch.context() as mp:
        small_blocks(mp)
        out, cache = twin_of(attention_forward)(q, k, v, mask)
        assert attention_blocks.probs_zero_past_edges(cache.probs, attention_blocks.query_blocks(T, T))
        _, dk, dv = twin_of(attention_backward)(dout, cache)
        assert np.all(dk[:, :, T - n_pad:] == 0) and np.all(dv[:, :, T - n_pad:] == 0)
        k2, v2 = k.copy(), v.copy()
        k2[:, :, T // 2:] += 5.0                                   # change the keys from T // 2 on
        v2[:, :, T // 2:] -= 5.0
        out2, _ = twin_of(attention_forward)(q, k2, v2, masks.causal_mask(T))
        out1, _ = twin_of(attention_forward)(q, k, v, masks.causal_mask(T))
        np.testing.assert_array_equal(out2[:, :, :T // 2], out1[:, :, :T // 2])


def test_block_path_keeps_the_merged_heads_layout(monkeypatch):
    """out and dq, dk, dv sit in the buffers merge_heads reshapes without a copy, as on the whole path."""
    small_blocks(monkeypatch)
    q, k, v, dout = (normal_array(i, (2, 3, 8, 4), 1.0, np.float32) for i in range(4))
    out, cache = twin_of(attention_forward)(q, k, v, masks.causal_mask(8))
    assert attention_blocks.mask_hides_past_edges(masks.causal_mask(8), attention_blocks.query_blocks(8, 8))
    dq, dk, dv = twin_of(attention_backward)(dout, cache)
    assert np.shares_memory(twin_of(merge_heads)(out), out)
    assert np.shares_memory(twin_of(merge_heads)(dq, dk, dv), dq)
