"""Classification tasks on generated data: images (ViT) and table rows (tabular Transformer).

    task = ClassificationTask(make, batch_size, n_val=1000, seed=0)
    train(model, task, TrainConfig(...))                 # the same loop as every family
    classification_accuracy(model, task)                 # on the held-out set

``make(n, rng)`` returns (input_1, ..., labels): fresh examples every training
batch (the generator never runs dry, so there is no overfitting to a fixed
set), and a held-out set drawn once from its own seed. The loss is the usual
cross-entropy on logits (B, K) and labels (B,).

``vit_task`` and ``tabular_task`` put together the model, the task and the
checkpoint metadata the command line needs (``train --model vit | tabular``).
"""
from __future__ import annotations

from functools import partial

import numpy as np

from ..backend import to_device, to_numpy
from ..layers.module import Module
from ..models.classifier_config import TabularConfig, ViTConfig
from ..models.tabular import TabularTransformer
from ..models.vit import ViT
from ..validate import check_int, check_size
from .shapes import SHAPES, draw_shapes
from .tables import CARDINALITIES, N_NUMERIC, make_table


class ClassificationTask:
    def __init__(self, make, batch_size: int, *, n_val: int = 1000, seed: int = 0, tokens_per_example: int = 1):
        if not callable(make):
            raise TypeError(f"make: expected a function make(n, rng), got {type(make).__name__}")
        self.make = make
        self.batch_size = check_int("batch_size", batch_size, low=1)
        self.tokens_per_example = check_int("tokens_per_example", tokens_per_example, low=1)
        n_val = check_int("n_val", n_val, low=1)
        check_size("n_val", (n_val,))
        self.val = make(n_val, np.random.default_rng([check_int("seed", seed, low=0), 99]))

    def batch(self, split: str, rng):
        """(inputs..., labels): fresh for "train", rows of the held-out set for "val"."""
        if split == "val":
            rows = rng.integers(0, len(self.val[-1]), size=self.batch_size)
            return tuple(a[rows] for a in self.val)
        return tuple(self.make(self.batch_size, rng))

    def forward(self, model, batch, device="cpu"):
        """Returns (logits (B, K), labels (B,))."""
        *inputs, labels = (to_device(a, device) for a in batch)
        return model.forward(*inputs), labels

    def tokens(self, batch) -> int:
        return int(len(batch[-1])) * self.tokens_per_example


def classification_accuracy(model, task: ClassificationTask, batch_size: int = 250, device="cpu") -> float:
    """The fraction of the held-out set whose argmax logit is the label (eval mode, no caches kept)."""
    if not isinstance(model, Module):
        raise TypeError(f"model: expected a Module, got {type(model).__name__}")
    if not isinstance(task, ClassificationTask):
        raise TypeError(f"task: expected a ClassificationTask, got {type(task).__name__}")
    batch_size = check_int("batch_size", batch_size, low=1)
    was_training = model.training
    model.eval()
    hits = 0
    n = len(task.val[-1])
    for start in range(0, n, batch_size):
        *inputs, labels = (to_device(a[start:start + batch_size], device) for a in task.val)
        logits = model.forward(*inputs)
        model.release_caches()
        hits += int((to_numpy(logits).argmax(-1) == to_numpy(labels)).sum())
    model.train(was_training)
    return hits / n


def vit_task(*, batch_size: int = 64, seed: int = 0, image_size: int = 16, patch_size: int = 4,
             n_val: int = 1000, **config):
    """(ViT, ClassificationTask on ``draw_shapes``, meta) for the six synthetic shapes."""
    cfg = ViTConfig(n_classes=len(SHAPES), image_size=image_size, patch_size=patch_size, in_channels=1, **config)
    task = ClassificationTask(partial(draw_shapes, size=image_size), batch_size, n_val=n_val, seed=seed,
                              tokens_per_example=cfg.n_tokens)
    meta = {"family": "vit", "config": cfg.to_dict(), "task": "shapes", "classes": list(SHAPES)}
    return ViT(cfg, rng=seed), task, meta


def tabular_task(*, batch_size: int = 64, seed: int = 0, n_val: int = 1000, **config):
    """(TabularTransformer, ClassificationTask on ``make_table``, meta) for the generated rule."""
    cfg = TabularConfig(n_classes=2, n_numeric=N_NUMERIC, cardinalities=CARDINALITIES, **config)
    task = ClassificationTask(make_table, batch_size, n_val=n_val, seed=seed, tokens_per_example=cfg.n_tokens)
    meta = {"family": "tabular", "config": cfg.to_dict(), "task": "rule"}
    return TabularTransformer(cfg, rng=seed), task, meta
