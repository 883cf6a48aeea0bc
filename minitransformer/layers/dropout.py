"""Dropout Module: the identity in eval mode or with p_drop == 0; the math is functional.dropout.

The mask generator is kept as ``self.rng``: a model's dropout draws are
reproducible from the seed it was given, and the gradient checker finds every
``module.rng`` in a tree and replays it, so a check can run with dropout on.
"""
from __future__ import annotations

from ..backend import default_rng
from ..functional.dropout import dropout_backward, dropout_forward
from ..validate import check_number
from .module import Module


class Dropout(Module):
    """y = x ⊙ m / (1 - p_drop), m ~ Bernoulli(1 - p_drop), in training; y = x in eval.

    p_drop: the probability of DROPPING an entry, in [0, 1).
    rng: a seed or a Generator for the masks; None gives a generator seeded by
    the operating system (masks then differ from run to run).
    """

    def __init__(self, p_drop: float, rng=None):
        super().__init__()
        self.p_drop = check_number("p_drop", p_drop, low=0.0, high=1.0, high_open=True)
        self.rng = default_rng(rng)

    def forward(self, x):
        """x (...) -> y like x (x itself in eval or with p_drop == 0)."""
        y, cache = dropout_forward(x, self.p_drop, rng=self.rng, training=self.training)
        self._save(cache, y)
        return y

    def backward(self, dy):
        """dy like y -> dx (dy itself when forward was the identity)."""
        return dropout_backward(dy, self._pop_cache(dy, "dy"))

    def __repr__(self) -> str:
        return f"Dropout(p_drop={self.p_drop})"
