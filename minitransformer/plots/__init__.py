"""The lecture figures. Every helper returns ``(fig, data)``: a matplotlib Figure
(built without pyplot, so it runs headless) and a dict of the arrays it drew, so a
test can check the picture's numbers against the formula. With ``path`` it also
saves a PNG. The math always comes from the library: a GELU curve calls
gelu_forward, a mask figure calls causal_mask.

    training.py      loss_curve, lr_schedules, label_smoothing
    positions.py     sinusoidal_encoding, rope_figure
    activations.py   activation_curves, gelu_difference
    masks.py         causal_table, key_padding_figure, attention_patterns
    attention.py     attention_map, attention_grid
    gradients.py     prenorm_vs_postnorm, gradcheck_errors

``python -m minitransformer figures`` writes them all (cli_figures.py).

The names load their file on first use, so the training command, which needs only
``loss_curve``, does not import the rest.
"""
from __future__ import annotations

import importlib

_WHERE = {
    "loss_curve": "training", "lr_schedules": "training", "label_smoothing": "training",
    "sinusoidal_encoding": "positions", "rope_figure": "positions",
    "activation_curves": "activations", "gelu_difference": "activations",
    "causal_table": "masks", "key_padding_figure": "masks", "attention_patterns": "masks",
    "attention_map": "attention", "attention_grid": "attention",
    "prenorm_vs_postnorm": "gradients", "gradcheck_errors": "gradients",
}

__all__ = sorted(_WHERE)


def __getattr__(name):
    if name in _WHERE:
        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_WHERE))
