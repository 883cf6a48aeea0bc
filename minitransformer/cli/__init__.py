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

from ..validate import cli_one_line_error

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
    _one_line_errors(p)
    return p


def _one_line_errors(parser) -> None:
    """Every (sub)parser reports a bad argument in one line naming the flag, without the usage dump."""
    if "error" not in vars(parser):                 # train sets its own
        parser.error = cli_one_line_error(parser)
    for action in parser._actions:
        for child in (getattr(action, "choices", None) or {}).values() if isinstance(action, argparse._SubParsersAction) else ():
            _one_line_errors(child)


def main(argv=None) -> int:
    """Parse ``argv`` (default: sys.argv[1:]), run the command, return its exit code."""
    args = _parser().parse_args(argv)
    if args.command is None:
        _parser().print_help()
        return 0
    module = next(module for name, module, _ in COMMANDS if name == args.command)
    return getattr(module, f"run_{args.command}")(args)
