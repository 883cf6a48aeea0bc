"""Figures of what happens past the trained context length.

    interpolation_figure   per-position loss of a RoPE GPT at twice its trained length,
                           plain RoPE (extrapolation) vs position interpolation
    sinks_figure           per-position NLL of token-by-token decoding far past the
                           context, rolling KV cache with and without attention sinks

These draw curves measured elsewhere (training/context.py: position_losses;
generation/streaming.py: streaming_nll), which need a trained model; the figures
command and lecture 10 train one and pass the curves here.
"""
from __future__ import annotations

import numpy as np

from ..validate import check_int
from ._common import new_figure, save


def interpolation_figure(losses: dict, train_len: int, *, smooth: int = 1, path=None):
    """Loss against position, one curve per evaluation, a line at the trained length.

    Inputs: losses {label: (L,) per-position losses}, all of one length L; train_len, the
            block size the model was trained at; smooth, the width of a moving average
            drawn over each curve (1: none); path or None.
    Returns: fig, data {"position" (L,), label: (L,) as given, "mean_beyond" {label: mean
             loss at positions >= train_len}, "mean_within" {label: mean at positions < train_len}}.
    """
    curves = _curves("losses", losses)
    L = len(next(iter(curves.values())))
    train_len = check_int("train_len", train_len, low=1, high=L)
    smooth = check_int("smooth", smooth, low=1)
    position = np.arange(L)
    fig, axes = new_figure(9, 4.8)
    ax = axes[0, 0]
    for label, curve in curves.items():
        ax.plot(position, _moving_average(curve, smooth), label=label)
    ax.axvline(train_len - 0.5, color="grey", linestyle="--", linewidth=1)
    ax.text(train_len, ax.get_ylim()[1], " trained length", va="top", color="grey")
    ax.set_xlabel("position t in the window")
    ax.set_ylabel("next-token loss (nats)")
    ax.set_title(f"RoPE GPT trained at T = {train_len}, evaluated at {L}")
    ax.legend()
    save(fig, path)
    data = {"position": position, **curves,
            "mean_beyond": {k: float(c[train_len:].mean()) if L > train_len else float("nan")
                            for k, c in curves.items()},
            "mean_within": {k: float(c[:train_len].mean()) for k, c in curves.items()}}
    return fig, data


def sinks_figure(nll: dict, block_size: int, *, smooth: int = 32, path=None):
    """Per-token NLL of streaming decoding against position, one curve per cache policy.

    Inputs: nll {label: (N,) NLL of token t + 1 given the cache at position t}, all of one
            length N; block_size, the trained context (a line is drawn there); smooth, the
            moving-average width of the drawn curves; path or None.
    Returns: fig, data {"position" (N,), label: (N,) as given, "perplexity" {label:
             exp(mean NLL at positions >= block_size)}}.
    """
    curves = _curves("nll", nll)
    N = len(next(iter(curves.values())))
    block_size = check_int("block_size", block_size, low=1)
    smooth = check_int("smooth", smooth, low=1)
    position = np.arange(N)
    beyond = position >= block_size
    perplexity = {k: float(np.exp(c[beyond].mean())) if beyond.any() else float("nan")
                  for k, c in curves.items()}
    fig, axes = new_figure(9, 4.8)
    ax = axes[0, 0]
    for label, curve in curves.items():
        ax.plot(position, _moving_average(curve, smooth), label=f"{label} (ppl {perplexity[label]:.2f})")
    ax.axvline(block_size - 0.5, color="grey", linestyle="--", linewidth=1)
    ax.text(block_size, ax.get_ylim()[1], " block_size", va="top", color="grey")
    ax.set_xlabel("position of the token in the stream")
    ax.set_ylabel(f"NLL (nats), moving average of {smooth}")
    ax.set_title("Decoding past the context: rolling KV cache with and without attention sinks")
    ax.legend()
    save(fig, path)
    return fig, {"position": position, **curves, "perplexity": perplexity}


def _curves(name: str, curves: dict) -> dict:
    if not isinstance(curves, dict) or not curves:
        raise ValueError(f"{name}: expected a non-empty dict {{label: 1-D array}}, got {curves!r:.60}")
    out = {str(k): np.asarray(v, dtype=np.float64) for k, v in curves.items()}
    lengths = {v.shape for v in out.values()}
    if len(lengths) != 1 or len(next(iter(lengths))) != 1 or not next(iter(lengths))[0]:
        raise ValueError(f"{name}: expected 1-D curves of one nonzero length, got shapes {sorted(lengths)}")
    return out


def _moving_average(curve, width: int):
    """The mean of each window of ``width`` values ending at t (fewer at the start)."""
    if width == 1:
        return curve
    total = np.cumsum(np.concatenate([[0.0], curve]))                  # (N + 1,)
    t = np.arange(1, len(curve) + 1)
    start = np.maximum(t - width, 0)
    return (total[t] - total[start]) / (t - start)
