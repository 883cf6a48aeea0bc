"""Embedding Module: owns the table W (V, C); the math is functional.embedding."""
from __future__ import annotations

import numpy as np

from .. import init
from ..backend import default_rng
from ..functional.embedding import embedding_backward, embedding_forward
from ..validate import check_size, check_int, check_number
from .module import Module


class Embedding(Module):
    """out = W[ids]: one learned row of W per token id; W ~ N(0, init_std²) at start."""

    def __init__(self, vocab_size: int, d_model: int, *, rng=None, init_std: float = 0.02, dtype=np.float32):
        super().__init__()
        V = check_int("vocab_size", vocab_size, low=1)
        C = check_int("d_model", d_model, low=1)
        init_std = check_number("init_std", init_std, low=0.0, finite=True)
        check_size("vocab_size, d_model", (V, C))
        self.add_param("W", init.normal(default_rng(rng), (V, C), init_std, dtype))

    def forward(self, ids):
        """ids (...) integers in [0, V) -> out (..., C)."""
        out, cache = embedding_forward(ids, self.W)
        self._save(cache, out)
        return out

    def backward(self, dout):
        """dout (..., C) -> None (ids have no gradient); accumulates grads["W"]."""
        self._accumulate("W", embedding_backward(dout, self._pop_cache(dout)))
        return None
