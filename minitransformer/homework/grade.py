"""Grade a submission: the trusted parent, one untrusted child per submission.

    stage        the submission's target bodies laid over a pristine student copy
                 (homework/submission.py); nothing of the submission runs here
    start        one child for the submission (homework/sandbox.py): python -I -S,
                 its own session, limits, an unprivileged user when we are root
    per assignment, each after the ones it needs (assignments.grading_order):
        install  the reference bodies of the assignments it needs into the child
        check    each graded case: draw inputs here, call the student's functions there,
                 compare, diagnose and score here (homework/evaluate.py)
    end          the child's process group killed; the caller writes the results

A timeout or a dead child costs the assignment it happened in: the child is
killed and the next assignment starts a fresh one. ``Limits.timeout`` bounds
one assignment, ``Limits.budget`` the whole submission, so a submission that
hangs everywhere costs its budget once.
"""
from __future__ import annotations

import ast
import shutil
import textwrap
import time
from pathlib import Path

from .assignments import grading_order, needed, select
from .evaluate import run
from .expected import Stored, in_student_copy
from .export import PACKAGE_DIR, _find
from .sandbox import ChildGone, Limits, Sandbox
from .submission import stage


def reference_source(target) -> str:
    """The reference's source of one target (decorators included), dedented."""
    path = (PACKAGE_DIR / Path(*target.module.split("."))).with_suffix(".py")
    source = path.read_text(encoding="utf-8")
    node = _find(ast.parse(source), target.qualname)
    first = min([d.lineno for d in node.decorator_list] + [node.lineno])
    return textwrap.dedent("".join(source.splitlines(keepends=True)[first - 1:node.end_lineno]))


def pieces_needed(assignment) -> list:
    """[module, qualname, source] of every target of the assignments ``assignment`` needs."""
    return [[t.module, t.qualname, reference_source(t)] for a in needed(assignment) for t in a.targets]


def _gone(assignment, e: ChildGone, seconds: float) -> dict:
    status = "timeout" if e.reason == "timeout" else "crashed"
    message = f"timed out after {seconds:.0f} s (an infinite loop?)" if str(e).startswith("timed out") else str(e)
    return {"id": assignment.id, "max_score": assignment.points, "score": 0.0, "status": status,
            "message": message, "rows": [], "seconds": seconds}


def local_reference():
    """In a student's copy (no reference, homework/expected.py): the public seed's stored
    expectations; else None, the reference of this installation."""
    return Stored() if in_student_copy() else None


def _not_stored(assignment) -> dict:
    return {"id": assignment.id, "max_score": assignment.points, "score": 0.0, "status": "not graded",
            "message": f"this copy holds no expected results for {assignment.id}: export it with the "
                       "assignment (homework export ... --out DIR)", "rows": []}


def grade_staged(copy_dir, assignments, *, limits: Limits = Limits(), seed: int = 0, examples: int = 3,
                 progress=None) -> list:
    """Results of ``assignments`` on a staged copy, in grading order."""
    results, sandbox, reference = [], None, local_reference()
    budget_end = time.monotonic() + limits.budget
    try:
        for a in grading_order(assignments):
            start = time.monotonic()
            if reference is not None and not reference.has(a.id):
                results.append(_not_stored(a))
                if progress:
                    progress(results[-1])
                continue
            try:
                if start >= budget_end:
                    raise ChildGone("timeout", f"the submission's time budget ({limits.budget:g} s) is spent")
                if sandbox is None:
                    sandbox = Sandbox(copy_dir, limits)
                sandbox.deadline = min(start + limits.timeout, budget_end)
                if a.needs:
                    sandbox.request("install", pieces=pieces_needed(a))
                result = run(a.id, sandbox, seed=seed, examples=examples, reference=reference)
                result["seconds"] = time.monotonic() - start
            except ChildGone as e:
                if sandbox is not None:
                    sandbox.close()
                sandbox = None
                result = _gone(a, e, time.monotonic() - start)
            results.append(result)
            if progress:
                progress(result)
    finally:
        if sandbox is not None:
            sandbox.close()
    return results


def grade(submission, ids=(), *, limits: Limits = Limits(), seed: int = 0, examples: int = 3,
          progress=None, notes=None) -> list:
    """Every selected assignment of a submission folder, in table order; ``notes`` (a list)
    receives what of the submission was ignored."""
    assignments = select(ids)
    require_folder(submission)
    copy_dir, ignored = stage(submission)
    if notes is not None:
        notes.extend(ignored)
    try:
        results = grade_staged(copy_dir, assignments, limits=limits, seed=seed, examples=examples,
                               progress=progress)
    finally:
        shutil.rmtree(copy_dir, ignore_errors=True)
    order = {a.id: i for i, a in enumerate(assignments)}
    return sorted(results, key=lambda r: order[r["id"]])


def require_folder(submission) -> None:
    if not Path(submission).is_dir():
        raise FileNotFoundError(f"{submission}: not a folder (a student's copy or the files they handed in)")

