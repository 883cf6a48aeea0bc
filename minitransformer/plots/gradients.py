"""Figures of gradients: their size per layer at initialisation, and how well the
hand-written backward passes agree with numerical differentiation.

    prenorm_vs_postnorm   ‖∂L/∂θ_l‖ of each block l, GPT with pre-norm and with post-norm
    gradcheck_errors      the relative error of every checked tensor (minitransformer/gradcheck), log scale
"""
from __future__ import annotations

import numpy as np

from ..backend import to_numpy
from ..functional.cross_entropy import cross_entropy_backward, cross_entropy_forward
from ..models import GPT, GPTConfig
from ..validate import check_int, check_number
from ._common import new_figure, save

ERROR_FLOOR = 1e-17   # a relative error of exactly 0 is drawn here (a log axis has no 0)


def block_gradient_norms(model, ids, targets):
    """‖∂L/∂θ_l‖₂ over all parameters θ_l of block l, l = 0 .. L-1, L = the mean cross-entropy
    of ``model`` on (ids, targets). The model's gradients are zeroed before and after.

    Inputs: model, a GPT; ids (B, T), targets (B, T) integer arrays. Returns: norms (L,) float64.
    """
    if not isinstance(model, GPT):
        raise TypeError(f"model: expected a GPT, got {type(model).__name__}")
    model.zero_grad()
    loss, cache = cross_entropy_forward(model.forward(ids), targets)
    model.backward(cross_entropy_backward(1.0, cache))
    norms = np.array([np.sqrt(sum(float((to_numpy(g).astype(np.float64) ** 2).sum())
                                  for _, _, g in block.parameters()))
                      for block in model.blocks])                   # (L,)
    model.zero_grad()
    return norms


def _norms_at_init(config: GPTConfig, batch_size: int, seed: int):
    """block_gradient_norms of a fresh float64 GPT on one batch of uniformly random ids and
    targets (float64: the norms carry no float32 round-off)."""
    model = GPT(config, rng=seed, dtype=np.float64)
    rng = np.random.default_rng([seed, 1])                          # the batch's own stream
    shape = (batch_size, config.block_size)
    return block_gradient_norms(model, rng.integers(0, config.vocab_size, shape),   # ids (B, T)
                                rng.integers(0, config.vocab_size, shape))          # targets (B, T)


def prenorm_vs_postnorm(n_layer: int = 12, d_model: int = 64, n_head: int = 4, vocab_size: int = 64,
                        block_size: int = 32, batch_size: int = 8, init_stds=(0.02, 0.25), seed: int = 0,
                        path=None):
    """Gradient norm of each block at initialisation, pre-norm against post-norm (residual.py):

        pre-norm   x + F(Norm(x))       the residual stream is an identity path to every block
        post-norm  Norm(x + F(x))       the gradient to block l crosses the norms of all blocks above

    One panel per weight std (GPTConfig.init_std; the residual projections get std/√(2L)).
    At GPT-2's 0.02, every sublayer adds a small correction to its stream: pre-norm's norms
    change slowly with depth; post-norm's first block, whose norm rescales the raw
    embeddings (std 0.02), gets a much larger gradient than the others. At a larger std
    (0.25 here, 12 blocks), post-norm's gradients grow towards the output (Xiong et al. 2020, "On Layer Normalization
    in the Transformer Architecture": why post-norm needs a warmup) and pre-norm's shrink
    towards it (the early blocks get the largest; Shleifer et al. 2021, NormFormer).

    Inputs: the GPT shape (n_layer, d_model, n_head, vocab_size, block_size), batch_size,
            init_stds, seed (weights and batch); path or None.
    Returns: fig, data {"layer" (L,), "init_stds", "pre" (n_std, L), "post" (n_std, L)}.
    """
    batch_size = check_int("batch_size", batch_size, low=1)
    init_stds = [check_number(f"init_stds[{i}]", s, low=0.0, low_open=True) for i, s in enumerate(init_stds)]
    norms = {"pre": [], "post": []}
    for position, rows in norms.items():
        for std in init_stds:
            config = GPTConfig(vocab_size=vocab_size, block_size=block_size, n_layer=n_layer, n_head=n_head,
                               d_model=d_model, norm_position=position, init_std=std)
            rows.append(_norms_at_init(config, batch_size, seed))     # (L,)
    norms = {position: np.array(rows) for position, rows in norms.items()}   # (n_std, L) each
    layer = np.arange(n_layer)
    fig, axes = new_figure(6 * len(init_stds), 4.5, 1, len(init_stds))
    for ax, std, pre, post in zip(axes[0], init_stds, norms["pre"], norms["post"]):
        ax.semilogy(layer, pre, "o-", label="pre-norm: x + F(Norm(x))")
        ax.semilogy(layer, post, "s-", label="post-norm: Norm(x + F(x))")
        ax.set_title(f"init std {std:g}: gradient norm per block at step 0")
        ax.set_xlabel("block (0 = next to the embeddings)")
        ax.set_ylabel("‖∂L/∂θ_block‖₂ (log scale)")
        ax.set_xticks(layer)
        ax.grid(alpha=0.3, which="both")
        ax.legend()
    fig.suptitle(f"GPT, {n_layer} blocks, d_model {d_model}: one random batch, cross-entropy loss")
    save(fig, path)
    return fig, {"layer": layer, "init_stds": init_stds, "pre": norms["pre"], "post": norms["post"]}


def gradcheck_errors(results, path=None):
    """The relative error of every tensor of every gradient check, on a log scale.

    Left: their histogram; right: one bar per tensor. The dashed line is the checker's
    tolerance: a correct float64 backward lands many decades below it (near 1e-9, the
    round-off of central differences with h = 1e-6), a wrong one near 1.
    Inputs: results [(layer name, GradcheckResult)] from gradcheck.check_pair / check_module;
            path or None.
    Returns: fig, data {"labels" (n,) "layer: tensor", "rel_error" (n,), "ok" (n,) bool,
                        "tol" the largest tolerance of the results}.
    """
    rows = [(f"{layer}: {row.name}", row.rel_error, row.ok) for layer, result in results for row in result.rows]
    if not rows:
        raise ValueError("results: expected at least one checked tensor, got none")
    labels = [label for label, _, _ in rows]
    rel_error = np.array([err for _, err, _ in rows])               # (n,)
    ok = np.array([flag for _, _, flag in rows])                    # (n,)
    tol = max(result.tol for _, result in results)
    shown = np.maximum(rel_error, ERROR_FLOOR)
    fig, axes = new_figure(14, 0.16 * len(rows) + 2.2, 1, 2, width_ratios=(1, 1.3))
    ax = axes[0, 0]
    ax.hist(np.log10(shown), bins=np.arange(-17.0, 0.5, 0.5), color="tab:blue")
    ax.axvline(np.log10(tol), color="tab:red", linestyle="--", label=f"tolerance {tol:.0e}")
    ax.set_title(f"Relative error of {len(rows)} gradients ({int(ok.sum())} OK)")
    ax.set_xlabel("log₁₀ relative error  |a − n|max / max(|a|max, |n|max)")
    ax.set_ylabel("number of tensors")
    ax.legend()
    ax = axes[0, 1]
    y = np.arange(len(rows))
    ax.barh(y, shown, color=np.where(ok, "tab:blue", "tab:red"))
    ax.axvline(tol, color="tab:red", linestyle="--")
    ax.set_xscale("log")
    ax.set_xlim(ERROR_FLOOR, 1.0)
    ax.set_yticks(y, labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_title("Per tensor (float64 central differences)")
    ax.set_xlabel(f"relative error (0 drawn at {ERROR_FLOOR:.0e})")
    ax.grid(alpha=0.3, axis="x")
    save(fig, path)
    return fig, {"labels": labels, "rel_error": rel_error, "ok": ok, "tol": tol}
