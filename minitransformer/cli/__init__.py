"""The command line: ``python -m minitransformer COMMAND`` (also the ``minitransformer`` script).

    train       train a GPT (default), an encoder-decoder, or a BERT-like encoder
    generate    continue a prompt with a trained GPT checkpoint
    figures     regenerate the lecture figures
    gradcheck   check every layer's backward against numerical gradients
    embed       sentence embeddings from a pretrained BERT-family checkpoint
    homework    list, export and grade the homework
    lectures    copy the lectures out of the package (--out DIR), or list them
    trace       one training step, op by op, forward and backward, as an HTML page

One module per command, each with ``add_<command>_arguments(parser)`` and
``run_<command>(args) -> exit code``; no command module imports another.

Only the named command's module is imported (``train`` never loads matplotlib's
figure machinery for ``figures``, nor the pretrained readers): a short run starts
in a fraction of a second instead of one to two. The help (no command, or ``-h``
before one) imports them all, to list every command's arguments.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from ..validate import cli_one_line_error

# (name, help): the module cli/<name>.py's add_<name>_arguments and run_<name> do the work
COMMANDS = (
    ("train", "train a model (no arguments: a small GPT on the default corpus)"),
    ("generate", "continue a prompt with a GPT checkpoint"),
    ("figures", "regenerate the lecture figures"),
    ("gradcheck", "check every backward against central differences (float64)"),
    ("embed", "sentence embeddings from a BERT checkpoint"),
    ("homework", "list, export (stubbed copies) and grade (check) the homework"),
    ("lectures", "copy the lectures into a folder, runnable there (--out DIR), or list them"),
    ("trace", "one training step, op by op, as a page to step through in a browser"),
)


def command_module(name: str):
    """The module of command ``name`` (cli/<name>.py), imported on first use."""
    return importlib.import_module(f"{__name__}.{name}")


def _parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; with ``only``, just that command's arguments are added (the others are listed)."""
    p = argparse.ArgumentParser(prog="python -m minitransformer",
                                description="The Transformer in NumPy, every backward by hand.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name, helptext in COMMANDS:
        command = sub.add_parser(name, help=helptext)
        if only is None or name == only:
            getattr(command_module(name), f"add_{name}_arguments")(command)
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
    argv = sys.argv[1:] if argv is None else list(argv)
    named = argv[0] if argv and argv[0] in dict(COMMANDS) else None
    args = _parser(named).parse_args(argv)
    if args.command is None:
        _parser().print_help()
        return 0
    return getattr(command_module(args.command), f"run_{args.command}")(args)
