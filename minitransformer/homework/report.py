"""What the grader prints, and the Gradescope autograder results.json."""
from __future__ import annotations

import json
import math
import os
from pathlib import Path


def printable(text) -> str:
    """``text`` on one line as it reads: newlines, terminal escapes and bidi overrides written as
    their escapes (a student's exception message or file name cannot forge a line of the report)."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in str(text))


def _num(x) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.2e}"


TOLERANCE = ("tolerance: relative error <= 1e-07 in float64, <= 0.0001 in float32, per tensor: "
             "max |yours - reference| / max(|yours|, |reference|)")


def header(width: int = 44) -> str:
    return f"   {'case · tensor':<{width}} {'shape':<16} {'max abs':>9} {'rel err':>9}  verdict"


HEADER = header()


def format_result(result: dict) -> str:
    """One assignment: its score, the tolerance, a header, one line per tensor (each wrong one
    with its diagnosis), then the rubric's checks."""
    lines = [f"== {result['id']}: {result['score']:g}/{result['max_score']} ({result['status']})"]
    if result.get("message"):
        lines.append(f"   {printable(result['message'])}")
    rows = result["rows"]
    if rows:
        width = min(max([44] + [len(r["name"]) for r in rows]), 80)
        lines += [f"   {result.get('tolerance', TOLERANCE)}", header(width)]
    for r in rows:
        verdict = "OK" if r["ok"] else "NOT OK"
        line = (f"   {printable(r['name']):<{width}} {printable(r['shape']):<16} {_num(r['max_abs_error']):>9} "
                f"{_num(r['rel_error']):>9}  {verdict}")
        if r.get("diagnosis"):
            line += f"   DIAGNOSIS: {printable(r['diagnosis'])}"
        lines.append(line)
    if result.get("rubric"):
        lines += ["   rubric (all or nothing per check; the numerical check is shown, not scored):"]
        lines += [f"   {line}" for line in result["rubric"]]
    return "\n".join(lines)


def format_notes(notes: list, at_most: int = 8) -> str:
    """What of the submission was ignored, a line each (the first ``at_most``)."""
    lines = [f"ignored: {printable(n)}" for n in notes[:at_most]]
    if len(notes) > at_most:
        lines.append(f"ignored: ... and {len(notes) - at_most} more")
    return "\n".join(lines)


def summary(results: list) -> str:
    score = sum(r["score"] for r in results)
    total = sum(r["max_score"] for r in results)
    return f"total {score:g}/{total}" + ("" if all_passed(results) else "  (not all passed)")


def all_passed(results: list) -> bool:
    return all(r["status"] == "ok" and r["score"] == r["max_score"] for r in results)


def gradescope(results: list, notes=(), execution_time: float | None = None) -> dict:
    """Gradescope's results.json: score, max_score, execution_time, output, visibility, tests."""
    report = {"score": round(sum(r["score"] for r in results), 2),
              "max_score": sum(r["max_score"] for r in results),
              "output": format_notes(list(notes)), "visibility": "visible",
              "tests": [{"name": r["id"], "score": r["score"], "max_score": r["max_score"],
                         "output": format_result(r), "visibility": "visible"} for r in results]}
    if execution_time is not None:
        report["execution_time"] = round(execution_time, 2)
    return report


def write_gradescope(path, results: list, notes=(), execution_time: float | None = None) -> None:
    """Written to a temporary name, then renamed: a reader never sees half a file."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(gradescope(results, notes, execution_time), f, indent=2)
        f.write("\n")
    os.replace(tmp, path)
