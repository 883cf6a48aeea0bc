"""The course: which assignments exist, in which order, and what each builds on.

In the grader every file of homework/assignments/ (and of any folder added to ``FOLDERS``)
that declares an ``ASSIGNMENT`` is one (homework/assignment.py); a file whose name starts
with "_" holds helpers. They come in the order of ``assignments.ORDER``, then the others by
id. In a student's copy, which holds none of those files (they are trusted: drawers and
the catalogue's variants), the same assignments come from the records in the copy's mark
(homework/expected.py), without their code.

    assignments()        every assignment, in the course's order
    get(id)              one (a KeyError is a bug: a user's ids go through select)
    select(ids)          the assignments named ("all" or none: every one), in the course's order;
                         UnknownAssignment (a user's error) names the ids that are not there
    needed(a)            every assignment ``a`` builds on, directly or through another
    grading_order(list)  each assignment after those it needs
    case_table()         id -> its graded cases; find_case(name): one case by its name
"""
from __future__ import annotations

import importlib
import importlib.util
from functools import lru_cache
from pathlib import Path

HERE = Path(__file__).resolve().parent
PACKAGE = __name__.rsplit(".", 1)[0]               # this package's homework: "minitransformer.homework"
# The folders whose files are assignments. A course may add its own (a file there imports as the
# built-in ones do: ``from ..assignment import ...``); the first folder is the package's own.
FOLDERS = [HERE / "assignments"]


class UnknownAssignment(Exception):
    """An assignment id that this course does not have: the user's error, said in one line."""


def assignments() -> tuple:
    """Every assignment, in the course's order: its files in the grader, the records of the copy's
    mark in a student's copy."""
    from .expected import copy_records, in_student_copy
    if in_student_copy():
        return copy_records()
    return _discovered(tuple(Path(f) for f in FOLDERS))


@lru_cache(maxsize=4)
def _discovered(folders: tuple) -> tuple:
    found = {}
    for folder in folders:
        for path in sorted(folder.glob("*.py")):
            if path.name.startswith("_"):
                continue
            assignment = getattr(_load(folder, path), "ASSIGNMENT", None)
            if assignment is None:
                continue
            if assignment.id in found:
                raise ValueError(f"two assignments have the id {assignment.id!r} (the second in {path})")
            found[assignment.id] = assignment
    order = importlib.import_module(f"{PACKAGE}.assignments").ORDER
    rank = {a: i for i, a in enumerate(order)}
    return tuple(sorted(found.values(), key=lambda a: (rank.get(a.id, len(rank)), a.id)))


def _load(folder: Path, path: Path):
    """The module of an assignment file: one of the package's own, or a file of an added folder,
    loaded as a module of the package's assignments (so its relative imports work the same)."""
    name = f"{PACKAGE}.assignments.{path.stem}"
    if folder.resolve() == FOLDERS[0].resolve():
        return importlib.import_module(name)
    import sys
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def by_id() -> dict:
    return {a.id: a for a in assignments()}


def get(assignment_id: str):
    """The assignment ``assignment_id``; a KeyError is the grader's bug (a user's ids go through
    ``select``, which says which are unknown)."""
    return by_id()[assignment_id]


def select(ids) -> list:
    """The assignments named in ``ids`` ("all" or none = every one), in the course's order;
    UnknownAssignment names the unknown ids."""
    ids, every = list(ids), list(assignments())
    if not ids or "all" in ids:
        return every
    known = [a.id for a in every]
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise UnknownAssignment(f"unknown assignment(s) {', '.join(unknown)}; known: {', '.join(known)}")
    return [a for a in every if a.id in ids]


def needed(assignment) -> list:
    """Every assignment ``assignment`` builds on, directly or through another, in the course's order."""
    found: set = set()
    stack = list(assignment.needs)
    while stack:
        a = stack.pop()
        if a not in found:
            found.add(a)
            stack.extend(get(a).needs)
    return [a for a in assignments() if a.id in found]


def grading_order(chosen) -> list:
    """``chosen`` with each assignment after those it needs: the reference of a needed assignment
    enters the student's process only once that assignment is graded."""
    order: list = []

    def visit(a):
        if a in order:
            return
        for b in needed(a):
            if b in chosen:
                visit(b)
        order.append(a)
    for a in chosen:
        visit(a)
    return order


def case_table() -> dict:
    """assignment id -> its GradedCases, the main case first."""
    return {a.id: a.cases for a in assignments()}


def find_case(name: str):
    """The graded case named ``name``, of any assignment."""
    for a in assignments():
        for case in a.cases:
            if case.name == name:
                return case
    raise LookupError(f"no graded case named {name!r}")
