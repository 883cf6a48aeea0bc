# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Lecture 10: beyond text and beyond the context
#
# The Transformer reads a sequence of vectors; nothing in it says the vectors
# must come from words. This lecture feeds it image patches and table rows, then
# looks at what happens at and beyond the context length it was trained on.

# %%
import matplotlib
matplotlib.use("Agg")                    # figures go to files, never to a window
import numpy as np
from matplotlib.figure import Figure

from _lecture import FAST, OUT, save_figure    # fast-mode switch; where figures go (lectures/_lecture.py)
np.set_printoptions(precision=4, suppress=True)

# %% [markdown]
# ## Images as sequences: counting patches
#
# The Vision Transformer cuts an $H \times W$ image into $p \times p$ patches and
# treats each flattened patch as one token: $N = (H/p)(W/p)$ tokens. For the
# paper's 224 × 224 images and 16 × 16 patches, $N = 14 \cdot 14 = 196$ tokens,
# each of $p^2 \cdot 3 = 768$ numbers (RGB).

# %%
H_img = W_img = 224
p = 16
N_patches = (H_img // p) * (W_img // p)
patch_numbers = p * p * 3
print(f"{H_img}x{W_img} image, {p}x{p} patches: N = {N_patches} tokens of {patch_numbers} numbers")

fig = Figure(figsize=(4, 4))
ax = fig.add_subplot()
yy, xx = np.mgrid[0:H_img, 0:W_img]
image = ((xx - 112) ** 2 + (yy - 112) ** 2 < 70 ** 2).astype(float)    # a disc, drawn with NumPy
ax.imshow(image, cmap="gray_r")
ax.set_xticks(np.arange(0, W_img + 1, p) - 0.5, labels=[])
ax.set_yticks(np.arange(0, H_img + 1, p) - 0.5, labels=[])
ax.grid(color="tab:red", linewidth=0.5)
ax.set_title(f"{H_img}x{W_img} image, {p}x{p} patches: {N_patches} tokens")
save_figure(fig, "vit_patch_grid.png")

# ---- section: vit (begin) ----
# ---- section: vit (end) ----

# ---- section: tabular (begin) ----
# ---- section: tabular (end) ----

# ---- section: relative positions (begin) ----
# ---- section: relative positions (end) ----

# ---- section: position interpolation (begin) ----
# ---- section: position interpolation (end) ----

# ---- section: attention sinks (begin) ----
# ---- section: attention sinks (end) ----

# ---- section: sparse patterns (begin) ----
# ---- section: sparse patterns (end) ----

# ---- section: quiz (begin) ----
# ---- section: quiz (end) ----

# %% [markdown]
# ## What this lecture claimed, checked

# %%
assert N_patches == 196 and patch_numbers == 768
print("lecture 10: all claims check out")
