"""embedding: y = W[ids], and dW, the rows of dy added up per id (a scatter-add)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...functional.embedding import ONE_HOT_MAX_V
from ..assignment import Assignment, Mistake, cases, pair
from ..graded import Case
from . import L4
from ._draw import shape_bct
from ._variants import _g, _rows, _x


# ------------------------------------------------------------------ the graded inputs
def draw(rng) -> Case:
    B, T, C = shape_bct(rng)
    V = int(rng.integers(2, 6))
    return Case({"ids": rng.integers(0, V, (B, T + 2)), "W": rng.standard_normal((V, C))}, wrt=("W",))


def draw_repeated(rng) -> Case:
    """Ids with repeats (every id of a small vocabulary twice at least): dW must add them up."""
    case = draw(rng)
    ids = case.inputs["ids"].copy()
    ids.reshape(-1)[:2] = ids.reshape(-1)[-1]                # the last id three times
    return replace(case, inputs=dict(case.inputs, ids=ids))


def draw_large_vocabulary(rng) -> Case:
    """V above ONE_HOT_MAX_V: embedding_backward takes the sorted scatter, not the one-hot product;
    ids with repeats, most rows of dW zero."""
    case = draw(rng)
    V = ONE_HOT_MAX_V + int(rng.integers(1, 200))
    ids = rng.integers(0, V, case.inputs["ids"].shape)
    ids.reshape(-1)[:2] = ids.reshape(-1)[-1]                # one id three times
    W = rng.standard_normal((V, case.inputs["W"].shape[1]))
    return replace(case, inputs=dict(case.inputs, ids=ids, W=W))


# ------------------------------------------------------------------ the catalogue
def _embedding_fancy(inp):
    ids, dout = np.asarray(inp["ids"]).reshape(-1), _rows(_g(inp))
    W = _x(inp, "W")
    dW = np.zeros_like(W)
    dW[ids] += dout                  # the buggy line itself: repeated ids keep only their last row
    return {"dW": dW}



def _sorted_scatter_unsorted_dout(inp):
    """The runs of the SORTED ids summed over the rows of dout in their original order (np.add.reduceat
    on dout instead of dout[order]): each id gets the sum of the wrong rows."""
    ids, dout = np.asarray(inp["ids"]).reshape(-1), _rows(_g(inp))
    W = _x(inp, "W")
    if W.shape[0] <= ONE_HOT_MAX_V:
        return {}                      # the one-hot product runs there, not the sorted scatter
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    starts = np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1]])
    dW = np.zeros_like(W)
    dW[sorted_ids[starts]] = np.add.reduceat(dout, starts, axis=0)
    return {"dW": dW}


MISTAKES = (
    Mistake("embedding", "embedding-fancy-index-add", ("dW",),
            "a repeated id keeps only ONE of its rows: `dW[ids] += dout` with repeated ids writes each "
            "row once (fancy indexing does not accumulate); use np.add.at(dW, ids, dout)",
            _embedding_fancy),
    Mistake("embedding", "embedding-sorted-scatter-unsorted-dout", ("dW",),
            "the sorted scatter sums the rows of dout in their original order: the runs of equal ids are "
            "found in the SORTED ids, so the rows summed must be sorted the same way, dout[order] "
            "(order = argsort(ids)), before np.add.reduceat",
            _sorted_scatter_unsorted_dout),
)


ASSIGNMENT = Assignment(
    id="embedding", title="Token embedding (a table lookup and its scatter-add)", lecture=L4, points=5,
    targets=("functional.embedding:embedding_forward", "functional.embedding:embedding_backward",
             "functional.embedding:_one_hot_scatter", "functional.embedding:_sorted_scatter"),
    cases=cases(pair("functional.embedding", "embedding"), ("out", "dW"),
                ("embedding: repeated ids (their gradients add up)", draw_repeated),
                ("embedding: a vocabulary above 128 (the sorted scatter)", draw_large_vocabulary),
                float32="embedding"),
    mistakes=MISTAKES,
)
