"""Drawers several assignments share: small random shapes, each from the generator it is given.

A drawer takes a ``numpy.random.Generator`` (seeded by the grader from the grading seed,
case and example) and returns a ``graded.Case``. Trusted: replayed with guessed seeds, a
drawer finds the seed.
"""
from __future__ import annotations

from dataclasses import replace

from ..graded import Case


def shape_bct(rng) -> tuple:
    """(B, T, C): B in 1..3, T in 1..4, C in 2..6."""
    return int(rng.integers(1, 4)), int(rng.integers(1, 5)), int(rng.integers(2, 7))


def bct(rng, **options) -> Case:
    """x (B, T, C) standard normal; ``options`` are the forward's keyword arguments."""
    return Case({"x": rng.standard_normal(shape_bct(rng))}, dict(options))


def scores(rng) -> Case:
    """x (B, T, n) with a spread of 3: softmax rows that are neither flat nor one-hot."""
    return Case({"x": 3 * rng.standard_normal(shape_bct(rng))})


def bhtd(rng) -> Case:
    """x (B, H, T, D), D even, and an offset."""
    B, H, T = int(rng.integers(1, 3)), int(rng.integers(1, 3)), int(rng.integers(1, 5))
    D = 2 * int(rng.integers(1, 4))
    return Case({"x": rng.standard_normal((B, H, T, D))}, {"offset": int(rng.integers(0, 4))})


def small_rows(draw):
    """``draw`` with some rows scaled by 1e-3: their variance (~1e-6) is near eps, where eps's place shows."""
    def drawn(rng):
        case = draw(rng)
        x = case.inputs["x"].copy()
        x[..., ::2, :] *= 1e-3
        return replace(case, inputs=dict(case.inputs, x=x))
    return drawn


def module_input(rng, B, T, C=8):
    return rng.standard_normal((B, T, C))


LEADING = ((5,), (2, 2, 3), (2, 1, 2, 3))    # x (N, C), (A, B, T, C), (A, B, T, U, C): not the usual (B, T, C)


def any_leading(draw):
    """``draw`` with x redrawn with 1, 3 or 4 leading axes (its last axis kept): a function whose
    docstring allows any leading axes must reduce over all of them (a parameter's gradient summed
    over axes (0, 1) is right only on (B, T, C))."""
    def drawn(rng):
        case = draw(rng)
        lead = LEADING[int(rng.integers(0, len(LEADING)))]
        x = rng.standard_normal(lead + case.inputs["x"].shape[-1:])
        return replace(case, inputs=dict(case.inputs, x=x))
    return drawn
