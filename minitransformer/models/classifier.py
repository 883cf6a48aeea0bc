"""The trunk both non-text classifiers share: encoder blocks and a head on the [CLS] token.

    x_l    = EncoderBlock_l(x_{l-1})             (B, 1 + N, C)   bidirectional, no padding
    h      = Norm_f(x_L)                         (pre-norm only: post-norm blocks end normalised)
    logits = h[:, 0] W_c + b_c                   (B, K)

The model in front of it (ViT, TabularTransformer) turns its input into the
tokens x_0 = [cls ; tokens] (+ positions); the blocks are the very EncoderBlocks
of BERT (layers/blocks.py), with no padding mask: every example has the same
number of tokens.
"""
from __future__ import annotations

import numpy as np

from ..layers.blocks import EncoderBlock
from ..layers.linear import Linear
from ..layers.module import Module, ModuleList
from ..layers.norm import make_norm
from .classifier_config import ClassifierConfig
from .encoder import _scatter_first


class EncoderClassifier(Module):
    def __init__(self, config: ClassifierConfig, *, rng, dropout_rng, dtype=np.float32):
        super().__init__()
        spec = config.block_spec()
        self.add_child("blocks", ModuleList(EncoderBlock(spec, rng=rng, dropout_rng=dropout_rng, dtype=dtype)
                                            for _ in range(config.n_layer)))
        if config.norm_position == "pre":
            self.add_child("norm_f", make_norm(config.norm, config.d_model, config.eps, dtype))
        self.add_child("head", Linear(config.d_model, config.n_classes, rng=rng,
                                      init_std=config.init_std, dtype=dtype))

    def forward(self, x):
        """x (B, 1 + N, C), the [CLS] token first -> logits (B, K)."""
        for block in self.blocks:
            x = block.forward(x)                                          # (B, 1 + N, C)
        if "norm_f" in self.children:
            x = self.norm_f.forward(x)                                    # (B, 1 + N, C)
        logits = self.head.forward(x[:, 0])                               # (B, K)
        self._save(x.shape, logits)
        return logits

    def backward(self, dlogits):
        """dlogits (B, K) -> dx (B, 1 + N, C)."""
        hidden_shape = self._pop_cache(dlogits)
        dx = _scatter_first(self.head.backward(dlogits), hidden_shape)   # (B, 1 + N, C)
        if "norm_f" in self.children:
            dx = self.norm_f.backward(dx)
        for block in reversed(list(self.blocks)):
            dx = block.backward(dx)
        return dx
