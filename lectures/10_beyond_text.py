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

# %% [markdown]
# ## Quiz
#
# Write your answer in each `answer_N = None  # your answer` cell and run the check
# below it: a wrong answer stops with a hint, an unanswered one says so
# (`lectures/_quiz.py`; `MINITRANSFORMER_QUIZ_SOLUTIONS=1` fills in the solutions).

# %%
from _quiz import check, summary

# %% [markdown]
# **Question 1.** A Vision Transformer cuts a 224 × 224 image into 16 × 16 patches. How
# many patch tokens does it read?

# %%
answer_1 = None  # your answer

# %%
check("1", answer_1, (224 // 16) * (224 // 16), hint="(H / p) · (W / p)")

# %% [markdown]
# **Question 2.** And if every PIXEL were a token instead, how long would the sequence be?

# %%
answer_2 = None  # your answer

# %%
check("2", answer_2, 224 * 224, hint="one token per pixel: about 50k, too long for full attention")

# %% [markdown]
# **Question 3.** How many numbers does one flattened 16 × 16 RGB patch hold?

# %%
answer_3 = None  # your answer

# %%
check("3", answer_3, 16 * 16 * 3, hint="p · p pixels, 3 colour channels each")

# %% [markdown]
# **Question 4.** A feature tokenizer for tables turns a row with three numerical and two
# categorical features, plus a [CLS] token, into how many tokens?

# %%
answer_4 = None  # your answer

# %%
check("4", answer_4, 3 + 2 + 1, hint="one token per feature, numerical or categorical, and one [CLS]")

# %% [markdown]
# **Question 5.** Position interpolation (the "SuperHOT" patch `theta = p * 0.25`): a
# model trained on 2048 positions is run on longer inputs with every position scaled by
# 0.25. Up to what length do the scaled positions stay within the trained range?

# %%
answer_5 = None  # your answer

# %%
check("5", answer_5, int(2048 / 0.25), hint="scaled position p · 0.25 must stay below 2048")

# %% [markdown]
# **Question 6.** Full attention over T = 4096 tokens costs how many times the score
# computations of T = 1024?

# %%
answer_6 = None  # your answer

# %%
check("6", answer_6, (4096 / 1024) ** 2, hint="T² scores")

# %% [markdown]
# **Question 7.** In Llama-2's attention maps (the survey deck), beyond the first two
# layers most heads attend heavily to which token: "first" or "last"?

# %%
answer_7 = None  # your answer

# %%
check("7", answer_7, "first", hint="the attention sink: the initial token")
summary()

# ---- section: quiz (end) ----

# %% [markdown]
# ## What this lecture claimed, checked

# %%
assert N_patches == 196 and patch_numbers == 768
print("lecture 10: all claims check out")
