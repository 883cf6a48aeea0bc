"""`python -m minitransformer generate`: continue a prompt with a trained GPT checkpoint.

    generate --checkpoint runs/gpt/checkpoint.npz --prompt "The "
    generate --checkpoint ... --prompt "The " --strategy beam --beam-size 4
    generate --checkpoint ... --prompt "The " --temperature 0.8 --top-p 0.9 --seed 1

Every bad argument or file ends with one line ``error: ...`` on stderr and exit
code 2, never a traceback. The KV cache holds block_size positions: a prompt of
T0 tokens gets at most block_size - T0 + 1 new tokens with it (a note says so when
it stops early); --no-cache re-runs the prefix at every token and crops it to the
last block_size tokens, so it can go on for as long as asked.
"""
from __future__ import annotations

import math

import argparse
import sys

import numpy as np

from ..generation import STRATEGIES, generate
from ..models import GPT
from ..training.load import FAMILIES, load_model
from ..validate import check_choice, check_int, check_number
from ..validate import cli_integer, cli_real


def add_generate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", required=True, help="a GPT checkpoint written by `train` (.npz)")
    p.add_argument("--prompt", required=True, help="the text to continue (at least one token)")
    p.add_argument("--strategy", choices=STRATEGIES, default="sample",
                   help="how the next token is chosen (default: sample)")
    p.add_argument("--temperature", type=cli_real(0.0), default=1.0,
                   help="sampling temperature >= 0; 0 = greedy (default: 1)")
    p.add_argument("--top-k", type=cli_integer(1), default=None, help="sample among the k most probable tokens only")
    p.add_argument("--top-p", type=cli_real(0.0, 1.0, high_open=False), default=None,
                   help="sample from the nucleus of probability p, in (0, 1]")
    p.add_argument("--beam-size", type=cli_integer(1), default=4, help="beams of --strategy beam (default: 4)")
    p.add_argument("--length-penalty", type=cli_real(-math.inf), default=1.0,
                   help="alpha of the beam score sum(log p) / length**alpha (default: 1)")
    p.add_argument("--max-new-tokens", type=cli_integer(1), default=50,
                   help="tokens to generate (default: 50); with the KV cache at most block_size - prompt + 1, "
                        "--no-cache for more")
    p.add_argument("--seed", type=cli_integer(0), default=0, help="seed of the sampling generator (default: 0)")
    p.add_argument("--no-cache", action="store_true",
                   help="re-run the whole prefix for every token (slower; crops to the context)")


def run_generate(args) -> int:
    """Print the prompt and its continuation; returns the exit code (0, or 2 after an error)."""
    try:
        text, note = _generate_text(args)
    except (ValueError, TypeError, KeyError, OSError) as e:
        message = e.args[0] if isinstance(e, KeyError) and e.args else e
        print(f"error: {message}", file=sys.stderr)
        return 2
    print(text)
    if note:
        print(note, file=sys.stderr)
    return 0


def _generate_text(args) -> tuple[str, str | None]:
    """(prompt + continuation, a note when the context cut generation short, or None)."""
    settings = _check_arguments(args)
    try:
        model, tokenizer = load_model(args.checkpoint)
    except (ValueError, TypeError, OSError) as e:        # name the flag
        raise ValueError(f"--checkpoint: {e}") from None
    if not isinstance(model, GPT):
        family = next(name for name, (cls, _) in FAMILIES.items() if isinstance(model, cls))
        raise ValueError(f"--checkpoint: expected a GPT checkpoint (family 'gpt'), got family {family!r}")
    try:
        ids = tokenizer.encode(args.prompt)
    except ValueError as e:
        raise ValueError(f"--prompt: {e}") from None
    block_size = model.config.block_size
    if not 1 <= len(ids) <= block_size:
        raise ValueError(f"--prompt: expected 1 to block_size={block_size} tokens (the model's context), "
                         f"got {len(ids)}")
    wanted = settings["max_new_tokens"]
    room = wanted if args.no_cache else min(wanted, block_size - len(ids) + 1)   # the cache cannot slide
    out = generate(model, np.asarray([ids], dtype=np.int64), room,
                   rng=np.random.default_rng(args.seed), use_cache=not args.no_cache,
                   **{k: v for k, v in settings.items() if k != "max_new_tokens"})
    n = out.shape[1] - len(ids)
    note = None
    if n < wanted:
        note = (f"note: stopped after {n} new tokens: the KV cache holds block_size={block_size} positions; "
                "--no-cache goes on with the context cropped to the last block_size tokens")
    return tokenizer.decode(out[0].tolist()), note


def _check_arguments(args) -> dict:
    """The keyword arguments of ``generate``, checked under the command line's own names."""
    check_choice("--strategy", args.strategy, STRATEGIES)
    sample = args.strategy == "sample"
    settings = {"strategy": args.strategy,
                "max_new_tokens": check_int("--max-new-tokens", args.max_new_tokens, low=0),
                "temperature": check_number("--temperature", args.temperature, low=0.0),
                "top_k": None if args.top_k is None else check_int("--top-k", args.top_k, low=1),
                "top_p": None if args.top_p is None else check_number("--top-p", args.top_p, low=0.0,
                                                                       high=1.0, low_open=True),
                "beam_size": check_int("--beam-size", args.beam_size, low=1),
                "length_penalty": check_number("--length-penalty", args.length_penalty)}
    if not sample:   # the sampling settings do not apply; generate refuses them, so say it here
        for flag, key, default in (("--temperature", "temperature", 1.0), ("--top-k", "top_k", None),
                                   ("--top-p", "top_p", None)):
            if settings[key] != default:
                raise ValueError(f"{flag}: applies to --strategy sample only, got --strategy {args.strategy}")
    return settings

