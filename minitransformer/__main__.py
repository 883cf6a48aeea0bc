"""The command line: ``python -m minitransformer COMMAND`` (also the ``minitransformer`` script).

    train       train a GPT (default), an encoder-decoder, or a BERT-like encoder
    generate    continue a prompt with a trained GPT checkpoint
    figures     regenerate the lecture figures into figures/
    gradcheck   check every layer's backward against numerical gradients
    embed       sentence embeddings from a pretrained BERT-family checkpoint
"""
from __future__ import annotations

import argparse
import sys


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m minitransformer",
                                description="The Transformer in NumPy, every backward by hand.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    from .cli_train import add_train_arguments
    add_train_arguments(sub.add_parser("train", help="train a model (no arguments: a small GPT, ~1.5 min)",
                                       description="Train a model and print what it learned."))
    g = sub.add_parser("gradcheck", help="check every backward against central differences (float64)")
    g.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default: 0)")
    for name, module, adder, helptext in _optional_commands():
        try:
            mod = __import__(f"minitransformer.{module}", fromlist=[adder])
        except ImportError:
            continue
        getattr(mod, adder)(sub.add_parser(name, help=helptext))
    return p


def _optional_commands():
    return [("generate", "cli_generate", "add_generate_arguments", "continue a prompt with a GPT checkpoint"),
            ("figures", "cli_figures", "add_figures_arguments", "regenerate the lecture figures"),
            ("embed", "cli_embed", "add_embed_arguments", "sentence embeddings from a BERT checkpoint")]


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    if args.command is None:
        _parser().print_help()
        return 0
    if args.command == "train":
        from .cli_train import run_train
        return run_train(args)
    if args.command == "gradcheck":
        from .cli_gradcheck import run_gradcheck
        return run_gradcheck(args)
    for name, module, adder, _ in _optional_commands():
        if args.command == name:
            mod = __import__(f"minitransformer.{module}", fromlist=["x"])
            return getattr(mod, "run_" + name)(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
