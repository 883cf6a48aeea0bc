"""ClsToken Module: owns the learned [CLS] vector (C,); the math is functional.cls_token."""
from __future__ import annotations

import numpy as np

from .. import init
from ..backend import default_rng
from ..functional.cls_token import prepend_cls_backward, prepend_cls_forward
from ..validate import check_int, check_number, check_size
from .module import Module


class ClsToken(Module):
    """x (B, N, C) -> [cls ; x] (B, 1 + N, C); cls ~ N(0, init_std²) at start."""

    def __init__(self, d_model: int, *, rng=None, init_std: float = 0.02, dtype=np.float32):
        super().__init__()
        d_model = check_int("d_model", d_model, low=1)
        check_size("d_model", (d_model,))
        init_std = check_number("init_std", init_std, low=0.0, finite=True)
        self.add_param("cls", init.normal(default_rng(rng), (d_model,), init_std, dtype))

    def forward(self, x):
        out, cache = prepend_cls_forward(x, self.cls)
        self._save(cache, out)
        return out                                                # (B, 1 + N, C)

    def backward(self, dout):
        """dout (B, 1 + N, C) -> dx (B, N, C); accumulates grads cls."""
        dx, dcls = prepend_cls_backward(dout, self._pop_cache(dout))
        self._accumulate("cls", dcls)
        return dx
