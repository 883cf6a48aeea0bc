"""The public seed's numbers, stored in a student's copy for its local check; the copy's mark.

A student's copy has no reference, no input drawer and no catalogue code: its
assignments' bodies are stubs, then the student's own code, and what computes or
draws graded values stays on the trusted side (homework/export.py, TRUSTED). So the
export, which runs with the reference, stores for the public seed 0 and each graded
case one drawn example: the inputs, the reference's results, the upstream gradient, a
Module's weights, and what every catalogue mistake computes on those inputs
(homework/reference.py, ``write_expected``); with them, the records of the cases and
of the catalogue without their code. ``homework check . ID`` run in the copy then
checks the student's code the way the grader does (homework/evaluate.py: the same
cases, comparison, diagnoses, promises and rubric), reading these numbers instead of
computing them. Numbers only: no reference code enters the copy. It is a local check,
not a grade: the grader draws other inputs from a secret seed.

    in_student_copy(package)  whether a package folder is a student's copy (its mark, MARKER)
    Stored()                  the reference evaluate.run takes in a student's copy
    stored_cases()            the copy's graded cases (graded.GradedCase, no drawer)
    stored_catalogue()        the copy's catalogue (mistakes.Mistake: stored variants, predicates)
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np

from .graded import Case, GradedCase, tolerance

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


def write_marker(package_dir: Path, ids) -> None:
    """Mark the package at ``package_dir`` as a student's copy of the assignments ``ids``."""
    marker = {"kind": "a student's copy (homework export): the grader never runs from it",
              "assignments": list(ids), "public_seed": PUBLIC_SEED}
    (Path(package_dir) / "homework" / MARKER).write_text(json.dumps(marker, indent=1) + "\n", encoding="utf-8")


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
    return value


def unplain(value):
    if isinstance(value, dict) and "__dtype__" in value:
        return np.dtype(value["__dtype__"]).type
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


@lru_cache(maxsize=4)
def stored_cases(folder: Path = HERE) -> dict:
    """assignment id -> its GradedCases as the copy stores them (``draw`` None)."""
    from .assignments import Check
    table = {}
    for a, stored in _table(folder).items():
        table[a] = tuple(GradedCase(a, c["name"], Check(**dict(c["check"], options=unplain(c["check"]["options"]))),
                                    None, tuple(c["tensors"]), c["dtype"], c["numerical"]) for c in stored["cases"])
    return table


def stored_catalogue(folder: Path = HERE) -> tuple:
    """The catalogue as the copy stores it: each entry's variants are stored numbers (Stored.diagnose
    hands them over), its predicate one of mistakes_match.MATCHES."""
    from .mistakes import Mistake
    from .mistakes_match import MATCHES
    found = []
    for a, stored in _table(folder).items():
        for m in stored["catalogue"]:
            found.append(Mistake(a, m["function"], m["name"], tuple(m["tensors"]), m["message"],
                                 variant=_not_stored if m["variant"] else None, match=MATCHES.get(m["match"])))
    return tuple(found)


def _not_stored(inputs) -> dict:
    """A variant whose numbers the copy does not hold for these inputs: it explains nothing."""
    return {}


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
        entry, key = self.table[graded.assignment]["cases"][index], f"{graded.assignment}/{index}"
        if entry["name"] != graded.name:
            raise KeyError(f"the stored expectations do not match the graded case {graded.name!r}: "
                           "export the copy again")
        kwargs = unplain(entry["kwargs"])
        kwargs.update({k[len(key) + 4:]: self.arrays[k] for k in self.arrays.files if k.startswith(f"{key}/kw/")})
        groups = entry["groups"]
        case = Case(self._group(key, "in", groups["in"]), kwargs, wrt=tuple(entry["wrt"]),
                    factors={k: tuple(v) for k, v in entry["factors"].items()},
                    masked=self._group(key, "masked", groups["masked"]))
        ref = self._group(key, "ref", groups["ref"])
        g = self.arrays[f"{key}/g"] if f"{key}/g" in self.arrays.files else None
        state = self._group(key, "state", groups["state"]) if groups["state"] else None
        return case, ref, g, state

    def diagnose(self, graded, index, example, case, g, student, ref) -> dict:
        from .evaluate import stem
        from .mistakes import diagnose_all
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
