"""`python -m minitransformer gradcheck`: every backward against central differences.

Runs the public checker (minitransformer/gradcheck) in float64 on each layer with small random
inputs and a random upstream gradient, prints one table per layer, and exits 1 if
any tensor is NOT OK. The same calls are how a student checks their own layer.

    python -m minitransformer gradcheck FILE.py:FORWARD:BACKWARD [--shapes "x=2,3,4;W=4,5"]

checks a student's own pair instead (homework/ownpair.py): a file inside the
student's package copy is imported as its package module; a homework function's name
(layernorm_forward, attention_forward ...) draws the grader's inputs and compares with
the reference, each wrong tensor with a diagnosis; other names draw inputs from the
signature or from --shapes. A target that cannot be checked is one line, exit 2.
"""
from __future__ import annotations

import sys

from ..gradcheck.suite import layer_checks
from ..homework.ownpair import TargetError, check_file, parse_shapes
from ..homework.report import format_result
from ..homework.result import FAIL, OK, Result
from ..validate import cli_integer


def _run_target(target: str, seed: int, shapes: str | None) -> int:
    try:
        rows, has_reference = check_file(target, seed, parse_shapes(shapes) if shapes is not None else None)
    except TargetError as e:
        print(f"gradcheck: {e}", file=sys.stderr)
        return 2
    ok = all(r.ok for r in rows)
    print(format_result(Result(target, len(rows), sum(r.ok for r in rows), OK if ok else FAIL,
                               "" if has_reference else "no reference for this name: the numerical check only, "
                               "no diagnoses", rows)))
    return 0 if ok else 1


def run_gradcheck(args) -> int:
    if getattr(args, "target", None):
        return _run_target(args.target, args.seed, getattr(args, "shapes", None))
    if getattr(args, "shapes", None) is not None:
        print("gradcheck: --shapes needs a target FILE.py:FORWARD:BACKWARD", file=sys.stderr)
        return 2
    failed = []
    for name, thunk in layer_checks(args.seed):
        result = thunk()
        print(f"\n== {name}: max relative error {result.max_rel_error:.2e}")
        print(result)
        if not result.ok:
            failed.append(name)
    print(f"\n{'all layers OK' if not failed else 'NOT OK: ' + ', '.join(failed)}")
    return 1 if failed else 0


def add_gradcheck_arguments(p) -> None:
    p.add_argument("target", nargs="?", metavar="FILE.py:FORWARD:BACKWARD",
                   help="check your own pair from a file (default: every layer of the package)")
    p.add_argument("--seed", type=cli_integer(0), default=0, help="seed of the random inputs (default: 0)")
    p.add_argument("--shapes", metavar="NAME=D1,D2;...",
                   help='shapes of the forward\'s array inputs, e.g. "x=2,3,4;W=4,5" (default: from the '
                        "function's name and signature)")
