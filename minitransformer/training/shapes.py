"""Synthetic grey images of six shapes, drawn with NumPy from a seeded generator (no download).

    images, labels = draw_shapes(n, rng)        images (n, S, S, 1) float32, labels (n,) int64

Classes (SHAPES): 0 circle (a filled disc), 1 square (filled), 2 triangle (filled,
apex up), 3 cross (a plus sign), 4 horizontal bars, 5 vertical bars (stripes
inside a square). Each image draws its own centre, size, brightness, stripe
period and background, then Gaussian pixel noise, so no two images are alike
and a fixed set of pixels never decides the class: the model has to look at
shape (disc vs square vs triangle) and texture (stripes across vs down).
"""
from __future__ import annotations

import numpy as np

from ..validate import check_generator, check_int, check_number

SHAPES = ("circle", "square", "triangle", "cross", "horizontal bars", "vertical bars")


def draw_shapes(n: int, rng, size: int = 16, noise: float = 0.15):
    """``n`` images of side ``size`` and their labels, classes uniform.

    Inputs: n >= 0; rng a numpy Generator; size >= 8 pixels; noise >= 0 the std of the pixel noise.
    Returns: images (n, size, size, 1) float32 in about [-0.5, 1.5], labels (n,) int64 in [0, 6).
    """
    n = check_int("n", n, low=0)
    check_generator("rng", rng)
    S = check_int("size", size, low=8)
    noise = check_number("noise", noise, low=0.0, finite=True)
    labels = rng.integers(0, len(SHAPES), size=n)                        # (n,)
    r = rng.uniform(0.18, 0.32, size=(n, 1, 1)) * S                      # half-size in pixels
    cy, cx = (rng.uniform(r, S - 1 - r) for _ in range(2))               # (n, 1, 1) centres inside
    period = rng.integers(2, 4, size=(n, 1, 1))                          # stripe period 2 or 3 pixels
    yy, xx = np.mgrid[0:S, 0:S].astype(np.float64)                       # (S, S)
    dy, dx = yy - cy, xx - cx                                            # (n, S, S)
    inside_box = (np.abs(dy) <= r) & (np.abs(dx) <= r)                   # (n, S, S)
    thick = np.maximum(r / 3, 1.0)
    masks = np.stack([
        dy ** 2 + dx ** 2 <= r ** 2,                                     # circle
        inside_box,                                                      # square
        (dy <= r) & (np.abs(dx) <= (dy + r) / 2),                        # triangle, apex at the top
        ((np.abs(dy) <= thick / 2) & (np.abs(dx) <= r)) | ((np.abs(dx) <= thick / 2) & (np.abs(dy) <= r)),
        inside_box & ((np.floor(yy - cy + r) // period) % 2 == 0),       # horizontal bars
        inside_box & ((np.floor(xx - cx + r) // period) % 2 == 0),       # vertical bars
    ])                                                                   # (6, n, S, S)
    shape = masks[labels, np.arange(n)]                                  # (n, S, S) each image its class
    brightness = rng.uniform(0.6, 1.0, size=(n, 1, 1))
    background = rng.uniform(-0.1, 0.1, size=(n, 1, 1))
    images = background + brightness * shape + noise * rng.standard_normal((n, S, S))
    return images[..., None].astype(np.float32), labels.astype(np.int64)
