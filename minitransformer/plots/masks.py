"""Figures of attention masks (True = the query may attend the key).

    causal_table         the causal mask as a ✓/✗ table over the tokens of a sentence
    key_padding_figure   a padded batch, its key padding mask, and padding AND causal
    attention_patterns   full (causal), sliding window, dilated sliding window, global + sliding

The masks come from functional/masks.py (the same functions the models use:
``window``, ``dilation`` and ``global_positions`` of the config).
"""
from __future__ import annotations

import numpy as np

from ..functional.masks import (causal_mask, combine_masks, dilated_window_mask, global_window_mask,
                                key_padding_mask, sliding_window_mask)
from ..validate import check_int
from ._common import mask_table, new_figure, save

PAD = "PAD"


def causal_table(tokens=("I", "am", "a", "student"), path=None):
    """The causal mask over ``tokens``: row i (a query) may attend column j (a key) iff j <= i.

    Inputs: tokens, a sequence of T strings; path or None.
    Returns: fig, data {"mask" (T, T) bool from causal_mask(T), "tokens" list of T strings}.
    """
    tokens = _tokens("tokens", tokens)
    mask = causal_mask(len(tokens))                                    # (T, T)
    fig, axes = new_figure(1.1 * len(tokens) + 3.2, 0.9 * len(tokens) + 1.6)
    mask_table(axes[0, 0], mask, title="Causal mask: each token sees itself and the past",
               row_labels=tokens, col_labels=tokens)
    save(fig, path)
    return fig, {"mask": mask, "tokens": tokens}


def key_padding_figure(sentences=("I am a student", "you are", "we are here"), shown: int = 1, path=None):
    """A batch of sentences padded to one length S, and what attention may see.

    Left: the key padding mask key_padding_mask(lengths, S): real tokens ✓, padding ✗
    (one row per sequence). Right: sequence ``shown`` with padding AND causal
    (combine_masks): no query sees a PAD key or the future. (The PAD queries' rows are
    computed too; the loss ignores their outputs.)
    Inputs: sentences, strings split on whitespace; shown, the index of the sentence on the
            right; path or None.
    Returns: fig, data {"tokens" (B lists of S strings, PAD-filled), "lengths" (B,),
                        "padding_mask" (B, S) bool, "combined" (S, S) bool}.
    """
    rows = [_tokens(f"sentences[{b}]", str(s).split()) for b, s in enumerate(sentences)]
    if not rows:
        raise ValueError("sentences: expected at least one sentence, got none")
    shown = check_int("shown", shown, low=0, high=len(rows) - 1)
    lengths = np.array([len(r) for r in rows])                          # (B,)
    S = int(lengths.max())
    padded = [r + [PAD] * (S - len(r)) for r in rows]                   # B lists of S tokens
    padding = key_padding_mask(lengths, S)                              # (B, 1, 1, S)
    combined = combine_masks(causal_mask(S), padding)[shown, 0]         # (S, S)
    fig, axes = new_figure(2.1 * S + 6, 0.8 * max(S, len(rows)) + 2.2, 1, 2)
    mask_table(axes[0, 0], padding[:, 0, 0, :], title="Key padding mask: PAD keys are hidden",
               row_labels=[f"sequence {b} (length {n})" for b, n in enumerate(lengths)],
               col_labels=[str(j) for j in range(S)], xlabel="key position", ylabel="",
               cell_text=padded, colorbar=False)
    mask_table(axes[0, 1], combined, title=f"Sequence {shown}: padding AND causal",
               row_labels=padded[shown], col_labels=padded[shown])
    save(fig, path)
    return fig, {"tokens": padded, "lengths": lengths, "padding_mask": padding[:, 0, 0, :],
                 "combined": combined}


def attention_patterns(T: int = 16, window: int = 4, dilation: int = 2, global_positions=(0, 8),
                       path=None):
    """Which keys each query may attend, for four causal patterns (cf. Beltagy et al. 2020,
    Longformer, whose patterns are two-sided; a decoder uses their causal halves):

        full      causal_mask(T)                                 O(T²) scores
        sliding   sliding_window_mask(T, window)                 O(T·window)
        dilated   dilated_window_mask(T, window, dilation)       same cost, span × dilation
        global    global_window_mask(T, window, global_positions)

    Inputs: T positions; window; dilation; global_positions; path or None.
    Returns: fig, data {"full", "sliding", "dilated", "global"}, each (T, T) bool.
    """
    T = check_int("T", T, low=1)
    data = {"full": causal_mask(T), "sliding": sliding_window_mask(T, window),
            "dilated": dilated_window_mask(T, window, dilation),
            "global": global_window_mask(T, window, global_positions)}
    titles = {"full": "full (causal)", "sliding": f"sliding window, w = {window}",
              "dilated": f"dilated sliding window, w = {window}, r = {dilation}",
              "global": f"global {tuple(global_positions)} + sliding window"}
    fig, axes = new_figure(20, 5.6, 1, 4)
    labels = [str(p) if p % 2 == 0 else "" for p in range(T)]
    for n, (ax, (name, mask)) in enumerate(zip(axes[0], data.items())):
        mask_table(ax, mask, title=f"{titles[name]}\n{int(mask.sum())} of {T * T} pairs",
                   row_labels=labels, col_labels=labels, xlabel="key position",
                   ylabel="query position" if n == 0 else "", marks=False, colorbar=n == 3)
    save(fig, path)
    return fig, data


def _tokens(name, tokens) -> list:
    tokens = [str(t) for t in tokens]
    if not tokens:
        raise ValueError(f"{name}: expected at least one token, got none")
    return tokens
