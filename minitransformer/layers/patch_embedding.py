"""PatchEmbedding Module: owns W (p·p·C_in, C) and b (C,); the math is functional.patches."""
from __future__ import annotations

import numpy as np

from .. import init
from ..backend import default_rng
from ..functional.patches import patch_embed_backward, patch_embed_forward
from ..validate import check_dim, check_int, check_number, check_size
from .linear import check_input
from .module import Module


class PatchEmbedding(Module):
    """images (B, H, W, C_in) -> Z = patchify(images) W + b (B, N, C); W ~ N(0, init_std²), b = 0.

    init_std None: 1/√(p·p·C_in), the scale that keeps Z near unit variance for unit pixels.
    """

    def __init__(self, patch_size: int, in_channels: int, d_model: int, *, rng=None,
                 init_std: float | None = None, dtype=np.float32):
        super().__init__()
        self.patch_size = check_int("patch_size", patch_size, low=1)
        self.in_channels = check_int("in_channels", in_channels, low=1)
        d_model = check_int("d_model", d_model, low=1)
        P = self.patch_size ** 2 * self.in_channels
        check_size("patch_size² · in_channels, d_model", (P, d_model))
        init_std = 1.0 / np.sqrt(P) if init_std is None else check_number("init_std", init_std, low=0.0,
                                                                          finite=True)
        self.add_param("W", init.normal(default_rng(rng), (P, d_model), init_std, dtype))
        self.add_param("b", init.zeros(d_model, dtype))

    def forward(self, images):
        """images (B, H, W, C_in) floating, the weights' dtype, H and W multiples of patch_size."""
        check_input("images", images, self.W)
        check_dim("images", images, 3, self.in_channels, "C_in, in_channels")
        Z, cache = patch_embed_forward(images, self.W, self.b, self.patch_size)
        self._save(cache, Z)
        return Z                                                  # (B, N, C)

    def backward(self, dZ):
        """dZ (B, N, C) -> dimages (B, H, W, C_in); accumulates grads W, b."""
        dimages, dW, db = patch_embed_backward(dZ, self._pop_cache(dZ))
        self._accumulate("W", dW)
        self._accumulate("b", db)
        return dimages
