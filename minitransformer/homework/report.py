"""What the grader prints, and the Gradescope autograder results.json, from typed results.

Each assignment's ``result.Result`` is printed by ``format_result``, one screen: the score and
the status, the one explanation (homework/explain.py: root cause first; the exception's
message where there is none), then the tolerance (diagnose.TOLERANCE), one row per case and
tensor (each wrong one with its own diagnosis), the rubric's marks.
An assignment whose grade could not be computed has the score None ("not graded", with
its reason): the total is then None too (a JSON null: Gradescope reports the run as
failed, for the instructor to re-run, rather than a 0). A result graded without the
kernel's walls carries its ``confinement`` line, printed with it and kept in the JSON; its
``flags`` (a backward that calls its own forward) are printed as FLAG lines and kept in the
JSON's ``extra_data``.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

from .diagnose import tolerance_text


class OutError(Exception):
    """A folder of results that cannot be written as asked; the message names it (one line)."""


def printable(text) -> str:
    """``text`` on one line as it reads: newlines, terminal escapes and bidi overrides written as
    their escapes (a student's exception message or file name cannot forge a line of the report)."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in str(text))


def _num(x) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.2e}"


def header(width: int = 44) -> str:
    return f"   {'case · tensor':<{width}} {'shape':<16} {'max abs':>9} {'rel err':>9}  verdict"



def format_result(result) -> str:
    """One assignment (a result.Result): its score, the explanation, the tolerance, a header, one line
    per tensor (each wrong one with its diagnosis), then the rubric's checks."""
    score = "-" if result.score is None else f"{result.score:g}"
    lines = [f"== {result.id}: {score}/{result.max_score:g} ({result.status})"]
    explanation = getattr(result, "explanation", "")
    if explanation:
        lines.append(f"   WHAT TO FIX: {printable(explanation)}")
    elif result.message:
        lines.append(f"   {printable(result.message)}")
    if result.confinement:
        lines.append(f"   {printable(result.confinement)}")
    lines += [f"   FLAG (for the instructor): {printable(flag)}" for flag in result.flags]
    rows = result.rows
    if rows:
        width = min(max([44] + [len(r.name) for r in rows]), 80)
        lines += [f"   tolerance: {tolerance_text()}", header(width)]
    for r in rows:
        verdict = "OK" if r.ok else "NOT OK"
        line = (f"   {printable(r.name):<{width}} {printable(r.shape):<16} {_num(r.max_abs_error):>9} "
                f"{_num(r.rel_error):>9}  {verdict}")
        if r.diagnosis:
            line += f"   DIAGNOSIS: {printable(r.diagnosis)}"
        lines.append(line)
    if result.rubric:
        lines += ["   rubric (all or nothing per check; the numerical check is shown, not scored):"]
        lines += [f"   {mark_line(m)}" + (f"   ({m.note})" if m.note else "") for m in result.rubric]
    return "\n".join(lines)


def mark_line(mark) -> str:
    """A rubric check as the report shows it: "  ok    2.50/2.50  name" or "  FAIL  0.00/2.50  name"."""
    return f"  {'ok' if mark.passed else 'FAIL':<4} {mark.earned:5.2f}/{mark.points:<5.2f} {mark.name}"


def format_notes(notes: list, at_most: int = 8) -> str:
    """What of the submission was ignored, a line each (the first ``at_most``)."""
    lines = [f"ignored: {printable(n)}" for n in notes[:at_most]]
    if len(notes) > at_most:
        lines.append(f"ignored: ... and {len(notes) - at_most} more")
    return "\n".join(lines)


def total(results: list):
    """The sum of the scores, or None when an assignment was not graded."""
    scores = [r.score for r in results]
    return None if any(s is None for s in scores) else round(sum(scores), 2)


def summary(results: list) -> str:
    score, most = total(results), sum(r.max_score for r in results)
    if score is None:
        missed = [r.id for r in results if r.score is None]
        graded = sum(r.score for r in results if r.score is not None)
        return f"total not graded: {', '.join(missed)} could not be graded (re-run); the rest {graded:g}"
    return f"total {score:g}/{most:g}" + ("" if all_passed(results) else "  (not all passed)")


def all_passed(results: list) -> bool:
    return all(r.passed for r in results)


def gradescope(results: list, notes=(), execution_time: float | None = None) -> dict:
    """Gradescope's results.json: score, max_score, execution_time, output, visibility, tests."""
    report = {"score": total(results), "max_score": sum(r.max_score for r in results),
              "output": format_notes(list(notes)), "visibility": "visible",
              "tests": [{"name": r.id, "score": r.score, "max_score": r.max_score,
                         "output": format_result(r), "visibility": "visible"} for r in results]}
    missed = {r.id: r.message for r in results if r.score is None}
    confinement = sorted({r.confinement for r in results if r.confinement})
    flags = {r.id: list(r.flags) for r in results if r.flags}
    if flags:
        report.setdefault("extra_data", {})["flags"] = flags
    if missed or confinement:
        report.setdefault("extra_data", {}).update(
            {k: v for k, v in (("not_graded", missed), ("confinement", confinement)) if v})
        report["output"] = "\n".join(filter(None, [*confinement, *(f"NOT GRADED {k}: {v}" for k, v in
                                                                   missed.items()), report["output"]]))
    if execution_time is not None:
        report["execution_time"] = round(execution_time, 2)
    return report


def write_gradescope(path, results: list, notes=(), execution_time: float | None = None) -> None:
    """Written to a temporary name, then renamed: a reader never sees half a file."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(gradescope(results, notes, execution_time), f, indent=2)
            f.write("\n")
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)                   # nothing half-written left behind
        raise
