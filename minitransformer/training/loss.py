"""The training loss: cross-entropy from logits (the math is functional.cross_entropy).

    loss_fn = CrossEntropyLoss(ignore_index=-100, smoothing=0.0)
    loss = loss_fn.forward(logits, targets)      # a Python float
    dlogits = loss_fn.backward()                 # dloss = 1.0 by default

    L, cache = task_loss(model, task, batch)     # a task's forward and its loss, in one call
    task_loss_backward(model, 1.0, cache)        # and their backward (model.grads accumulate)

A mixture-of-experts model adds its layers' load-balancing losses in training (α · aux
each, layers/moe.py): L = CE + Σ_layers α aux_l, and the backward carries both.

Per target: (1 - ε)(-log p_y) + ε · mean over all V classes of (-log p_c), averaged
over the targets that are not ``ignore_index``; an all-ignored batch gives 0.0
and a zero gradient.
"""
from __future__ import annotations

from ..functional.twins import twin
from ..functional.cross_entropy import cross_entropy_backward, cross_entropy_forward
from ..layers.module import Module
from ..layers.moe import MoEFeedForward
from ..validate import check_int, check_number


class CrossEntropyLoss(Module):
    """A thin owner of the cross-entropy cache; no parameters."""

    def __init__(self, ignore_index: int = -100, smoothing: float = 0.0):
        super().__init__()
        self.ignore_index = check_int("ignore_index", ignore_index)
        self.smoothing = check_number("smoothing", smoothing, low=0.0, high=1.0)

    def forward(self, logits, targets) -> float:
        """logits (..., V), targets (...) integers -> the mean loss as a Python float."""
        loss, cache = twin(cross_entropy_forward)(logits, targets, self.ignore_index, self.smoothing)
        self._save(cache)
        return float(loss)

    def backward(self, dloss: float = 1.0):
        """dloss (scalar) -> dlogits (..., V). Raises RuntimeError without a pending forward."""
        return twin(cross_entropy_backward)(dloss, self._pop_cache())


def auxiliary_loss_layers(model) -> list:
    """The layers of ``model`` that add a loss of their own to the training loss: the mixtures
    of experts' load balancing (layers/moe.py); none in a dense model."""
    return [m for _, m in model.named_modules() if isinstance(m, MoEFeedForward)]


def task_loss(model, task, batch, smoothing: float = 0.0, device="cpu"):
    """(L, cache): ``model``'s mean cross-entropy on ``batch`` (``task.forward`` gives the logits
    and targets), plus in training the auxiliary losses of its layers (a mixture of experts'
    α · aux; 0 in eval), a Python float, and the cache ``task_loss_backward`` takes. The
    training step and every data-parallel replica compute their loss with this one function."""
    logits, targets = task.forward(model, batch, device)
    L, cache = twin(cross_entropy_forward)(logits, targets, smoothing=smoothing)
    aux = sum(layer.aux_loss for layer in auxiliary_loss_layers(model))
    return float(L) + aux, cache


def task_loss_backward(model, dL: float, cache) -> None:
    """``model``'s backward from ``task_loss``'s cache, the loss's upstream gradient ``dL``
    (1 for a whole batch, N_i / N for a data-parallel part): the gradients accumulate. The
    auxiliary losses get the same upstream gradient (each layer adds its own in its backward)."""
    for layer in auxiliary_loss_layers(model):
        layer.aux_upstream = float(dL)
    model.backward(twin(cross_entropy_backward)(dL, cache))
