"""The language-model head: logits = h Eᵀ (+ b), E of shape (V, C).

E is the output embedding. With weight tying (Press & Wolf 2017) it is the very
token-embedding matrix, shared through ``Module.tie``: both uses accumulate into
one gradient, so dE is the sum of the embedding path and this path.
"""
from __future__ import annotations

import numpy as np

from .. import init
from ..backend import default_rng
from ..functional.linear import linear_backward, linear_forward
from ..validate import check_dim, check_size, check_int, check_number
from .linear import check_flag, check_input
from .module import Module


class LMHead(Module):
    def __init__(self, d_model: int, vocab_size: int, *, bias: bool = False, rng=None,
                 init_std: float = 0.02, dtype=np.float32):
        super().__init__()
        d_model = check_int("d_model", d_model, low=1)
        vocab_size = check_int("vocab_size", vocab_size, low=1)
        init_std = check_number("init_std", init_std, low=0.0, finite=True)
        check_flag("bias", bias)
        check_size("vocab_size, d_model", (vocab_size, d_model))
        self.add_param("W", init.normal(default_rng(rng), (vocab_size, d_model), init_std, dtype))  # (V, C)
        if bias:
            self.add_param("b", init.zeros(vocab_size, dtype))

    def forward(self, h):
        """h (..., C) floating, the dtype of W (TypeError/ValueError naming ``h`` otherwise) -> logits (..., V)."""
        check_input("h", h, self.W)
        check_dim("h", h, -1, self.W.shape[1], "C, the columns of W")
        logits, cache = linear_forward(h, self.W.T, self.params.get("b"))   # (B, T, V)
        self._save(cache, logits)
        return logits

    def backward(self, dlogits):
        dh, dWT, db = linear_backward(dlogits, self._pop_cache(dlogits))          # dWT (C, V)
        self._accumulate("W", dWT.T)
        if db is not None:
            self._accumulate("b", db)
        return dh                                                           # (B, T, C)
