"""A whole class: every submission folder graded, one JSON each, one CSV gradebook.

Submissions are graded ``jobs`` at a time, each in a worker process of this
(trusted) installation that runs one child for the submission; a hanging
submission costs its own time budget, once, and delays no other. A worker that
dies (killed, out of memory) breaks the pool for the submissions in flight: they
are graded again, each alone, and one that kills its worker again is "not graded",
with the reason; the gradebook is always written.

Classmates are never collateral: a grade the grader could not compute (the disk
full while staging, a worker killed twice, the child not walled in) is "not
graded" with the reason in the student's JSON and in the gradebook, never 0, so the
instructor re-runs exactly those.

The output folder: refused when it holds anything unless ``force``, and then only
what the previous run listed in its manifest (``MANIFEST``: the students' JSONs, the
gradebook) is removed first, so no student's file from an earlier run stays beside
the new ones looking current; other files are kept.
"""
from __future__ import annotations

import csv
import json
import os
import re
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from .grade import grade, not_graded, refused
from .registry import select
from .report import OutError, gradescope, printable
from .result import CRASHED, EXCEPTION, FAIL, NOT_GRADED, NOT_IMPLEMENTED, OK, TIMEOUT, Result
from .sandbox import Limits
from .submission import TWO_VERSIONS, Ambiguous, Parsed, _places, syntax_error

MANIFEST = ".minitransformer-gradebook"
GRADEBOOK = "gradebook.csv"
SEED_FILE = "seed.json"


def submissions_in(folder) -> list:
    """The sub-folders of ``folder``, one per student, by name."""
    return sorted(p for p in Path(folder).iterdir() if p.is_dir() and not p.name.startswith("."))


def _grade_one(args) -> tuple:
    """(student, results, notes, statuses) of one submission folder."""
    submission, ids, limits, seed, unconfined = args
    notes: list = []
    assignments = select(ids)
    try:
        if no_files(submission, assignments):    # nothing of the package here: said, nothing run
            results = [Result(a.id, a.points, 0.0, NOT_IMPLEMENTED, nothing_found(assignments))
                       for a in assignments]
        else:
            results = grade(submission, ids, limits=limits, seed=seed, notes=notes, unconfined=unconfined)
    except Ambiguous as e:                     # the student's file names: refused, to hand in again
        results = [refused(a, e.args[0]) for a in assignments]
    except Exception as e:                     # noqa: BLE001 - the grader's failure: not graded, said so
        reason = f"the grader failed on this submission ({type(e).__name__}: {str(e)[:200]})"
        results = [not_graded(a, reason) for a in assignments]
    return submission.name, results, notes, statuses(submission, assignments, results)


# ------------------------------------------------------------------ why a score is what it is
NO_FILES = "no files found"
SYNTAX_ERROR = "syntax error"
WRONG = "wrong"
WORDS = {OK: "ok", FAIL: WRONG, EXCEPTION: "exception", NOT_IMPLEMENTED: "not implemented", TIMEOUT: "timeout",
         CRASHED: "crashed", NOT_GRADED: NOT_GRADED}      # a Result's status as the gradebook says it


def no_files(submission, assignments) -> bool:
    """Whether the folder holds no file of the assignments' modules at any place a student puts one."""
    return not any(p.is_file() for a in assignments for t in a.targets for p in _places(Path(submission), t))


def nothing_found(assignments) -> str:
    files = sorted({f"minitransformer/{t.module.replace('.', '/')}.py" for a in assignments for t in a.targets})
    return (f"{NO_FILES}: the folder holds none of {', '.join(files)} (with its path, or by its name alone): "
            "the wrong folder, or a zip nested too deep?")


def statuses(submission, assignments, results) -> dict:
    """assignment id -> (status, reason), as the gradebook shows them: the Result's status in words
    (ok, wrong, exception, not implemented, timeout, crashed, not graded) with its message, a stub
    left because the file at the target's place is not valid Python as "syntax error" with the
    line, and a folder without any file of the package as "no files found"."""
    found = {}
    parsed = Parsed(Path(submission))
    for r in results:
        a = next(a for a in assignments if a.id == r.id)
        status, reason = WORDS[r.status], r.message
        if r.message.startswith(NO_FILES):
            status = NO_FILES
        elif r.status == NOT_IMPLEMENTED:
            broken = syntax_error(Path(submission), a, parsed)
            status, reason = (SYNTAX_ERROR, broken) if broken else (status, reason)
        elif r.status == FAIL:
            reason = _first_wrong(r)
        reason = re.sub(r"\S*mt-staged-\w+/", "", reason)      # the grader's staging folder, not the student's
        found[r.id] = (status, reason.removeprefix(f"{status}: ").removeprefix(f"{WORDS[r.status]}: "))
    return found


def _first_wrong(result) -> str:
    """The first wrong tensor and its diagnosis, or the first check of the rubric failed."""
    row = next((r for r in result.rows if not r.ok), None)
    if row is not None:
        return f"{row.name}: relative error {row.rel_error:.2g}" + (f"; {row.diagnosis}" if row.diagnosis else "")
    mark = next((m for m in result.rubric if not m.passed), None)
    return f"failed: {mark.name}" if mark else result.message


def cell(text: str) -> str:
    """A text cell of the gradebook: on one line, and never read as a formula by a spreadsheet
    (a file named "=HYPERLINK(...).py" lands in the notes)."""
    text = printable(text)
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


def prepare_out(out, force: bool) -> Path:
    """The output folder, empty or emptied of the previous run's own files (``force``); OutError
    for a file in its place, a folder holding other things without ``force``, or one that cannot be made."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise OutError(f"--out {out}: is a file; expected a folder for the students' JSONs and the gradebook")
    if out.is_dir() and any(out.iterdir()):
        if not force:
            raise OutError(f"--out {out}: not empty; choose an empty folder, or --force to replace the files "
                           "an earlier check-class wrote there (others are kept)")
        manifest = out / MANIFEST
        listed = manifest.read_text(encoding="utf-8").split("\n") if manifest.is_file() else []
        for name in [n for n in listed if n and "/" not in n and n not in ("..", ".")] + [MANIFEST]:
            (out / name).unlink(missing_ok=True)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OutError(f"--out {out}: cannot create it ({e.strerror})") from None
    return out


def write_seed(out: Path, seed: int) -> str:
    """The secret seed into out/seed.json, readable by its owner only (to grade the same inputs again:
    --seed-file out/seed.json); the file's name."""
    fd = os.open(out / SEED_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump({"seed": seed, "note": "the secret seed of the graded inputs: keep it from the students"}, f)
        f.write("\n")
    return SEED_FILE


def grade_class(folder, ids=(), out="gradebook", *, jobs: int = 1, limits: Limits = Limits(), seed: int = 0,
                progress=None, force: bool = False, unconfined: bool = False, write_seed_file: bool = False) -> Path:
    """Grade every submission in ``folder``; write out/<student>.json and out/gradebook.csv (and,
    with ``write_seed_file``, the seed: out/seed.json)."""
    assignments = select(ids)
    out = prepare_out(out, force)
    tasks = [(s, [a.id for a in assignments], limits, seed, unconfined) for s in submissions_in(folder)]
    rows, written = {}, [write_seed(out, seed)] if write_seed_file else []
    files = report_files([task[0].name for task in tasks])

    def record(name, results, notes, said):
        report = gradescope(results, notes)
        problems = [n for n in notes if n.startswith(TWO_VERSIONS)]   # the gradebook's notes: no ignored files
        try:
            (out / files[name]).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
            written.append(files[name])
        except OSError as e:
            problems.append(f"could not write {name}.json ({e.strerror})")
        rows[name] = _row(name, results, problems, assignments, report["score"], said)
        if progress:
            progress(name, report)

    for task in _in_pool(tasks, jobs, record):      # their worker died: again, each alone
        if _in_pool([task], 1, record):
            reason = "the grading process died twice (killed, or out of memory)"
            results = [not_graded(a, reason) for a in assignments]
            record(task[0].name, results, [], statuses(task[0], assignments, results))
    with open(out / GRADEBOOK, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["student"] + [a.id for a in assignments] + ["total"] + columns(assignments) + ["notes"])
        writer.writerows(rows[task[0].name] for task in tasks)
    (out / MANIFEST).write_text("\n".join(written + [GRADEBOOK]) + "\n", encoding="utf-8")
    return out / GRADEBOOK


def report_files(names) -> dict:
    """name -> the file of that student's JSON in OUT: ``<name>.json``, unless that is a file this
    command writes itself (a folder named "seed" would replace the class's secret seed, seed.json)
    or one taken already: then ``<name> (2).json``, ``(3)``, ... in the order of ``names``."""
    taken, files = {SEED_FILE, GRADEBOOK, MANIFEST}, {}
    for name in names:
        file, n = f"{name}.json", 1
        while file in taken:
            n += 1
            file = f"{name} ({n}).json"
        taken.add(file)
        files[name] = file
    return files


def columns(assignments) -> list:
    """The gradebook's columns after the total: a status per assignment."""
    return [f"{a.id} status" for a in assignments]


def _row(name, results, problems, assignments, total, said) -> list:
    """A gradebook row: a score per assignment ("not graded" where none could be computed), the total,
    a status per assignment (``statuses``), and the notes: how it was confined, what is flagged for
    the instructor (a backward calling its own forward), then each assignment that is not ok with its reason (the files the grader ignored are in the student's JSON, not here)."""
    by_id = {r.id: r for r in results}
    scores = [by_id[a.id].score if a.id in by_id else None for a in assignments]
    status = [said.get(a.id, (NOT_GRADED, ""))[0] for a in assignments]
    reasons = sorted({r.confinement for r in results if r.confinement})
    reasons += [f"flagged: {r.id}: {flag}" for r in results for flag in r.flags]   # for the instructor, first
    if all(s == NO_FILES for s in status) and status:
        reasons.append(f"{NO_FILES}: {said[assignments[0].id][1]}")
    else:                                     # one reason said once, for every assignment it holds for
        groups: dict = {}
        for a in assignments:
            if a.id in said and said[a.id][0] != "ok":
                groups.setdefault((said[a.id][0], said[a.id][1].removeprefix("not graded: ")), []).append(a.id)
        reasons += [f"{', '.join(ids)}: {status}: {reason}" for (status, reason), ids in groups.items()]
    return ([cell(name)] + [NOT_GRADED if s is None else s for s in scores] + [NOT_GRADED if total is None else total]
            + status + [cell("; ".join(reasons + problems)[:1000])])


def _in_pool(tasks, jobs: int, record) -> list:
    """Grade ``tasks`` in a pool of ``jobs`` workers, ``record(name, results, notes)`` in order;
    returns the tasks lost to a worker that died."""
    lost = []
    with ProcessPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(_grade_one, task) for task in tasks]
        for task, future in zip(tasks, futures):
            try:
                record(*future.result())
            except BrokenProcessPool:
                lost.append(task)
    return lost
