"""Position-wise feed-forward network: FFN(x) = act(x W_1 + b_1) W_2 + b_2.

Shapes: x (B, T, C) -> h (B, T, F) -> y (B, T, C), applied to every position alone.
For the gated units (GEGLU, SwiGLU; Shazeer 2020) the first projection is twice
as wide, h = x [W | V] of shape (B, T, 2F), and the unit returns act(xW) ⊙ xV:
one matrix product for both halves.
"""
from __future__ import annotations

import numpy as np

from ..backend import default_rng
from .activation import GATED_ACTIVATIONS, make_activation
from ..validate import check_size, check_int, check_number
from .linear import Linear, check_input
from .module import Module


class FeedForward(Module):
    def __init__(self, d_model: int, d_ff: int, activation: str = "gelu", *, bias: bool = True,
                 rng=None, init_std: float = 0.02, out_std: float | None = None, dtype=np.float32):
        super().__init__()
        d_model = check_int("d_model", d_model, low=1)
        d_ff = check_int("d_ff", d_ff, low=1)
        check_size("d_model, d_ff", (d_model, 2 * d_ff))
        init_std = check_number("init_std", init_std, low=0.0, finite=True)
        if out_std is not None:
            out_std = check_number("out_std", out_std, low=0.0, finite=True)
        rng = default_rng(rng)
        width = 2 * d_ff if activation in GATED_ACTIVATIONS else d_ff
        self.add_child("fc_in", Linear(d_model, width, bias, rng=rng, init_std=init_std, dtype=dtype))
        self.add_child("act", make_activation(activation, dtype))
        self.add_child("fc_out", Linear(d_ff, d_model, bias, rng=rng,
                                        init_std=init_std if out_std is None else out_std, dtype=dtype))

    def forward(self, x):
        check_input("x", x, self.fc_in.W)    # before the activation sees it
        h = self.fc_in.forward(x)            # (B, T, F) or (B, T, 2F)
        a = self.act.forward(h)              # (B, T, F)
        y = self.fc_out.forward(a)           # (B, T, C)
        self._save(True, y)                  # nothing to keep but the output's shape and dtype
        return y

    def backward(self, dy):
        self._pop_cache(dy)                  # checks dy against the output
        da = self.fc_out.backward(dy)        # (B, T, F)
        dh = self.act.backward(da)           # (B, T, F) or (B, T, 2F)
        return self.fc_in.backward(dh)       # (B, T, C)
