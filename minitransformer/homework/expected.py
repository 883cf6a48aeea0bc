"""The public seed's numbers, stored in a student's copy for its local check; the copy's mark.

A student's copy has no reference, no input drawer and no catalogue code: its
assignments' bodies are stubs, then the student's own code, and what computes or
draws graded values stays on the trusted side (homework/export.py, TRUSTED: the
assignments' files among it). So the export, which runs with the reference, stores for
the public seed 0 and each graded case one drawn example: the inputs, the reference's
results, the upstream gradient, a Module's weights, a lent function's table, and what
every catalogue mistake computes on those inputs (homework/reference.py,
``write_expected``); and in the copy's mark, the record of every assignment without its
code (assignment.Assignment.record: targets, points, needs, the cases' names and tensors,
the catalogue's messages and predicates' names, the handout's text). ``homework check .
ID`` run in the copy then checks the student's code the way the grader does
(homework/evaluate.py: the same cases, comparison, diagnoses, promises and rubric),
reading these numbers instead of computing them. Numbers and text only: no reference
code enters the copy. It is a local check, not a grade: the grader draws other inputs
from a secret seed.

    in_student_copy(package)  whether a package folder is a student's copy (its mark, MARKER)
    copy_records()            the copy's assignments, from its mark (registry.assignments() there)
    Stored()                  the reference evaluate.run takes in a student's copy
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np

from .graded import Case, Tabulated, tolerance

PUBLIC_SEED = 0
HERE = Path(__file__).resolve().parent
NAME = "expected"
MARKER = "copy.json"             # written by the export: a student's copy, and its assignments


def in_student_copy(package_dir: Path | None = None) -> bool:
    """Whether the package at ``package_dir`` (default: this one) is a student's copy."""
    folder = (Path(package_dir) / "homework") if package_dir else HERE
    return (folder / MARKER).is_file()


def copy_assignments(package_dir: Path | None = None) -> list:
    """The assignments a student's copy was exported with (its mark); [] elsewhere."""
    folder = (Path(package_dir) / "homework") if package_dir else HERE
    try:
        marker = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    found = marker.get("assignments") if isinstance(marker, dict) else None
    return [a for a in found if isinstance(a, str)] if isinstance(found, list) else []


def write_marker(package_dir: Path, ids, records: list) -> None:
    """Mark the package at ``package_dir`` as a student's copy of the assignments ``ids``; ``records``:
    every assignment of the course without its code (assignment.Assignment.record)."""
    marker = {"kind": "a student's copy (homework export): the grader never runs from it",
              "assignments": list(ids), "public_seed": PUBLIC_SEED, "records": records}
    (Path(package_dir) / "homework" / MARKER).write_text(json.dumps(marker, indent=1) + "\n", encoding="utf-8")


@lru_cache(maxsize=4)
def copy_records(folder: Path = HERE) -> tuple:
    """The assignments of the course as a student's copy holds them (its mark's records): no drawer,
    the variants' numbers stored, the predicates by name."""
    from .assignment import Assignment
    marker = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    return tuple(Assignment.from_record(r) for r in marker["records"])


# ------------------------------------------------------------------ JSON for the non-array options
def plain(value):
    """``value`` as JSON can hold it (dtypes and tuples tagged), for ``unplain``."""
    if isinstance(value, type) and issubclass(value, np.generic):
        return {"__dtype__": np.dtype(value).name}
    if isinstance(value, tuple):
        return {"__tuple__": [plain(v) for v in value]}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.random.Generator):
        return {"__generator__": type(value.bit_generator).__name__, "state": plain(value.bit_generator.state)}
    return value


def unplain(value):
    if isinstance(value, dict) and "__dtype__" in value:
        return np.dtype(value["__dtype__"]).type
    if isinstance(value, dict) and "__generator__" in value:
        generator = getattr(np.random, value["__generator__"])()
        generator.state = unplain(value["state"])
        return np.random.Generator(generator)
    if isinstance(value, dict) and "__tuple__" in value:
        return tuple(unplain(v) for v in value["__tuple__"])
    if isinstance(value, dict):
        return {k: unplain(v) for k, v in value.items()}
    return value


# ------------------------------------------------------------------ the records, read in a copy
@lru_cache(maxsize=4)
def _table(folder: Path = HERE) -> dict:
    data = json.loads((folder / f"{NAME}.json").read_text(encoding="utf-8"))
    return data["assignments"]


class Stored:
    """evaluate.run's reference in a student's copy: the stored example of each case."""

    examples = 1

    def __init__(self, folder: Path = HERE):
        self.table = _table(folder)
        self.arrays = np.load(folder / f"{NAME}.npz", allow_pickle=False)

    def has(self, assignment_id: str) -> bool:
        return assignment_id in self.table

    def _group(self, key, group, names) -> dict:
        return {n: self.arrays[f"{key}/{group}/{n}"] for n in names}

    def case(self, graded, index, example, seed):
        """The stored example of the case, as evaluate.Drawn."""
        from .evaluate import Drawn
        entry, key = self.table[graded.assignment]["cases"][index], f"{graded.assignment}/{index}"
        if entry["name"] != graded.name:
            raise KeyError(f"the stored expectations do not match the graded case {graded.name!r}: "
                           "export the copy again")
        kwargs = unplain(entry["kwargs"])
        kwargs.update({k[len(key) + 4:]: self.arrays[k] for k in self.arrays.files if k.startswith(f"{key}/kw/")})
        kwargs.update({name: Tabulated(self.arrays[f"{key}/fn/{name}/points"], self.arrays[f"{key}/fn/{name}/values"],
                                       step) for name, step in entry.get("functions", {}).items()})
        groups = entry["groups"]
        case = Case(self._group(key, "in", groups["in"]), kwargs, wrt=tuple(entry["wrt"]),
                    factors={k: tuple(v) for k, v in entry["factors"].items()},
                    masked=self._group(key, "masked", groups["masked"]))
        ref = self._group(key, "ref", groups["ref"])
        g = self.arrays[f"{key}/g"] if f"{key}/g" in self.arrays.files else None
        state = self._group(key, "state", groups["state"]) if groups["state"] else None
        return Drawn(case, ref, g, state)

    def diagnose(self, graded, index, example, drawn, student) -> dict:
        from .evaluate import stem
        from .mistakes import diagnose_all
        case, g, ref = drawn.case, drawn.upstream, drawn.expected
        key, entry = f"{graded.assignment}/{index}", self.table[graded.assignment]["cases"][index]
        variants = {name: {} for name in entry["variants"]}
        prefix = f"{key}/var/"
        for k in self.arrays.files:
            if k.startswith(prefix):
                name, tensor = k[len(prefix):].split("/", 1)
                variants.setdefault(name, {})[tensor] = self.arrays[k]
        inputs = dict(case.inputs, **{k: v for k, v in case.kwargs.items() if k not in ("ctor", "spec")},
                      upstream=g)
        return diagnose_all(graded.assignment, inputs, student, ref, function=stem(graded),
                            tol=tolerance(graded), factors=case.factors, masked=case.masked, variants=variants)
