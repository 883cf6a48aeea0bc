"""GPT: a decoder-only language model (Radford et al. 2018, 2019).

    logits = DecoderStack(ids)        ids (B, T) -> logits (B, T, V)

Each position predicts the next token; the causal mask in every self-attention
keeps position t from seeing t+1 onwards. GPT-2's choices are the defaults of
``GPTConfig``: pre-norm, tanh GELU, learned positions, tied head.
"""
from __future__ import annotations

import numpy as np

from ..backend import default_rng
from .config import GPTConfig
from .decoder import DecoderStack


def dropout_generator(rng):
    """A generator for dropout masks, separate from the one that initialised the weights."""
    seed = int(rng.integers(2**63)) if hasattr(rng, "integers") else rng
    return np.random.default_rng([0 if seed is None else seed, 1])


class GPT(DecoderStack):
    def __init__(self, config: GPTConfig, *, rng=0, dropout_rng=None, dtype=np.float32):
        if not isinstance(config, GPTConfig):
            raise TypeError(f"config: expected a GPTConfig, got {type(config).__name__}")
        init_rng = default_rng(rng)
        super().__init__(config, cross=False, tie_weights=config.tie_weights, rng=init_rng,
                         dropout_rng=dropout_rng if dropout_rng is not None else dropout_generator(rng),
                         dtype=dtype)

    def forward(self, ids, cache=None):
        """ids (B, T) integer token ids -> logits (B, T, V)."""
        return super().forward(ids, cache=cache)
