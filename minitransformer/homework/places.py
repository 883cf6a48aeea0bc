"""Where a staged line is in the student's own file: the report names the student's path, never a staging folder.

The grader runs the student's bodies inside a staged copy (homework/submission.py,
``mt-staged-...``), where each body sits at other line numbers than in the file the
student handed in. ``stage(..., places=Places(submission))`` records, for every staged
target, its body's lines in both files; then

    places.where(text)         "/tmp/mt-staged-x/minitransformer/functional/linear.py:57 in f"
                               -> Spot(path "sub/minitransformer/functional/linear.py", line 12,
                               function "f", the line's text), or None
    places.of(target)          the Spot of a target's def line ("module:qualname")
    places.scrub(text)         ``text`` with every staged path written as the student's

Copy side and parent side only: text and line numbers of the student's own file, no code.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

STAGED = re.compile(r"(?P<path>[^\s()'\"]*mt-staged-[^/\s]+/(?P<rel>[^\s:()'\"]+\.py))(?::(?P<line>\d+))?"
                    r"(?: in (?P<function>[\w.<>]+))?")


@dataclass(frozen=True)
class Spot:
    path: str                 # the student's path, as handed in
    line: int
    function: str = ""
    text: str = ""            # the line itself, stripped ("" when unknown)

    def __str__(self) -> str:
        return f"{self.path}:{self.line}" + (f" (in {self.function})" if self.function else "")


@dataclass
class _Body:
    target: str               # "module:qualname"
    staged_rel: str           # "minitransformer/functional/linear.py"
    staged_start: int         # 0-based index of the body's first line in the staged file
    staged_end: int
    path: str                 # the student's path
    start: int                # 0-based index of the body's first line in the student's file
    def_line: int             # 1-based
    lines: list = field(default_factory=list)   # the student's body lines


class Places:
    """The staged bodies of one submission and where each is in the student's files."""

    def __init__(self, submission=None):
        self.submission = Path(submission) if submission is not None else None
        self.bodies: list = []

    def add(self, target: str, staged_rel: str, staged_span: tuple, student_rel: str, student_span: tuple,
            def_line: int, lines: list) -> None:
        path = student_rel if self.submission is None else (self.submission / student_rel).as_posix()
        self.bodies.append(_Body(target, staged_rel, staged_span[0], staged_span[1], path, student_span[0],
                                 def_line, [ln.rstrip("\r\n") for ln in lines]))

    def at(self, staged_rel: str, line: int, function: str = "") -> Spot | None:
        """The student's spot of line ``line`` (1-based) of a staged file; None outside their bodies."""
        for b in self.bodies:
            if b.staged_rel == staged_rel and b.staged_start <= line - 1 < b.staged_end:
                k = line - 1 - b.staged_start
                text = _code_of(b.lines[k]) if k < len(b.lines) else ""
                return Spot(b.path, b.start + k + 1, function or b.target.split(":")[1], text)
        return None

    def where(self, text: str) -> Spot | None:
        """The student's spot of a staged place written as "PATH:LINE in FUNCTION"."""
        m = STAGED.search(text or "")
        if not m or not m.group("line"):
            return None
        return self.at(m.group("rel"), int(m.group("line")), m.group("function") or "")

    def of(self, target: str) -> Spot | None:
        """The def line of a staged target ("functional.linear:linear_backward") in the student's file."""
        for b in self.bodies:
            if b.target == target:
                return Spot(b.path, b.def_line, b.target.split(":")[1])
        return None

    def scrub(self, text: str) -> str:
        """``text`` with each staged place written as the student's (or as its package path)."""
        def one(m):
            spot = self.at(m.group("rel"), int(m.group("line"))) if m.group("line") else None
            if spot is not None:
                return f"{spot.path}:{spot.line}" + (f" in {m.group('function')}" if m.group("function") else "")
            return m.group("rel") + (f":{m.group('line')}" if m.group("line") else "") + \
                (f" in {m.group('function')}" if m.group("function") else "")
        return STAGED.sub(one, text or "")


def scrub(text: str, places: Places | None = None) -> str:
    """A staging folder never shown: ``places.scrub`` or, without places, the package's own path."""
    return (places or Places()).scrub(text)


def _code_of(line: str) -> str:
    """The line's code, stripped, without a comment after it (a ``#`` inside a string stays)."""
    import io
    import tokenize
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(line.strip() + "\n").readline))
    except (tokenize.TokenError, SyntaxError):
        return line.strip()
    comment = next((t for t in tokens if t.type == tokenize.COMMENT), None)
    return line.strip()[:comment.start[1]].rstrip() if comment else line.strip()
