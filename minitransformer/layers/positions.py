"""Learned absolute position embeddings (GPT-2, BERT): one trained row per position.

    P = W[offset : offset + T]          (T, C)

The model adds P to the token embeddings of a (B, T) batch, broadcasting over B,
so its backward receives dP (T, C) already summed over the batch. Rows outside
offset .. offset + T - 1 are not used and receive no gradient:
    dW[offset : offset + T] += dP
``offset`` is the number of positions already decoded (KV-cache generation).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import init
from ..backend import default_rng
from ..validate import check_int, check_number, check_upstream
from .module import Module


class PositionCache(NamedTuple):
    offset: int      # the first row used
    T: int           # how many rows were used


class LearnedPositionEmbedding(Module):
    """Parameter W (max_len, C) ~ N(0, init_std²); forward(T, offset) -> its rows offset .. offset + T - 1."""

    def __init__(self, max_len: int, d_model: int, *, rng=None, init_std: float = 0.02, dtype=np.float32):
        super().__init__()
        self.max_len = check_int("max_len", max_len, low=1)
        d_model = check_int("d_model", d_model, low=1)
        init_std = check_number("init_std", init_std, low=0.0, finite=True)
        self.add_param("W", init.normal(default_rng(rng), (self.max_len, d_model), init_std, dtype))

    def forward(self, T: int, offset: int = 0):
        """Inputs: T positions starting at ``offset``. Returns: P (T, C), a copy (W stays untouched)."""
        T = check_int("T", T, low=0)
        offset = check_int("offset", offset, low=0)
        if offset + T > self.max_len:
            raise ValueError(f"T: expected offset + T <= max_len={self.max_len} positions, "
                             f"got offset {offset} + T {T} = {offset + T}")
        self._save(PositionCache(offset, T))
        return self.W[offset:offset + T].copy()            # (T, C)

    def backward(self, dP):
        """Inputs: dP (T, C). Accumulates dW on the rows used; returns None (T and offset are integers)."""
        offset, T = self._pop_cache()
        check_upstream("dP", dP, (T, self.W.shape[1]), self.W.dtype)  # the forward output's shape and dtype
        self.grads["W"][offset:offset + T] += dP           # (T, C): the rows forward read
        return None
