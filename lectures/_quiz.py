"""The checked quizzes at the end of each lecture, with the answers stored as digests.

A question is three cells: the question (markdown), the student's answer
(``answer_3 = None  # your answer``) and a check:

    check("3", answer_3, "5d6b2bc7c9ad0e1d", digits=3, hint="softmax: exp(s_j) / Σ exp(s_i)")

The third argument is not the answer but its digest: the first 16 hex digits of the
SHA-256 of the answer written canonically (``canonical``). A student reading the
file sees no expected value; the check still tells right from wrong by writing the
student's answer the same way and comparing digests. (A digest hides an answer from
a glance, not from a search: whoever hashes every integer up to 1000 finds the
small ones. The tests compute every answer independently and check each digest.)

    answer None   "not answered yet" is printed and nothing is checked, unless the
                  environment variable MINITRANSFORMER_QUIZ_ANSWERS names a JSON file
                  {"3": answer, ...}: then that answer is checked in its place (the
                  tests do this with answers they compute from the library).
    a right one   "question 3: correct" is printed.
    a wrong one   AssertionError with the question, the answer given and the hint.

What counts as right: whole numbers exactly (8 and 8.0 alike); with ``digits=n`` a
number rounded to n significant digits, give or take one unit in the last of them
(so 0.468 and 0.4683 both answer 0.46831 at 3 digits, 0.47 does not); strings after
stripping and lowercasing ("B" answers "b"); True/False exactly; lists and tuples
element by element; sets as sets. ``summary()`` prints how many were answered right.
"""
from __future__ import annotations

import hashlib
import json
import math
import numbers
import os

ANSWERS_VARIABLE = "MINITRANSFORMER_QUIZ_ANSWERS"
DIGEST_LENGTH = 16
_tally = {"correct": 0, "missing": 0}


def canonical(value, digits: int | None = None) -> str:
    """The one way ``value`` is written before hashing (the rules in the module docstring)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, numbers.Number):
        x = float(value)
        if digits is None:
            return str(int(x)) if x.is_integer() else repr(x)
        return f"{x:.{digits - 1}e}"
    if isinstance(value, str):
        return value.strip().lower()
    if isinstance(value, (set, frozenset)):
        return "{" + ",".join(sorted(canonical(v, digits) for v in value)) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(canonical(v, digits) for v in value) + "]"
    raise TypeError(f"answer: expected a number, string, bool, list or set, got {type(value).__name__}")


def digest(value, digits: int | None = None) -> str:
    """The first 16 hex digits of sha256(canonical(value, digits)): what a check stores."""
    return hashlib.sha256(canonical(value, digits).encode("utf-8")).hexdigest()[:DIGEST_LENGTH]


def matches(answer, expected_digest: str, digits: int | None = None) -> bool:
    """Whether ``answer`` hashes to ``expected_digest``; with ``digits``, a number may be
    one unit off in its last significant digit (so no answer falls on the wrong side of
    a rounding boundary)."""
    try:
        if digest(answer, digits) == expected_digest:
            return True
    except TypeError:
        return False
    if digits is None or isinstance(answer, bool) or not isinstance(answer, numbers.Number) or answer == 0:
        return False
    unit = 10.0 ** (math.floor(math.log10(abs(float(answer)))) - digits + 1)
    return any(digest(float(answer) + step, digits) == expected_digest for step in (-unit, unit))


def _given_answer(question: str):
    """The answer to ``question`` in the JSON file named by MINITRANSFORMER_QUIZ_ANSWERS, or None."""
    path = os.environ.get(ANSWERS_VARIABLE)
    if not path:
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f).get(question)


def check(question: str, answer, expected_digest: str, hint: str = "", digits: int | None = None):
    """Check one answer against the stored digest; AssertionError naming the question and
    giving the hint when wrong. Returns True when checked and right, None when not answered."""
    if answer is None:
        answer = _given_answer(question)
    if answer is None:
        _tally["missing"] += 1
        print(f"question {question}: not answered yet (set answer_{question} above, then run this cell)")
        return None
    if not matches(answer, expected_digest, digits):
        raise AssertionError(f"question {question}: {answer!r} is not right. "
                             f"{'Hint: ' + hint if hint else 'Think again.'}")
    _tally["correct"] += 1
    print(f"question {question}: correct")
    return True


def summary() -> dict:
    """Print and return how many questions were answered right and how many are still open."""
    print(f"quiz: {_tally['correct']} correct, {_tally['missing']} not answered yet")
    return dict(_tally)
