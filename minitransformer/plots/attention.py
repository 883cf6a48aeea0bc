"""Figures of attention probabilities, with the tokens on the axes.

    attention_map    one head: P (T, S), row i = where query i looks
    attention_grid   every layer × head of a GPT on one sequence

The probabilities are the ones the model computed: MultiHeadAttention keeps P of
its pending forward and hands it out through ``attention_probs()``.
"""
from __future__ import annotations

import numpy as np

from ..backend import to_numpy
from ..models import GPT
from ..validate import check_ndim
from ._common import heatmap, new_figure, save, token_label


def attention_map(probs, tokens, key_tokens=None, *, title: str = "Attention probabilities", path=None):
    """One head's attention: P[i, j] = how much query i attends key j (each row sums to 1).

    Inputs: probs (T, S), NumPy or CuPy; tokens, the T query tokens; key_tokens, the S key
            tokens (default: tokens, self-attention); title; path or None.
    Returns: fig, data {"probs" (T, S) NumPy, "tokens", "key_tokens"}.
    """
    check_ndim("probs", probs, 2, "(T, S)")
    probs = to_numpy(probs)
    tokens = _labels("tokens", tokens, probs.shape[0], "T, the rows of probs")
    key_tokens = tokens if key_tokens is None else _labels("key_tokens", key_tokens, probs.shape[1],
                                                          "S, the columns of probs")
    size = 0.28 * max(probs.shape) + 2.5
    fig, axes = new_figure(size + 1.2, size)
    ax = axes[0, 0]
    heatmap(ax, probs, title=title, xlabel="key (attended to)", ylabel="query (attending)",
            colorbar_label="attention probability", vmin=0.0, vmax=1.0)
    ax.set_aspect("equal")
    _token_ticks(ax, tokens, key_tokens, rows=True, cols=True)
    save(fig, path)
    return fig, {"probs": probs, "tokens": tokens, "key_tokens": key_tokens}


def collect_attention(model, ids):
    """P of every layer of ``model`` (a GPT) on one sequence, in eval mode (no dropout).

    Inputs: model, a GPT; ids (T,) or (1, T) integer token ids on the model's device.
    Returns: probs (L, H, T, T) NumPy, layer by layer (model.blocks[l].attn.sublayer).
    The model's train/eval flag is restored and no forward cache is left pending.
    """
    if not isinstance(model, GPT):
        raise TypeError(f"model: expected a GPT, got {type(model).__name__}")
    check_ndim("ids", ids, (1, 2), "(T,) or (1, T)")
    if ids.ndim == 2 and ids.shape[0] != 1:
        raise ValueError(f"ids: expected one sequence, shape (T,) or (1, T), got shape {tuple(ids.shape)}")
    was_training = model.training
    model.eval()
    try:
        model.forward(ids.reshape(1, -1))                                   # (1, T, V), discarded
        probs = np.stack([to_numpy(block.attn.sublayer.attention_probs())[0]  # (H, T, T) each
                          for block in model.blocks])                       # (L, H, T, T)
    finally:
        model.release_caches()                    # no backward follows: drop the caches now
        model.train(was_training)
    return probs


def attention_grid(model, ids, tokens, path=None):
    """The attention of every head of every layer of a GPT on one sequence: a grid, layers
    down, heads across, one colour scale (0 to 1) for all.

    Inputs: model, a GPT; ids (T,) or (1, T) integer token ids; tokens, T labels; path or None.
    Returns: fig, data {"probs" (L, H, T, T), "tokens"}.
    """
    probs = collect_attention(model, ids)
    L, H, T, _ = probs.shape
    tokens = _labels("tokens", tokens, T, "T, the length of ids")
    fig, axes = new_figure(2.6 * H + 1.5, 2.6 * L + 0.8, L, H)
    for l in range(L):
        for h in range(H):
            ax = axes[l, h]
            image = heatmap(ax, probs[l, h], title=f"layer {l}, head {h}", xlabel="", ylabel="",
                            colorbar_label="", vmin=0.0, vmax=1.0, colorbar=False)
            _token_ticks(ax, tokens, tokens, rows=h == 0, cols=l == L - 1, fontsize=7)
    fig.colorbar(image, ax=axes, label="attention probability", shrink=0.6)
    fig.suptitle("Attention of every head (rows: queries, columns: keys)")
    save(fig, path)
    return fig, {"probs": probs, "tokens": tokens}


def _token_ticks(ax, row_tokens, col_tokens, *, rows: bool, cols: bool, fontsize: int = 8) -> None:
    """Token labels on the axes that ask for them, none on the others."""
    ax.set_yticks(range(len(row_tokens)), [token_label(t) for t in row_tokens] if rows else [],
                  fontsize=fontsize)
    vertical = max((len(t) for t in col_tokens), default=0) > 2      # words stand up, characters do not
    ax.set_xticks(range(len(col_tokens)), [token_label(t) for t in col_tokens] if cols else [],
                  fontsize=fontsize, rotation=90 if vertical else 0)


def _labels(name, tokens, expected: int, what: str) -> list:
    tokens = [str(t) for t in tokens]
    if len(tokens) != expected:
        raise ValueError(f"{name}: expected {expected} labels ({what}), got {len(tokens)}")
    return tokens
