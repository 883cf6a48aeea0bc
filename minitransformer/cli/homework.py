"""`python -m minitransformer homework {list,export,check}`: assignments, students' copies, grading.

    homework list
    homework export ASSIGNMENT... --out DIR [--with-solutions]      ("all" = every assignment)
    homework check DIR [ASSIGNMENT...] [--json results.json] [--timeout S]

``check`` runs each assignment in its own subprocess against the reference (this
installation) and prints a table per assignment with a diagnosis per wrong tensor;
``--json`` writes Gradescope's results.json. Exit code 0 only when everything passes.
"""
from __future__ import annotations

import sys
import time

from ..homework.assignments import ASSIGNMENTS
from ..homework.export import export
from ..homework.grade import grade, require_copy
from ..homework.report import HEADER, all_passed, format_result, summary, write_gradescope
from ..validate import cli_integer, cli_real


def _list() -> int:
    print(f"{'id':<14} {'points':>6}  {'lecture':<38} title")
    for a in ASSIGNMENTS:
        print(f"{a.id:<14} {a.points:>6}  {a.lecture:<38} {a.title}")
        for t in a.targets:
            print(f"{'':<14} {'':>6}  {'':<38}   writes minitransformer.{t}")
    print(f"total {sum(a.points for a in ASSIGNMENTS)} points")
    return 0


def _export(args) -> int:
    chosen = export(args.assignments, args.out, with_solutions=args.with_solutions)
    kind = "solutions kept" if args.with_solutions else "stubbed"
    print(f"exported {len(chosen)} assignment(s) ({kind}) to {args.out}: "
          f"{', '.join(a.id for a in chosen)}; handout {args.out}/HOMEWORK.md")
    return 0


def _check(args) -> int:
    start = time.perf_counter()
    require_copy(args.dir)
    print(HEADER)
    results = grade(args.dir, args.assignments, timeout=args.timeout, seed=args.seed, jobs=args.jobs,
                    progress=lambda r: print(format_result(r), flush=True))
    print(f"{summary(results)}  ({time.perf_counter() - start:.1f} s)")
    if args.json:
        write_gradescope(args.json, results)
    return 0 if all_passed(results) else 1


def run_homework(args) -> int:
    try:
        if args.action == "list":
            return _list()
        if args.action == "export":
            return _export(args)
        return _check(args)
    except (KeyError, FileNotFoundError) as e:
        print(f"homework: {e.args[0]}", file=sys.stderr)
        return 2


def add_homework_arguments(p) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    sub.add_parser("list", help="the assignments: id, points, lecture, the functions to write")
    e = sub.add_parser("export", help="a student's copy of the package with the chosen bodies stubbed")
    e.add_argument("assignments", nargs="+", metavar="ASSIGNMENT", help='assignment ids, or "all"')
    e.add_argument("--out", required=True, help="the folder to write the copy and the handout into")
    e.add_argument("--with-solutions", action="store_true", help="keep the real bodies (instructor copy)")
    c = sub.add_parser("check", help="grade a copy, one subprocess per assignment")
    c.add_argument("dir", help="the student's copy (the folder holding minitransformer/)")
    c.add_argument("assignments", nargs="*", metavar="ASSIGNMENT", help="default: all")
    c.add_argument("--json", help="write Gradescope's results.json here")
    c.add_argument("--timeout", type=cli_real(0.0), default=30.0, help="seconds per assignment (default: 30)")
    c.add_argument("--jobs", type=cli_integer(1), default=1,
                   help="assignments graded at once (default: 1; each keeps its own time limit)")
    c.add_argument("--seed", type=cli_integer(0), default=0, help="seed of the random inputs (default: 0)")
