"""The reference's side of grading: expected results computed here, from inputs drawn here.

Trusted side: this file draws the graded inputs from the seed (homework/cases.py) and
runs the catalogue's variants (homework/mistakes_*.py), so it is left out of every
student's copy and of the grader's child (homework/export.py, TRUSTED).

    Computed        evaluate.run's reference in the grader: each case drawn from the seed,
                    the reference's results and the catalogue's diagnoses computed here
    write_expected  at export, the public seed's numbers a student's copy checks itself
                    with (homework/expected.py reads them): per graded case one drawn
                    example (inputs, expected results, upstream gradient, a Module's
                    weights, every catalogue variant), and the records of the cases and of
                    the catalogue without their code
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .cases import CASES, reference_results, trial_inputs, upstream_for
from .evaluate import stem
from .expected import NAME, PUBLIC_SEED, plain
from .graded import REFERENCE, build_module, resolve, run_module, tolerance
from .mistakes import _variants, diagnose_all, entries
from .mistakes_match import name_of


def draw(graded, seed: int, index: int, example: int):
    """The case's inputs for (seed, case index, example): one SeedSequence per draw, so the 128-bit
    seed's bits all count and no two cases or examples share a stream."""
    return graded.draw(np.random.default_rng(np.random.SeedSequence([seed, index, example])))


class Computed:
    """The reference of this installation: inputs drawn from the seed, results computed here."""

    examples = None                   # as many as asked

    def case(self, graded, index: int, example: int, seed: int):
        """(case, reference results, upstream gradient, a Module's initial parameters or None)."""
        case = draw(graded, seed, index, example)
        if graded.check.checker != "module":
            ref, g = reference_results(graded, case, seed=seed + example)
            return case, ref, g, None
        module = build_module(resolve(REFERENCE, graded.check.forward), case, REFERENCE)
        state = {name: np.array(p, copy=True) for name, p, _ in module.parameters()}
        ref, g = run_module(module, case, g=lambda out: upstream_for(out, seed + example))
        return case, ref, g, state

    def diagnose(self, graded, index, example, case, g, student, ref) -> dict:
        return diagnose_all(graded.assignment, trial_inputs(graded, case, g), student, ref,
                            function=stem(graded), tol=tolerance(graded), factors=case.factors,
                            masked=case.masked)


# ------------------------------------------------------------------ the numbers a student's copy stores
def _entry(graded, index, arrays: dict) -> dict:
    """One drawn example of a case (the public seed's) into ``arrays``; its record."""
    case, ref, g, state = Computed().case(graded, index, 0, PUBLIC_SEED)
    key = f"{graded.assignment}/{index}"
    options = {k: v for k, v in case.kwargs.items() if not isinstance(v, np.ndarray)}
    for group, values in (("in", case.inputs), ("kw", {k: v for k, v in case.kwargs.items() if k not in options}),
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
    check = graded.check
    return {"name": graded.name, "check": {"checker": check.checker, "draw": check.draw, "forward": check.forward,
                                           "backward": check.backward, "options": plain(check.options)},
            "tensors": list(graded.tensors), "dtype": graded.dtype, "numerical": graded.numerical,
            "kwargs": plain(options), "wrt": list(case.wrt), "variants": sorted(cache),
            "factors": {k: list(v) for k, v in case.factors.items()},
            "groups": {group: [n for n in values] for group, values in
                       (("in", case.inputs), ("state", state or {}), ("masked", case.masked),
                        ("ref", {k: v for k, v in ref.items() if v is not None}))}}


def _catalogue(assignment_id: str) -> list:
    """The assignment's catalogue without its code: what each mistake is called, which tensors it
    shows in, its message, whether its variants are stored, and its predicate's name (a
    non-value mistake: homework/mistakes_match.py ships in the copy)."""
    return [{"function": m.function, "name": m.name, "tensors": list(m.tensors), "message": m.message,
             "variant": m.variant is not None, "match": name_of(m.match)} for m in entries(assignment_id)]


def write_expected(package_dir: Path, ids) -> None:
    """The public seed's expectations of the assignments ``ids`` into package_dir/homework/."""
    arrays, table = {}, {}
    for a in ids:
        table[a] = {"cases": [_entry(graded, i, arrays) for i, graded in enumerate(CASES[a])],
                    "catalogue": _catalogue(a)}
    folder = Path(package_dir) / "homework"
    np.savez_compressed(folder / f"{NAME}.npz", **arrays)
    (folder / f"{NAME}.json").write_text(json.dumps({"assignments": table}) + "\n", encoding="utf-8")
