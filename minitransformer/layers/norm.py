"""LayerNorm and RMSNorm Modules: own gamma (and beta); the math is functional.norm.

``make_norm(name, d_model)`` builds either from a config value ("layernorm", "rmsnorm"),
so a model switches norms by configuration, not by subclassing.
"""
from __future__ import annotations

import numpy as np

from .. import init
from ..functional.twins import twin
from ..functional.norm import (layernorm_backward, layernorm_forward, rmsnorm_backward,
                               rmsnorm_forward)
from ..validate import check_choice, check_int, check_number
from .module import Module

NORMS = ("layernorm", "rmsnorm")


class LayerNorm(Module):
    """y = gamma ⊙ (x - μ)/√(σ² + eps) + beta over the last axis; gamma = 1, beta = 0 at start."""

    def __init__(self, d_model: int, eps: float = 1e-5, dtype=np.float32):
        super().__init__()
        d_model = check_int("d_model", d_model, low=1)
        self.eps = check_number("eps", eps, low=0.0, low_open=True, finite=True)
        self.add_param("gamma", init.ones(d_model, dtype))
        self.add_param("beta", init.zeros(d_model, dtype))

    def forward(self, x):
        """x (..., C) -> y (..., C)."""
        y, cache = twin(layernorm_forward)(x, self.gamma, self.beta, self.eps)
        self._save(cache)
        return y

    def backward(self, dy):
        """dy (..., C) -> dx (..., C); accumulates grads gamma, beta."""
        dx, dgamma, dbeta = twin(layernorm_backward)(dy, self._pop_cache())
        self._accumulate("gamma", dgamma)
        self._accumulate("beta", dbeta)
        return dx


class RMSNorm(Module):
    """y = x / √(mean(x²) + eps) ⊙ gamma over the last axis; gamma = 1 at start."""

    def __init__(self, d_model: int, eps: float = 1e-6, dtype=np.float32):
        super().__init__()
        d_model = check_int("d_model", d_model, low=1)
        self.eps = check_number("eps", eps, low=0.0, low_open=True, finite=True)
        self.add_param("gamma", init.ones(d_model, dtype))

    def forward(self, x):
        """x (..., C) -> y (..., C)."""
        y, cache = twin(rmsnorm_forward)(x, self.gamma, self.eps)
        self._save(cache)
        return y

    def backward(self, dy):
        """dy (..., C) -> dx (..., C); accumulates grad gamma."""
        dx, dgamma = twin(rmsnorm_backward)(dy, self._pop_cache())
        self._accumulate("gamma", dgamma)
        return dx


def make_norm(name: str, d_model: int, eps: float | None = None, dtype=np.float32) -> Module:
    """The norm called ``name`` ("layernorm" or "rmsnorm") over d_model features.

    eps=None takes the class default (LayerNorm 1e-5, RMSNorm 1e-6).
    """
    check_choice("name", name, NORMS)
    cls = LayerNorm if name == "layernorm" else RMSNorm
    return cls(d_model, dtype=dtype) if eps is None else cls(d_model, eps=eps, dtype=dtype)
