"""Pooler Module (BERT): owns W (C, C) and b (C,); the math is functional.pooler."""
from __future__ import annotations

import numpy as np

from .. import init
from ..backend import default_rng
from ..functional.pooler import pooler_backward, pooler_forward
from ..validate import check_int, check_number, check_size
from .linear import check_input
from .module import Module


class Pooler(Module):
    """h (B, S, C) -> tanh(h[:, 0] W + b) (B, C); W ~ N(0, init_std²), b = 0."""

    def __init__(self, d_model: int, *, rng=None, init_std: float = 0.02, dtype=np.float32):
        super().__init__()
        C = check_int("d_model", d_model, low=1)
        init_std = check_number("init_std", init_std, low=0.0, finite=True)
        check_size("d_model, d_model", (C, C))
        self.add_param("W", init.normal(default_rng(rng), (C, C), init_std, dtype))
        self.add_param("b", init.zeros(C, dtype))

    def forward(self, h):
        check_input("h", h, self.W)
        pooled, cache = pooler_forward(h, self.W, self.b)
        self._save(cache, pooled)
        return pooled                                             # (B, C)

    def backward(self, dpooled):
        """dpooled (B, C) -> dh (B, S, C), nonzero at position 0 only; accumulates grads W, b."""
        dh, dW, db = pooler_backward(dpooled, self._pop_cache(dpooled))
        self._accumulate("W", dW)
        self._accumulate("b", db)
        return dh
