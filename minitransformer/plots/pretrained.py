"""Figures of a real pretrained model (all-MiniLM-L6-v2) seen through our Encoder.

    attention_maps(model, tokenizer, sentence, path)    every head of every layer, tokens labelled
    attention_sink(model, tokenizer, sentences, path)   how much each layer attends to [CLS] and [SEP]
    pretrained_figures(out_dir)                         both figures for MiniLM, the list of PNG paths

Each figure function returns (fig, data): a ``matplotlib.figure.Figure`` (no
pyplot, so nothing global changes) and the numbers drawn, and saves a PNG when
given a ``path``.

The "attention sink": many heads put most of their weight on one special token
that carries little meaning of its own. Clark et al. (2019, "What does BERT look
at?") found [SEP] playing that part in BERT-base; in all-MiniLM-L6-v2 it is
[CLS], with about half of all attention in layers 1 to 4 against the 1/n that
uniform attention would give (and [SEP] below 1/n). Clark et al. read it as a
"no-op": a head with nothing useful to read for a query parks its probability
mass on a token whose value changes the output little. The second figure shows
it as the average weight per layer.

Layers and heads are numbered from 0, as in every figure of plots/ (layer l is
model.blocks[l]). The token labels are TOKEN_FONT_SIZE points and each panel is
tall and wide enough for one label per token without overlap, so the labels read
at the PNG's own size.
"""
from __future__ import annotations

import os

import numpy as np

from ..backend import get_xp, to_numpy

FIGURE_SENTENCE = "The cat sat on the mat because it was tired."
SINK_SENTENCES = (
    "The cat sat on the mat because it was tired.",
    "A man is playing a guitar on the street.",
    "Prices rose by four percent in the last quarter of the year.",
    "She forgot her umbrella, so she got wet on the way home.",
    "Neural networks learn representations from data.",
    "The museum opens at nine and closes at five on weekdays.",
    "Can you tell me where the nearest train station is?",
    "Water boils at one hundred degrees Celsius at sea level.",
)
TOKEN_FONT_SIZE = 8           # points: readable at 120 dpi without zooming
LABEL_PITCH = 1.35            # a label's height in the panel: TOKEN_FONT_SIZE · LABEL_PITCH points


def attention_probabilities(model, ids, attention_mask=None) -> np.ndarray:
    """P of every layer for one batch, in eval mode: (L, B, H, S, S) NumPy array.

    Inputs: ids (B, S) integers; attention_mask (B, S), 1 at real tokens, or None.
    The model's train/eval flag is restored and its backward caches are dropped.
    """
    was_training = model.training
    model.eval()
    try:
        xp = get_xp(model.embed.tok.W)
        mask = None if attention_mask is None else xp.asarray(attention_mask)
        model.forward(xp.asarray(ids), attention_mask=mask)
        P = np.stack([to_numpy(block.attn.sublayer.attention_probs()) for block in model.blocks])
    finally:
        model.release_caches()                    # the probabilities are copied out; free the rest
        model.train(was_training)
    return P                                                                  # (L, B, H, S, S)


def attention_maps(model, tokenizer, sentence: str = FIGURE_SENTENCE, path=None):
    """A grid of heat maps, one row per layer and one column per head, for one sentence.

    Each map is P[query, key] of one head: row = the token attending, column = the
    token attended to, both labelled with the WordPiece tokens.
    Returns: (fig, data) with data = {"tokens": [str] * S, "probs": (L, H, S, S)}.
    """
    from matplotlib.figure import Figure

    ids = np.asarray([tokenizer.encode(sentence)])                           # (1, S)
    P = attention_probabilities(model, ids)[:, 0]                             # (L, H, S, S)
    tokens = [tokenizer.vocab[i] for i in ids[0].tolist()]
    L, H, S, _ = P.shape
    panel = panel_inches(S)
    label_room = 0.075 * max(len(t) for t in tokens) + 0.4          # inches for the longest label
    fig = Figure(figsize=(panel * H + label_room + 1.6, panel * L + label_room + 0.8), layout="constrained")
    axes = fig.subplots(L, H, squeeze=False)
    for layer in range(L):       # a grid of L·H panels to draw: one call each
        for head in range(H):
            ax = axes[layer, head]
            image = ax.imshow(P[layer, head], vmin=0.0, vmax=1.0, cmap="viridis")
            ax.set_xticks(range(S), tokens if layer == L - 1 else [], rotation=90, fontsize=TOKEN_FONT_SIZE)
            ax.set_yticks(range(S), tokens if head == 0 else [], fontsize=TOKEN_FONT_SIZE)
            ax.tick_params(length=0)
            if layer == 0:
                ax.set_title(f"head {head}", fontsize=11)
        axes[layer, 0].set_ylabel(f"layer {layer}", fontsize=11)
    fig.colorbar(image, ax=axes, shrink=0.5, label="attention probability")
    fig.suptitle(f"Attention of every head (rows: queries, columns: keys): {sentence!r}")
    _save(fig, path)
    return fig, {"tokens": tokens, "probs": P}


def panel_inches(S: int) -> float:
    """The side of one attention panel for S tokens: one TOKEN_FONT_SIZE label per row."""
    return max(1.6, S * TOKEN_FONT_SIZE * LABEL_PITCH / 72)


def attention_sink(model, tokenizer, sentences=SINK_SENTENCES, path=None):
    """Average attention each layer pays to [CLS] (the first token) and to [SEP] (the last real one).

    Averaged over heads, real query tokens and sentences; "uniform" is what a head
    that spread its weight evenly over the real tokens would give (mean of 1/n).
    Returns: (fig, data) with data = {"layer": (L,) 0 .. L-1, "cls": (L,), "sep": (L,), "uniform": float}.
    """
    from matplotlib.figure import Figure

    ids, mask = tokenizer.encode_batch(list(sentences))                       # (N, S) each
    P = attention_probabilities(model, ids, mask)                             # (L, N, H, S, S)
    n = mask.sum(axis=1)                                                      # (N,) real tokens
    sep = (n - 1)[None, :, None, None, None]                                  # [SEP]: the last real token
    to_cls = P[..., 0].mean(axis=2)                                           # (L, N, S) mean over heads
    to_sep = np.take_along_axis(P, np.broadcast_to(sep, P.shape[:-1] + (1,)), axis=-1)[..., 0].mean(axis=2)
    m = mask.astype(P.dtype)                                                  # (N, S) real queries only
    data = {"layer": np.arange(P.shape[0]),
            "cls": (to_cls * m).sum(axis=(1, 2)) / m.sum(),                   # (L,)
            "sep": (to_sep * m).sum(axis=(1, 2)) / m.sum(),                   # (L,)
            "uniform": float(np.mean(1.0 / n))}
    fig = Figure(figsize=(6, 4), layout="constrained")
    ax = fig.subplots()
    ax.plot(data["layer"], data["cls"], "o-", label="to [CLS] (first token)")
    ax.plot(data["layer"], data["sep"], "s-", label="to [SEP] (last token)")
    ax.axhline(data["uniform"], color="gray", linestyle="--", label="uniform attention (1/n)")
    ax.set(xlabel="layer (0 = next to the embeddings)", ylabel="average attention probability", xticks=data["layer"], ylim=(0, 1),
           title=f"Attention sinks: {len(sentences)} sentences, mean over heads and queries")
    ax.legend()
    _save(fig, path)
    return fig, data


def pretrained_figures(out_dir, model_dir=None) -> list[str]:
    """Draw both figures for all-MiniLM-L6-v2 into ``out_dir``; returns the PNG paths.

    ``model_dir`` defaults to the installed package's files (pretrained.minilm_path());
    raises FileNotFoundError when there is none.
    """
    from ..pretrained import minilm_path
    from ..pretrained.bert import from_pretrained

    model, tokenizer = from_pretrained(model_dir if model_dir is not None else minilm_path())
    os.makedirs(out_dir, exist_ok=True)
    paths = [os.path.join(out_dir, "minilm_attention_maps.png"),
             os.path.join(out_dir, "minilm_attention_sink.png")]
    attention_maps(model, tokenizer, FIGURE_SENTENCE, path=paths[0])
    attention_sink(model, tokenizer, SINK_SENTENCES, path=paths[1])
    return paths


def _save(fig, path) -> None:
    if path is not None:
        fig.savefig(path, dpi=120)
