"""The Vision Transformer (Dosovitskiy et al. 2021, "An Image is Worth 16x16 Words").

    Z      = patchify(images) W_p + b_p            (B, N, C)        N = (H/p)(W/p)
    x_0    = [cls ; Z] + P                         (B, 1 + N, C)    P: row + column + [CLS] positions
    x_0'   = [x_0 ; registers]                     (B, 1 + N + R, C) only when n_registers = R > 0
    logits = EncoderClassifier(Dropout(x_0'))      (B, K)           blocks, Norm_f, head on [CLS]

Images are channels last, (B, H, W, C_in) (functional/patches.py says how a
patch is flattened). The positions are the factorised 2-D ones of
functional/grid_positions.py, not ViT's free 1-D table (its appendix D.4 found
the two about equal). Pre-norm and exact GELU, as in ViT; the head is one linear
layer (ViT's fine-tuning head; pre-training used an MLP with one hidden layer).

Register tokens (Darcet et al. 2023, functional/registers.py) are appended after
the positions are added, so they carry none; they pass through every block and the
head never reads them. ``resize(image_size)`` interpolates the position tables to
another image size (functional/resize_positions.py), as DINO does.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..backend import default_rng
from ..functional.resize_positions import resize_grid_positions
from ..layers.cls_token import ClsToken
from ..layers.dropout import Dropout
from ..layers.grid_positions import GridPositionEmbedding
from ..layers.module import Module
from ..layers.patch_embedding import PatchEmbedding
from ..layers.registers import RegisterTokens
from ..validate import check_ndim, check_size
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
        if config.n_registers:          # drawn last: the other weights are those of the same ViT without
            self.add_child("registers", RegisterTokens(config.n_registers, C, rng=init_rng,
                                                       init_std=config.init_std, dtype=dtype))

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
        if "registers" in self.children:
            x = self.registers.forward(x)                                 # (B, 1 + N + R, C)
        x = self.dropout.forward(x)                                       # (B, 1 + N [+ R], C)
        logits = self.encoder.forward(x)                                  # (B, K)
        self._save(True, logits)
        return logits

    def backward(self, dlogits):
        """dlogits (B, n_classes) -> dimages (B, H, W, C_in)."""
        self._pop_cache(dlogits)
        dx = self.dropout.backward(self.encoder.backward(dlogits))        # (B, 1 + N [+ R], C)
        if "registers" in self.children:
            dx = self.registers.backward(dx)                              # (B, 1 + N, C)
        self.pos.backward(dx.sum(axis=0))                                 # (1 + N, C): shared over B
        dZ = self.cls.backward(dx)                                        # (B, N, C)
        return self.patches.backward(dZ)                                  # (B, H, W, C_in)

    def resize(self, image_size: int, *, align_corners: bool = True, mode: str = "linear") -> "ViT":
        """Take images of image_size × image_size pixels from now on; returns the model.

        The row and column position tables are interpolated to the new grid
        (``resize_grid_positions``: the bilinear resize of the grid; with align_corners
        the corner patches keep their vectors); every other parameter stays as it is,
        since the patch embedding, the blocks and the head do not depend on the
        number of patches. In place: the position tables are new arrays with zero
        gradients, so build the optimizer after resizing. ``mode="cubic"``: bicubic, as DINO.
        """
        config = dataclasses.replace(self.config, image_size=image_size)   # checked: a multiple of patch_size
        check_size("image_size", (config.grid, config.d_model))            # the new tables, before allocating
        E_row, E_col = resize_grid_positions(self.pos.E_row, self.pos.E_col, config.grid, config.grid,
                                             align_corners=align_corners, mode=mode)
        self.pos.add_param("E_row", E_row)                                 # (Hp', C), a zero gradient
        self.pos.add_param("E_col", E_col)                                 # (Wp', C)
        self.pos.release_caches()
        self.config = config
        return self
