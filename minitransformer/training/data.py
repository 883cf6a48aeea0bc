"""Data: the default corpus, train/validation split, batches, synthetic tasks, MLM masking.

Everything here stays on the host (NumPy); the training loop moves a batch to the
device. Every random choice comes from an explicit ``numpy.random.Generator``
passed in, never from a seed or a global state, so a run is reproduced by
reproducing its generator.

Shape legend: N examples, B batch, T target length, S source length.
Token ids are int64; ``IGNORE_INDEX`` (-100) marks label positions the loss skips,
the cross-entropy convention of the whole package.
"""
from __future__ import annotations

import functools
import os
from typing import NamedTuple

import numpy as np

from ..validate import (check_choice, check_generator, check_int, check_integer_ids, check_items, check_size, check_ndim,
                       check_number, check_probability)

IGNORE_INDEX = -100
PAD, BOS, EOS = 0, 1, 2          # special tokens of the synthetic sequence tasks
FIRST_SYMBOL = 3                 # the ordinary symbols are FIRST_SYMBOL .. vocab - 1
TASKS = ("copy", "reverse", "sort")


# ------------------------------------------------------------------------- text
@functools.lru_cache(maxsize=1)
def default_corpus() -> str:
    """The English text that ships with Python: the help topics of ``pydoc_data``.

    The values of ``pydoc_data.topics.topics`` concatenated in sorted key order,
    so it needs no download and is the same on every machine with the same Python
    (on Python 3.11.7: 464,970 characters, 103 distinct symbols).
    """
    from pydoc_data.topics import topics
    return "".join(topics[key] for key in sorted(topics))


def load_text(path=None) -> str:
    """The default corpus when ``path`` is None, else the UTF-8 text file at ``path``.

    Line endings are read as "\\n" (Python's universal newlines).
    Raises FileNotFoundError for a missing file, ValueError for one that is not UTF-8.
    """
    if path is None:
        return default_corpus()
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path: expected a file path (str or os.PathLike) or None, got {type(path).__name__}")
    if os.path.isdir(path):
        raise IsADirectoryError(f"path: expected a UTF-8 text file, got the folder {os.fspath(path)!r}")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"path: expected a UTF-8 text file, no file at {os.fspath(path)!r}")
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except UnicodeDecodeError as e:
        raise ValueError(f"path: {os.fspath(path)!r} is not UTF-8 text: byte {e.object[e.start]:#04x} "
                         f"at offset {e.start} cannot be decoded") from None


def train_val_split(ids, val_fraction: float = 0.1):
    """The first part for training, the last ``round(n · val_fraction)`` items for validation.

    Contiguous and not shuffled: neighbouring windows overlap, so a shuffled split
    would show the model its validation text during training.
    Inputs: ids, any sequence (NumPy array, list, str) of length n; 0 <= val_fraction < 1.
    Returns: (train, val), slices of ``ids`` (views for an array).
    """
    val_fraction = check_number("val_fraction", val_fraction, low=0.0, high=1.0, high_open=True)
    if not (isinstance(ids, (str, list, tuple)) or getattr(ids, "ndim", None) == 1):
        raise TypeError(f"ids: expected a sequence (a 1-D array, a list or a str), got {type(ids).__name__}")
    n_val = round(len(ids) * val_fraction)
    n_train = len(ids) - n_val
    return ids[:n_train], ids[n_train:]


# ---------------------------------------------------------------------- batches
def random_batch(data, block_size: int, batch_size: int, rng):
    """B windows of T consecutive tokens, each with its next-token targets.

        x[b, t] = data[o_b + t],   y[b, t] = data[o_b + t + 1],   o_b uniform in [0, n - T - 1]

    Inputs: data (n,) integer ids, n >= T + 1; block_size T; batch_size B;
            rng, a numpy.random.Generator (the offsets o_b are drawn from it).
    Returns: x (B, T) int64, y (B, T) int64.
    """
    check_ndim("data", data, 1, "(n,)")
    if data.dtype.kind not in "iu":
        raise TypeError(f"data: expected an integer array of token ids, got {data.dtype}")
    T = check_int("block_size", block_size, low=1)
    B = check_int("batch_size", batch_size, low=1)
    check_generator("rng", rng)
    if len(data) < T + 1:
        raise ValueError(f"data: expected at least block_size + 1 = {T + 1} tokens, got {len(data)}")
    offsets = rng.integers(0, len(data) - T, size=B)        # (B,)  high excluded: y's last index is n - 1
    index = offsets[:, None] + np.arange(T)[None, :]        # (B, T)
    x = data[index].astype(np.int64, copy=False)            # (B, T)
    y = data[index + 1].astype(np.int64, copy=False)        # (B, T)
    return x, y


# -------------------------------------------------------- synthetic seq2seq tasks
class SequenceTask(NamedTuple):
    """A batch of a synthetic encoder-decoder task (int64 arrays; L_i the length of example i).

    src (N, S):         the L_i symbols, then PAD                       (S = longest length)
    src_lengths (N,):   L_i; the key padding mask is arange(S) < src_lengths[:, None]
    tgt_in (N, T):      BOS, the L_i target symbols, then PAD             (T = S + 1)
    tgt_out (N, T):     the L_i target symbols, EOS, then IGNORE_INDEX    (the labels; tgt_in shifted by one)
    """
    src: np.ndarray
    src_lengths: np.ndarray
    tgt_in: np.ndarray
    tgt_out: np.ndarray


def make_sequence_task(task: str, n: int, length_range, vocab: int, rng) -> SequenceTask:
    """N examples of "copy", "reverse" or "sort" over the symbols 3 .. vocab - 1.

    Lengths L are uniform in length_range = (lo, hi), both included; symbols are
    uniform and independent. The target is the source itself ("copy"), reversed
    ("reverse") or in ascending order ("sort"). Layout: see ``SequenceTask``;
    padded label positions hold IGNORE_INDEX (not PAD) so the loss skips them.
    """
    check_choice("task", task, TASKS)
    N = check_int("n", n, low=1)
    if len(check_items("length_range", length_range)) != 2:
        raise ValueError(f"length_range: expected a pair (lo, hi), got {length_range!r}")
    lo = check_int("length_range[0]", length_range[0], low=1)
    S = check_int("length_range[1]", length_range[1], low=lo)
    check_size("n, length_range", (N, S + 2))
    vocab = check_int("vocab", vocab, low=FIRST_SYMBOL + 1)
    check_generator("rng", rng)

    lengths = rng.integers(lo, S + 1, size=N)                       # (N,)
    symbols = rng.integers(FIRST_SYMBOL, vocab, size=(N, S))        # (N, S)
    positions = np.arange(S)                                        # (S,)
    valid = positions[None, :] < lengths[:, None]                   # (N, S) True on the L_i symbols
    src = np.where(valid, symbols, PAD)                             # (N, S)
    target = _target(task, src, lengths, valid, vocab)              # (N, S), PAD beyond L_i

    rows = np.arange(N)
    tgt_in = np.concatenate([np.full((N, 1), BOS), target], axis=1)           # (N, T)
    tgt_out = np.concatenate([target, np.full((N, 1), PAD)], axis=1)          # (N, T)
    tgt_out[rows, lengths] = EOS
    tgt_out[np.arange(S + 1)[None, :] > lengths[:, None]] = IGNORE_INDEX      # after EOS
    return SequenceTask(src.astype(np.int64), lengths.astype(np.int64),
                        tgt_in.astype(np.int64), tgt_out.astype(np.int64))


def _target(task, src, lengths, valid, vocab):
    """The target symbols of each row, left-aligned, PAD beyond L_i (all rows at once)."""
    if task == "copy":
        return src.copy()                                                    # (N, S)
    if task == "reverse":
        source_index = lengths[:, None] - 1 - np.arange(src.shape[1])[None, :]   # L_i - 1 - t
        reversed_ = np.take_along_axis(src, np.maximum(source_index, 0), axis=1)
        return np.where(valid, reversed_, PAD)                               # (N, S)
    # "sort": PAD is replaced by `vocab`, larger than every symbol, so it sorts last
    ordered = np.sort(np.where(valid, src, vocab), axis=1)                   # (N, S)
    return np.where(valid, ordered, PAD)


# --------------------------------------------------------------------- MLM masking
def mlm_mask(ids, rng, vocab_size: int, mask_id: int, p: float = 0.15, special_ids=()):
    """BERT's masked-language-model corruption (Devlin et al., 2019, section 3.1).

    Each position whose id is not in ``special_ids`` is chosen independently with
    probability p (so about p of them, not exactly p). Of the chosen positions,
    80% get ``mask_id``, 10% a random token, 10% keep their token; the model must
    predict the original token at every chosen position.

    The random token is uniform over the ids that are neither special nor
    ``mask_id`` (BERT draws from the whole vocabulary; excluding the special ids
    keeps [PAD] or [CLS] out of sentence bodies). It may equal the original.

    Inputs: ids (...) integer ids in [0, vocab_size); rng, a numpy.random.Generator;
            mask_id in [0, vocab_size); 0 <= p <= 1; special_ids, ids never chosen.
    Returns: inputs (...) int64, the corrupted ids;
             labels (...) int64, the original id where chosen, IGNORE_INDEX (-100) elsewhere.
    """
    ids = np.asarray(ids)
    vocab_size = check_int("vocab_size", vocab_size, low=1)
    check_integer_ids("ids", ids, vocab_size)
    mask_id = check_int("mask_id", mask_id, low=0, high=vocab_size - 1)
    check_probability("p", p, allow_one=True)
    check_generator("rng", rng)
    special = np.array([check_int(f"special_ids[{i}]", s) for i, s in enumerate(special_ids)], dtype=np.int64)
    replacements = np.setdiff1d(np.arange(vocab_size), np.append(special, mask_id))  # random-token pool
    if replacements.size == 0:
        raise ValueError("special_ids: no id left for the random replacement "
                         f"(all {vocab_size} ids are special or mask_id)")

    chosen = (rng.random(ids.shape) < p) & ~np.isin(ids, special)        # (...) the positions to predict
    action = rng.random(ids.shape)                                        # (...) < 0.8 mask, < 0.9 random
    random_tokens = replacements[rng.integers(0, replacements.size, size=ids.shape)]
    inputs = ids.astype(np.int64)                                         # a fresh copy
    inputs[chosen & (action < 0.8)] = mask_id
    randomised = chosen & (action >= 0.8) & (action < 0.9)
    inputs[randomised] = random_tokens[randomised]
    labels = np.where(chosen, ids, IGNORE_INDEX).astype(np.int64)
    return inputs, labels
