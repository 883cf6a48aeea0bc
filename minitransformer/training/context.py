"""Beyond the trained context: a small character GPT, and its loss at every position.

    train_char_gpt    a GPT trained on the default corpus (or a given text) at one block size
    position_losses   ℓ_t = -log p(x_{t+1} | x_{≤t}) averaged over windows, per position t

A RoPE model has no position parameters, so its weights run unchanged on a longer
window: ``position_losses`` rebuilds the model with ``block_size = length`` (and a
``rope_scale`` for position interpolation, functional/rope.py), copies the
weights, and measures. Positions past the trained block size show how far the
model extrapolates; ``rope_scale = length / block_size`` maps them back into the
trained range (Chen et al. 2023). Learned positions have no rows past block_size:
refused.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..functional.softmax import log_softmax_forward
from ..models import GPT, GPTConfig
from ..tokenizers import CharTokenizer
from ..validate import check_int, check_number
from .data import load_text, train_val_split
from .loop import TrainConfig, train
from .tasks import LanguageModelTask


def train_char_gpt(steps: int, *, seed: int = 0, batch_size: int = 16, lr: float = 3e-3, text=None,
                   **config):
    """A character-level GPT trained for ``steps`` steps on ``text`` (default: the shipped corpus).

    Inputs: steps >= 1; seed (weights and batches); batch_size; lr; config: GPTConfig fields
            (vocab_size comes from the text).
    Returns: model (eval mode), tokenizer, train_ids, val_ids (the last 10 % of the text).
    """
    steps = check_int("steps", steps, low=1)
    text = load_text() if text is None else text
    tokenizer = CharTokenizer.from_text(text)
    ids = np.asarray(tokenizer.encode(text), dtype=np.int64)
    train_ids, val_ids = train_val_split(ids)
    model = GPT(GPTConfig(vocab_size=tokenizer.vocab_size, **config), rng=check_int("seed", seed, low=0))
    if len(val_ids) <= model.config.block_size:
        raise ValueError(f"text: the last 10 % (the validation split) must hold block_size + 1 = "
                         f"{model.config.block_size + 1} characters, got {len(val_ids)} of {len(ids)}")
    task = LanguageModelTask(train_ids, val_ids, model.config.block_size, batch_size)
    cfg = TrainConfig(steps=steps, lr=lr, warmup_steps=min(20, steps), eval_interval=steps,
                      eval_batches=1, final_eval_batches=1, log_interval=steps, seed=seed)
    train(model, task, cfg, log=lambda line: None)
    return model.eval(), tokenizer, train_ids, val_ids


def position_losses(model, ids, length: int, *, n_windows: int = 32, rope_scale: float = 1.0):
    """Mean next-token loss at each position 0 .. length - 1 over ``n_windows`` windows of ``ids``.

        ℓ_t = mean over windows w of  -log p(ids[o_w + t + 1] | ids[o_w .. o_w + t])

    Inputs: model, a GPT with RoPE, ALiBi or no positions; ids (N,) token ids, N > length;
            length, the window (may exceed the model's block_size); n_windows, evenly
            spaced starts o_w; rope_scale, position interpolation for the evaluation.
    Returns: (length,) float64 losses.
    """
    if not isinstance(model, GPT):
        raise TypeError(f"model: expected a GPT, got {type(model).__name__}")
    if model.config.position in ("learned", "sinusoidal"):
        raise ValueError(f"model: {model.config.position} positions have no rows past block_size="
                         f"{model.config.block_size}; expected position 'rope', 'alibi' or 'none'")
    length = check_int("length", length, low=1)
    n_windows = check_int("n_windows", n_windows, low=1)
    check_number("rope_scale", rope_scale, low=0.0, low_open=True, finite=True)
    ids = np.asarray(ids)
    if ids.ndim != 1 or ids.shape[0] <= length:
        raise ValueError(f"ids: expected a 1-D token stream longer than length={length}, got shape {ids.shape}")
    evaluator = _rebuilt(model, length, rope_scale)
    starts = np.linspace(0, ids.shape[0] - length - 1, n_windows).astype(np.int64)   # (W,)
    windows = ids[starts[:, None] + np.arange(length + 1)]                            # (W, length + 1)
    logp, _ = log_softmax_forward(evaluator.forward(windows[:, :-1]).astype(np.float64))  # (W, length, V)
    nll = -np.take_along_axis(logp, windows[:, 1:, None], axis=-1)[..., 0]             # (W, length)
    return nll.mean(axis=0)                                                            # (length,)


def _rebuilt(model, block_size: int, rope_scale: float):
    """The same weights in a GPT of another block_size / rope_scale, in eval mode."""
    config = model.config
    changes = dict(block_size=max(block_size, config.block_size))
    if config.position == "rope":
        changes["rope_scale"] = rope_scale
    elif rope_scale != 1.0:
        raise ValueError(f"rope_scale: expected 1.0 for a model with position={config.position!r}, "
                         f"got {rope_scale}")
    evaluator = GPT(replace(config, **changes), rng=0, dtype=model.head.W.dtype)
    evaluator.load_state_dict(model.state_dict())
    return evaluator.eval()
