"""Attention masks: the one place in the package where they are made.

A mask is a boolean array, True = "this query may attend this key", broadcastable
to the scores' shape (B, H, T, S): T queries, S keys. attention_forward turns
False into a score of -inf before the softmax, so a masked key gets probability 0.

Queries and keys live on one time axis. With a KV cache the S keys are the S - T
earlier positions followed by the T new ones, so query i sits at absolute
position i + (S - T); every mask below uses that position, and with S = T (no
cache) it is just i.

    causal_mask          (T, S)        key j visible iff j <= i + (S - T)
    sliding_window_mask  (T, S)        ... and j > i + (S - T) - window
    dilated_window_mask  (T, S)        ... every r-th key of a window of span (window - 1)·r + 1
    global_window_mask   (T, S)        sliding window OR (causal AND key or query is global)
    bidirectional_window_mask (T, S)   key j visible iff |i + (S - T) - j| < window (encoders)
    key_padding_mask     (B, 1, 1, S)  key j visible iff it is a real token
    combine_masks        logical AND of the masks given (None = no mask)
    additive_mask        0 where True, -inf where False: what attention adds to its scores

Example, T = S = 4 (a 1 is True):

    causal        window = 2    padding, length 3
    1 0 0 0       1 0 0 0       1 1 1 0
    1 1 0 0       1 1 0 0       1 1 1 0
    1 1 1 0       0 1 1 0       1 1 1 0
    1 1 1 1       0 0 1 1       1 1 1 0

Sparse patterns (Child et al. 2019; Beltagy et al. 2020, Longformer, causal halves),
T = S = 5:

    window = 2, dilation = 2     window = 2, global position 0
    1 0 0 0 0                    1 0 0 0 0
    0 1 0 0 0                    1 1 0 0 0
    1 0 1 0 0                    1 1 1 0 0
    0 1 0 1 0                    1 0 1 1 0
    0 0 1 0 1                    1 0 0 1 1
"""
from __future__ import annotations

import math

import numpy

from ..backend import get_xp
from ..validate import check_bool, check_int, check_ndim, check_same_shape, check_dtype, check_items, check_size


def query_key_positions(T: int, S: int | None = None, *, xp=numpy):
    """Absolute positions of the T queries, a column (T, 1), and of the S keys, a row (1, S).

    The queries are the last T of the S positions: query i sits at i + (S - T).
    Masks and ALiBi both measure key j against query i with these.
    """
    T = check_int("T", T, low=0)
    S = T if S is None else check_int("S", S, low=0)
    check_size("T, S", (T, S))
    if T > S:
        raise ValueError(f"T: expected at most S={S} queries (the queries are the last T of "
                         f"the S positions), got T={T}")
    i = xp.arange(T)[:, None] + (S - T)                    # (T, 1) absolute query positions
    j = xp.arange(S)[None, :]                              # (1, S) key positions
    return i, j


def causal_mask(T: int, S: int | None = None, *, xp=numpy):
    """Query i (at absolute position i + S - T) may attend key j iff j <= i + S - T.

    Inputs: T queries; S keys (default T); xp the array module to build it with.
    Returns: (T, S) bool, lower triangular when S = T.
    """
    i, j = query_key_positions(T, S, xp=xp)
    return j <= i                                          # (T, S)


def sliding_window_mask(T: int, window: int, S: int | None = None, *, xp=numpy):
    """Each query sees the ``window`` most recent keys, itself included, nothing in the future:
    key j is visible iff  i + S - T - window < j <= i + S - T.

    Inputs: T queries; window >= 1; S keys (default T); xp.
    Returns: (T, S) bool. window >= S gives the causal mask.
    """
    window = check_int("window", window, low=1)
    i, j = query_key_positions(T, S, xp=xp)
    return (j <= i) & (j > i - window)                     # (T, S)


def dilated_window_mask(T: int, window: int, dilation: int, S: int | None = None, *, xp=numpy):
    """Causal dilated sliding window: query i (at p = i + S - T) sees the ``window`` keys
    p, p - r, ..., p - (window - 1)·r, r = dilation: key j visible iff
    0 <= p - j <= (window - 1)·r  and  (p - j) mod r = 0.

    The same number of scores as a window of ``window`` keys, over a span r times longer.
    Inputs: T queries; window >= 1; dilation r >= 1; S keys (default T); xp.
    Returns: (T, S) bool. dilation = 1 gives sliding_window_mask(T, window, S).
    """
    window = check_int("window", window, low=1)
    dilation = check_int("dilation", dilation, low=1)
    i, j = query_key_positions(T, S, xp=xp)                # (T, 1) absolute, (1, S)
    distance = i - j                                       # (T, S) p - j
    return (distance >= 0) & (distance <= (window - 1) * dilation) & (distance % dilation == 0)  # (T, S)


def global_window_mask(T: int, window: int, global_positions, S: int | None = None, *, xp=numpy):
    """Causal sliding window plus global tokens: key j visible from query i (at p = i + S - T) iff
    j <= p  and  (p - j < window  or  j is global  or  p is global).

    Every later query sees a global token, and a global query sees its whole past
    (Longformer's global attention, causal). Positions are absolute: with a KV cache,
    ``global_positions`` name positions of the whole sequence, not of the new tokens.
    Inputs: T queries; window >= 1; global_positions, integers >= 0 (positions >= S
            simply never occur); S keys (default T); xp.
    Returns: (T, S) bool. No global positions gives sliding_window_mask(T, window, S).
    """
    window = check_int("window", window, low=1)
    positions = [check_int(f"global_positions[{n}]", g, low=0) for n, g in enumerate(check_items("global_positions", global_positions))]
    i, j = query_key_positions(T, S, xp=xp)                # (T, 1) absolute, (1, S)
    g = xp.asarray(positions, dtype=i.dtype)               # (n_global,)
    is_global_key = (j[..., None] == g).any(axis=-1)       # (1, S)
    is_global_query = (i[..., None] == g).any(axis=-1)     # (T, 1)
    return (j <= i) & ((j > i - window) | is_global_key | is_global_query)  # (T, S)


def bidirectional_window_mask(T: int, window: int, S: int | None = None, *, xp=numpy):
    """Longformer's local attention for an encoder (Beltagy et al. 2020, section 3.1): query i
    (at p = i + S - T) sees the keys less than ``window`` positions away on either side:
    key j visible iff |p - j| < window.

    The same distance rule as sliding_window_mask, both ways: window = 1 sees only itself,
    window = w sees w - 1 keys on each side (2w - 1 in all; Longformer's "window size" is that
    count). Example, T = S = 5, window = 2:

        1 1 0 0 0
        1 1 1 0 0
        0 1 1 1 0
        0 0 1 1 1
        0 0 0 1 1

    Inputs: T queries; window >= 1; S keys (default T); xp.
    Returns: (T, S) bool. window >= S gives all True (full attention).
    """
    window = check_int("window", window, low=1)
    i, j = query_key_positions(T, S, xp=xp)                # (T, 1) absolute, (1, S)
    distance = i - j                                       # (T, S) p - j
    return (distance < window) & (distance > -window)      # (T, S) |p - j| < window


def check_sparse_pattern(window, dilation: int, global_positions) -> None:
    """A sparse pattern refines the sliding window, one pattern at a time: ValueError naming
    ``dilation, global_positions`` unless (dilation > 1 or global positions) comes with a window
    and not both are set."""
    if window is not None:
        check_int("window", window, low=1)
    dilation = check_int("dilation", dilation, low=1)
    global_positions = check_items("global_positions", global_positions)
    if (dilation > 1 or len(global_positions)) and window is None:
        raise ValueError("dilation, global_positions: a sparse pattern refines the sliding window; "
                         f"expected a window with dilation={dilation}, "
                         f"global_positions={global_positions}, got window=None")
    if dilation > 1 and len(global_positions):
        raise ValueError("dilation, global_positions: expected one sparse pattern, got both "
                         f"dilation={dilation} and global_positions={global_positions}")


def key_padding_mask(lengths=None, S: int | None = None, *, padding=None):
    """Hide padding keys. Give exactly one of:

    - ``lengths`` (B,) integers in [0, S], with S: sequence b has ``lengths[b]`` real
      tokens followed by padding, key j visible iff j < lengths[b];
    - ``padding`` (B, S) bool, True = a padding token (hidden); S, if given, must match.

    Returns: (B, 1, 1, S) bool, True = real key, broadcastable over heads and queries.
    """
    if (lengths is None) == (padding is None):
        raise ValueError("key_padding_mask: expected exactly one of lengths or padding, got "
                         f"{'both' if lengths is not None else 'neither'}")
    if padding is not None:
        check_ndim("padding", padding, 2, "(B, S)")
        check_bool("padding", padding)
        if S is not None:
            check_same_shape("padding", padding, (padding.shape[0], S))
        return ~padding[:, None, None, :]                  # (B, 1, 1, S)
    if S is None:
        raise ValueError("S: expected the number of keys when lengths are given, got None")
    S = check_int("S", S, low=0)
    check_ndim("lengths", lengths, 1, "(B,)")
    check_size("lengths, S", (lengths.shape[0], S))       # the (B, S) mask, before it is made
    if getattr(lengths.dtype, "kind", None) not in ("i", "u"):
        raise TypeError(f"lengths: expected an integer array, got {lengths.dtype}")
    if lengths.size and (int(lengths.min()) < 0 or int(lengths.max()) > S):
        raise ValueError(f"lengths: expected values in [0, S={S}], "
                         f"got values in [{int(lengths.min())}, {int(lengths.max())}]")
    xp = get_xp(lengths)
    j = xp.arange(S)                                       # (S,) key positions
    return (j < lengths[:, None])[:, None, None, :]        # (B, 1, 1, S)


def combine_masks(*masks):
    """Logical AND of the masks that are not None (broadcasting); None if all are None.

    A single mask is returned as it is, not copied.
    """
    present = [(i, m) for i, m in enumerate(masks) if m is not None]
    for i, m in present:
        check_bool(f"masks[{i}]", m)
    if not present:
        return None
    combined = present[0][1]
    for i, m in present[1:]:
        if not _broadcasts(combined.shape, m.shape):
            raise ValueError(f"masks[{i}]: shape {tuple(m.shape)} does not broadcast with the masks before it, "
                             f"{tuple(combined.shape)}")
        combined = combined & m                            # broadcast shape of the two
    return combined


def _broadcasts(a: tuple, b: tuple) -> bool:
    """Whether shapes ``a`` and ``b`` broadcast (NumPy's rule: each trailing pair equal or a 1)."""
    return all(x == y or 1 in (x, y) for x, y in zip(tuple(a)[::-1], tuple(b)[::-1]))


def additive_mask(mask, dtype):
    """The float form of a boolean mask: 0 where True, -inf where False, in ``dtype``.

    Adding it to the scores masks them in one in-place pass; on (12, 4, 64, 64)
    float32 scores with a causal mask that is 19 µs, against 45 µs for
    ``xp.copyto(scores, -inf, where=~mask)`` and 134 µs for ``xp.where`` (a new array).
    """
    # A boolean mask only: ~ on an integer 0/1 mask is bitwise (~0 = -1, ~1 = -2, both
    # "true"), which would hide every key. A dtype check: nothing in the hot path.
    check_bool("mask", mask)
    dtype = check_dtype("dtype", dtype)
    xp = get_xp(mask)
    bias = xp.zeros(mask.shape, dtype=dtype)               # mask's shape: small, e.g. (T, S)
    bias[~mask] = -math.inf
    return bias

