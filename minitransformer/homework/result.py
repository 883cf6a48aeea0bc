"""What grading one assignment gives, typed: a ``Result`` (score, status, rows, the rubric's marks).

    Result     one assignment of one submission: its score (None: not graded), its status, the
               message, the table's rows (diagnose.Row), the rubric's marks, the seconds it took,
               how it was confined, the one explanation a student reads first, its flags (what the
               instructor should read: a backward that calls its own forward, i.e. differentiates it
               instead of being derived)
    Mark       one check of the rubric: its name, its points, passed or not
    STATUSES   what a status may be

homework/evaluate.py makes a Result from the graded cases, homework/grade.py one for what
could not be graded (a timeout, a crash, the grader's own failure), homework/report.py prints
it and writes Gradescope's JSON, homework/classroom.py puts it in the gradebook. Nothing reads
a status or a pass back from text.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from .diagnose import Row

OK, FAIL, EXCEPTION, NOT_IMPLEMENTED = "ok", "fail", "exception", "not implemented"
TIMEOUT, CRASHED, NOT_GRADED = "timeout", "crashed", "not graded"
STATUSES = (OK, FAIL, EXCEPTION, NOT_IMPLEMENTED, TIMEOUT, CRASHED, NOT_GRADED)


@dataclass(frozen=True)
class Mark:
    name: str                      # the rubric's check, as the report shows it
    points: float                  # what it is worth
    passed: bool
    note: str = ""                 # why a right answer did not count (a trivial case alone)

    @property
    def earned(self) -> float:
        return self.points if self.passed else 0.0


@dataclass
class Result:
    id: str                        # the assignment
    max_score: float
    score: float | None            # None: not graded (the grader could not compute a grade)
    status: str                    # one of STATUSES
    message: str = ""              # the first exception, the timeout, why it was not graded ...
    rows: list = field(default_factory=list)      # diagnose.Row: one per case and tensor
    rubric: list = field(default_factory=list)    # Mark: one per check of the rubric
    seconds: float | None = None
    confinement: str = ""          # "graded unconfined: no ..." where a wall was missing
    explanation: str = ""          # the one explanation, root cause first (homework/explain.py)
    flags: list = field(default_factory=list)     # for the instructor: a backward that calls its own forward

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"status: expected one of {', '.join(STATUSES)}, got {self.status!r}")

    @property
    def passed(self) -> bool:
        """Full marks, every check passed."""
        return self.status == OK and self.score == self.max_score

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Result":
        return cls(**dict(d, rows=[Row(**r) for r in d.get("rows", [])],
                          rubric=[Mark(**m) for m in d.get("rubric", [])]))
