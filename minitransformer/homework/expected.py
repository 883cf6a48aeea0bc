"""The public seed's expected results, stored in a student's copy for the local check.

A student's copy has no reference: its assignments' bodies are stubs, then the
student's own code. So the export, which runs with the reference, stores for the
public seed 0 and each graded case (homework/cases.py) one drawn example: the
inputs, the reference's results, the upstream gradient, a Module's weights, and
every catalogue variant of the case (homework/mistakes.py: what each known mistake
computes on those inputs). ``homework check . ID`` run in the copy then grades the
student's code exactly as the grader does (homework/evaluate.py: the same cases,
comparison, diagnoses, promises and rubric), reading these instead of computing
them. Numbers only: no reference code enters the copy.

    write(package_dir, ids)     at export, into package_dir/homework/expected.npz + .json
    in_student_copy(package)    whether a package folder is such a copy (it has the file)
    Stored()                    the reference evaluate.run takes in a student's copy
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .cases import CASES, tolerance, trial_inputs
from .checks import Case
from .mistakes import _variants, diagnose_all, entries

PUBLIC_SEED = 0
HERE = Path(__file__).resolve().parent
NAME = "expected"


def in_student_copy(package_dir: Path | None = None) -> bool:
    folder = (Path(package_dir) / "homework") if package_dir else HERE
    return (folder / f"{NAME}.npz").is_file()


# ------------------------------------------------------------------ JSON for the non-array options
def _plain(value):
    if isinstance(value, type) and issubclass(value, np.generic):
        return {"__dtype__": np.dtype(value).name}
    if isinstance(value, tuple):
        return {"__tuple__": [_plain(v) for v in value]}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, np.generic):
        return value.item()
    return value


def _unplain(value):
    if isinstance(value, dict) and "__dtype__" in value:
        return np.dtype(value["__dtype__"]).type
    if isinstance(value, dict) and "__tuple__" in value:
        return tuple(_unplain(v) for v in value["__tuple__"])
    if isinstance(value, dict):
        return {k: _unplain(v) for k, v in value.items()}
    return value


# ------------------------------------------------------------------ written at export
def _entry(graded, index, arrays: dict) -> dict:
    from .evaluate import Computed, stem
    case, ref, g, state = Computed().case(graded, index, 0, PUBLIC_SEED)
    key = f"{graded.assignment}/{index}"
    plain = {k: v for k, v in case.kwargs.items() if not isinstance(v, np.ndarray)}
    for group, values in (("in", case.inputs), ("kw", {k: v for k, v in case.kwargs.items() if k not in plain}),
                          ("ref", {k: v for k, v in ref.items() if v is not None}), ("state", state or {}),
                          ("masked", case.masked)):
        for name, value in values.items():
            arrays[f"{key}/{group}/{name}"] = np.asarray(value)
    if g is not None:
        arrays[f"{key}/g"] = np.asarray(g)
    cache: dict = {}
    inputs = trial_inputs(graded, case, g)
    for mistake in entries(graded.assignment, stem(graded)):
        if mistake.variant is not None:
            for tensor, value in _variants(mistake, inputs, cache).items():
                if value is not None:
                    arrays[f"{key}/var/{mistake.name}/{tensor}"] = np.asarray(value)
    return {"name": graded.name, "kwargs": _plain(plain), "wrt": list(case.wrt), "variants": sorted(cache),
            "factors": {k: list(v) for k, v in case.factors.items()},
            "groups": {group: [n for n in values] for group, values in
                       (("in", case.inputs), ("state", state or {}), ("masked", case.masked),
                        ("ref", {k: v for k, v in ref.items() if v is not None}))}}


def write(package_dir: Path, ids) -> None:
    """The public seed's expectations of the assignments ``ids`` into the copy's package folder."""
    arrays, table = {}, {}
    for a in ids:
        table[a] = [_entry(graded, i, arrays) for i, graded in enumerate(CASES[a])]
    folder = Path(package_dir) / "homework"
    np.savez_compressed(folder / f"{NAME}.npz", **arrays)
    (folder / f"{NAME}.json").write_text(json.dumps(table) + "\n", encoding="utf-8")


# ------------------------------------------------------------------ read in a student's copy
class Stored:
    """evaluate.run's reference in a student's copy: the stored example of each case."""

    examples = 1

    def __init__(self, folder: Path = HERE):
        self.table = json.loads((folder / f"{NAME}.json").read_text(encoding="utf-8"))
        self.arrays = np.load(folder / f"{NAME}.npz", allow_pickle=False)

    def has(self, assignment_id: str) -> bool:
        return assignment_id in self.table

    def _group(self, key, group, names) -> dict:
        return {n: self.arrays[f"{key}/{group}/{n}"] for n in names}

    def case(self, graded, index, example, seed):
        entry, key = self.table[graded.assignment][index], f"{graded.assignment}/{index}"
        if entry["name"] != graded.name:
            raise KeyError(f"the stored expectations do not match the graded case {graded.name!r}: "
                           "export the copy again")
        kwargs = _unplain(entry["kwargs"])
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
        key, entry = f"{graded.assignment}/{index}", self.table[graded.assignment][index]
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
