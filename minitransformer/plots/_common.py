"""The plumbing every figure shares: a fresh Figure, a heatmap with its colour bar,
a ✓/✗ table for boolean masks, token labels, saving.

Figures are built as ``matplotlib.figure.Figure`` objects, never through pyplot:
no global "current figure", no GUI backend, so the helpers run headless (CI, ssh,
a notebook kernel) and two calls never draw into each other's axes. Saving a
Figure to a PNG goes through the Agg renderer.
"""
from __future__ import annotations

import os

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

DPI = 120                                     # legible on a slide, small in the repository
HIDDEN_COLOUR, VISIBLE_COLOUR = "#e9e9e9", "#4c9be8"
CHECK, CROSS = "\u2713", "\u2717"             # ✓ may attend, ✗ hidden (DejaVu Sans has both)
_VISIBLE_GLYPHS = {" ": "\u2423", "\n": "\u21b5", "\t": "\u21e5"}   # ␣ ↵ ⇥


def new_figure(width: float, height: float, nrows: int = 1, ncols: int = 1, **subplot_kw):
    """(fig, axes): a Figure of width × height inches with an (nrows, ncols) array of axes."""
    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, **subplot_kw)
    return fig, axes


def save(fig, path) -> None:
    """Write ``fig`` to ``path`` (the format from its suffix, PNG for .png); None: do nothing."""
    if path is None:
        return
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path: expected a file path (str or os.PathLike) or None, got {type(path).__name__}")
    directory = os.path.dirname(os.fspath(path))
    if directory:
        os.makedirs(directory, exist_ok=True)
    fig.savefig(path, dpi=DPI)


def heatmap(ax, values, *, title: str, xlabel: str, ylabel: str, colorbar_label: str,
            cmap: str = "viridis", vmin=None, vmax=None, colorbar: bool = True):
    """Draw a 2-D array with row 0 at the top, one cell per entry; returns the image."""
    image = ax.imshow(values, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
    if colorbar:
        ax.figure.colorbar(image, ax=ax, label=colorbar_label)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    return image


def mask_table(ax, mask, *, title: str, row_labels, col_labels, xlabel: str = "key (attended to)",
               ylabel: str = "query (attending)", cell_text=None, marks: bool = True,
               colorbar: bool = True) -> None:
    """A boolean (rows, cols) mask as a table: coloured cells marked ✓ (True) or ✗ (False).

    ``cell_text``, if given, replaces the marks (e.g. the token in each cell);
    ``marks=False`` leaves the cells unmarked (large masks).
    """
    mask = np.asarray(mask, dtype=bool)
    cmap = ListedColormap([HIDDEN_COLOUR, VISIBLE_COLOUR])
    image = ax.imshow(mask, cmap=cmap, vmin=0, vmax=1, aspect="equal", interpolation="nearest")
    for (r, c), visible in np.ndenumerate(mask):
        if not marks and cell_text is None:
            break
        text = (CHECK if visible else CROSS) if cell_text is None else cell_text[r][c]
        ax.text(c, r, text, ha="center", va="center", fontsize=11,
                color="white" if visible else "#555555")
    ax.set_xticks(range(mask.shape[1]), col_labels)
    ax.set_yticks(range(mask.shape[0]), row_labels)
    ax.xaxis.tick_top()
    ax.xaxis.set_label_position("top")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.tick_params(length=0)
    if colorbar:
        bar = ax.figure.colorbar(image, ax=ax, ticks=[0.25, 0.75], shrink=0.6)
        bar.ax.set_yticklabels([f"{CROSS} hidden", f"{CHECK} may attend"])


def token_label(token) -> str:
    """A token as a tick label: a space, a newline or a tab made visible (␣ ↵ ⇥)."""
    return "".join(_VISIBLE_GLYPHS.get(ch, ch) for ch in str(token))
