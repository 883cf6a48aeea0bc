"""The checked quizzes at the end of each lecture.

A question is three cells: the question (markdown), the student's answer
(``answer_3 = None  # your answer``) and a check:

    check("3", answer_3, expected, hint="Var(q·k) grows like D")

    answer None   "not answered yet" is printed and nothing is checked, unless the
                  environment variable MINITRANSFORMER_QUIZ_SOLUTIONS=1 is set: then
                  the expected value is checked in its place (the tests do this, so
                  every check and every expected value runs in CI).
    a right one   "question 3: correct" is printed.
    a wrong one   AssertionError with the question, the answer given and the hint
                  (the expected value is not shown: the student should think again).

What counts as right: numbers within ``rel_tol`` (default 1e-6) of the expected
value, or within ``abs_tol``; strings equal after stripping and lowercasing
(so "B" answers "b"); True/False exactly; lists and tuples element by element;
sets as sets. ``summary()`` prints how many questions were answered right.
"""
from __future__ import annotations

import math
import numbers
import os

SOLUTIONS_VARIABLE = "MINITRANSFORMER_QUIZ_SOLUTIONS"
_tally = {"correct": 0, "missing": 0}


def solutions_enabled() -> bool:
    """True when MINITRANSFORMER_QUIZ_SOLUTIONS=1: unanswered questions use the expected value."""
    return os.environ.get(SOLUTIONS_VARIABLE) == "1"


def matches(answer, expected, rel_tol: float = 1e-6, abs_tol: float = 0.0) -> bool:
    """Whether ``answer`` counts as ``expected`` (the rules in the module docstring)."""
    if isinstance(expected, bool) or isinstance(answer, bool):
        return isinstance(answer, bool) and isinstance(expected, bool) and answer == expected
    if isinstance(expected, numbers.Number):
        if not isinstance(answer, numbers.Number):
            return False
        return math.isclose(float(answer), float(expected), rel_tol=rel_tol, abs_tol=abs_tol)
    if isinstance(expected, str):
        return isinstance(answer, str) and answer.strip().lower() == expected.strip().lower()
    if isinstance(expected, (set, frozenset)):
        return isinstance(answer, (set, frozenset, list, tuple)) and {
            a.strip().lower() if isinstance(a, str) else a for a in answer} == {
            e.strip().lower() if isinstance(e, str) else e for e in expected}
    if isinstance(expected, (list, tuple)):
        return (isinstance(answer, (list, tuple)) and len(answer) == len(expected)
                and all(matches(a, e, rel_tol, abs_tol) for a, e in zip(answer, expected)))
    return answer == expected


def check(question: str, answer, expected, hint: str = "", rel_tol: float = 1e-6, abs_tol: float = 0.0):
    """Check one answer; AssertionError naming the question and giving the hint when wrong.

    Returns True when checked and right, None when not answered (and no solutions).
    """
    if answer is None:
        if not solutions_enabled():
            _tally["missing"] += 1
            print(f"question {question}: not answered yet (set answer_{question} above, then run this cell)")
            return None
        answer = expected
    if not matches(answer, expected, rel_tol, abs_tol):
        raise AssertionError(f"question {question}: {answer!r} is not right. "
                             f"{'Hint: ' + hint if hint else 'Think again.'}")
    _tally["correct"] += 1
    print(f"question {question}: correct")
    return True


def summary() -> dict:
    """Print and return how many questions were answered right and how many are still open."""
    print(f"quiz: {_tally['correct']} correct, {_tally['missing']} not answered yet")
    return dict(_tally)
