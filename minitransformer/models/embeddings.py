"""The input embedding of every model family:

    x = Dropout(Norm(s · E[ids] + P[positions] + E_type[token types]))

with s = √C for the original Transformer (section 3.4) and 1 otherwise, P learned
or sinusoidal (nothing here for RoPE / ALiBi / none: those act inside attention),
the token-type term only when ``type_vocab_size`` > 0 (BERT's segments) and the
norm only when asked (BERT).
"""
from __future__ import annotations

import numpy as np

from ..backend import default_rng, get_xp
from ..functional.positions import sinusoidal_table
from ..layers.dropout import Dropout
from ..layers.embedding import Embedding
from ..layers.module import Module
from ..layers.norm import make_norm
from ..layers.positions import LearnedPositionEmbedding
from ..validate import check_integer_ids, check_ndim, check_same_shape


def check_nonempty(name: str, ids) -> None:
    """ValueError naming ``name`` for a batch of 0 rows or 0 tokens: every model refuses them
    (a mean over 0 positions is NaN, a softmax over 0 keys has no value)."""
    if 0 in tuple(ids.shape):
        raise ValueError(f"{name}: expected at least one row and one token, got shape {tuple(ids.shape)}")


class InputEmbedding(Module):
    def __init__(self, vocab_size: int, d_model: int, max_len: int, position: str, *,
                 type_vocab_size: int = 0, scale: float = 1.0, norm: str | None = None,
                 eps: float = 1e-5, p_drop: float = 0.0, rng=None, dropout_rng=None,
                 init_std: float = 0.02, dtype=np.float32):
        super().__init__()
        rng = default_rng(rng)
        self.position, self.scale, self.max_len = position, scale, max_len
        self.add_child("tok", Embedding(vocab_size, d_model, rng=rng, init_std=init_std, dtype=dtype))
        if position == "learned":
            self.add_child("pos", LearnedPositionEmbedding(max_len, d_model, rng=rng, init_std=init_std, dtype=dtype))
        # The sinusoidal table is a constant, not a parameter: no gradient, not in state_dict.
        self.table = sinusoidal_table(max_len, d_model, dtype=dtype) if position == "sinusoidal" else None
        if type_vocab_size:
            self.add_child("type", Embedding(type_vocab_size, d_model, rng=rng, init_std=init_std, dtype=dtype))
        if norm is not None:
            self.add_child("norm", make_norm(norm, d_model, eps, dtype))
        self.add_child("dropout", Dropout(p_drop, rng=dropout_rng))

    def _after_move(self, fn) -> None:
        if self.table is not None:
            self.table = fn(self.table)

    def forward(self, ids, token_type_ids=None, offset: int = 0):
        """ids (B, T) integers; offset = position of ids[:, 0] (KV-cache decoding). Returns (B, T, C)."""
        check_ndim("ids", ids, 2, "(B, T)")
        check_integer_ids("ids", ids, self.tok.W.shape[0])
        check_nonempty("ids", ids)
        if token_type_ids is not None:
            check_same_shape("token_type_ids", token_type_ids, ids.shape, "the shape of ids")
        T = ids.shape[1]
        if offset + T > self.max_len:
            raise ValueError(f"ids: expected at most block_size={self.max_len} positions, "
                             f"got {T} tokens at offset {offset}")
        x = self.tok.forward(ids)                                  # (B, T, C)
        if self.scale != 1.0:
            x *= self.scale
        if self.position == "learned":
            x += self.pos.forward(T, offset)                       # (T, C) broadcast over B
        elif self.position == "sinusoidal":
            x += self.table[offset:offset + T]                     # (T, C)
        if "type" in self.children:
            types = get_xp(ids).zeros_like(ids) if token_type_ids is None else token_type_ids
            x += self.type.forward(types)                          # (B, T, C)
        if "norm" in self.children:
            x = self.norm.forward(x)
        return self.dropout.forward(x)                             # (B, T, C)

    def backward(self, dx):
        """Accumulates the embedding gradients; ids have none, so returns None."""
        dx = self.dropout.backward(dx)
        if "norm" in self.children:
            dx = self.norm.backward(dx)
        if "type" in self.children:
            self.type.backward(dx)
        if self.position == "learned":
            self.pos.backward(dx.sum(axis=0))                      # (T, C): positions are shared over B
        self.tok.backward(dx * self.scale if self.scale != 1.0 else dx)
        return None
