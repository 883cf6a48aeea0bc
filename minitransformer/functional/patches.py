"""Patch embedding (Vision Transformer, Dosovitskiy et al. 2021): an image as a sequence.

Images are channels-last, (B, H, W, C_in), the layout NumPy and matplotlib use.
An image is cut into p × p patches, read row by row over the grid of patches;
each patch is flattened, row within the patch first, then column, then channel:

    X[b, n, (i·p + j)·C_in + c] = image[b, r·p + i, s·p + j, c],    n = r · (W/p) + s
    N = (H/p) · (W/p) patches of P = p · p · C_in numbers          X (B, N, P)

and a linear map takes every patch to the model width:

    Z = X W + b                                  W (P, C), b (C,), Z (B, N, C)

(the paper's "linear projection of flattened patches"; a convolution with kernel
and stride p is the same map). ``patchify`` is a pure rearrangement, so its
backward is its inverse, ``unpatchify``: every pixel lies in exactly one patch.

Backward (each line reverses a forward line):
    dX, dW, db = linear_backward(dZ)             reverses Z = X W + b
    dimages    = unpatchify(dX)                  reverses X = patchify(images)

Shapes: B batch, H × W pixels, C_in channels, p patch side, N patches, P = p²·C_in, C = d_model.
"""
from __future__ import annotations

from typing import NamedTuple

from ..validate import check_dim, check_dtype_like, check_float, check_int, check_items, check_ndim
from .linear import LinearCache, linear_backward, linear_forward


def check_patch_grid(name: str, H: int, W: int, p: int) -> None:
    """ValueError naming ``name`` unless an H × W image splits into whole p × p patches."""
    H, W = check_int(f"{name} (height)", H, low=1), check_int(f"{name} (width)", W, low=1)
    p = check_int("patch_size", p, low=1)
    if H % p or W % p:
        raise ValueError(f"{name}: expected a height and width divisible by patch_size={p}, "
                         f"got {H} x {W}")


def patchify(images, patch_size: int):
    """images (B, H, W, C_in) -> X (B, N, p·p·C_in), patches row by row (module docstring)."""
    check_ndim("images", images, 4, "(B, H, W, C_in)")
    p = check_int("patch_size", patch_size, low=1)
    B, H, W, C_in = images.shape
    check_patch_grid("images", H, W, p)
    grid = images.reshape(B, H // p, p, W // p, p, C_in)          # (B, H/p, p, W/p, p, C_in)
    grid = grid.transpose(0, 1, 3, 2, 4, 5)                       # (B, H/p, W/p, p, p, C_in)
    return grid.reshape(B, (H // p) * (W // p), p * p * C_in)     # (B, N, P)


def unpatchify(X, image_shape, patch_size: int):
    """The inverse of ``patchify``: X (B, N, p·p·C_in) -> images (B, H, W, C_in).

    image_shape: (H, W, C_in) of one image.
    """
    check_ndim("X", X, 3, "(B, N, P)")
    p = check_int("patch_size", patch_size, low=1)
    shape = check_items("image_shape", image_shape)
    if len(shape) != 3:
        raise ValueError(f"image_shape: expected (H, W, C_in), got {image_shape!r}")
    H, W, C_in = (check_int("image_shape", s, low=1) for s in shape)
    check_patch_grid("image_shape", H, W, p)
    B = X.shape[0]
    if tuple(X.shape[1:]) != ((H // p) * (W // p), p * p * C_in):
        raise ValueError(f"X: expected shape (B, {(H // p) * (W // p)}, {p * p * C_in}) for "
                         f"{H} x {W} x {C_in} images and patch_size={p}, got {tuple(X.shape)}")
    grid = X.reshape(B, H // p, W // p, p, p, C_in)               # (B, H/p, W/p, p, p, C_in)
    grid = grid.transpose(0, 1, 3, 2, 4, 5)                       # (B, H/p, p, W/p, p, C_in)
    return grid.reshape(B, H, W, C_in)                            # (B, H, W, C_in)


class PatchEmbedCache(NamedTuple):
    linear: LinearCache      # the patches X (needed for dW) and W (needed for dX)
    image_shape: tuple       # (H, W, C_in), to fold dX back into images
    patch_size: int          # p


def patch_embed_forward(images, W, b, patch_size: int):
    """Z = patchify(images) W + b.

    Inputs: images (B, H, W, C_in) floating, H and W multiples of patch_size;
            W (p·p·C_in, C); b (C,) or None; patch_size p.
    Returns: Z (B, N, C), PatchEmbedCache.
    """
    check_ndim("images", images, 4, "(B, H, W, C_in)")
    check_float("images", images)
    p = check_int("patch_size", patch_size, low=1)
    check_ndim("W", W, 2, "(p·p·C_in, C)")
    check_dim("W", W, 0, p * p * images.shape[3], f"p·p·C_in with patch_size={p}, the numbers of one patch")
    check_dtype_like("W", W, images, "images")
    if b is not None:
        check_dtype_like("b", b, images, "images")
    X = patchify(images, p)                                       # (B, N, P)
    Z, linear_cache = linear_forward(X, W, b)                     # (B, N, C)
    return Z, PatchEmbedCache(linear_cache, tuple(images.shape[1:]), p)


def patch_embed_backward(dZ, cache: PatchEmbedCache):
    """Inputs: dZ (B, N, C), the cache.
    Returns: dimages (B, H, W, C_in), dW (p·p·C_in, C), db (C,) or None."""
    linear_cache, image_shape, p = cache
    dX, dW, db = linear_backward(dZ, linear_cache)                # reverses Z = X W + b
    dimages = unpatchify(dX, image_shape, p)                      # reverses X = patchify(images)
    return dimages, dW, db
