"""`python -m minitransformer homework ...`: assignments, students' copies, grading, Gradescope.

    homework list
    homework export ASSIGNMENT... --out DIR [--with-solutions | --without-derivations] [--force]   ("all": every one)
    homework check SUBMISSION (ASSIGNMENT... | --assigned-by EXPORT) [--json results.json] [--seed-file F] [--unconfined]
    homework check-class SUBMISSIONS (ASSIGNMENT... | --assigned-by EXPORT) --out DIR [--force] [--jobs N] [--seed-file F]
                         [--unconfined]
    homework autograder ASSIGNMENT... --out autograder.zip [--seed-file F] [--unconfined]

``check`` grades a folder of the student's files (their whole copy, or only the
files they changed): the bodies of the assignments' functions are laid over a
pristine copy and run in a process the kernel walls in; everything is compared here
with this installation's reference (docs/homework.md). Exit code 0 only when
everything passes. Outside a student's copy they grade the assignments named, or those an
export set (``--assigned-by``: its folder's mark, or the autograder's grader.json), and refuse
without either: the course's other assignments were never set. The secret seed of the graded inputs comes from a file, never
the command line (any process can read that); check-class and autograder draw a
128-bit one with ``secrets`` when none is given and write it down. Where this
machine cannot wall the student's code in, the grading commands refuse unless
``--unconfined``, and every result says so.

In a student's copy (a homework export) only the local check runs: ``homework
check . ID`` stages and grades the copy as the grader does (homework/local.py) on the
public seed's stored numbers, names first the code the grader will not see, and says it
is no grade; the instructor's commands and options refuse there.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

from ..homework.registry import UnknownAssignment, assignments, select
from ..validate import cli_integer, cli_real

SECRET_BITS = 128
MAX_SEED_FILE = 1 << 16


class Refused(Exception):
    """A command that is not run; the message is its one line."""


def _list() -> int:
    print(f"{'id':<14} {'points':>6}  {'lecture':<38} title")
    every = assignments()
    for a in every:
        print(f"{a.id:<14} {a.points:>6}  {a.lecture:<38} {a.title}")
        for t in a.targets:
            print(f"{'':<14} {'':>6}  {'':<38}   writes minitransformer.{t}")
    print(f"total {sum(a.points for a in every)} points")
    return 0


def _export(args) -> int:
    from ..homework.export import export
    select(args.assignments)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise Refused(f"--out {out}: is a file; expected a folder for the copy (empty, or one an earlier "
                      "export wrote, with --force)")
    try:
        chosen = export(args.assignments, out, with_solutions=args.with_solutions, force=args.force,
                        derivations=not args.without_derivations)
    except OSError as e:
        raise Refused(f"--out {out}: cannot write the copy there ({e.strerror or e}"
                      f"{': ' + str(e.filename) if e.filename else ''})") from None
    kind = "solutions kept" if args.with_solutions else \
        "stubbed, without the derivations" if args.without_derivations else "stubbed"
    print(f"exported {len(chosen)} assignment(s) ({kind}) to {args.out}: "
          f"{', '.join(a.id for a in chosen)}; handout {args.out}/HOMEWORK.md")
    return 0


# ------------------------------------------------------------------ the seed: a file, never argv
def read_seed(path: str, *, secret: bool) -> int:
    """The seed in the file ``path`` (an integer, or JSON with a "seed"); with ``secret``, one that
    can only have come from a real draw of 128 bits (at least 64 bits long)."""
    file = Path(path)
    if file.is_dir():
        raise Refused(f"--seed-file {path}: is a folder; expected a file holding the seed")
    try:
        with open(file, "rb") as f:
            data = f.read(MAX_SEED_FILE + 1)
        text = data.decode("utf-8").strip()
    except FileNotFoundError:
        raise Refused(f"--seed-file {path}: no such file") from None
    except OSError as e:
        raise Refused(f"--seed-file {path}: cannot be read ({e.strerror})") from None
    except UnicodeDecodeError:
        text = None
    value = None
    if text is not None and len(data) <= MAX_SEED_FILE:
        try:
            value = json.loads(text)
        except ValueError:
            value = None
    value = value.get("seed") if isinstance(value, dict) else value
    if type(value) is not int or value < 0:
        raise Refused(f"--seed-file {path}: expected a non-negative integer, or JSON with a \"seed\" "
                      f"(a text file), got {_shown(value, text)}")
    if secret and value.bit_length() < 64:
        raise Refused(f"--seed-file {path}: a secret seed has {SECRET_BITS} random bits (python -c \"import "
                      f"secrets; print(secrets.randbits({SECRET_BITS}))\"); this one has {value.bit_length()}: "
                      "anyone can try them all")
    return value


def _shown(value, text) -> str:
    if text is None:
        return "a file that is not text"
    return repr(value)[:40] if value is not None else repr(text[:40])


def new_secret_seed() -> int:
    import secrets
    return secrets.randbits(SECRET_BITS)


def _limits(args):
    from ..homework.sandbox import Limits
    return Limits(timeout=args.timeout, budget=args.budget, memory_mb=args.memory_mb)


def _refuse_in_a_copy(args) -> None:
    """The grader never runs from a student's copy: its own code is the student's to change."""
    from ..homework.expected import in_student_copy
    if not in_student_copy():
        return
    command = args.action
    if command == "check":
        for flag, given in (("--json", args.json), ("--seed-file", args.seed_file), ("--unconfined", args.unconfined)):
            if given:
                raise Refused(f"check {flag}: not in a student's copy: this copy checks its own code (a local "
                              "check, no grade); the grader runs from the installed package, outside the copy")
        return
    raise Refused(f"{command}: this is a student's copy of minitransformer (a homework export), and the grader "
                  "never runs from one (its code is the student's to change): run the installed "
                  f"`minitransformer homework {command}` outside the copy")


def _walls(args) -> None:
    """Fail closed: refuse, one line, where the kernel cannot wall the student's code in."""
    from ..homework.expected import in_student_copy
    from ..homework.grade import refusal
    from ..homework.walls import missing
    lacking = missing()
    if in_student_copy():
        return                              # the local check says which walls stood (local.walls_line)
    if lacking and not args.unconfined:
        raise Refused(refusal(lacking))
    if lacking:
        print(f"graded unconfined: no {', no '.join(lacking)} (every result says so)", file=sys.stderr)


# ------------------------------------------------------------------ the commands that grade
def _json_target(path) -> Path:
    """--json's file: its folder exists, and it is not a folder itself."""
    file = Path(path)
    if file.is_dir():
        raise Refused(f"--json {path}: is a folder; expected the file to write results.json to")
    if not file.parent.is_dir():
        raise Refused(f"--json {path}: the folder {file.parent} does not exist")
    return file


def _check(args) -> int:
    from ..homework.expected import copy_assignments, in_student_copy
    from ..homework.grade import grade, refused, require_folder
    from ..homework.report import all_passed, format_notes, format_result, summary, write_gradescope
    from ..homework.submission import ambiguous
    start = time.perf_counter()
    local = in_student_copy()
    ids = args.assignments or (copy_assignments() if local else _set_ids(args, "check", Path(args.dir)))
    chosen = select(ids)
    require_folder(args.dir)
    json_file = _json_target(args.json) if args.json else None
    seed = read_seed(args.seed_file, secret=False) if args.seed_file else 0
    unclear = ambiguous(Path(args.dir), chosen)
    if unclear:                             # file names that do not say which file: refused, never a 0
        if json_file is not None:
            write_gradescope(json_file, [refused(a, unclear) for a in chosen])
        raise Refused(unclear)
    if not local and _nothing_there(args, chosen, json_file):
        return 1
    try:
        _walls(args)
    except Refused as e:                    # results.json says why nothing was graded (Gradescope shows it)
        if json_file is not None:
            from ..homework.grade import not_graded
            write_gradescope(json_file, [not_graded(a, e.args[0]) for a in chosen])
        raise
    if local:
        return _local_check(args, ids, start)
    if not args.seed_file:
        print("note: graded on the public seed 0, whose inputs and results ship in every student's copy; "
              "for a grade: --seed-file F", file=sys.stderr)
    notes: list = []
    results = grade(args.dir, ids, limits=_limits(args), seed=seed, notes=notes, unconfined=args.unconfined,
                    progress=lambda r: print(format_result(r), flush=True))
    if notes:
        print(format_notes(notes))
    print(f"{summary(results)}  ({time.perf_counter() - start:.1f} s)")
    if json_file is not None:
        write_gradescope(json_file, results, notes, time.perf_counter() - start)
    return 0 if all_passed(results) else 1


def _local_check(args, ids, start) -> int:
    """``homework check .`` in a student's copy: staged and graded as the grader does (homework/local.py),
    the code the grader will not see named first, the walls said once, and where an assignment ran on
    the student's own version of one it builds on, said under it."""
    from ..homework.grade import grade
    from ..homework.local import handed_out_sources, stubbed_needs, used_yours
    from ..homework.outside import outside
    from ..homework.report import all_passed, format_notes, format_result, printable, summary
    print("local check of this copy: staged as the grader stages it (only the bodies you write), its cases, "
          "diagnoses and rubric on the public seed 0's numbers stored here; what the grader checks, not your grade")
    if handed_out_sources() is None:
        print("warning: this copy has no minitransformer/homework/copy.zip (the copy as handed out): your files are "
              "staged as they are, so code outside the bodies counts here, not in the grader; export it again")
    unseen = outside(args.dir)
    for line in unseen:
        print(f"warning: {printable(line)}")
    done, said = {}, [""]

    def show(r):
        if r.confinement and r.confinement != said[0]:
            print(printable(r.confinement))
            said[0] = r.confinement
        head, _, rest = format_result(dataclasses.replace(r, confinement="")).partition("\n")
        notes = [f"   {printable(n)}" for n in (used_yours(r, done), stubbed_needs(r)) if n]
        print("\n".join([head] + notes + ([rest] if rest else [])), flush=True)
        done[r.id] = r
    notes: list = []
    results = grade(args.dir, ids, limits=_limits(args), notes=notes, progress=show)
    if notes:
        print(format_notes(notes))
    if unseen:
        print(f"ignored: {len(unseen)} change(s) outside the bodies you write (the warnings above): the grader "
              "does not see them")
    print(f"{summary(results)}  ({time.perf_counter() - start:.1f} s)")
    return 0 if all_passed(results) else 1


def _nothing_there(args, assignments, json_file) -> bool:
    """A submission holding no file of the assignments: said in one line (and in results.json), scored 0
    without running anything; True when so."""
    from ..homework.classroom import no_files, nothing_found
    from ..homework.report import write_gradescope
    from ..homework.result import NOT_IMPLEMENTED, Result
    if not no_files(Path(args.dir), assignments):
        return False
    said = nothing_found(assignments)
    print(f"{args.dir}: {said}")
    if json_file is not None:
        write_gradescope(json_file, [Result(a.id, a.points, 0.0, NOT_IMPLEMENTED, said) for a in assignments])
    return True


# ------------------------------------------------------------------ which assignments: what the export set
def _set_ids(args, command: str, folder: Path | None = None) -> list:
    """The assignments to grade when none are named: those of --assigned-by (the instructor's export or
    the autograder's grader.json); else refused, one line: grading every assignment of the course would
    count the ones nobody set as done or as failed."""
    if args.assigned_by:
        return assigned_by(args.assigned_by)
    hint = ""
    if folder is not None:
        from ..homework.expected import copy_assignments
        marked = copy_assignments(folder / "minitransformer") if (folder / "minitransformer").is_dir() else []
        if marked:
            hint = (f" (the copy's own mark lists {' '.join(marked)}, but it is the student's file to change: "
                    "name them yourself)")
    raise Refused(f"{command}: which assignments? name them ({command} ... layernorm attention, or all) or give "
                  "--assigned-by EXPORT (the folder your export wrote, or the autograder's grader.json or zip)"
                  + hint)


def assigned_by(path: str) -> list:
    """The assignment ids an export set: an export's folder (its minitransformer/homework/copy.json), that
    copy.json itself, the autograder's grader.json, or its zip."""
    import zipfile
    place = Path(path)
    try:
        if place.is_dir():
            marker = place / "minitransformer" / "homework" / "copy.json"
            data = marker.read_text(encoding="utf-8") if marker.is_file() else None
            if data is None:
                raise Refused(f"--assigned-by {path}: no minitransformer/homework/copy.json in it (a student's "
                              "copy that `homework export` wrote has one; a copy --with-solutions has none)")
        elif zipfile.is_zipfile(place):
            with zipfile.ZipFile(place) as z:
                data = z.read("grader.json").decode("utf-8")
        else:
            data = place.read_text(encoding="utf-8")
        found = json.loads(data).get("assignments")
    except FileNotFoundError:
        raise Refused(f"--assigned-by {path}: no such file or folder") from None
    except (OSError, KeyError, ValueError, AttributeError, zipfile.BadZipFile) as e:
        raise Refused(f"--assigned-by {path}: not an export's copy.json, a grader.json or an autograder zip "
                      f"({type(e).__name__})") from None
    if not (isinstance(found, list) and found and all(isinstance(i, str) for i in found)):
        raise Refused(f"--assigned-by {path}: lists no assignments")
    return found


def _check_class(args) -> int:
    from ..homework.classroom import SEED_FILE, grade_class
    start = time.perf_counter()
    ids = args.assignments or _set_ids(args, "check-class")
    select(ids)
    if not Path(args.submissions).is_dir():
        raise Refused(f"{args.submissions}: not a folder of submission folders")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise Refused(f"--out {out}: is a file; expected a folder for the students' JSONs and the gradebook")
    _walls(args)
    seed = read_seed(args.seed_file, secret=True) if args.seed_file else new_secret_seed()
    rewrite = args.seed_file is None or Path(args.seed_file).resolve() == (out / SEED_FILE).resolve()
    csv = grade_class(args.submissions, ids, out, jobs=args.jobs, limits=_limits(args), seed=seed,
                      force=args.force, unconfined=args.unconfined, write_seed_file=rewrite,
                      progress=lambda name, r: print(f"{name:<24} {_score(r)}/{r['max_score']}", flush=True))
    if args.seed_file is None:
        print(f"seed: a new {SECRET_BITS}-bit secret, in {out / SEED_FILE} (grade the same inputs again with "
              f"--seed-file {out / SEED_FILE}; keep it from the students)")
    print(f"gradebook {csv}  ({time.perf_counter() - start:.1f} s)")
    return 0


def _score(report) -> str:
    """A student's total in Gradescope's JSON (report["score"]), or "not graded"."""
    return "not graded" if report["score"] is None else f"{report['score']:g}"


def _autograder(args) -> int:
    from ..homework.autograder import build
    select(args.assignments)
    out = Path(args.out)
    if out.is_dir():
        raise Refused(f"--out {out}: is a folder; expected the zip file to write, e.g. {out}/autograder.zip")
    blocked = next((p for p in out.parents if p.exists() and not p.is_dir()), None)
    if blocked is not None:
        raise Refused(f"--out {out}: {blocked} is a file, not a folder")
    seed = read_seed(args.seed_file, secret=True) if args.seed_file else new_secret_seed()
    path = build(args.assignments, out, seed=seed, timeout=args.timeout, budget=args.budget,
                 unconfined=args.unconfined)
    where = "the one in --seed-file" if args.seed_file else f"a new {SECRET_BITS}-bit secret"
    print(f"wrote {path}: upload it as the Gradescope autograder (setup.sh, run_autograder, the wheel); the seed "
          f"is {where}, in its grader.json: keep the zip from the students")
    return 0


def run_homework(args) -> int:
    from ..homework.export import ExportError
    from ..homework.report import OutError
    from ..homework.sandbox import Unconfined
    actions = {"list": lambda a: _list(), "export": _export, "check": _check, "check-class": _check_class,
               "autograder": _autograder}
    try:
        if args.seed is not None:
            raise Refused("--seed: a seed on the command line is readable by every process of this machine "
                          "(ps, /proc/PID/cmdline): put it in a file for --seed-file F, or give none and a "
                          f"{SECRET_BITS}-bit one is drawn")
        if args.action != "list":
            _refuse_in_a_copy(args)
        return actions[args.action](args)
    except (Refused, OutError, ExportError, Unconfined, UnknownAssignment) as e:
        print(f"homework: {e.args[0]}", file=sys.stderr)
    except FileNotFoundError as e:
        print(f"homework: {e.filename + ': ' if e.filename else ''}{e.strerror or e.args[0]}", file=sys.stderr)
    except OSError as e:
        print(f"homework: {e.filename + ': ' if e.filename else ''}{e.strerror or e}", file=sys.stderr)
    return 2


def _grading_options(p, *, unconfined_help: str) -> None:
    p.add_argument("--timeout", type=cli_real(0.0), default=20.0,
                   help="seconds per assignment (default: 20)")
    p.add_argument("--budget", type=cli_real(0.0), default=120.0,
                   help="seconds per submission, all assignments together (default: 120)")
    p.add_argument("--memory-mb", type=cli_integer(64), default=1024,
                   help="address space the student's process may add, in MiB (default: 1024)")
    p.add_argument("--seed-file", help="a file holding the secret seed of the graded inputs (an integer, or "
                                       "JSON with a \"seed\")")
    p.add_argument("--unconfined", action="store_true", help=unconfined_help)
    p.add_argument("--seed", help=argparse.SUPPRESS)     # refused: a seed on the command line is no secret


def add_homework_arguments(p) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    sub.add_parser("list", help="the assignments: id, points, lecture, the functions to write").set_defaults(seed=None)
    e = sub.add_parser("export", help="a student's copy of the package with the chosen bodies stubbed")
    e.add_argument("assignments", nargs="+", metavar="ASSIGNMENT", help='assignment ids, or "all"')
    e.add_argument("--out", required=True, help="an empty folder to write the copy and the handout into")
    e.add_argument("--with-solutions", action="store_true", help="keep the real bodies (instructor copy)")
    e.add_argument("--without-derivations", action="store_true",
                   help="cut each stubbed backward's formula from the docstrings (the forward's equation, the "
                        "shapes and the cache stay) and leave out the lectures that derive them")
    e.add_argument("--force", action="store_true",
                   help="write into a non-empty folder (files this export did not write are kept)")
    e.set_defaults(seed=None)
    unconfined = ("grade even where the kernel cannot wall the student's code in (no Landlock or seccomp): "
                  "every result is marked \"graded unconfined\"")
    c = sub.add_parser("check", help="grade one submission in a walled-in process")
    c.add_argument("dir", help="the submission: the student's copy, or only the files they changed")
    c.add_argument("assignments", nargs="*", metavar="ASSIGNMENT",
                   help='the assignments to grade, or "all"; none: those of --assigned-by (in a student\'s '
                        "copy: the copy's)")
    c.add_argument("--assigned-by", metavar="EXPORT",
                   help="grade the assignments this export set: its folder, or the autograder's grader.json or zip")
    c.add_argument("--json", help="write Gradescope's results.json here")
    _grading_options(c, unconfined_help=unconfined)
    k = sub.add_parser("check-class", help="grade every submission folder: a JSON each and a CSV gradebook")
    k.add_argument("submissions", help="a folder holding one folder per student")
    k.add_argument("assignments", nargs="*", metavar="ASSIGNMENT",
                   help='the assignments to grade, or "all"; none: those of --assigned-by')
    k.add_argument("--assigned-by", metavar="EXPORT",
                   help="grade the assignments this export set: its folder, or the autograder's grader.json or zip")
    k.add_argument("--out", default="gradebook", help="an empty folder for the JSONs and gradebook.csv "
                                                      "(default: gradebook)")
    k.add_argument("--force", action="store_true",
                   help="write into a non-empty --out, replacing what an earlier check-class wrote there")
    k.add_argument("--jobs", type=cli_integer(1), default=1, help="submissions graded at once (default: 1)")
    _grading_options(k, unconfined_help=unconfined)
    g = sub.add_parser("autograder", help="Gradescope's autograder zip (setup.sh, run_autograder, a wheel)")
    g.add_argument("assignments", nargs="+", metavar="ASSIGNMENT", help='assignment ids, or "all"')
    g.add_argument("--out", required=True, help="the zip to write, e.g. autograder.zip")
    _grading_options(g, unconfined_help="let the zip grade where Gradescope's machine cannot wall the student's "
                                        "code in, every result marked \"graded unconfined\"")
