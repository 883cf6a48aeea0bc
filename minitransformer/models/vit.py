"""The Vision Transformer (Dosovitskiy et al. 2021, "An Image is Worth 16x16 Words").

    Z      = patchify(images) W_p + b_p            (B, N, C)        N = (H/p)(W/p)
    x_0    = [cls ; Z] + P                         (B, 1 + N, C)    P: row + column + [CLS] positions
    logits = EncoderClassifier(Dropout(x_0))       (B, K)           blocks, Norm_f, head on [CLS]

Images are channels last, (B, H, W, C_in) (functional/patches.py says how a
patch is flattened). The positions are the factorised 2-D ones of
functional/grid_positions.py, not ViT's free 1-D table (its appendix D.4 found
the two about equal). Pre-norm and exact GELU, as in ViT; the head is one linear
layer (ViT's fine-tuning head; pre-training used an MLP with one hidden layer).
"""
from __future__ import annotations

import numpy as np

from ..backend import default_rng
from ..layers.cls_token import ClsToken
from ..layers.dropout import Dropout
from ..layers.grid_positions import GridPositionEmbedding
from ..layers.module import Module
from ..layers.patch_embedding import PatchEmbedding
from ..validate import check_ndim
from .classifier import EncoderClassifier
from .classifier_config import ViTConfig
from .embeddings import check_nonempty
from .gpt import dropout_generator


class ViT(Module):
    def __init__(self, config: ViTConfig, *, rng=0, dropout_rng=None, dtype=np.float32):
        super().__init__()
        if not isinstance(config, ViTConfig):
            raise TypeError(f"config: expected a ViTConfig, got {type(config).__name__}")
        init_rng = default_rng(rng)
        dropout_rng = dropout_rng if dropout_rng is not None else dropout_generator(rng)
        self.config = config
        C = config.d_model
        self.add_child("patches", PatchEmbedding(config.patch_size, config.in_channels, C, rng=init_rng,
                                                 dtype=dtype))
        self.add_child("cls", ClsToken(C, rng=init_rng, init_std=config.init_std, dtype=dtype))
        self.add_child("pos", GridPositionEmbedding(config.grid, config.grid, C, rng=init_rng,
                                                    init_std=config.init_std, dtype=dtype))
        self.add_child("dropout", Dropout(config.p_drop, rng=dropout_rng))
        self.add_child("encoder", EncoderClassifier(config, rng=init_rng, dropout_rng=dropout_rng, dtype=dtype))

    def forward(self, images):
        """images (B, H, W, C_in), H = W = image_size -> logits (B, n_classes)."""
        c = self.config
        check_ndim("images", images, 4, "(B, H, W, C_in)")
        check_nonempty("images", images)
        if tuple(images.shape[1:]) != (c.image_size, c.image_size, c.in_channels):
            raise ValueError(f"images: expected shape (B, {c.image_size}, {c.image_size}, {c.in_channels}) "
                             f"(image_size, image_size, in_channels), got {tuple(images.shape)}")
        Z = self.patches.forward(images)                                  # (B, N, C)
        x = self.cls.forward(Z)                                           # (B, 1 + N, C)
        x += self.pos.forward()                                           # (1 + N, C) broadcast over B
        x = self.dropout.forward(x)                                       # (B, 1 + N, C)
        logits = self.encoder.forward(x)                                  # (B, K)
        self._save(True, logits)
        return logits

    def backward(self, dlogits):
        """dlogits (B, n_classes) -> dimages (B, H, W, C_in)."""
        self._pop_cache(dlogits)
        dx = self.dropout.backward(self.encoder.backward(dlogits))        # (B, 1 + N, C)
        self.pos.backward(dx.sum(axis=0))                                 # (1 + N, C): shared over B
        dZ = self.cls.backward(dx)                                        # (B, N, C)
        return self.patches.backward(dZ)                                  # (B, H, W, C_in)
