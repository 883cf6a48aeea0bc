"""sinusoidal: the position table PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(same)."""
from __future__ import annotations

import numpy as np

from ..assignment import Assignment, Mistake, cases, function
from ..graded import Case
from . import L4


# ------------------------------------------------------------------ the graded inputs
def draw(rng, odd=False) -> Case:
    d = 2 * int(rng.integers(2, 5)) + (1 if odd else 0)
    return Case({}, {"max_len": int(rng.integers(3, 12)), "d": d, "dtype": np.float64})


def draw_any(rng) -> Case:
    return Case({}, {"max_len": int(rng.integers(1, 12)), "d": int(rng.integers(1, 10)), "dtype": np.float64})


# ------------------------------------------------------------------ the catalogue
def _sinusoidal(inp, *, swap=False, exponent_i=False, halves=False, inverted=False):
    L, d = inp["max_len"], inp["d"]
    pos = np.arange(L)[:, None]
    i2 = np.arange(0, d, 2)
    angle = pos / 10000.0 ** ((i2 / 2 if exponent_i else i2) / d * (-1 if inverted else 1))
    sin, cos = (np.cos, np.sin) if swap else (np.sin, np.cos)
    PE = np.empty((L, d))
    if halves:
        h = (d + 1) // 2
        PE[:, :h], PE[:, h:] = sin(angle), cos(angle[:, : d // 2])
    else:
        PE[:, 0::2], PE[:, 1::2] = sin(angle), cos(angle[:, : d // 2])
    return {"out": PE}


MISTAKES = (
    Mistake("sinusoidal_table", "sinusoidal-sin-cos-swapped", ("out",),
            "sin and cos are swapped: PE[pos, 2i] = sin(...), PE[pos, 2i+1] = cos(...)",
            lambda inp: _sinusoidal(inp, swap=True)),
    Mistake("sinusoidal_table", "sinusoidal-exponent", ("out",),
            "the exponent uses i/d: the angle is pos / 10000^(2i/d), 2i the even column",
            lambda inp: _sinusoidal(inp, exponent_i=True)),
    Mistake("sinusoidal_table", "sinusoidal-halves", ("out",),
            "sin fills the first half and cos the second: the convention interleaves them, "
            "sin in the even columns 2i, cos in the odd ones 2i+1",
            lambda inp: _sinusoidal(inp, halves=True)),
    Mistake("sinusoidal_table", "sinusoidal-frequency-inverted", ("out",),
            "the angle is pos · 10000^(2i/d): it is pos / 10000^(2i/d) (the frequencies fall with i, "
            "from 1 down to 1/10000)",
            lambda inp: _sinusoidal(inp, inverted=True)),
)


ASSIGNMENT = Assignment(
    id="sinusoidal", title="Sinusoidal position table (forward only)", lecture=L4, points=3,
    targets=("functional.sinusoidal:sinusoidal_table",),
    cases=cases(function("functional.sinusoidal:sinusoidal_table"), ("out",),
                ("sinusoidal: even d", draw_any),
                ("sinusoidal: odd d", lambda rng: draw(rng, odd=True))),
    mistakes=MISTAKES,
)
