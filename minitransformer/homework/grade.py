"""Grade a submission: the trusted parent, one untrusted child per submission.

    stage        the submission's target bodies laid over the grader's pristine copy
                 (homework/submission.py); nothing of the submission runs here
    start        one child for the submission (homework/sandbox.py): python -I -S, its own
                 session, the kernel's walls (homework/walls.py), ``nobody`` when we are root
    per assignment, each after the ones it needs (registry.grading_order):
        need     the child turns the functions of the assignments it builds on into
                 questions to this process, answered with the reference, arrays only
                 (homework/needs.py): no reference code enters the child
        check    each graded case: draw inputs here, call the student's functions there,
                 compare, diagnose and score here (homework/evaluate.py)
    end          the child's process group killed; the caller writes the results

A timeout or a dead child costs the assignment it happened in: the child is
killed and the next assignment starts a fresh one. ``Limits.timeout`` bounds
one assignment, ``Limits.budget`` the whole submission, so a submission that
hangs everywhere costs its budget once.

A grade this process could not compute is "not graded" with the reason, never 0:
the submission could not be staged (a full disk), the child could not start or
could not be walled in, or the grader failed on what the child sent. Its score is
None; the instructor re-runs it.

Fail closed: where this machine lacks a wall (walls.missing()), ``grade`` refuses
(``Unconfined``) unless ``unconfined=True``, and then every result says "graded
unconfined". In a student's copy (its local check: not a grade) the submission is
staged over the copy as handed out, what an assignment builds on runs in the child
(homework/local.py), the walls are raised where the machine has them, and the
results say what stood.
"""
from __future__ import annotations

import dataclasses
import shutil
import time
from pathlib import Path

from .evaluate import run
from .expected import Stored, copy_assignments, in_student_copy
from .graded import REFERENCE
from .local import handed_out, plan, walls_line, where_in_copy
from .needs import Answers
from .places import Places
from .registry import grading_order, needed, select
from .result import CRASHED, NOT_GRADED, NOT_IMPLEMENTED, TIMEOUT, Result
from .sandbox import ChildGone, Limits, Sandbox, Unconfined
from .submission import SYNTAX_ERROR, Parsed, stage, syntax_error
from .walls import missing


def _gone(assignment, e: ChildGone, seconds: float) -> Result:
    status = TIMEOUT if e.reason == "timeout" else CRASHED
    message = f"timed out after {seconds:.0f} s (an infinite loop?)" if str(e).startswith("timed out") else str(e)
    return Result(assignment.id, assignment.points, 0.0, status, message, seconds=seconds)


def not_graded(assignment, reason: str) -> Result:
    """The Result of an assignment whose grade could not be computed: no score, the reason."""
    return Result(assignment.id, assignment.points, None, NOT_GRADED,
                  f"not graded: {reason} (the grader's failure, not the student's: re-run it)")


def refused(assignment, reason: str) -> Result:
    """The Result of an assignment of a hand-in refused as it stands (file names that do not say
    which file they are): no score, the reason, the student's to fix by handing in again."""
    return Result(assignment.id, assignment.points, None, NOT_GRADED, f"not graded: {reason}")


def local_reference():
    """In a student's copy (no reference, homework/expected.py): the public seed's stored
    expectations; else None, the reference of this installation."""
    return Stored() if in_student_copy() else None


def _not_stored(assignment) -> Result:
    return Result(assignment.id, assignment.points, None, NOT_GRADED,
                  f"this copy holds no expected results for {assignment.id}: export it with the "
                  "assignment (homework export ... --out DIR)")


def _needs(sandbox, assignment, local: bool = False) -> None:
    """The child asks this process for the functions ``assignment`` builds on, from now on; they are
    answered in a process of their own, bounded like the child (sandbox.Isolated): the arguments are
    the student's. In a local check the staged copy holds them (homework/local.py: the student's
    where the copy assigns them, else as handed out) and the child runs them itself; only a copy
    without copy.zip asks this process (the copy's own code) for those it does not assign."""
    asked = needed(assignment)
    if local:
        own = set(copy_assignments())
        asked = [] if handed_out() is not None else [a for a in asked if a.id not in own]
    targets = [[t.module, t.qualname] for a in asked for t in a.targets]
    sandbox.answer_with(Answers(assignment.id, REFERENCE), isolate=bool(targets))
    if targets:
        sandbox.request("need", targets=targets)


def _rewrite(result, where) -> None:
    """``result``'s message and rows with each place in the staged copy as ``where`` writes it."""
    result.message = where(result.message)
    result.rows = [dataclasses.replace(r, diagnosis=where(r.diagnosis)) if r.diagnosis else r for r in result.rows]


class NotGraded(Exception):
    """The grader could not compute a grade; the message says why."""


def _grade_one(a, sandbox, copy_dir, limits, seed, examples, reference, required, budget_end,
               walls=None, places=None) -> tuple:
    """(result, the sandbox to go on with) of one assignment; ``walls`` (a dict) receives the walls the
    student's process stood behind (a local check says them); ``places``: where the staged bodies are
    in the student's files (homework/places.py)."""
    start = time.monotonic()
    try:
        if start >= budget_end:
            raise ChildGone("timeout", f"the submission's time budget ({limits.budget:g} s) is spent")
        if sandbox is None:
            sandbox = _start(copy_dir, limits, required)
        if walls is not None:
            walls.update(sandbox.walls)
        sandbox.deadline = min(start + limits.timeout, budget_end)
        _needs(sandbox, a, local=walls is not None)
        result = run(a.id, sandbox, seed=seed, examples=examples, reference=reference, places=places)
        result.seconds = time.monotonic() - start
        return result, sandbox
    except NotGraded as e:
        return not_graded(a, str(e)), None
    except ChildGone as e:
        result = _gone(a, e, time.monotonic() - start)
    except Exception as e:                        # noqa: BLE001 - the grader's own failure: said, not scored
        result = not_graded(a, f"the grader failed on what the student's process sent ({type(e).__name__}: "
                               f"{str(e)[:200]})")
    if sandbox is not None:
        sandbox.close()
    return result, None


def _start(copy_dir, limits, required) -> Sandbox:
    """A Sandbox; NotGraded when it cannot be started behind its walls (no student code has run yet:
    the failure is the machine's)."""
    try:
        return Sandbox(copy_dir, limits, required=required)
    except Unconfined as e:
        raise NotGraded(str(e)) from None
    except ChildGone as e:
        raise NotGraded(f"the student's process could not start ({e})") from None
    except OSError as e:
        raise NotGraded(f"the student's process could not start ({e.strerror or e})") from None


def grade_staged(copy_dir, assignments, *, limits: Limits = Limits(), seed: int = 0, examples: int = 3,
                 progress=None, required: bool = True, where=None, places=None) -> list:
    """Results of ``assignments`` on a staged copy, in grading order. ``required``: the child must
    stand behind every wall (an assignment is not graded otherwise); ``where``: rewrites a place in
    the staged copy in a message (a local check: the student's file and line, local.where_in_copy);
    ``places``: where the staged bodies are in the student's files (homework/places.py)."""
    results, sandbox, reference = [], None, local_reference()
    walls = {} if reference is not None else None
    budget_end = time.monotonic() + limits.budget
    try:
        for a in grading_order(assignments):
            if reference is not None and not reference.has(a.id):
                result = _not_stored(a)
            else:
                result, sandbox = _grade_one(a, sandbox, copy_dir, limits, seed, examples, reference, required,
                                             budget_end, walls, places)
                if walls:
                    result.confinement = "local check: " + walls_line(walls)
                if where is not None:
                    _rewrite(result, where)
            results.append(result)
            if progress:
                progress(result)
    finally:
        if sandbox is not None:
            sandbox.close()
    return results


def _syntax_said(submission: Path, assignments):
    """Result -> Result: a stub graded because the student's file at the target's place is not valid
    Python says so (the file, the line), instead of "not implemented"."""
    parsed, by_id = Parsed(submission), {a.id: a for a in assignments}

    def said(result):
        broken = syntax_error(submission, by_id[result.id], parsed) if result.status == NOT_IMPLEMENTED else ""
        if broken and not result.message.startswith(SYNTAX_ERROR):
            result.message = f"{SYNTAX_ERROR}: {broken}: the grader could not read your code there, so it ran the stub"
            result.explanation = result.message
        return result
    return said


def grade(submission, ids=(), *, limits: Limits = Limits(), seed: int = 0, examples: int = 3,
          progress=None, notes=None, unconfined: bool = False) -> list:
    """Every selected assignment of a submission folder, in the course's order; ``notes`` (a list)
    receives what of the submission was ignored. Unconfined (or, without ``unconfined``,
    refused with ``Unconfined``) where this machine lacks a wall; every result then says so."""
    assignments = select(ids)
    require_folder(submission)
    local = in_student_copy()
    lacking = missing()
    if lacking and not (unconfined or local):
        raise Unconfined(refusal(lacking))
    try:
        places = Places(submission)
        if local:                           # staged as the grader stages: homework/local.py
            theirs, as_handed_out = plan(assignments)
            copy_dir, ignored = stage(submission, theirs, places, listed=False,
                                      handed_out_bodies=as_handed_out if handed_out() is not None else ())
        else:
            copy_dir, ignored = stage(submission, assignments, places)
    except (OSError, RecursionError, MemoryError) as e:
        reason = f"the submission could not be staged ({getattr(e, 'strerror', None) or type(e).__name__})"
        return [not_graded(a, reason) for a in assignments]
    except SyntaxError as e:            # a local check without copy.zip stages over the student's own files
        reason = (f"a file of this copy is not valid Python ({e.msg}, line {e.lineno}), and without "
                  "homework/copy.zip the check stages over your files: fix it, or export the copy again")
        return [not_graded(a, reason) for a in assignments]
    if notes is not None:
        notes.extend(ignored)
    try:
        where = where_in_copy(copy_dir, submission, theirs) if local else None
        said = _syntax_said(Path(submission), assignments)
        results = grade_staged(copy_dir, assignments, limits=limits, seed=seed, examples=examples,
                               progress=progress and (lambda r: progress(said(r))),
                               required=not (local or lacking), where=where, places=places)
        results = [said(r) for r in results]
    finally:
        shutil.rmtree(copy_dir, ignore_errors=True)
    if lacking and not local:
        for r in results:
            r.confinement = "graded unconfined: no " + ", no ".join(lacking)
    order = {a.id: i for i, a in enumerate(assignments)}
    return sorted(results, key=lambda r: order[r.id])


def refusal(lacking: list) -> str:
    """The one line that says why nothing is graded here."""
    return (f"this machine cannot wall in the student's code: no {', no '.join(lacking)}; grade on Linux "
            "5.13 or later (x86_64 or aarch64), or pass --unconfined to grade anyway, every result marked "
            "\"graded unconfined\"")


def require_folder(submission) -> None:
    if not Path(submission).is_dir():
        raise FileNotFoundError(f"{submission}: not a folder (a student's copy or the files they handed in)")
