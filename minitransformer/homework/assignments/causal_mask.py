"""causal_mask: True where query i may attend key j (j <= i), the T queries the last T of S positions."""
from __future__ import annotations

import numpy as np

from ..assignment import Assignment, Mistake, cases, function
from ..graded import Case
from . import L2


# ------------------------------------------------------------------ the graded inputs
def draw(rng, extra_keys=False) -> Case:
    T = int(rng.integers(2, 6))
    return Case({}, {"T": T, "S": T + (2 if extra_keys else 0)})   # S - T = 2: not an off-by-one


# ------------------------------------------------------------------ the catalogue
def _causal(inp, shift=0, left=False, upper=False):
    T = inp["T"]
    S = T if inp.get("S") is None else inp["S"]
    i = np.arange(T)[:, None] + (0 if left else S - T)
    j = np.arange(S)[None, :]
    return {"out": (j >= i + shift) if upper else (j <= i + shift)}


MISTAKES = (
    Mistake("causal_mask", "causal-left-aligned", ("out",),
            "with S > T keys, the T queries are the LAST T positions: query i sits at i + S - T",
            lambda inp: _causal(inp, left=True) if inp.get("S") not in (None, inp["T"]) else {}),
    Mistake("causal_mask", "causal-diagonal-hidden", ("out",),
            "off by one: a query may attend its own position (j <= i); this mask hides the diagonal",
            lambda inp: _causal(inp, shift=-1)),
    Mistake("causal_mask", "causal-one-future-key", ("out",),
            "off by one: the query also sees the next key; it may attend keys j <= i only",
            lambda inp: _causal(inp, shift=1)),
    Mistake("causal_mask", "causal-upper-triangle", ("out",),
            "this is the upper triangle (the future); True = may attend, so keep j <= i (lower triangle)",
            lambda inp: _causal(inp, upper=True)),
)


ASSIGNMENT = Assignment(
    id="causal_mask", title="Causal mask (forward only)", lecture=L2, points=2,
    targets=("functional.masks:causal_mask",),
    equivalents=("functional.masks:sliding_window_mask", "functional.masks:dilated_window_mask",
                 "functional.masks:global_window_mask"),                      # a window >= S is causal
    cases=cases(function("functional.masks:causal_mask"), ("out",),
                ("causal_mask: T = S", draw),
                ("causal_mask: S > T (the queries are the last T positions)", lambda rng: draw(rng, extra_keys=True))),
    mistakes=MISTAKES,
)
