"""AdditiveAttention Module (Bahdanau et al. 2015): owns W (Cs, A), U (Ch, A), v (A,);
the math is functional.additive_attention."""
from __future__ import annotations

import numpy as np

from .. import init
from ..backend import default_rng
from ..functional.additive_attention import additive_attention_backward, additive_attention_forward
from ..validate import check_int, check_number, check_size
from .linear import check_input
from .module import Module


class AdditiveAttention(Module):
    """c_i = Σ_j softmax_j(vᵀ tanh(W s_i + U h_j)) h_j; W, U, v ~ N(0, init_std²)
    (default init_std = 1/√d_in for W and U, 1/√A for v)."""

    def __init__(self, d_query: int, d_key: int, d_attn: int, *, rng=None, init_std: float | None = None,
                 dtype=np.float32):
        super().__init__()
        Cs, Ch, A = (check_int(n, d, low=1) for n, d in (("d_query", d_query), ("d_key", d_key),
                                                          ("d_attn", d_attn)))
        if init_std is not None:
            init_std = check_number("init_std", init_std, low=0.0, finite=True)
        check_size("d_query + d_key, d_attn", (Cs + Ch, A))
        rng = default_rng(rng)
        self.add_param("W", init.normal(rng, (Cs, A), init_std or Cs ** -0.5, dtype))
        self.add_param("U", init.normal(rng, (Ch, A), init_std or Ch ** -0.5, dtype))
        self.add_param("v", init.normal(rng, (A,), init_std or A ** -0.5, dtype))
        self.alpha = None               # (B, T, S) the last forward's attention weights, for plots

    def forward(self, s, h, mask=None):
        """s (B, T, Cs) queries, h (B, S, Ch) keys = values, mask broadcastable to (B, T, S)
        (True = may attend) -> c (B, T, Ch)."""
        check_input("s", s, self.W)
        check_input("h", h, self.W)
        c, cache = additive_attention_forward(s, h, self.W, self.U, self.v, mask)
        self.alpha = cache.alpha
        self._save(cache, c)
        return c

    def backward(self, dc):
        """dc (B, T, Ch) -> (ds, dh); accumulates the gradients of W, U, v."""
        ds, dh, dW, dU, dv = additive_attention_backward(dc, self._pop_cache(dc, "dc"))
        self._accumulate("W", dW)
        self._accumulate("U", dU)
        self._accumulate("v", dv)
        return ds, dh
