"""The residual stream of a GPT, layer by layer, and what each layer already predicts.

    x_0       = InputEmbedding(ids)                       (B, T, C)  the stream entering block 0
    a_l       = Attn_l(x_{l-1})  = x_{l-1}' − x_{l-1}     (B, T, C)  attention's contribution, block l
    m_l       = MLP_l(x_{l-1}')  = x_l − x_{l-1}'         (B, T, C)  the feed-forward's, x_{l-1}' = x_{l-1} + a_l
    x_l       = x_0 + Σ_{j ≤ l} (a_j + m_j)               (B, T, C)  the stream after block l
    lens_l    = CE(head(Norm_f(x_l)), targets)                       the logit lens (nostalgebraist 2020)

Each block only ADDS to the stream (pre-norm: x + Sublayer(Norm(x))), so the
stream is a sum of contributions; the figure shows their sizes, the mean over
positions of the Euclidean norm over C: ‖x_l‖ for l = 0..L, ‖a_l‖ and ‖m_l‖ for
the blocks l = 1..L. In a post-norm block the differences include the norm
after the addition: they are the change the sublayer makes to the stream.

The logit lens reads the stream early: each x_l goes through the model's final
norm and its LM head as if the later blocks were not there, and the loss of that
prediction is measured on the batch. At l = L it is the model's own loss; at
l = 0 it is what the embeddings alone predict (with tied weights, a bigram-like
guess). ``residual_stream`` computes the numbers, ``residual_stream_figure`` draws
them: left the norms, right the lens loss with ln V, the loss of a uniform guess.
"""
from __future__ import annotations

import math

import numpy as np

from ..backend import to_numpy
from ..functional.cross_entropy import cross_entropy_forward
from ..models import GPT
from ..validate import check_ndim
from ._common import new_figure, save


def _mean_norm(x) -> float:
    """Mean over batch and positions of ‖x[b, t]‖ over C."""
    return float(np.linalg.norm(to_numpy(x).astype(np.float64), axis=-1).mean())


def logit_lens(model, x):
    """The LM head's logits of a stream x (B, T, C): head(Norm_f(x)), Norm_f only in a pre-norm model."""
    h = model.norm_f.forward(x) if "norm_f" in model.children else x     # (B, T, C)
    return model.head.forward(h)                                          # (B, T, V)


def residual_stream(model, ids, targets) -> dict:
    """The stream of a GPT on one batch, in eval mode (no dropout).

    Inputs: model, a GPT; ids (B, T) integer token ids; targets (B, T), the next tokens.
    Returns: {"streams" (L + 1, B, T, C) NumPy: x_0 ... x_L,
              "stream_norm" (L + 1,), "attention_norm" (L,), "mlp_norm" (L,): mean ‖·‖ over positions,
              "lens_loss" (L + 1,): CE of head(Norm_f(x_l)) against targets}.
    The model's train/eval flag is restored and no forward cache is left pending.
    """
    if not isinstance(model, GPT):
        raise TypeError(f"model: expected a GPT, got {type(model).__name__}")
    check_ndim("ids", ids, 2, "(B, T)")
    was_training = model.training
    model.eval()
    try:
        x = model.embed.forward(ids)                                      # (B, T, C) x_0
        streams, attention, mlp = [x], [], []
        for block in model.blocks:
            after_attention = block.attn.forward(x)                       # (B, T, C) x + a_l
            after_mlp = block.ffn.forward(after_attention)                # (B, T, C) x + a_l + m_l
            attention.append(_mean_norm(after_attention - x))
            mlp.append(_mean_norm(after_mlp - after_attention))
            x = after_mlp
            streams.append(x)
        lens = [float(cross_entropy_forward(logit_lens(model, s), targets)[0]) for s in streams]
    finally:
        model.release_caches()                    # no backward follows: drop the caches now
        model.train(was_training)
    return {"streams": np.stack([to_numpy(s) for s in streams]),
            "stream_norm": np.array([_mean_norm(s) for s in streams]),
            "attention_norm": np.array(attention), "mlp_norm": np.array(mlp), "lens_loss": np.array(lens)}


def residual_stream_figure(model, ids, targets, *, title: str = "GPT", path=None):
    """Left: ‖x_l‖ and each block's ‖a_l‖, ‖m_l‖; right: the logit lens loss per layer.

    Inputs: model, a GPT; ids (B, T); targets (B, T); title, what the model is (how it was trained);
            path or None.
    Returns: fig, the data of ``residual_stream``.
    """
    data = residual_stream(model, ids, targets)
    L = len(data["attention_norm"])
    layers, blocks = np.arange(L + 1), np.arange(1, L + 1)
    fig, axes = new_figure(11, 4.2, 1, 2)
    left, right = axes[0]
    left.bar(blocks - 0.2, data["attention_norm"], width=0.4, label="attention's contribution ‖a_l‖")
    left.bar(blocks + 0.2, data["mlp_norm"], width=0.4, label="MLP's contribution ‖m_l‖")
    left.plot(layers, data["stream_norm"], marker="o", color="black", label="the stream ‖x_l‖")
    left.set(xlabel="layer l (0: the embeddings; l: after block l)", ylabel="mean norm over positions",
             title=f"Residual stream: {title}")
    left.set_xticks(layers)
    left.legend(fontsize=8)
    V = model.config.vocab_size
    right.plot(layers, data["lens_loss"], marker="o", label="head(Norm_f(x_l))")
    right.axhline(math.log(V), color="grey", linestyle="--", label=f"uniform guess, ln V = {math.log(V):.2f}")
    right.set(xlabel="layer l", ylabel="cross-entropy on the batch (nats)",
              title=f"Logit lens ({len(ids)} sequences of {ids.shape[1]} tokens)")
    right.set_xticks(layers)
    right.legend(fontsize=8)
    save(fig, path)
    return fig, data
