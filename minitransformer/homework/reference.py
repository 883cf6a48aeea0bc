"""The reference's side of grading: expected results computed here, from inputs drawn here.

Trusted side: this file draws the graded inputs from the seed (the assignments' drawers)
and runs the catalogue's variants (homework/assignments/), so it is left out of every
student's copy and of the grader's child (homework/export.py, TRUSTED).

    draw            a case's inputs for (seed, case index, example)
    upstream_for    the random upstream gradient of a result, drawn from the seed
    reference_results, trial_inputs    the reference on a drawn case; a variant's inputs
    Computed        evaluate.run's reference in the grader: each case drawn from the seed,
                    the reference's results and the catalogue's diagnoses computed here
    write_expected  at export, the public seed's numbers a student's copy checks itself
                    with (homework/expected.py reads them): per graded case one drawn
                    example (inputs, expected results, upstream gradient, a Module's
                    weights, a lent function's table, every catalogue variant)
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .evaluate import Drawn, stem
from .expected import NAME, PUBLIC_SEED, plain
from .graded import REFERENCE, Case, KnownFunction, build_module, resolve, run_module, run_pair, tolerance
from .mistakes import _variants, diagnose_all, entries
from .registry import get


def draw(graded, seed: int, index: int, example: int) -> Case:
    """The case's inputs for (seed, case index, example): one SeedSequence per draw, so the 128-bit
    seed's bits all count and no two cases or examples share a stream."""
    return graded.draw(np.random.default_rng(np.random.SeedSequence([seed, index, example])))


def upstream_for(out, seed: int = 0):
    """The random upstream gradient of a result (never all ones), in its dtype; 0-d for a loss."""
    g = np.random.default_rng(np.random.SeedSequence([seed, 7])).standard_normal(np.shape(out))
    return g.astype(np.asarray(out).dtype)


def _copies(inputs: dict) -> dict:
    return {k: np.array(v, copy=True) for k, v in inputs.items()}


def reference_results(graded, case: Case, seed: int = 0, package: str | None = None):
    """The reference's results on a drawn case, and the upstream gradient (None for a function): the
    case's own ``expect`` where it has one (a result the grader knows otherwise), else the reference
    functions run on copies of its inputs."""
    package = package or REFERENCE
    check = graded.check
    if graded.expect is not None:
        return graded.expect(case), None
    upstream = lambda out: upstream_for(out, seed)                # noqa: E731  (drawn from the output's shape)
    if check.checker == "module":
        return run_module(build_module(resolve(package, check.forward), case, package), case, g=upstream)
    forward = resolve(package, check.forward)
    if check.backward is None:
        return {"out": forward(**_copies(case.inputs), **case.kwargs)}, None
    return run_pair(case, forward, resolve(package, check.backward), g=upstream)


def trial_inputs(graded, case: Case, g, package: str | None = None) -> dict:
    """What a variant is given (homework/mistakes.py): the forward's arguments by name (arrays and
    options), ``upstream`` (the gradient given to backward), and for a Module ``build`` (a
    zero-argument function returning the reference Module with the case's weights) and
    ``forward_inputs``."""
    inputs = dict(case.inputs, **{k: v for k, v in case.kwargs.items() if k not in ("ctor", "spec")})
    inputs["upstream"] = g
    if graded.check.checker == "module":
        package = package or REFERENCE
        cls = resolve(package, graded.check.forward)
        inputs["build"] = lambda: build_module(cls, case, package)
        inputs["forward_inputs"] = dict(case.inputs)
    return inputs


class Computed:
    """The reference of this installation: inputs drawn from the seed, results computed here."""

    examples = None                   # as many as asked

    def case(self, graded, index: int, example: int, seed: int) -> Drawn:
        case = draw(graded, seed, index, example)
        if graded.check.checker != "module":
            expected, g = reference_results(graded, case, seed=seed + example)
            return Drawn(case, expected, g)
        module = build_module(resolve(REFERENCE, graded.check.forward), case, REFERENCE)
        state = {name: np.array(p, copy=True) for name, p, _ in module.parameters()}
        expected, g = run_module(module, case, g=lambda out: upstream_for(out, seed + example))
        return Drawn(case, expected, g, state)

    def diagnose(self, graded, index, example, drawn: Drawn, student) -> dict:
        case = drawn.case
        return diagnose_all(graded.assignment, trial_inputs(graded, case, drawn.upstream), student,
                            drawn.expected, function=stem(graded), tol=tolerance(graded), factors=case.factors,
                            masked=case.masked)


# ------------------------------------------------------------------ the numbers a student's copy stores
def _entry(graded, index, arrays: dict) -> dict:
    """One drawn example of a case (the public seed's) into ``arrays``; its record."""
    drawn = Computed().case(graded, index, 0, PUBLIC_SEED)
    case, key = drawn.case, f"{graded.assignment}/{index}"
    lent = {k: v for k, v in case.kwargs.items() if isinstance(v, KnownFunction)}
    options = {k: v for k, v in case.kwargs.items() if not isinstance(v, np.ndarray) and k not in lent}
    tables = {name: fn.tabulated() for name, fn in lent.items()}
    expected = {k: v for k, v in drawn.expected.items() if v is not None}
    for group, values in (("in", case.inputs), ("kw", {k: v for k, v in case.kwargs.items()
                                                      if k not in options and k not in lent}),
                          ("ref", expected), ("state", drawn.state or {}), ("masked", case.masked)):
        for name, value in values.items():
            arrays[f"{key}/{group}/{name}"] = np.asarray(value)
    for name, table in tables.items():
        arrays[f"{key}/fn/{name}/points"], arrays[f"{key}/fn/{name}/values"] = table.points, table.values
    if drawn.upstream is not None:
        arrays[f"{key}/g"] = np.asarray(drawn.upstream)
    cache: dict = {}
    inputs = trial_inputs(graded, case, drawn.upstream)
    for mistake in entries(graded.assignment, stem(graded)):
        if mistake.variant is not None:
            for tensor, value in _variants(mistake, inputs, cache).items():
                if value is not None:
                    arrays[f"{key}/var/{mistake.name}/{tensor}"] = np.asarray(value)
    return {"name": graded.name, "kwargs": plain(options), "wrt": list(case.wrt), "variants": sorted(cache),
            "factors": {k: list(v) for k, v in case.factors.items()},
            "functions": {name: table.step for name, table in tables.items()},
            "groups": {group: [n for n in values] for group, values in
                       (("in", case.inputs), ("state", drawn.state or {}), ("masked", case.masked),
                        ("ref", expected))}}


def write_expected(package_dir: Path, ids) -> None:
    """The public seed's expectations of the assignments ``ids`` into package_dir/homework/."""
    arrays, table = {}, {}
    for a in ids:
        table[a] = {"cases": [_entry(graded, i, arrays) for i, graded in enumerate(get(a).cases)]}
    folder = Path(package_dir) / "homework"
    np.savez_compressed(folder / f"{NAME}.npz", **arrays)
    (folder / f"{NAME}.json").write_text(json.dumps({"assignments": table}) + "\n", encoding="utf-8")
