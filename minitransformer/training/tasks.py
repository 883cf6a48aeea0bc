"""What a model is trained on: batches, and the logits/targets pair the loss compares.

A task knows how to draw a batch from an explicit generator and how to run the
model forward on it; the training loop (train.py) does the rest the same way for
every family:

    LanguageModelTask   GPT on a token stream: predict token t+1 from tokens <= t
    SequenceTaskData    Seq2Seq on copy / reverse / sort: teacher forcing
    MaskedLMTask        Encoder on a token stream with BERT's 15% / 80-10-10 masking
"""
from __future__ import annotations

import numpy as np

from ..backend import to_device
from .data import make_sequence_task, mlm_mask, random_batch


class LanguageModelTask:
    def __init__(self, train_ids, val_ids, block_size: int, batch_size: int):
        self.splits = {"train": np.asarray(train_ids), "val": np.asarray(val_ids)}
        self.block_size, self.batch_size = block_size, batch_size

    def batch(self, split: str, rng):
        return random_batch(self.splits[split], self.block_size, self.batch_size, rng)  # x, y (B, T)

    def forward(self, model, batch, device="cpu"):
        """Returns (logits (B, T, V), targets (B, T))."""
        x, y = (to_device(a, device) for a in batch)
        return model.forward(x), y

    def tokens(self, batch) -> int:
        return int(batch[0].size)


class SequenceTaskData:
    """Fresh synthetic examples every batch (train) or a fixed held-out set (val)."""

    def __init__(self, task: str, vocab: int, length_range, batch_size: int, n_val: int = 500, seed: int = 0):
        self.task, self.vocab, self.length_range, self.batch_size = task, vocab, length_range, batch_size
        self.val = make_sequence_task(task, n_val, length_range, vocab, np.random.default_rng([seed, 99]))

    def batch(self, split: str, rng):
        if split == "val":
            rows = rng.integers(0, self.val.src.shape[0], size=self.batch_size)
            return tuple(a[rows] for a in self.val)
        return tuple(make_sequence_task(self.task, self.batch_size, self.length_range, self.vocab, rng))

    def forward(self, model, batch, device="cpu"):
        src, src_lengths, tgt_in, tgt_out = (to_device(a, device) for a in batch)
        return model.forward(src, tgt_in), tgt_out

    def tokens(self, batch) -> int:
        return int(batch[0].size + batch[2].size)


class MaskedLMTask:
    def __init__(self, train_ids, val_ids, block_size: int, batch_size: int, vocab_size: int, mask_id: int):
        self.lm = LanguageModelTask(train_ids, val_ids, block_size, batch_size)
        self.vocab_size, self.mask_id = vocab_size, mask_id

    def batch(self, split: str, rng):
        x, _ = self.lm.batch(split, rng)
        return mlm_mask(x, rng, self.vocab_size, self.mask_id, special_ids=(self.mask_id,))

    def forward(self, model, batch, device="cpu"):
        inputs, labels = (to_device(a, device) for a in batch)
        return model.forward(inputs, head="mlm"), labels

    def tokens(self, batch) -> int:
        return int(batch[0].size)
