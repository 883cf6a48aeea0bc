"""What the grader prints, and the Gradescope autograder results.json."""
from __future__ import annotations

import json
import math


def _num(x) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.2e}"


def format_result(result: dict) -> str:
    """One assignment: a header line, then one line per tensor, each with its diagnosis."""
    lines = [f"== {result['id']}: {result['score']:g}/{result['max_score']} ({result['status']})"]
    if result.get("message"):
        lines.append(f"   {result['message']}")
    for r in result["rows"]:
        verdict = "OK" if r["ok"] else "NOT OK"
        line = (f"   {r['name']:<44} {r['shape']:<16} {_num(r['max_abs_error']):>9} "
                f"{_num(r['rel_error']):>9}  {verdict}")
        if r.get("diagnosis"):
            line += f"   DIAGNOSIS: {r['diagnosis']}"
        lines.append(line)
    return "\n".join(lines)


HEADER = f"   {'tensor':<44} {'shape':<16} {'max abs':>9} {'rel err':>9}  verdict"


def summary(results: list) -> str:
    score = sum(r["score"] for r in results)
    total = sum(r["max_score"] for r in results)
    return f"total {score:g}/{total}" + ("" if all_passed(results) else "  (not all passed)")


def all_passed(results: list) -> bool:
    return all(r["status"] == "ok" and r["score"] == r["max_score"] for r in results)


def gradescope(results: list) -> dict:
    """{"score", "max_score", "tests": [{"name", "score", "max_score", "output"}]}."""
    return {"score": round(sum(r["score"] for r in results), 2),
            "max_score": sum(r["max_score"] for r in results),
            "tests": [{"name": r["id"], "score": r["score"], "max_score": r["max_score"],
                       "output": format_result(r)} for r in results]}


def write_gradescope(path, results: list) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(gradescope(results), f, indent=2)
        f.write("\n")
