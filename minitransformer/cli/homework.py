"""`python -m minitransformer homework ...`: assignments, students' copies, grading, Gradescope.

    homework list
    homework export ASSIGNMENT... --out DIR [--with-solutions] [--force]   ("all" = every assignment)
    homework check SUBMISSION [ASSIGNMENT...] [--json results.json] [--seed N | --seed-file F]
    homework check-class SUBMISSIONS [ASSIGNMENT...] --out DIR [--jobs N]
    homework autograder ASSIGNMENT... --out autograder.zip (--seed N | --seed-file F)

``check`` grades a folder of the student's files (their whole copy, or only the
files they changed): the bodies of the assignments' functions are laid over a
pristine copy and run in a confined process; everything is compared here with this
installation's reference (docs/homework.md). Exit code 0 only when everything passes.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from ..homework.assignments import ASSIGNMENTS, select
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
    from ..homework.export import export
    chosen = export(args.assignments, args.out, with_solutions=args.with_solutions, force=args.force)
    kind = "solutions kept" if args.with_solutions else "stubbed"
    print(f"exported {len(chosen)} assignment(s) ({kind}) to {args.out}: "
          f"{', '.join(a.id for a in chosen)}; handout {args.out}/HOMEWORK.md")
    return 0


def _seed(args) -> int:
    """--seed, or the seed in --seed-file (an integer, or JSON with a "seed")."""
    if getattr(args, "seed_file", None):
        text = Path(args.seed_file).read_text(encoding="utf-8").strip()
        try:
            value = json.loads(text)
        except ValueError:
            raise KeyError(f"--seed-file {args.seed_file}: expected an integer or JSON with a \"seed\"")
        value = value.get("seed") if isinstance(value, dict) else value
        if type(value) is not int or value < 0:
            raise KeyError(f"--seed-file {args.seed_file}: expected a non-negative integer seed, got {value!r}")
        return value
    return args.seed


def _limits(args):
    from ..homework.sandbox import Limits
    return Limits(timeout=args.timeout, budget=args.budget, memory_mb=args.memory_mb)


def _confinement_note() -> None:
    """For the instructor: what confines the student's process where the kernel does not
    (a student checking their own copy is grading their own code: no note)."""
    from ..homework.expected import in_student_copy
    from ..homework.sandbox import confinement_note
    note = None if in_student_copy() else confinement_note()
    if note:
        print(note, file=sys.stderr)


def _check(args) -> int:
    from ..homework.grade import grade, require_folder
    from ..homework.report import all_passed, format_notes, format_result, summary, write_gradescope
    start = time.perf_counter()
    select(args.assignments)
    require_folder(args.dir)
    _confinement_note()
    seed, notes = _seed(args), []
    results = grade(args.dir, args.assignments, limits=_limits(args), seed=seed, notes=notes,
                    progress=lambda r: print(format_result(r), flush=True))
    if notes:
        print(format_notes(notes))
    print(f"{summary(results)}  ({time.perf_counter() - start:.1f} s)")
    if args.json:
        write_gradescope(args.json, results, notes, time.perf_counter() - start)
    return 0 if all_passed(results) else 1


def _require_secret_seed(args, command: str) -> None:
    """A class is graded on inputs its students have not seen: the public seed 0's inputs and
    results ship in every student's copy, so a shared table of them would pass."""
    if args.seed is None and not args.seed_file:
        raise KeyError(f"{command}: give the graded inputs' secret seed, --seed N or --seed-file F "
                       "(the public seed 0's inputs and results ship in every student's copy)")


def _check_class(args) -> int:
    from ..homework.classroom import grade_class
    _require_secret_seed(args, "check-class")
    start = time.perf_counter()
    select(args.assignments)
    if not Path(args.submissions).is_dir():
        raise FileNotFoundError(f"{args.submissions}: not a folder of submission folders")
    _confinement_note()
    csv = grade_class(args.submissions, args.assignments, args.out, jobs=args.jobs, limits=_limits(args),
                      seed=_seed(args),
                      progress=lambda name, r: print(f"{name:<24} {r['score']:g}/{r['max_score']}", flush=True))
    print(f"gradebook {csv}  ({time.perf_counter() - start:.1f} s)")
    return 0


def _autograder(args) -> int:
    from ..homework.autograder import build
    _require_secret_seed(args, "autograder")
    path = build(args.assignments, args.out, seed=_seed(args), timeout=args.timeout, budget=args.budget)
    print(f"wrote {path}: upload it as the Gradescope autograder (setup.sh, run_autograder, the wheel)")
    return 0


def run_homework(args) -> int:
    from ..homework.export import ExportError
    actions = {"list": lambda a: _list(), "export": _export, "check": _check, "check-class": _check_class,
               "autograder": _autograder}
    try:
        return actions[args.action](args)
    except (KeyError, FileNotFoundError, ExportError) as e:
        print(f"homework: {e.args[0]}", file=sys.stderr)
        return 2


def _grading_options(p, *, seed_default=0) -> None:
    p.add_argument("--timeout", type=cli_real(0.0), default=20.0,
                   help="seconds per assignment (default: 20)")
    p.add_argument("--budget", type=cli_real(0.0), default=120.0,
                   help="seconds per submission, all assignments together (default: 120)")
    p.add_argument("--memory-mb", type=cli_integer(64), default=1024,
                   help="address space the student's process may add, in MiB (default: 1024)")
    p.add_argument("--seed", type=cli_integer(0), default=seed_default,
                   help="seed of the graded inputs: the instructor's secret "
                        + ("(default: 0, the public one)" if seed_default == 0 else "(required, or --seed-file)"))
    p.add_argument("--seed-file", help="a file holding the seed (an integer, or JSON with a \"seed\")")


def add_homework_arguments(p) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    sub.add_parser("list", help="the assignments: id, points, lecture, the functions to write")
    e = sub.add_parser("export", help="a student's copy of the package with the chosen bodies stubbed")
    e.add_argument("assignments", nargs="+", metavar="ASSIGNMENT", help='assignment ids, or "all"')
    e.add_argument("--out", required=True, help="an empty folder to write the copy and the handout into")
    e.add_argument("--with-solutions", action="store_true", help="keep the real bodies (instructor copy)")
    e.add_argument("--force", action="store_true",
                   help="write into a non-empty folder (files this export did not write are kept)")
    c = sub.add_parser("check", help="grade one submission in a confined process")
    c.add_argument("dir", help="the submission: the student's copy, or only the files they changed")
    c.add_argument("assignments", nargs="*", metavar="ASSIGNMENT", help="default: all")
    c.add_argument("--json", help="write Gradescope's results.json here")
    _grading_options(c)
    k = sub.add_parser("check-class", help="grade every submission folder: a JSON each and a CSV gradebook")
    k.add_argument("submissions", help="a folder holding one folder per student")
    k.add_argument("assignments", nargs="*", metavar="ASSIGNMENT", help="default: all")
    k.add_argument("--out", default="gradebook", help="where the JSONs and gradebook.csv go (default: gradebook)")
    k.add_argument("--jobs", type=cli_integer(1), default=1, help="submissions graded at once (default: 1)")
    _grading_options(k, seed_default=None)
    g = sub.add_parser("autograder", help="Gradescope's autograder zip (setup.sh, run_autograder, a wheel)")
    g.add_argument("assignments", nargs="+", metavar="ASSIGNMENT", help='assignment ids, or "all"')
    g.add_argument("--out", required=True, help="the zip to write, e.g. autograder.zip")
    _grading_options(g, seed_default=None)
