"""The decoder stack shared by GPT and the encoder-decoder:

    x_0 = InputEmbedding(ids)                          (B, T, C)
    x_l = DecoderBlock_l(x_{l-1} [, memory])           (B, T, C)
    h   = Norm_f(x_L)        (pre-norm only: post-norm blocks end normalised)
    logits = h Eᵀ                                      (B, T, V)

Incremental decoding passes a ``DecoderCache``: each call feeds the new tokens
only, and every self-attention layer appends their keys and values to its
KVCache, so a new token costs one position instead of a re-run of the prefix.
"""
from __future__ import annotations

import numpy as np

from ..backend import default_rng
from ..layers.kv_cache import KVCache
from ..layers.blocks import DecoderBlock
from ..layers.lm_head import LMHead
from ..layers.module import Module, ModuleList
from ..layers.norm import make_norm
from .config import TransformerConfig
from .embeddings import InputEmbedding
from .sharing import share_parameters


class DecoderCache:
    """Per-layer key/value caches and the number of positions already decoded."""

    def __init__(self, n_layer: int, cross: bool):
        self.self_attn = [KVCache() for _ in range(n_layer)]
        self.cross_attn = [KVCache() for _ in range(n_layer)] if cross else [None] * n_layer
        self.length = 0

    @property
    def position(self) -> int:
        """The position the next token is fed at: the number of positions decoded."""
        return self.length


class DecoderStack(Module):
    def __init__(self, config: TransformerConfig, *, cross: bool = False, tie_weights: bool = True,
                 scale_embeddings: bool = False, rng=None, dropout_rng=None, dtype=np.float32):
        super().__init__()
        rng = default_rng(rng)
        self.config, self.cross = config, cross
        spec = config.block_spec(causal=True)
        C, V = config.d_model, config.vocab_size
        self.add_child("embed", InputEmbedding(V, C, config.block_size, config.position,
                                               scale=C ** 0.5 if scale_embeddings else 1.0,
                                               p_drop=config.p_drop, rng=rng, dropout_rng=dropout_rng,
                                               init_std=config.init_std, dtype=dtype))
        self.add_child("blocks", ModuleList(
            DecoderBlock(spec, cross=cross, rng=rng, dropout_rng=dropout_rng, dtype=dtype)
            for _ in range(config.n_layer)))
        if config.share_relative_bias:
            share_parameters(self.blocks, lambda name: name.endswith("rel_bias"))
        if config.norm_position == "pre":
            self.add_child("norm_f", make_norm(config.norm, C, config.eps, dtype))
        self.add_child("head", LMHead(C, V, rng=rng, init_std=config.init_std, dtype=dtype))
        if tie_weights:
            self.head.tie("W", self.embed.tok, "W")

    def new_cache(self) -> DecoderCache:
        """A KV cache for incremental decoding (a rolling one: generation/sink_cache.py)."""
        return DecoderCache(self.config.n_layer, self.cross)

    def forward(self, ids, memory=None, memory_padding_mask=None, cache: DecoderCache | None = None):
        """ids (B, T) -> logits (B, T, V). With a cache, ids are the NEW tokens only."""
        offset = cache.position if cache is not None else 0
        x = self.embed.forward(ids, offset=offset)                          # (B, T, C)
        for l, block in enumerate(self.blocks):
            x = block.checkpointed_forward(x, memory, memory_padding_mask,
                              kv_cache=cache.self_attn[l] if cache else None,
                              cross_kv_cache=cache.cross_attn[l] if cache else None)
        if "norm_f" in self.children:
            x = self.norm_f.forward(x)                                      # (B, T, C)
        if cache is not None:
            cache.length += ids.shape[1]
        logits = self.head.forward(x)                                       # (B, T, V)
        self._save(True, logits)             # only the output's shape and dtype, to check dlogits
        return logits

    def backward(self, dlogits):
        """dlogits: the shape and dtype of forward's logits (ValueError/TypeError naming ``dout``).
        Returns dmemory (summed over the blocks) for a cross-attending stack, else None."""
        self._pop_cache(dlogits)
        dx = self.head.backward(dlogits)                                    # (B, T, C)
        if "norm_f" in self.children:
            dx = self.norm_f.backward(dx)
        dmemory = None
        for block in reversed(list(self.blocks)):
            grads = block.checkpointed_backward(dx)
            if self.cross:
                dx, dm = grads
                dmemory = dm if dmemory is None else dmemory + dm           # (B, S, C)
            else:
                dx = grads
        self.embed.backward(dx)
        return dmemory
