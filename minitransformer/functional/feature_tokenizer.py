"""The feature tokenizer of FT-Transformer (Gorishniy et al. 2021): a table row as tokens.

A row has n_num numeric features x_j (real numbers) and n_cat categorical
features c_k (integers in [0, V_k), V_k the size of column k's vocabulary).
Every feature becomes one token of width C:

    numeric j:      t_j = x_j · w_j + b_j                   w_j, b_j rows of W_num, b_num (n_num, C)
    categorical k:  t_k = E[o_k + c_k]                      E (V_1 + ... + V_K, C)

with o_k = V_1 + ... + V_{k-1} the offset of column k in the one table E, so that
every (column, value) pair owns its own row (value 2 of column 1 and value 2 of
column 2 are different categories). The tokens are the numeric ones first, then
the categorical ones: T = [t_1 .. t_{n_num} ; t_1 .. t_{n_cat}]   (B, n_num + n_cat, C).

No position is added: a feature is recognised by its own w_j, b_j or rows of E,
and the order of the columns means nothing. (The paper also gives categorical
tokens a bias per column; it adds nothing here, since E[o_k + c] can absorb it.)

Backward (x_cat has no gradient):
    dx_num[b, j] = Σ_c dT[b, j, c] · W_num[j, c]            reverses t = x · w + b
    dW_num[j]    = Σ_b dT[b, j] · x_num[b, j]               reverses t = x · w + b
    db_num[j]    = Σ_b dT[b, j]                             reverses the broadcast of b over B
    dE           = embedding_backward(dT_cat)               reverses t_k = E[o_k + c_k] (rows summed by id)

Shapes: B rows, n_num numeric and n_cat categorical features, C = d_model.
"""
from __future__ import annotations

from typing import NamedTuple

from ..backend import get_xp
from ..validate import (check_dim, check_dtype_like, check_float, check_int, check_integer_ids, check_items,
                        check_ndim, check_upstream)
from .embedding import EmbeddingCache, embedding_backward, embedding_forward


class FeatureTokenizerCache(NamedTuple):
    x_num: object                    # (B, n_num) the values, needed for dW_num
    W_num: object                    # (n_num, C) needed for dx_num
    embedding: EmbeddingCache        # the shifted ids o_k + c_k, to route dT_cat to rows of E
    out_shape: tuple                 # (B, n_num + n_cat, C)


def category_offsets(cardinalities):
    """o_k = V_1 + ... + V_{k-1}: where column k's rows start in the one table E (a tuple)."""
    offsets, total = [], 0
    for k, V in enumerate(check_items("cardinalities", cardinalities)):
        offsets.append(total)
        total += check_int(f"cardinalities[{k}]", V, low=1)
    return tuple(offsets)


def _check_inputs(x_num, x_cat, W_num, b_num, E, cardinalities):
    check_ndim("x_num", x_num, 2, "(B, n_num)")
    if x_num.shape[1] + len(cardinalities) == 0:
        raise ValueError("x_num, cardinalities: expected at least one feature, got 0 numeric and 0 categorical")
    check_float("x_num", x_num)
    check_ndim("W_num", W_num, 2, "(n_num, C)")
    check_dim("W_num", W_num, 0, x_num.shape[1], "n_num, the numeric columns of x_num")
    check_dtype_like("W_num", W_num, x_num, "x_num")
    check_ndim("b_num", b_num, 2, "(n_num, C)")
    if tuple(b_num.shape) != tuple(W_num.shape):
        raise ValueError(f"b_num: expected shape {tuple(W_num.shape)} (the shape of W_num), "
                         f"got {tuple(b_num.shape)}")
    check_dtype_like("b_num", b_num, x_num, "x_num")
    check_ndim("x_cat", x_cat, 2, "(B, n_cat)")
    check_dim("x_cat", x_cat, 0, x_num.shape[0], "B, the rows of x_num")
    check_dim("x_cat", x_cat, 1, len(cardinalities), "n_cat, one column per entry of cardinalities")
    for k, V in enumerate(cardinalities):       # an unseen category names its column
        check_integer_ids(f"x_cat[:, {k}]", x_cat[:, k], V)
    check_ndim("E", E, 2, "(V_1 + ... + V_K, C)")
    check_dim("E", E, 0, sum(cardinalities), "V_1 + ... + V_K, the sum of the cardinalities")
    check_dim("E", E, 1, W_num.shape[1], "C, the width of W_num")
    check_dtype_like("E", E, x_num, "x_num")


def feature_tokenizer_forward(x_num, x_cat, W_num, b_num, E, cardinalities):
    """T = [x_num · W_num + b_num ; E[offsets + x_cat]].

    Inputs: x_num (B, n_num) floating; x_cat (B, n_cat) integers, column k in [0, V_k);
            W_num, b_num (n_num, C); E (V_1 + ... + V_K, C); cardinalities (V_1, ..., V_K).
            n_num or n_cat may be 0 (then W_num, b_num have 0 rows, or x_cat 0 columns).
    Returns: T (B, n_num + n_cat, C), FeatureTokenizerCache.
    """
    xp = get_xp(x_num, E)
    offsets = category_offsets(cardinalities)
    _check_inputs(x_num, x_cat, W_num, b_num, E, cardinalities)
    B, (n_num, C), n_cat = x_num.shape[0], W_num.shape, len(cardinalities)
    numeric = x_num[:, :, None] * W_num + b_num                   # (B, n_num, C)
    ids = x_cat + xp.asarray(offsets, dtype=x_cat.dtype)          # (B, n_cat) rows of E
    categorical, embedding_cache = embedding_forward(ids, E)      # (B, n_cat, C)
    T = xp.empty((B, n_num + n_cat, C), dtype=x_num.dtype)        # (B, n_num + n_cat, C)
    T[:, :n_num] = numeric
    T[:, n_num:] = categorical
    return T, FeatureTokenizerCache(x_num, W_num, embedding_cache, tuple(T.shape))


def feature_tokenizer_backward(dT, cache: FeatureTokenizerCache):
    """Inputs: dT (B, n_num + n_cat, C), the cache.
    Returns: dx_num (B, n_num), dW_num (n_num, C), db_num (n_num, C), dE (V_1 + ... + V_K, C)."""
    x_num, W_num, embedding_cache, out_shape = cache
    check_upstream("dT", dT, out_shape, x_num.dtype)
    n_num = W_num.shape[0]
    dnumeric = dT[:, :n_num]                                      # (B, n_num, C)  reverses T[:, :n_num] = numeric
    dcategorical = dT[:, n_num:]                                  # (B, n_cat, C)  reverses T[:, n_num:] = categorical
    dx_num = (dnumeric * W_num).sum(axis=2)                       # (B, n_num)     reverses x · w
    dW_num = (dnumeric * x_num[:, :, None]).sum(axis=0)           # (n_num, C)     reverses x · w
    db_num = dnumeric.sum(axis=0)                                 # (n_num, C)     reverses + b (broadcast over B)
    dE = embedding_backward(dcategorical, embedding_cache)        # (ΣV, C)        reverses E[ids]
    return dx_num, dW_num, db_num, dE
