"""The command line: ``python -m minitransformer COMMAND`` (also the ``minitransformer`` script).

    train       train a GPT (default), an encoder-decoder, or a BERT-like encoder
    generate    continue a prompt with a trained GPT checkpoint
    figures     regenerate the lecture figures
    gradcheck   check every layer's backward against numerical gradients
    embed       sentence embeddings from a pretrained BERT-family checkpoint

One module per command, each with ``add_<command>_arguments(parser)`` and
``run_<command>(args) -> exit code``; no command module imports another.
"""
from __future__ import annotations

import argparse

from . import embed, figures, generate, gradcheck, homework, train

# (name, module, help): the module's add_<name>_arguments and run_<name> do the work
COMMANDS = (
    ("train", train, "train a model (no arguments: a small GPT on the default corpus)"),
    ("generate", generate, "continue a prompt with a GPT checkpoint"),
    ("figures", figures, "regenerate the lecture figures"),
    ("gradcheck", gradcheck, "check every backward against central differences (float64)"),
    ("embed", embed, "sentence embeddings from a BERT checkpoint"),
    ("homework", homework, "list, export (stubbed copies) and grade (check) the homework"),
)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m minitransformer",
                                description="The Transformer in NumPy, every backward by hand.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name, module, helptext in COMMANDS:
        getattr(module, f"add_{name}_arguments")(sub.add_parser(name, help=helptext))
    return p


def main(argv=None) -> int:
    """Parse ``argv`` (default: sys.argv[1:]), run the command, return its exit code."""
    args = _parser().parse_args(argv)
    if args.command is None:
        _parser().print_help()
        return 0
    module = next(module for name, module, _ in COMMANDS if name == args.command)
    return getattr(module, f"run_{args.command}")(args)
