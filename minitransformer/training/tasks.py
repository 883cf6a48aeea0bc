"""What a model is trained on: batches, and the logits/targets pair the loss compares.

A task knows how to draw a batch from an explicit generator and how to run the
model forward on it; the training loop (train.py) does the rest the same way for
every family:

    LanguageModelTask   GPT on a token stream: predict token t+1 from tokens <= t
    SequenceTaskData    Seq2Seq on copy / reverse / sort: teacher forcing
    TextToTextTasks     Seq2Seq on several of them at once, a prefix token naming the task (T5)
    MaskedLMTask        Encoder on a token stream with BERT's 15% / 80-10-10 masking
"""
from __future__ import annotations

import numpy as np

from ..backend import to_device
from ..validate import check_choice, check_int, check_items
from .data import SequenceTask, make_sequence_task, mlm_mask, random_batch


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


class TextToTextTasks(SequenceTaskData):
    """T5's text-to-text format (Raffel et al. 2020) on the synthetic tasks: ONE encoder-decoder for
    several tasks, each source led by a prefix that names its task, as T5 writes "translate
    English to German: ..." before its input.

    Ids: the tasks' symbols are 3 .. vocab − 1 (data.py); the prefix of ``tasks[i]`` is the id
    vocab + i, so the model's vocabulary is ``vocab_size`` = vocab + len(tasks). A source is
    [prefix, L symbols, PAD ...] (S + 1 columns); the targets are the task's own. A training
    example draws its task uniformly; ``val[name]`` is a fixed held-out set of each task, and
    the "val" split draws from all of them. ``forward`` and ``tokens`` are SequenceTaskData's.
    """

    def __init__(self, tasks, vocab: int, length_range, batch_size: int, n_val: int = 200, seed: int = 0):
        self.tasks = tuple(check_items("tasks", tasks))
        if not self.tasks or len(set(self.tasks)) != len(self.tasks):
            raise ValueError(f"tasks: expected distinct task names, at least one, got {self.tasks}")
        for n, task in enumerate(self.tasks):
            check_choice(f"tasks[{n}]", task, ("copy", "reverse", "sort"))
        self.vocab, self.length_range = vocab, length_range
        self.batch_size = check_int("batch_size", batch_size, low=1)
        self.vocab_size = vocab + len(self.tasks)
        self.val = {task: self.prefixed(task, make_sequence_task(task, n_val, length_range, vocab,
                                                                 np.random.default_rng([seed, 99, i])))
                    for i, task in enumerate(self.tasks)}
        self._val_all = SequenceTask(*(np.concatenate(arrays) for arrays in zip(*self.val.values())))

    def prefix_id(self, task: str) -> int:
        """The id of ``task``'s prefix token: vocab + its index in ``tasks``."""
        check_choice("task", task, self.tasks)
        return self.vocab + self.tasks.index(task)

    def prefixed(self, task: str, examples: SequenceTask) -> SequenceTask:
        """``examples`` of ``task`` with its prefix id put before every source (lengths + 1)."""
        prefix = np.full((examples.src.shape[0], 1), self.prefix_id(task), dtype=np.int64)
        return examples._replace(src=np.concatenate([prefix, examples.src], axis=1),      # (N, S + 1)
                                 src_lengths=examples.src_lengths + 1)

    def batch(self, split: str, rng):
        if split == "val":
            rows = rng.integers(0, self._val_all.src.shape[0], size=self.batch_size)
            return tuple(a[rows] for a in self._val_all)
        B = self.batch_size
        per_task = [self.prefixed(t, make_sequence_task(t, B, self.length_range, self.vocab, rng)) for t in self.tasks]
        which = rng.integers(0, len(self.tasks), size=B)                  # (B,) each example's task
        return tuple(np.stack(arrays)[which, np.arange(B)] for arrays in zip(*per_task))


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
