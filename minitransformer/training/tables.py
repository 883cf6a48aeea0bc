"""A synthetic table whose label mixes numeric and categorical columns (seeded, no download).

Each row has three numeric columns x_0, x_1, x_2 ~ N(0, 1) and two categorical
ones, c_0 in {0, 1, 2, 3} and c_1 in {0, 1, 2} (CARDINALITIES). The label is

    y = [ x_0 + SLOPE[c_0] · x_1 + SHIFT[c_1] > 0 ],     then flipped with probability ``flip``

so the category c_0 decides whether x_1 counts for or against (an interaction a
linear model on the raw columns cannot express), c_1 moves the threshold, and
x_2 is noise the model must learn to ignore. With flip = 0.05 no classifier can
beat 95% on average; always answering the majority class gets about 50%.
"""
from __future__ import annotations

import numpy as np

from ..validate import check_generator, check_int, check_number

CARDINALITIES = (4, 3)                         # values of c_0, c_1
N_NUMERIC = 3                                  # x_0, x_1, x_2
SLOPE = np.array([1.5, -1.5, 0.5, -0.5])       # the weight of x_1, by c_0
SHIFT = np.array([-0.8, 0.0, 0.8])             # the threshold's shift, by c_1


def make_table(n: int, rng, flip: float = 0.05):
    """``n`` rows and their labels.

    Inputs: n >= 0; rng a numpy Generator; flip in [0, 0.5] the label noise.
    Returns: x_num (n, 3) float32, x_cat (n, 2) int64, labels (n,) int64 in {0, 1}.
    """
    n = check_int("n", n, low=0)
    check_generator("rng", rng)
    flip = check_number("flip", flip, low=0.0, high=0.5)
    x_num = rng.standard_normal((n, N_NUMERIC))                                # (n, 3)
    x_cat = np.stack([rng.integers(0, V, size=n) for V in CARDINALITIES], 1)   # (n, 2)
    score = x_num[:, 0] + SLOPE[x_cat[:, 0]] * x_num[:, 1] + SHIFT[x_cat[:, 1]]  # (n,)
    flipped = rng.random(n) < flip
    labels = (score > 0) ^ flipped                                             # (n,)
    return x_num.astype(np.float32), x_cat.astype(np.int64), labels.astype(np.int64)
