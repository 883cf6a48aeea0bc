"""RegisterTokens Module: owns the R learned register vectors (R, C); the math is functional.registers."""
from __future__ import annotations

import numpy as np

from .. import init
from ..backend import default_rng
from ..functional.registers import append_registers_backward, append_registers_forward
from ..validate import check_int, check_number, check_size
from .module import Module


class RegisterTokens(Module):
    """x (B, N, C) -> [x ; registers] (B, N + R, C); registers ~ N(0, init_std²) at start."""

    def __init__(self, n_registers: int, d_model: int, *, rng=None, init_std: float = 0.02, dtype=np.float32):
        super().__init__()
        R = check_int("n_registers", n_registers, low=1)
        C = check_int("d_model", d_model, low=1)
        check_size("n_registers, d_model", (R, C))
        init_std = check_number("init_std", init_std, low=0.0, finite=True)
        self.add_param("registers", init.normal(default_rng(rng), (R, C), init_std, dtype))

    def forward(self, x):
        out, cache = append_registers_forward(x, self.registers)
        self._save(cache, out)
        return out                                                # (B, N + R, C)

    def backward(self, dout):
        """dout (B, N + R, C) -> dx (B, N, C); accumulates grads registers."""
        dx, dregisters = append_registers_backward(dout, self._pop_cache(dout))
        self._accumulate("registers", dregisters)
        return dx
