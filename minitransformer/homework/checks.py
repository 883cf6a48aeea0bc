"""The input drawers of the graded cases: the trusted side, never in a student's copy.

The graded cases (homework/cases.py) draw their inputs with the drawers below, from
a generator seeded with the grading seed (the instructor's 128-bit secret, or the
public 0): float64 arrays of small random shapes, each drawer for one kind of
function. A drawer replayed with guessed seeds finds the seed, so this file is left
out of every student's copy and of the grader's child (homework/export.py, TRUSTED).
Adding a graded case is a drawer and a line of cases.CASES; a diagnosis, an entry of
the catalogue (homework/mistakes.py).
"""
from __future__ import annotations

import numpy as np

from .graded import Case


# ------------------------------------------------------------------------ input drawers
def _shape_bct(rng):
    return int(rng.integers(1, 4)), int(rng.integers(1, 5)), int(rng.integers(2, 7))


def draw_bct(rng, fn, options):
    return Case({"x": rng.standard_normal(_shape_bct(rng))}, dict(options))


def draw_softmax(rng, fn, options):
    return Case({"x": 3 * rng.standard_normal(_shape_bct(rng))}, dict(options))


def draw_linear(rng, fn, options):
    B, T, d_in = _shape_bct(rng)
    d_out = d_in + int(rng.integers(1, 3))        # d_in != d_out: a transposed dW has the wrong shape
    return Case({"x": rng.standard_normal((B, T, d_in)), "W": rng.standard_normal((d_in, d_out)),
                 "b": rng.standard_normal(d_out)})


def draw_layernorm(rng, fn, options):
    x = rng.standard_normal(_shape_bct(rng))
    C = x.shape[-1]
    return Case({"x": x, "gamma": 1 + 0.5 * rng.standard_normal(C), "beta": rng.standard_normal(C)})


def draw_rmsnorm(rng, fn, options):
    x = rng.standard_normal(_shape_bct(rng))
    return Case({"x": x, "gamma": 1 + 0.5 * rng.standard_normal(x.shape[-1])})


def draw_cross_entropy(rng, fn, options):
    B, T, V = _shape_bct(rng)
    T += 2                                                      # room for kept and ignored targets
    targets = rng.integers(0, V, (B, T))
    ignored = rng.random((B, T)) < 0.3
    ignored[0, 0], ignored[0, 1] = True, False                  # at least one of each
    targets[ignored] = -100
    n_kept = int((~ignored).sum())
    smoothing = [0.0, 0.1][int(rng.integers(0, 2))]
    return Case({"logits": 2 * rng.standard_normal((B, T, V)), "targets": targets},
                {"ignore_index": -100, "smoothing": smoothing}, wrt=("logits",),
                factors={"N_kept/N": (n_kept / ignored.size, "averaged over the ignored targets too?"),
                         "N/N_kept": (ignored.size / n_kept, "")},
                masked={"dlogits": np.broadcast_to(ignored[..., None], (B, T, V))})


def draw_embedding(rng, fn, options):
    B, T, C = _shape_bct(rng)
    V = int(rng.integers(2, 6))
    return Case({"ids": rng.integers(0, V, (B, T + 2)), "W": rng.standard_normal((V, C))}, wrt=("W",))


def draw_dropout(rng, fn, options):
    x = rng.standard_normal(_shape_bct(rng))
    p = float(rng.uniform(0.1, 0.6))
    return Case({"x": x}, {"p_drop": p, "mask": rng.random(x.shape) >= p}, wrt=("x",),
                factors={"1/(1-p)": (1 / (1 - p), "the inverted scaling 1/(1-p) applied twice?"),
                         "1-p": (1 - p, "forgot the inverted scaling 1/(1-p)?")})


def draw_attention(rng, fn, options):
    B, H, T, S, D = (int(rng.integers(1, 3)), int(rng.integers(1, 3)), int(rng.integers(1, 5)),
                     int(rng.integers(1, 6)), 8)           # D = 8: √D is not mistaken for 2
    mask = rng.random((B, 1, T, S)) < 0.75
    mask[..., 0] = True                                          # every query sees a key ...
    if T > 1 and rng.random() < 0.5:
        mask[0, 0, -1, :] = False                                # ... except, sometimes, one: output 0
    inputs = {"q": rng.standard_normal((B, H, T, D)), "k": rng.standard_normal((B, H, S, D)),
              "v": rng.standard_normal((B, H, S, D)), "mask": mask}
    wrt = ("q", "k", "v")
    if rng.random() < 0.5:
        inputs["bias"] = rng.standard_normal((1, H, T, S))
        wrt += ("bias",)
    return Case(inputs, wrt=wrt,
                factors={f"√D with D={D}": (D ** 0.5, "forgot 1/√D?"),
                         f"1/√D with D={D}": (D ** -0.5, "applied 1/√D twice?")})


def draw_bhtd(rng, fn, options):
    B, H, T = int(rng.integers(1, 3)), int(rng.integers(1, 3)), int(rng.integers(1, 5))
    D = 2 * int(rng.integers(1, 4))
    return Case({"x": rng.standard_normal((B, H, T, D))}, {"offset": int(rng.integers(0, 4))})


def draw_sinusoidal(rng, fn, options):
    return Case({}, {"max_len": int(rng.integers(1, 12)), "d": int(rng.integers(1, 10)), "dtype": np.float64})


def draw_causal_mask(rng, fn, options):
    T = int(rng.integers(1, 6))
    return Case({}, {"T": T, "S": T + int(rng.integers(0, 3))})


def draw_mha(rng, fn, options):
    B, T = int(rng.integers(1, 3)), int(rng.integers(1, 5))
    return Case({"x": rng.standard_normal((B, T, 8))},
                {"ctor": ((8, 2), {"causal": True, "rng": 0, "dtype": np.float64})},
                factors={"√D with D=4": (2.0, "forgot 1/√D?"),
                         "1/√D with D=4": (0.5, "applied 1/√D twice?")})


def draw_block(rng, fn, options):
    B, T = int(rng.integers(1, 3)), int(rng.integers(1, 5))
    return Case({"x": rng.standard_normal((B, T, 8))},
                {"ctor": ((), {"rng": 0, "dtype": np.float64}),
                 "spec": dict(d_model=8, n_head=2, d_ff=16, norm_position="pre")})


DRAWERS = {"bct": draw_bct, "softmax": draw_softmax, "linear": draw_linear, "layernorm": draw_layernorm,
           "rmsnorm": draw_rmsnorm, "cross_entropy": draw_cross_entropy, "embedding": draw_embedding,
           "dropout": draw_dropout, "attention": draw_attention, "bhtd": draw_bhtd,
           "sinusoidal": draw_sinusoidal, "causal_mask": draw_causal_mask, "mha": draw_mha,
           "block": draw_block}
