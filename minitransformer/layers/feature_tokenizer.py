"""FeatureTokenizer Module: owns W_num, b_num (n_num, C) and E (V_1 + ... + V_K, C);
the math is functional.feature_tokenizer."""
from __future__ import annotations

import numpy as np

from .. import init
from ..backend import default_rng, get_xp
from ..functional.feature_tokenizer import (category_offsets, feature_tokenizer_backward,
                                            feature_tokenizer_forward)
from ..validate import check_int, check_items, check_number, check_size
from .linear import check_input
from .module import Module


class FeatureTokenizer(Module):
    """(x_num (B, n_num), x_cat (B, n_cat)) -> tokens (B, n_num + n_cat, C).

    cardinalities: (V_1, ..., V_K), the vocabulary size of each categorical column.
    Every table ~ N(0, init_std²) at start (b_num too: a zero bias would make the
    token of a numeric 0 the zero vector, the same for every column).
    """

    def __init__(self, n_numeric: int, cardinalities, d_model: int, *, rng=None,
                 init_std: float = 0.02, dtype=np.float32):
        super().__init__()
        n_num = check_int("n_numeric", n_numeric, low=0)
        self.cardinalities = tuple(check_items("cardinalities", cardinalities))
        category_offsets(self.cardinalities)                      # every V_k a positive integer
        if n_num + len(self.cardinalities) == 0:
            raise ValueError("n_numeric, cardinalities: expected at least one feature, got none")
        C = check_int("d_model", d_model, low=1)
        init_std = check_number("init_std", init_std, low=0.0, finite=True)
        V = sum(self.cardinalities)
        check_size("sum(cardinalities), d_model", (V, C))
        rng = default_rng(rng)
        # A table with no row (no numeric or no categorical column) is no parameter: it stays
        # out of parameters() and state_dict(), and forward passes an empty (0, C) array.
        self._empty = {"W_num": (0, C), "b_num": (0, C), "E": (0, C)}
        if n_num:
            self.add_param("W_num", init.normal(rng, (n_num, C), init_std, dtype))
            self.add_param("b_num", init.normal(rng, (n_num, C), init_std, dtype))
        if V:
            self.add_param("E", init.normal(rng, (V, C), init_std, dtype))

    def _table(self, name):
        if name in self.params:
            return self.params[name]
        like = next(iter(self.params.values()))                   # the device and dtype of the others
        return get_xp(like).zeros(self._empty[name], dtype=like.dtype)

    def forward(self, x_num, x_cat):
        """x_num (B, n_num) floating, the weights' dtype; x_cat (B, n_cat) integers, column k in [0, V_k)."""
        check_input("x_num", x_num, next(iter(self.params.values())))
        T, cache = feature_tokenizer_forward(x_num, x_cat, self._table("W_num"), self._table("b_num"),
                                             self._table("E"), self.cardinalities)
        self._save(cache, T)
        return T                                                  # (B, n_num + n_cat, C)

    def backward(self, dT):
        """dT (B, n_num + n_cat, C) -> (dx_num (B, n_num), None for x_cat); accumulates the grads."""
        dx_num, dW_num, db_num, dE = feature_tokenizer_backward(dT, self._pop_cache(dT))
        for name, grad in (("W_num", dW_num), ("b_num", db_num), ("E", dE)):
            if name in self.params:
                self._accumulate(name, grad)
        return dx_num, None
