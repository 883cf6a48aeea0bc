"""Figures of training: the loss curve, the learning-rate schedules, label smoothing.

    loss_curve        the training loss per step (raw and smoothed) and the evaluations
    lr_schedules      Noam's warmup schedule for several (d_model, warmup), and warmup + cosine
    label_smoothing   the target distribution q with and without smoothing, as the loss sees it

Each returns (fig, data): data holds the arrays drawn, so a test can hold them
against the formula. The schedules and the smoothed target come from the library
(optim.schedules, functional.cross_entropy); nothing here re-derives them.
"""
from __future__ import annotations

import numpy as np

from ..functional.cross_entropy import cross_entropy_backward, cross_entropy_forward
from ..functional.softmax import softmax_forward
from ..optim.schedules import noam_schedule, warmup_cosine_schedule
from ..validate import check_int, check_number
from ._common import new_figure, save

NOAM_SETTINGS = ((512, 4000), (512, 8000), (256, 4000))   # (d_model, warmup): the paper's base model first
COSINE = (1e-3, 100, 2000, 1e-4)                           # (max_lr, warmup, total, min_lr): train.TrainConfig's


def loss_curve(history, evals, path=None, *, smoothing: float = 0.95):
    """The training loss per step, raw and smoothed, with the evaluation points.

    The smoothed curve is an exponential moving average with its start-up bias removed:

        s_0 = 0,   s_t = β s_{t-1} + (1 - β) L_t,   smoothed_t = s_t / (1 - β^t)      β = smoothing

    (the division makes smoothed_1 = L_1 instead of a curve rising from 0).
    Inputs: history [(step, loss)] one per training step; evals [(step, train_eval, val_eval)],
            possibly empty; path to save a PNG, or None; smoothing β in [0, 1).
    Returns: fig, data {"step", "loss", "smoothed", "eval_step", "eval_train", "eval_val"}.
    """
    beta = check_number("smoothing", smoothing, low=0.0, high=1.0, high_open=True)
    steps, losses = _columns("history", history, 2, "(step, loss)")
    if steps.size == 0:
        raise ValueError("history: expected at least one (step, loss) pair, got none")
    eval_step, eval_train, eval_val = _columns("evals", evals, 3, "(step, train_eval, val_eval)")
    smoothed = np.empty_like(losses)
    s = 0.0
    for t, loss in enumerate(losses, start=1):
        s = beta * s + (1.0 - beta) * loss
        smoothed[t - 1] = s / (1.0 - beta ** t)
    fig, axes = new_figure(8, 4.5)
    ax = axes[0, 0]
    ax.plot(steps, losses, color="tab:blue", alpha=0.3, linewidth=0.8, label="training loss (one batch)")
    ax.plot(steps, smoothed, color="tab:blue", linewidth=2, label=f"smoothed (moving average, β = {beta:g})")
    if eval_step.size:
        ax.plot(eval_step, eval_train, "o-", color="tab:green", label="evaluation: train split")
        ax.plot(eval_step, eval_val, "s--", color="tab:red", label="evaluation: validation split")
    ax.set_title("Training loss")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("cross-entropy (nats per token)")
    ax.grid(alpha=0.3)
    ax.legend()
    save(fig, path)
    return fig, {"step": steps, "loss": losses, "smoothed": smoothed, "eval_step": eval_step,
                 "eval_train": eval_train, "eval_val": eval_val}


def _columns(name, rows, width: int, legend: str):
    """The columns of a list of ``width``-tuples, as float64 arrays (an empty list gives empty columns)."""
    table = np.asarray(list(rows), dtype=np.float64)
    if table.size == 0:
        table = table.reshape(0, width)
    if table.ndim != 2 or table.shape[1] != width:
        raise ValueError(f"{name}: expected a list of {legend} tuples, got an array of shape {table.shape}")
    return tuple(table[:, c] for c in range(width))


def lr_schedules(noam_settings=NOAM_SETTINGS, noam_steps: int = 20000, cosine=COSINE, path=None):
    """Left: the schedule of "Attention Is All You Need" (section 5.3),
    lr = d_model^-0.5 · min(step^-0.5, step · warmup^-1.5), for each (d_model, warmup):
    a linear rise that peaks at step = warmup, then a 1/√step decay.
    Right: linear warmup to max_lr, then a half cosine down to min_lr (this package's default).

    Inputs: noam_settings [(d_model, warmup)]; noam_steps, the steps drawn (from 1);
            cosine (max_lr, warmup_steps, total_steps, min_lr); path or None.
    Returns: fig, data {"noam_step" (S,), "noam_lr" (n, S), "noam_settings",
                        "cosine_step" (N,), "cosine_lr" (N,)}.
    """
    noam_steps = check_int("noam_steps", noam_steps, low=1)
    noam_settings = [(check_int(f"noam_settings[{i}] d_model", d, low=1),
                      check_int(f"noam_settings[{i}] warmup", w, low=1)) for i, (d, w) in enumerate(noam_settings)]
    max_lr, warmup, total, min_lr = cosine
    step = np.arange(1, noam_steps + 1)
    noam_lr = np.array([[schedule(int(s)) for s in step]
                        for schedule in (noam_schedule(d, w) for d, w in noam_settings)])   # (n, S)
    cosine_schedule = warmup_cosine_schedule(max_lr, warmup, total, min_lr)
    cosine_step = np.arange(1, total + 1)
    cosine_lr = np.array([cosine_schedule(int(s)) for s in cosine_step])                   # (N,)

    fig, axes = new_figure(12, 4.5, 1, 2)
    ax = axes[0, 0]
    for (d, w), lr in zip(noam_settings, noam_lr):
        line, = ax.plot(step, lr, label=f"d_model = {d}, warmup = {w}")
        if w <= noam_steps:
            ax.plot(w, lr[w - 1], "o", color=line.get_color())     # the peak
    ax.set_title("Noam schedule (Vaswani et al. 2017): peak at step = warmup")
    ax.set_xlabel("step")
    ax.set_ylabel("learning rate")
    ax.ticklabel_format(axis="y", style="sci", scilimits=(0, 0))
    ax.grid(alpha=0.3)
    ax.legend()
    ax = axes[0, 1]
    ax.plot(cosine_step, cosine_lr, color="tab:purple")
    ax.axvline(warmup, color="gray", linestyle=":", label=f"end of warmup (step {warmup})")
    ax.axhline(min_lr, color="gray", linestyle="--", linewidth=0.8, label=f"min_lr = {min_lr:g}")
    ax.set_title(f"Linear warmup + cosine decay (max_lr = {max_lr:g})")
    ax.set_xlabel("step")
    ax.set_ylabel("learning rate")
    ax.grid(alpha=0.3)
    ax.legend()
    save(fig, path)
    return fig, {"noam_step": step, "noam_lr": noam_lr, "noam_settings": noam_settings,
                 "cosine_step": cosine_step, "cosine_lr": cosine_lr}


def label_smoothing(V: int = 8, target: int = 2, smoothing: float = 0.1, path=None):
    """The target distribution the cross-entropy pulls the prediction towards,

        q = (1 - ε) · onehot(y) + ε / V,

    read off the library's gradient rather than typed in: dL/dz = (softmax(z) - q) / N, so
    with one row (N = 1) q = softmax(z) - dL/dz. Left ε = 0 (a one-hot target), right ε.

    Inputs: V classes (>= 2); target y in [0, V); smoothing ε in [0, 1]; path or None.
    Returns: fig, data {"classes" (V,), "hard" (V,) the target at ε = 0, "smoothed" (V,) at ε}.
    """
    V = check_int("V", V, low=2)
    target = check_int("target", target, low=0, high=V - 1)
    smoothing = check_number("smoothing", smoothing, low=0.0, high=1.0)
    targets = {e: _implied_target(V, target, e) for e in (0.0, smoothing)}
    classes = np.arange(V)
    fig, axes = new_figure(11, 4, 1, 2, sharey=True)
    for ax, e, colour in ((axes[0, 0], 0.0, "tab:gray"), (axes[0, 1], smoothing, "tab:orange")):
        q = targets[e]
        bars = ax.bar(classes, q, color=colour)
        ax.bar_label(bars, labels=[f"{round(v, 6) + 0.0:g}" for v in q], fontsize=8)  # + 0.0: -0 -> 0
        ax.set_title(f"ε = {e:g}: " + ("one-hot target" if e == 0 else f"q = (1 - ε)·onehot + ε/V, V = {V}"))
        ax.set_xlabel(f"class (the correct one: {target})")
        ax.set_xticks(classes)
        ax.set_ylim(0, 1.1)
    axes[0, 0].set_ylabel("target probability q")
    save(fig, path)
    return fig, {"classes": classes, "hard": targets[0.0], "smoothed": targets[smoothing]}


def _implied_target(V: int, target: int, smoothing: float):
    """q = softmax(z) - dL/dz for one row of logits z = 0 (any z gives the same q)."""
    logits = np.zeros((1, V))                                  # (N=1, V)
    _, cache = cross_entropy_forward(logits, np.array([target]), smoothing=smoothing)
    dlogits = cross_entropy_backward(1.0, cache)               # (1, V) = (softmax - q) / 1
    p, _ = softmax_forward(logits)                             # (1, V)
    return (p - dlogits)[0]                                    # (V,)
