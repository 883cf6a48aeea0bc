"""dropout: inverted dropout y = x ⊙ m / (1 - p_drop) with a keep-mask m, the identity in eval; dx."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..assignment import Assignment, Mistake, cases, pair
from ..graded import Case
from ..mistakes_match import dropout_in_eval, keeps_p_drop, other_mask
from . import L3
from ._draw import shape_bct
from ._variants import _g, _x


# ------------------------------------------------------------------ the graded inputs
def draw(rng) -> Case:
    x = rng.standard_normal(shape_bct(rng))
    p = float(rng.uniform(0.1, 0.6))
    return Case({"x": x}, {"p_drop": p, "mask": rng.random(x.shape) >= p}, wrt=("x",),
                factors={"1/(1-p)": (1 / (1 - p), "the inverted scaling 1/(1-p) applied twice?"),
                         "1-p": (1 - p, "forgot the inverted scaling 1/(1-p)?")})


def draw_random(rng) -> Case:
    """x (4, 32, 32), p_drop in [0.1, 0.35], no mask: the student's mask is drawn from ``rng`` (a generator
    seeded from the grading seed). Any mask is right that keeps each entry with probability 1 - p_drop:
    the case is judged by that property (properties.dropout_random_path), 4,096 entries, a 5σ bound."""
    x = rng.standard_normal((4, 32, 32))
    p = float(rng.uniform(0.1, 0.35))                        # far from 1/2: keeping p or 1 - p differs by >= 0.3
    return Case({"x": x}, {"p_drop": p, "rng": np.random.default_rng(int(rng.integers(0, 2**63)))}, wrt=("x",))


def draw_eval(rng) -> Case:
    case = draw(rng)
    kwargs = {"p_drop": case.kwargs["p_drop"], "training": False}
    return replace(case, kwargs=kwargs, factors={})


# ------------------------------------------------------------------ the catalogue
def _dropout(inp, *, scale=None, mask=None, backward_scale=None, backward_mask=True):
    x, dy = _x(inp), _g(inp)
    p = float(inp["p_drop"])
    m = (np.asarray(inp["mask"]) if mask is None else mask).astype(np.float64)
    s = 1 / (1 - p) if scale is None else scale
    sb = s if backward_scale is None else backward_scale
    return {"out": x * m * s, "dx": dy * (m if backward_mask else 1.0) * sb}


def _mask_given(inp):
    return inp.get("mask") is not None and inp.get("training", True)


MISTAKES = (
    Mistake("dropout", "dropout-no-scaling", ("out", "dx"),
            "the kept entries are not scaled: inverted dropout multiplies them by 1/(1 - p_drop)",
            lambda inp: _dropout(inp, scale=1.0) if _mask_given(inp) else {}),
    Mistake("dropout", "dropout-scaled-by-keep-probability", ("out", "dx"),
            "the kept entries are multiplied by (1 - p_drop); inverted dropout DIVIDES by it",
            lambda inp: _dropout(inp, scale=1 - float(inp["p_drop"])) if _mask_given(inp) else {}),
    Mistake("dropout", "dropout-scaled-by-one-over-p", ("out", "dx"),
            "the kept entries are divided by p_drop, the probability of DROPPING: inverted dropout divides "
            "by the keep probability, scale = 1/(1 - p_drop), in forward and backward",
            lambda inp: _dropout(inp, scale=1 / float(inp["p_drop"])) if _mask_given(inp) else {}),
    Mistake("dropout", "dropout-backward-one-over-p", ("dx",),
            "dx is divided by p_drop, the probability of DROPPING: the forward's scale is 1/(1 - p_drop), "
            "and the backward uses the same (cache.scale)",
            lambda inp: _dropout(inp, backward_scale=1 / float(inp["p_drop"])) if _mask_given(inp) else {}),
    Mistake("dropout", "dropout-mask-inverted", ("out", "dx"),
            "the mask is inverted: True in `mask` means KEEP the entry (p_drop is the probability of dropping)",
            lambda inp: _dropout(inp, mask=~np.asarray(inp["mask"])) if _mask_given(inp) else {}),
    Mistake("dropout", "dropout-backward-unmasked", ("dx",),
            "dx is not masked: the dropped entries had no effect on y, so their gradient is 0 (dx = dy ⊙ m / (1 - p_drop))",
            lambda inp: _dropout(inp, backward_mask=False) if _mask_given(inp) else {}),
    Mistake("dropout", "dropout-backward-unscaled", ("dx",),
            "dx is not scaled: the forward multiplied the kept entries by 1/(1 - p_drop), so does the backward",
            lambda inp: _dropout(inp, backward_scale=1.0) if _mask_given(inp) else {}),
    Mistake("dropout", "dropout-no-upstream", ("dx",),
            "dx = m / (1 - p_drop) alone: multiply by the upstream gradient dy (chain rule)",
            lambda inp: {"dx": _dropout(dict(inp, upstream=np.ones_like(_g(inp))))["dx"]}
            if _mask_given(inp) else {}),
    Mistake("dropout", "dropout-own-mask", ("out", "dx"),
            "the entries kept are not those of `mask`: when a mask is given, use it instead of drawing one",
            match=other_mask),
    Mistake("dropout", "dropout-keeps-p", ("out",),
            "the random mask keeps a fraction p_drop of the entries: p_drop is the probability of DROPPING, so "
            "keep where u >= p_drop for u = rng.random(x.shape) (True with probability 1 - p_drop); "
            "u < p_drop is the drop mask",
            match=keeps_p_drop),
    Mistake("dropout", "dropout-in-eval", ("out", "dx"),
            "training=False must be the identity (y = x, dx = dy): no entry is dropped or scaled in eval",
            match=dropout_in_eval),
)


ASSIGNMENT = Assignment(
    id="dropout", title="Inverted dropout", lecture=L3, points=3,
    targets=("functional.dropout:dropout_forward", "functional.dropout:dropout_backward"),
    cases=cases(pair("functional.dropout", "dropout"), ("out", "dx"),
                ("dropout: training with a given keep-mask", draw),
                ("dropout: eval mode (training=False) is the identity", draw_eval), float32="dropout")
    + cases(pair("functional.dropout", "dropout"), ("out", "dx"),
            ("dropout: the random path, a mask drawn from rng (keeps 1 - p_drop of 4,096 entries)", draw_random),
            judge="dropout_random_path"),
    mistakes=MISTAKES,
)
