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
import os
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


EXIT_BROKEN_PIPE = 128 + 13     # the status of a Unix tool that SIGPIPE ended: 141
EXIT_INTERRUPTED = 128 + 2      # ... and of one that Ctrl-C (SIGINT) ended: 130


class ReaderGone(KeyboardInterrupt):
    """stdout's reader went away (``homework list | head``). Not an OSError, so no command's
    own ``except OSError`` (a file it could not write) takes it for its own failure; a
    KeyboardInterrupt, so ``train`` stops as on Ctrl-C: the last step saved, the resume
    command on stderr."""


class _StdoutGuard:
    """sys.stdout during a command: a write into a closed pipe raises ReaderGone once, and
    every later write is dropped (the cleanup after it prints nothing to nobody)."""

    def __init__(self, stream):
        self._stream, self.reader_gone = stream, False

    def write(self, text):
        return self._guarded(self._stream.write, text)

    def flush(self):
        return self._guarded(self._stream.flush)

    def _guarded(self, call, *args):
        if self.reader_gone:
            return len(args[0]) if args else None
        try:
            return call(*args)
        except BrokenPipeError:
            self.reader_gone = True
            _silence(self._stream)
            raise ReaderGone from None

    def __getattr__(self, name):            # fileno, isatty, encoding, buffer: the stream's own
        return getattr(self._stream, name)


def main(argv=None) -> int:
    """Parse ``argv`` (default: sys.argv[1:]), run the command, return its exit code.

    A reader that goes away (``homework list | head``) ends any command quietly with
    EXIT_BROKEN_PIPE, as Unix tools do, instead of a BrokenPipeError traceback; Ctrl-C
    that a command does not handle itself (``train`` saves its run) ends it with one line
    and EXIT_INTERRUPTED.
    """
    stdout = sys.stdout
    guard = sys.stdout = _StdoutGuard(stdout)
    try:
        code = _run(sys.argv[1:] if argv is None else list(argv))
        guard.flush()                 # inside the try: a flush at exit would meet the closed pipe too
    except (ReaderGone, BrokenPipeError):
        if not guard.reader_gone:     # a BrokenPipeError from a write that bypassed the guard (.buffer)
            _silence(stdout)
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        sys.stdout = stdout
    return EXIT_BROKEN_PIPE if guard.reader_gone else code


def _run(argv: list) -> int:
    named = argv[0] if argv and argv[0] in dict(COMMANDS) else None
    args = _parser(named).parse_args(argv)
    if args.command is None:
        _parser().print_help()
        return 0
    return getattr(command_module(args.command), f"run_{args.command}")(args)


def _silence(stream) -> None:
    """Point the stream's descriptor at /dev/null: what is still buffered for the closed pipe is
    dropped at exit instead of raising again (the Python documentation's recipe for SIGPIPE)."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):        # not a real file (a test's capture)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)
