"""The training loss: cross-entropy from logits (the math is functional.cross_entropy).

    loss_fn = CrossEntropyLoss(ignore_index=-100, smoothing=0.0)
    loss = loss_fn.forward(logits, targets)      # a Python float
    dlogits = loss_fn.backward()                 # dloss = 1.0 by default

Per target: (1 - ε)(-log p_y) + ε · mean over all V classes of (-log p_c), averaged
over the targets that are not ``ignore_index``; an all-ignored batch gives 0.0
and a zero gradient.
"""
from __future__ import annotations

from ..functional._kernels import fast
from ..functional.cross_entropy import cross_entropy_backward, cross_entropy_forward
from ..layers.module import Module
from ..validate import check_int, check_number


class CrossEntropyLoss(Module):
    """A thin owner of the cross-entropy cache; no parameters."""

    def __init__(self, ignore_index: int = -100, smoothing: float = 0.0):
        super().__init__()
        self.ignore_index = check_int("ignore_index", ignore_index)
        self.smoothing = check_number("smoothing", smoothing, low=0.0, high=1.0)

    def forward(self, logits, targets) -> float:
        """logits (..., V), targets (...) integers -> the mean loss as a Python float."""
        loss, cache = fast(cross_entropy_forward)(logits, targets, self.ignore_index, self.smoothing)
        self._save(cache)
        return float(loss)

    def backward(self, dloss: float = 1.0):
        """dloss (scalar) -> dlogits (..., V). Raises RuntimeError without a pending forward."""
        return fast(cross_entropy_backward)(dloss, self._pop_cache())
