"""Masks: exact patterns written out by hand, the KV-cache offset, and argument errors."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from minitransformer.functional.masks import (additive_mask, causal_mask, combine_masks,
                                              dilated_window_mask, global_window_mask,
                                              key_padding_mask, sliding_window_mask)


def bools(rows):
    return np.array(rows, dtype=bool)


def test_causal_mask_pattern():
    np.testing.assert_array_equal(causal_mask(3), bools([[1, 0, 0],
                                                         [1, 1, 0],
                                                         [1, 1, 1]]))


def test_causal_mask_with_cached_keys_places_queries_last():
    # 2 new queries after 2 cached keys: they sit at positions 2 and 3.
    np.testing.assert_array_equal(causal_mask(2, 4), bools([[1, 1, 1, 0],
                                                            [1, 1, 1, 1]]))


def test_sliding_window_pattern():
    np.testing.assert_array_equal(sliding_window_mask(4, 2), bools([[1, 0, 0, 0],
                                                                    [1, 1, 0, 0],
                                                                    [0, 1, 1, 0],
                                                                    [0, 0, 1, 1]]))
    # One new query at position 4 with a window of 3: keys 2, 3, 4.
    np.testing.assert_array_equal(sliding_window_mask(1, 3, 5), bools([[0, 0, 1, 1, 1]]))


def test_key_padding_mask_from_lengths_and_from_padding():
    expected = bools([[1, 1, 1, 0],
                      [1, 0, 0, 0],
                      [0, 0, 0, 0]])[:, None, None, :]
    np.testing.assert_array_equal(key_padding_mask(np.array([3, 1, 0]), 4), expected)
    padding = bools([[0, 0, 0, 1],
                     [0, 1, 1, 1],
                     [1, 1, 1, 1]])
    np.testing.assert_array_equal(key_padding_mask(padding=padding), expected)


@given(T=st.integers(1, 6), extra=st.integers(0, 4))
def test_cached_queries_see_what_the_full_sequence_would(T, extra):
    """Rows of the (S, S) mask for the last T positions = the (T, S) mask with S - T cached keys."""
    S = T + extra
    np.testing.assert_array_equal(causal_mask(T, S), causal_mask(S)[S - T:])
    for window in (1, 2, S):
        np.testing.assert_array_equal(sliding_window_mask(T, window, S),
                                      sliding_window_mask(S, window)[S - T:])


@given(S=st.integers(1, 6), window=st.integers(1, 8))
def test_window_counts_and_limit(S, window):
    """Query i sees min(window, i + 1) keys; a window as long as the sequence is the causal mask."""
    m = sliding_window_mask(S, window)
    np.testing.assert_array_equal(m.sum(axis=1), np.minimum(window, np.arange(S) + 1))
    if window >= S:
        np.testing.assert_array_equal(m, causal_mask(S))


def test_combine_masks_is_and_ignoring_none():
    a, b = causal_mask(3), bools([[1, 1, 0]])
    assert combine_masks() is None and combine_masks(None, None) is None
    assert combine_masks(None, a) is a                      # one mask: returned, not copied
    np.testing.assert_array_equal(combine_masks(a, None, b), bools([[1, 0, 0],
                                                                    [1, 1, 0],
                                                                    [1, 1, 0]]))


def test_additive_mask_values_and_dtype():
    bias = additive_mask(bools([[1, 0]]), np.float32)
    assert bias.dtype == np.float32
    np.testing.assert_array_equal(bias, np.array([[0.0, -np.inf]], np.float32))


def test_additive_mask_refuses_an_integer_mask():
    # ~ on int 0/1 is bitwise (-1, -2): the old result hid every key, with no error.
    with pytest.raises(TypeError, match="mask: expected a boolean array, got int64"):
        additive_mask(np.array([[1, 0]], np.int64), np.float32)


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match="window: expected an integer in \\[1"):
        sliding_window_mask(3, 0)
    with pytest.raises(ValueError, match="T: expected at most S=2"):
        causal_mask(3, 2)
    with pytest.raises(ValueError, match="lengths: expected values in \\[0, S=4\\]"):
        key_padding_mask(np.array([5]), 4)
    with pytest.raises(ValueError, match="S: expected the number of keys"):
        key_padding_mask(np.array([1]))
    with pytest.raises(ValueError, match="exactly one of lengths or padding"):
        key_padding_mask()
    with pytest.raises(TypeError, match="padding: expected a boolean array"):
        key_padding_mask(padding=np.zeros((2, 3)))
    with pytest.raises(TypeError, match="lengths: expected an integer array"):
        key_padding_mask(np.array([1.0]), 3)


# ------------------------------------------------------------------ sparse patterns
def test_dilated_window_pattern_written_out():
    # window 3, dilation 2: query p sees p, p - 2, p - 4.
    np.testing.assert_array_equal(dilated_window_mask(6, 3, 2), bools([[1, 0, 0, 0, 0, 0],
                                                                       [0, 1, 0, 0, 0, 0],
                                                                       [1, 0, 1, 0, 0, 0],
                                                                       [0, 1, 0, 1, 0, 0],
                                                                       [1, 0, 1, 0, 1, 0],
                                                                       [0, 1, 0, 1, 0, 1]]))
    # One new query at position 5 after 5 cached keys, window 2, dilation 3: keys 5 and 2.
    np.testing.assert_array_equal(dilated_window_mask(1, 2, 3, 6), bools([[0, 0, 1, 0, 0, 1]]))


def test_global_window_pattern_written_out():
    # window 2, global positions 0 and 3: column 0 and 3 seen by every later query,
    # row 3 sees its whole past.
    np.testing.assert_array_equal(global_window_mask(6, 2, (0, 3)), bools([[1, 0, 0, 0, 0, 0],
                                                                           [1, 1, 0, 0, 0, 0],
                                                                           [1, 1, 1, 0, 0, 0],
                                                                           [1, 1, 1, 1, 0, 0],
                                                                           [1, 0, 0, 1, 1, 0],
                                                                           [1, 0, 0, 1, 1, 1]]))
    # Two new queries at positions 4, 5 after 4 cached keys: the last two rows above.
    np.testing.assert_array_equal(global_window_mask(2, 2, (0, 3), 6), bools([[1, 0, 0, 1, 1, 0],
                                                                              [1, 0, 0, 1, 1, 1]]))


@given(T=st.integers(1, 6), extra=st.integers(0, 4), window=st.integers(1, 4), dilation=st.integers(1, 3))
def test_sparse_patterns_with_cached_keys_are_the_last_rows(T, extra, window, dilation):
    S = T + extra
    np.testing.assert_array_equal(dilated_window_mask(T, window, dilation, S),
                                  dilated_window_mask(S, window, dilation)[S - T:])
    np.testing.assert_array_equal(global_window_mask(T, window, (0, 2), S),
                                  global_window_mask(S, window, (0, 2))[S - T:])


@given(S=st.integers(1, 8), window=st.integers(1, 5))
def test_sparse_patterns_reduce_to_the_sliding_window(S, window):
    np.testing.assert_array_equal(dilated_window_mask(S, window, 1), sliding_window_mask(S, window))
    np.testing.assert_array_equal(global_window_mask(S, window, ()), sliding_window_mask(S, window))


def test_sparse_pattern_errors_name_the_argument():
    with pytest.raises(ValueError, match="dilation: expected an integer in \\[1"):
        dilated_window_mask(4, 2, 0)
    with pytest.raises(ValueError, match=r"global_positions\[1\]: expected an integer in \[0"):
        global_window_mask(4, 2, (0, -1))


def test_key_padding_mask_refuses_a_huge_S_before_allocating():
    """Found by the fuzz tests: S = 2**40 with lengths ended in a MemoryError naming nothing."""
    with pytest.raises(ValueError, match=r"lengths, S: expected at most .* got shape \(2, 1099511627776\)"):
        key_padding_mask(np.array([1, 3]), 2**40)
