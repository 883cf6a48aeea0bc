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
# %% [markdown]
# ## Relative positions: Shaw's tables and T5's buckets
#
# Absolute positions tie a token to "I am number 37"; a model trained on 512
# positions has never seen number 600. Relative schemes tell attention only how far
# apart a query $i$ and a key $j$ are, so the same rule holds at any offset.
#
# **Shaw et al. (2018)** learn two tables of $2k+1$ rows, one row per clipped
# distance, and add the row inside attention:
#
# $$r_{ij} = \operatorname{clip}(j - i, -k, k) + k, \qquad a^K_{ij} = A^K[r_{ij}], \quad a^V_{ij} = A^V[r_{ij}]$$
# $$e_{ij} = \frac{q_i \cdot (k_j + a^K_{ij})}{\sqrt{D}}, \qquad P = \operatorname{softmax}(e + \text{mask}), \qquad
#   o_i = \sum_j P_{ij}\,(v_j + a^V_{ij})$$
#
# Every distance beyond $k$ reads the edge row: precise distances matter nearby,
# far away "far" is enough. The gradient of a table row is a scatter-add of every
# $(i, j)$ that reads it (`functional/shaw.py`).
#
# **T5 (Raffel et al. 2020)** learns one scalar per head and per *bucket* of
# distance, added to the scores like ALiBi's bias: $\text{bias}_{hij} = B[b(j - i), h]$.
# With $n = i - j$, half the buckets are exact small distances and the rest are
# log-spaced up to `max_distance`; the encoder gives keys after the query their own
# half, the decoder (causal) sends every future key to bucket 0:
#
# $$b(n) = n \ \text{if}\ n < m, \qquad
#   b(n) = \min\Big(m + \Big\lfloor \frac{\ln(n/m)}{\ln(\text{max\_distance}/m)}\,(h - m) \Big\rfloor,\ h - 1\Big)$$
#
# with $h$ the buckets of one half ($n_\text{buckets}/2$ bidirectional, all $n_\text{buckets}$ causal)
# and $m = h/2$ exact ones (`functional/t5_bias.py`).
# Both are `position="shaw"` / `"t5"` in every model config.

# %%
from minitransformer.functional.shaw import relative_index, shaw_attention_forward
from minitransformer.functional.t5_bias import relative_position_bucket
from minitransformer.plots.positions import relative_positions
from _lecture import show_png

rel_index = relative_index(5, 5, 2)          # T = 5, k = 2
print("Shaw table row r_ij, T = 5, k = 2 (rows: query i, columns: key j):")
print(rel_index)

# T5, bidirectional, 32 buckets, max_distance 128: h = 16 per half, m = 8 exact.
rel_distances = np.array([0, -1, -7, -8, -20, -100, -1000, 1, 20])    # j - i
rel_buckets = relative_position_bucket(rel_distances, True, 32, 128)
rel_causal = relative_position_bucket(rel_distances, False, 32, 128)
for d, b, c in zip(rel_distances, rel_buckets, rel_causal):
    print(f"j - i = {d:6d}:  bidirectional bucket {b:2d}   causal bucket {c:2d}")

# %% [markdown]
# A worked check of one bucket by hand: a key 20 positions back, bidirectional,
# $n = 20 \ge m = 8$: $8 + \lfloor \ln(20/8) / \ln(128/8) \cdot 8 \rfloor = 8 + \lfloor 2.64 \rfloor = 10$.
# The same key 20 positions *ahead* lands in the upper half: $16 + 10 = 26$.
#
# Shaw's scores see only the clipped distance: the same four tokens placed at
# positions 0-3 or 3-6 of a longer sequence give the same score differences.

# %%
rel_rng = np.random.default_rng(0)
rel_q, rel_k, rel_v = (rel_rng.standard_normal((1, 1, 4, 8)) for _ in range(3))
rel_tables = rel_rng.standard_normal((5, 8)), rel_rng.standard_normal((5, 8))
_, rel_alone = shaw_attention_forward(rel_q, rel_k, rel_v, *rel_tables)
rel_place = lambda x: np.concatenate([rel_rng.standard_normal((1, 1, 3, 8)), x,  # noqa: E731
                                      rel_rng.standard_normal((1, 1, 2, 8))], axis=2)
_, rel_shifted = shaw_attention_forward(rel_place(rel_q), rel_place(rel_k), rel_place(rel_v), *rel_tables)
rel_log_alone = np.log(rel_alone.probs[0, 0])                   # log P = e - logsumexp(e) per row
rel_log_shifted = np.log(rel_shifted.probs[0, 0, 3:7, 3:7])
rel_shift_error = np.abs((rel_log_alone - rel_log_alone[:, :1]) - (rel_log_shifted - rel_log_shifted[:, :1])).max()
print(f"largest change of a score difference after the shift: {rel_shift_error:.1e}")

fig_rel, rel_maps = relative_positions(T=40, clip=4, n_buckets=16, max_distance=32,
                                       path=OUT / "relative_positions.png")
show_png(OUT / "relative_positions.png")

# %%
assert (rel_index == np.array([[2, 3, 4, 4, 4], [1, 2, 3, 4, 4], [0, 1, 2, 3, 4],
                               [0, 0, 1, 2, 3], [0, 0, 0, 1, 2]])).all()
assert list(rel_buckets) == [0, 1, 7, 8, 10, 15, 15, 17, 26]       # by hand, as in the cell above
assert list(rel_causal) == [0, 1, 7, 8, 17, 30, 31, 0, 0]           # m = 16 exact: 20 back -> 16 + 1
assert (rel_causal[rel_distances > 0] == 0).all()                   # causal: the future is bucket 0
assert rel_shift_error < 1e-12
assert (rel_maps["t5_causal"][rel_maps["distance"] > 0] == 0).all()
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
