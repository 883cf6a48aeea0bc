"""T5's relative position bias (Raffel et al. 2020, section 2.1): a learned scalar per
head and per BUCKET of relative distance, added to the attention scores.

    n        = p_i - j                     how far back key j is from query i (p_i = i + S - T)
    b_ij     = bucket(n)                   (T, S) integers in [0, n_buckets)
    bias_hij = table[b_ij, h]              (H, T, S), added to q kᵀ/√D before the softmax

The buckets (the T5 code's ``_relative_position_bucket``):

    bidirectional (encoder): half of the buckets for keys at or before the query
        (n >= 0), the other half, offset by n_buckets // 2, for keys after it (n < 0);
        within a half, n := |n| and half := n_buckets // 2.
    causal (decoder): n := max(n, 0), so every future key (j > p_i) falls in bucket 0
        with the query itself; half := n_buckets.
    then, with max_exact = half // 2:
        n <  max_exact:  bucket n                                   one bucket per distance
        n >= max_exact:  max_exact + floor(log(n / max_exact) / log(max_distance / max_exact)
                                           · (half - max_exact)),   at most half - 1

Small distances get a bucket each; larger ones share log-spaced buckets, and every
distance from max_distance on shares the last. T5 uses 32 buckets, max_distance 128.
The logarithm is taken in float64 here (T5 uses float32): at the exact bucket edges
the two can round differently.

Backward: bias = table[b] is a lookup (functional/embedding.py), so

    dtable[m, h] = Σ_{(i, j) : b_ij = m} dbias_hij          (a scatter-add; dbias summed over B)

The attention's own backward returns dbias in the bias's shape (H, T, S), already
summed over the batch (functional/attention.py).
"""
from __future__ import annotations

import math
from typing import NamedTuple

from ..backend import get_xp
from ..validate import check_float, check_int, check_ndim, check_same_shape
from .embedding import EmbeddingCache, embedding_backward, embedding_forward
from .masks import query_key_positions


class T5BiasCache(NamedTuple):
    lookup: EmbeddingCache   # the buckets b (T, S) and n_buckets: where dbias's entries go
    n_head: int              # H, the columns of the table


def check_bucket_options(bidirectional, n_buckets, max_distance, *,
                         names=("n_buckets", "max_distance")) -> tuple[int, int]:
    """The bucket options, with messages naming them (``names``: a config may call them
    relative_buckets, relative_max_distance); returns (n_buckets, max_distance).

    At least one exact bucket per half (n_buckets >= 4 bidirectional, >= 2 causal), and
    max_distance above the exact range (the log-spaced buckets divide by log(max_distance / max_exact)).
    """
    if not isinstance(bidirectional, bool):
        raise TypeError(f"bidirectional: expected True or False, got {type(bidirectional).__name__} "
                        f"{bidirectional!r}")
    n_buckets = check_int(names[0], n_buckets, low=4 if bidirectional else 2)
    half = n_buckets // 2 if bidirectional else n_buckets
    max_distance = check_int(names[1], max_distance, low=half // 2 + 1)
    return n_buckets, max_distance


def relative_position_bucket(relative_position, bidirectional: bool = True, n_buckets: int = 32,
                             max_distance: int = 128):
    """bucket(j - p_i): T5's bucket of a relative position (key minus query).

    Inputs: relative_position, an integer array (any shape) of j - p_i; bidirectional
    (True: encoder, False: causal decoder); n_buckets >= 4 (bidirectional) or >= 2;
    max_distance > the largest exact distance (n_buckets // 4 bidirectional, // 2 causal).
    Returns: integer array of the same shape, values in [0, n_buckets).
    """
    n_buckets, max_distance = check_bucket_options(bidirectional, n_buckets, max_distance)
    if getattr(getattr(relative_position, "dtype", None), "kind", None) not in ("i", "u"):
        raise TypeError("relative_position: expected an integer array, got "
                        f"{getattr(relative_position, 'dtype', type(relative_position).__name__)}")
    xp = get_xp(relative_position)
    n = -relative_position.astype(xp.int64)                # p_i - j: how far back the key is
    bucket = xp.zeros(n.shape, dtype=xp.int64)
    half = n_buckets
    if bidirectional:
        half = n_buckets // 2
        bucket += (n < 0) * half                           # keys after the query: the upper half
        n = xp.abs(n)
    else:
        n = xp.maximum(n, 0)                               # future keys share bucket 0 with the query
    max_exact = half // 2
    is_small = n < max_exact
    n_large = xp.maximum(n, max_exact).astype(xp.float64)  # the log only where it is used (no log 0)
    log_ratio = xp.log(n_large / max_exact) / math.log(max_distance / max_exact)
    if_large = max_exact + (log_ratio * (half - max_exact)).astype(xp.int64)
    if_large = xp.minimum(if_large, half - 1)              # max_distance and beyond: the last bucket
    return bucket + xp.where(is_small, n, if_large)


def t5_bias_forward(table, T: int, S: int, bidirectional: bool, max_distance: int):
    """bias[h, i, j] = table[bucket(j - p_i), h], p_i = i + S - T.

    Inputs: table (n_buckets, H) float; T queries, the last T of S positions;
    bidirectional; max_distance.
    Returns: bias (H, T, S) of table's dtype, T5BiasCache.
    """
    check_ndim("table", table, 2, "(n_buckets, H)")
    check_float("table", table)
    T, S = check_int("T", T, low=1), check_int("S", S, low=1)
    xp = get_xp(table)
    i, j = query_key_positions(T, S, xp=xp)                # (T, 1), (1, S)
    b = relative_position_bucket(j - i, bidirectional, table.shape[0], max_distance)  # (T, S)
    bias_TSH, lookup = embedding_forward(b, table)         # (T, S, H)
    bias = bias_TSH.transpose(2, 0, 1)                     # (H, T, S)
    return bias, T5BiasCache(lookup, table.shape[1])


def t5_bias_backward(dbias, cache: T5BiasCache):
    """Inputs: dbias (H, T, S), or (B, H, T, S) (summed over B here); the cache.

    Returns: dtable (n_buckets, H), the scatter-add of dbias into the rows of the buckets.
    """
    check_float("dbias", dbias)
    check_ndim("dbias", dbias, (3, 4), "(H, T, S) or (B, H, T, S)")
    d = dbias.sum(axis=0) if dbias.ndim == 4 else dbias    # (H, T, S)   the bias is shared over B
    T, S = cache.lookup.ids.shape
    check_same_shape("dbias", d, (cache.n_head, T, S))
    dbias_TSH = d.transpose(1, 2, 0)                       # (T, S, H)   reverses: bias = bias_TSH.transpose
    return embedding_backward(dbias_TSH, cache.lookup)     # (n_buckets, H) reverses: bias_TSH = table[b]
