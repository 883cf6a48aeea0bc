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
#
# | section | what | in the package |
# |---|---|---|
# | images | the Vision Transformer: patches, [CLS], row + column positions | `functional/patches.py`, `models/vit.py`, `train --model vit` |
# | tables | the feature tokenizer: an embedding per category, a scaled vector per number | `functional/feature_tokenizer.py`, `models/tabular.py`, `train --model tabular` |
# | relative positions | Shaw's clipped-distance tables, T5's log buckets | `functional/shaw.py`, `functional/t5_bias.py`, `position="shaw"/"t5"` |
# | position interpolation | RoPE at positions m / s | `rope_scale` |
# | attention sinks | a rolling KV cache that keeps the first tokens | `SinkKVCache`, `generate(cache_window=, n_sink=)` |
# | sparse patterns | dilated and global + sliding windows | `functional/masks.py`, `dilation`, `global_positions` |

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

# %% [markdown]
# ### A synthetic image, cut into patches
#
# No download: `draw_shapes` draws grey 16 × 16 images of six shapes (circle,
# square, triangle, cross, horizontal and vertical bars) with NumPy, each with
# its own position, size, brightness and noise. With $p = 4$ an image is a
# $4 \times 4$ grid of patches, $N = (16/4)^2 = 16$ tokens of $p^2 C_{in} = 16$
# numbers. Images are channels last, $(B, H, W, C_{in})$; a patch is read row
# by row, then column, then channel:
#
# $$X[b, n, (i p + j) C_{in} + c] = \text{image}[b,\, r p + i,\, s p + j,\, c], \qquad n = r\,(W/p) + s$$

# %%
from minitransformer.functional.patches import patch_embed_forward, patchify, unpatchify
from minitransformer.training.shapes import SHAPES, draw_shapes

shape_images, shape_labels = draw_shapes(12, np.random.default_rng(0))     # (12, 16, 16, 1), (12,)
p_vit = 4
X_patches = patchify(shape_images, p_vit)                                  # (12, 16, 16)
print("images", shape_images.shape, "-> patches", X_patches.shape)

fig = Figure(figsize=(9, 3.2))
axes = fig.subplots(1, 3, gridspec_kw={"width_ratios": [1, 1, 2.2]})
first = shape_images[0, :, :, 0]
axes[0].imshow(first, cmap="gray_r")
axes[0].set_title(f"class: {SHAPES[shape_labels[0]]}")
axes[1].imshow(first, cmap="gray_r")
axes[1].set_xticks(np.arange(0, 17, p_vit) - 0.5, labels=[])
axes[1].set_yticks(np.arange(0, 17, p_vit) - 0.5, labels=[])
axes[1].grid(color="tab:red", linewidth=1)
axes[1].set_title(f"{p_vit}x{p_vit} patches")
axes[2].imshow(X_patches[0], cmap="gray_r", aspect="auto")
axes[2].set_xlabel("the 16 numbers of a patch")
axes[2].set_ylabel("token n (row by row)")
axes[2].set_title("the sequence X (N, p·p·C_in)")
fig.tight_layout()
save_figure(fig, "vit_patches_of_a_shape.png")

# %% [markdown]
# `patchify` only moves numbers, so its backward is its inverse: the gradient of
# a pixel is the gradient of the one patch entry it went to. The embedding is then
# a linear map of each flattened patch, $Z = X W + b$, whose backward we already know.

# %%
W_patch = np.random.default_rng(1).standard_normal((p_vit * p_vit, 8))
Z_patches, _ = patch_embed_forward(shape_images.astype(np.float64), W_patch, np.zeros(8), p_vit)   # (12, 16, 8)
vit_roundtrip = np.array_equal(unpatchify(X_patches, (16, 16, 1), p_vit), shape_images)
print("Z:", Z_patches.shape, "| unpatchify(patchify(x)) == x:", vit_roundtrip)

# %% [markdown]
# ### [CLS], positions, and a short training
#
# ViT prepends a learned [CLS] vector and adds positions; here a patch at grid row
# $r$, column $s$ gets $E_{row}[r] + E_{col}[s]$ (the [CLS] token a vector of its
# own), so the model knows where in the image a patch sat. The rest is the
# encoder of BERT, unchanged; a linear head reads the [CLS] position.
# `python -m minitransformer train --model vit` runs the same training longer.
# The two trainings of this lecture take minutes in full, so they run the speed wing's
# `fast.train`: the same loop as `train`, on two model replicas, a core each (docs/speed.md).

# %%
from minitransformer import fast
from minitransformer.training.classification import classification_accuracy, vit_task
from minitransformer.training.loop import TrainConfig

vit_steps = 150 if FAST else 1500
vit_model, vit_data, _ = vit_task(batch_size=32 if FAST else 64, seed=0, n_val=300 if FAST else 1000,
                                  n_layer=1 if FAST else 2, n_head=2 if FAST else 4, d_model=32 if FAST else 64)
vit_run = fast.train(vit_model, vit_data, TrainConfig(steps=vit_steps, lr=3e-3 if FAST else 1e-3, warmup_steps=10,
                                                      eval_interval=vit_steps, eval_batches=2, final_eval_batches=2,
                                                      log_interval=vit_steps), log=lambda line: None)
vit_accuracy = classification_accuracy(vit_model, vit_data)
print(f"ViT, {vit_steps} steps: held-out accuracy {vit_accuracy:.1%} (chance {1 / len(SHAPES):.1%})")

fig = Figure(figsize=(5, 3))
ax = fig.add_subplot()
ax.plot(*zip(*vit_run.history), linewidth=0.8)
ax.axhline(np.log(len(SHAPES)), color="gray", linestyle="--", label="log 6: guessing")
ax.set_xlabel("step")
ax.set_ylabel("cross-entropy")
ax.set_title(f"ViT on generated shapes: {vit_accuracy:.0%} held out")
ax.legend()
fig.tight_layout()
save_figure(fig, "vit_training.png")

# %%
assert X_patches.shape == (12, (16 // p_vit) ** 2, p_vit * p_vit * 1)
assert vit_roundtrip
assert np.allclose(Z_patches[0, 5], X_patches[0, 5] @ W_patch)              # one patch, one matrix product
assert vit_accuracy > 0.3 > 1.5 / len(SHAPES)                               # well above chance (1/6)

# %% [markdown]
# ## Tables as sequences: the feature tokenizer
#
# A table row mixes numbers and categories. FT-Transformer (Gorishniy et al.
# 2021) gives every feature one token of width $C$:
#
# - numeric feature $j$: $t_j = x_j\, w_j + b_j$ (a learned direction scaled by the value, plus a learned bias);
# - categorical feature $k$ with value $c$: $t_k = E[o_k + c]$, one learned row per (column, value),
#   $o_k$ the offset of column $k$ in the one table $E$.
#
# Then [CLS] + the encoder + a head on [CLS], as for images. No positions: a
# feature is recognised by its own $w_j, b_j$ or rows of $E$.

# %%
from minitransformer.functional.feature_tokenizer import category_offsets, feature_tokenizer_forward
from minitransformer.training.tables import CARDINALITIES, make_table

tiny_num, tiny_cat, tiny_labels = make_table(4, np.random.default_rng(2))   # (4, 3), (4, 2), (4,)
print("numeric columns:\n", tiny_num, "\ncategorical columns:\n", tiny_cat, "\nlabels:", tiny_labels)
C_tab = 4
tab_rng = np.random.default_rng(3)
W_num = tab_rng.standard_normal((3, C_tab))
b_num = tab_rng.standard_normal((3, C_tab))
E_cat = tab_rng.standard_normal((sum(CARDINALITIES), C_tab))
tokens, _ = feature_tokenizer_forward(tiny_num.astype(np.float64), tiny_cat, W_num, b_num, E_cat, CARDINALITIES)
offsets = category_offsets(CARDINALITIES)
print("offsets of the categorical columns in E:", offsets, "| tokens:", tokens.shape)   # (4, 5, 4)

fig = Figure(figsize=(8, 2.6))
axes = fig.subplots(1, 4, sharey=True)
for row, ax in enumerate(axes):
    ax.imshow(tokens[row], cmap="RdBu", vmin=-3, vmax=3)
    ax.set_yticks(range(5), labels=["x0", "x1", "x2", "c0", "c1"])
    ax.set_xticks([])
    ax.set_title(f"row {row}: label {tiny_labels[row]}", fontsize=9)
fig.suptitle("five tokens per row: three numeric, two categorical")
save_figure(fig, "tabular_tokens.png")

# %% [markdown]
# The generated task: $y = [x_0 + s[c_0]\, x_1 + u[c_1] > 0]$ with 5% of the labels
# flipped, so $c_0$ decides whether $x_1$ counts for or against (an interaction),
# $x_2$ is noise, and no model can beat $1 - 0.05 = 95\%$.
# `python -m minitransformer train --model tabular` trains it longer.

# %%
from minitransformer import fast
from minitransformer.training.classification import classification_accuracy, tabular_task
from minitransformer.training.loop import TrainConfig

tab_steps = 150 if FAST else 1500
tab_model, tab_data, _ = tabular_task(batch_size=64, seed=0, n_val=500 if FAST else 1000,
                                      n_layer=1 if FAST else 2, n_head=2 if FAST else 4,
                                      d_model=16 if FAST else 64)
fast.train(tab_model, tab_data, TrainConfig(steps=tab_steps, lr=3e-3 if FAST else 1e-3, warmup_steps=10,
                                            eval_interval=tab_steps, eval_batches=2, final_eval_batches=2,
                                            log_interval=tab_steps), log=lambda line: None)
tab_accuracy = classification_accuracy(tab_model, tab_data)
tab_majority = max(tab_data.val[-1].mean(), 1 - tab_data.val[-1].mean())
print(f"tabular, {tab_steps} steps: held-out accuracy {tab_accuracy:.1%} (majority class {tab_majority:.1%})")

# %%
assert np.allclose(tokens[:, 1], tiny_num[:, 1:2] * W_num[1] + b_num[1])        # t_j = x_j w_j + b_j
assert np.array_equal(tokens[:, 4], E_cat[offsets[1] + tiny_cat[:, 1]])         # t_k = E[o_k + c_k]
assert offsets == (0, CARDINALITIES[0])
assert tab_accuracy > tab_majority + 0.15

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

# %% [markdown]
# ### Deck erratum: Shaw adds a^V, it does not subtract it
#
# The survey deck writes Shaw's output as $z_i = \sum_j \alpha_{ij}(x_j W^V - a^V_{ij})$. The paper
# (eq. 3) ADDS the relative value, as it adds $a^K_{ij}$ to the key two lines above:
# $z_i = \sum_j \alpha_{ij}(x_j W^V + a^V_{ij})$. By hand with the weights `shaw_attention_forward`
# returns, both signs, against the library:

# %%
rel_out, rel_cache = shaw_attention_forward(rel_q, rel_k, rel_v, *rel_tables)
alpha = rel_cache.probs[0, 0]                                   # (T, T) α_ij
a_V = rel_tables[1][relative_index(4, 4, 2)]                    # (T, T, D) a^V_ij
plus = np.einsum("ij,ijd->id", alpha, rel_v[0, 0][None] + a_V)      # Σ_j α_ij (v_j + a^V_ij)
minus = np.einsum("ij,ijd->id", alpha, rel_v[0, 0][None] - a_V)     # the deck's sign
print("library vs +a^V:", np.abs(rel_out[0, 0] - plus).max(), "| vs the deck's −a^V:", np.abs(rel_out[0, 0] - minus).max())
assert np.allclose(rel_out[0, 0], plus, rtol=0, atol=1e-12)
assert not np.allclose(rel_out[0, 0], minus, atol=1e-3)

# %% [markdown]
# ## Position interpolation: reading a longer context with RoPE
#
# RoPE rotates pair $j$ of a query or key at position $m$ by the angle $m\,\theta_j$,
# $\theta_j = 10000^{-2j/D}$. A model trained on windows of $L$ tokens has only ever
# seen angles $m\theta_j$ with $m < L$. For the fast pairs ($j$ small) that range
# covers many full turns, so a larger $m$ gives nothing new; for the slowest pairs
# $L\theta_j$ is far less than $2\pi$, and a position past $L$ is an angle the model
# has never met: it *extrapolates*, and its loss goes up.
#
# Position interpolation (Chen et al. 2023; kaiokendev's SuperHOT) squeezes the
# positions instead of extending them: with a scale $s$,
# $$m \;\mapsto\; m / s, \qquad \text{angle}_j(m) = \frac{m}{s}\,\theta_j ,$$
# so positions $0 \ldots sL-1$ land inside the trained range $[0, L)$, at
# fractional positions the model has not seen either but which lie *between*
# trained ones. In code: `rope_forward(x, offset, scale=s)`, in a model
# `GPTConfig(position="rope", rope_scale=s)`.
#
# Worked example: $D = 8$, trained length $L = 32$, the slowest pair $j = 3$.

# %%
from minitransformer.functional.rope import rope_forward
from minitransformer.models import GPTConfig
from minitransformer.plots.context import interpolation_figure
from minitransformer.training.context import position_losses, train_char_gpt
from minitransformer.training.data import load_text
from _lecture import show_png

D_rope, L_trained = 8, 32
theta = 10000.0 ** (-np.arange(0, D_rope, 2) / D_rope)          # θ_j, j = 0 .. 3
max_trained_angle = (L_trained - 1) * theta[3]
print(f"slowest pair: θ_3 = {theta[3]:.4f}; trained angles up to {max_trained_angle:.3f} rad")
print(f"position 40, plain RoPE: {40 * theta[3]:.3f} rad (never seen);"
      f" with s = 2: {40 / 2 * theta[3]:.3f} rad (inside)")

# Scale s at position s·m is exactly scale 1 at position m:
x_rope = np.random.default_rng(0).standard_normal((1, 1, 1, D_rope))
at_40_scaled, _ = rope_forward(x_rope, offset=40, scale=2.0)
at_20_plain, _ = rope_forward(x_rope, offset=20)
print("rope(x, position 40, scale 2) == rope(x, position 20):", np.array_equal(at_40_scaled, at_20_plain))

# %% [markdown]
# A small RoPE GPT (character level, the corpus that ships with Python) is trained
# on windows of $T = 32$ tokens and evaluated on held-out windows of $2T = 64$: the
# mean next-token loss at every position of the window, plain RoPE against scale 2.
# The weights are the same; only `block_size` and `rope_scale` of the evaluating
# copy change (RoPE has no position parameters). Without a fine-tune, interpolation
# trades a little loss inside the trained length (angles the model never saw at
# fractional positions) for the positions beyond it; Chen et al. recover the
# former with about 1000 fine-tuning steps at the new length.

# %%
context_text = load_text()[:30000] if FAST else load_text()
context_gpt, _, _, context_val = train_char_gpt(2 if FAST else 300, seed=0, text=context_text,
                                                 block_size=32, n_layer=2, n_head=4, d_model=64,
                                                 position="rope")
T_ctx = context_gpt.config.block_size
n_eval_windows = 8 if FAST else 64
interp_losses = {"plain RoPE (extrapolation)": position_losses(context_gpt, context_val, 2 * T_ctx,
                                                               n_windows=n_eval_windows),
                 "position interpolation, scale 2": position_losses(context_gpt, context_val, 2 * T_ctx,
                                                                    n_windows=n_eval_windows, rope_scale=2.0)}
_, interp_data = interpolation_figure(interp_losses, T_ctx, path=OUT / "10_rope_interpolation.png")
show_png(OUT / "10_rope_interpolation.png")
for label in interp_losses:
    print(f"{label:34s} mean loss at positions < {T_ctx}: {interp_data['mean_within'][label]:.3f}, "
          f">= {T_ctx}: {interp_data['mean_beyond'][label]:.3f}")

# %%
assert 40 * theta[3] > max_trained_angle >= 40 / 2 * theta[3]
assert np.array_equal(at_40_scaled, at_20_plain)
assert all(loss.shape == (2 * T_ctx,) and np.isfinite(loss).all() for loss in interp_losses.values())
assert GPTConfig(position="rope", rope_scale=2.0).rope_scale == 2.0

# %% [markdown]
# ### The survey's claim, measured: what interpolation gains past the trained length
#
# The survey deck relays kaiokendev's SuperHOT patch (`theta = p * 0.25`): "the base model
# [goes] past 2K tokens without outputting gibberish". That is a claim about a large model
# whose plain RoPE breaks down past its trained length (Chen et al. 2023 report LLaMA's
# perplexity exploding there), and Chen et al. add about 1000 steps of fine-tuning at the new
# length. Does it show in the small model above, with no fine-tuning? From the curves: the
# gain past $T$ (plain RoPE's mean loss there minus interpolation's) and the cost inside $T$
# (interpolation's mean loss there minus plain RoPE's). At this scale it does not show:
# plain RoPE's loss past the trained length rises only a little (a character model reads
# mostly the last few characters, and those distances were all trained), so there is
# little for interpolation to win back, while its squeezed positions cost loss everywhere.
# The full run asserts this: no gain past $T$ of more than a few hundredths, a clear cost
# inside it. (In fast mode the model has trained 2 steps and both curves are still flat at
# about $\ln V$: only the numbers are printed.)

# %%
plain_label, interp_label = "plain RoPE (extrapolation)", "position interpolation, scale 2"
gain_beyond = interp_data["mean_beyond"][plain_label] - interp_data["mean_beyond"][interp_label]
cost_within = interp_data["mean_within"][interp_label] - interp_data["mean_within"][plain_label]
rise_plain = interp_data["mean_beyond"][plain_label] - interp_data["mean_within"][plain_label]
print(f"past T = {T_ctx}: interpolation gains {gain_beyond:+.3f} nats a token over plain RoPE; "
      f"inside T it costs {cost_within:+.3f}; plain RoPE's own rise past T: {rise_plain:+.3f}")
assert np.isfinite([gain_beyond, cost_within, rise_plain]).all()
if not FAST:
    assert gain_beyond < 0.05                       # no real gain past T without fine-tuning, here
    assert cost_within > 0.1                        # and a clear cost inside T

# %% [markdown]
# ## Attention sinks: generating past the context with a rolling cache
#
# A KV cache grows by one entry per token; at `block_size` a model with absolute
# positions must stop. The obvious fix, a *sliding window* cache that drops the
# oldest entry, keeps memory bounded, but Xiao et al. (2023, StreamingLLM) found
# that large language models then collapse as soon as the *first* tokens leave the
# cache. Every softmax row must sum to 1; a head with nothing useful to read parks
# its probability on the first tokens, which every query can see (the "attention
# sink"). Evict them and that mass lands on tokens that mean something.
#
# StreamingLLM's rolling cache keeps the first $k$ positions (the sinks, $k = 4$)
# plus the $w$ most recent:
# $$\text{keys seen by the token at step } t = \{0, \ldots, k-1\} \;\cup\; \{t-w+1, \ldots, t\},$$
# and assigns positions by **cache slot** ($0 \ldots k+w-1$), not by place in the
# text, so RoPE and ALiBi never see a distance larger than they were trained on.
# (Learned absolute positions have no row past `block_size`: refused.) The keys are
# stored before RoPE and rotated by their slot at every step.
#
# Worked example: $k = 2$ sinks, window $w = 3$ (the new token and 2 held), 7 tokens fed one at a time.

# %%
from minitransformer.generation.generate import generate
from minitransformer.generation.streaming import streaming_nll
from minitransformer.generation import SinkKVCache
from minitransformer.plots.context import sinks_figure
from _lecture import show_png

sink_cache = SinkKVCache(n_sink=2, window=3)
for t in range(7):
    sink_cache.append(np.full((1, 1, 1, 2), float(t)), np.full((1, 1, 1, 2), float(t)))
    print(f"after token {t}: the cache holds text positions {sink_cache.positions.tolist()}")

# %% [markdown]
# The RoPE GPT of the previous section (trained on windows of 32) reads held-out
# text of 8 × 32 tokens, one token at a time, with a window of 16 and 4 sinks, or
# the same window and no sinks. The loss of each next token, averaged over 8
# streams, against its position. A model this small and this briefly trained need
# not have formed sinks at all: the figure measures whether it did.

# %%
N_stream, B_stream = (64, 2) if FAST else (8 * T_ctx, 8)
stream_starts = np.linspace(0, len(context_val) - N_stream - 1, B_stream).astype(np.int64)
stream_ids = context_val[stream_starts[:, None] + np.arange(N_stream)]            # (B, N)
stream_nll = {"4 sinks + window 16": streaming_nll(context_gpt, stream_ids, window=16, n_sink=4).mean(0),
              "window 16, no sinks": streaming_nll(context_gpt, stream_ids, window=16, n_sink=0).mean(0)}
_, sinks_data = sinks_figure(stream_nll, T_ctx, smooth=8 if FAST else 32, path=OUT / "10_attention_sinks.png")
show_png(OUT / "10_attention_sinks.png")
for label, ppl in sinks_data["perplexity"].items():
    print(f"{label:22s} perplexity past position {T_ctx}: {ppl:.3f}")
streamed = generate(context_gpt, stream_ids[:1, :8], 3 * T_ctx, cache_window=16, n_sink=4)
print(f"generated {streamed.shape[1]} tokens with block_size {T_ctx}")

# %%
assert sink_cache.positions.tolist() == [0, 1, 5, 6]          # 2 sinks + the 2 most recent
assert sink_cache.length == 4 and sink_cache.seen == 7
assert streamed.shape == (1, 8 + 3 * T_ctx)                    # past block_size
assert all(np.isfinite(p) for p in sinks_data["perplexity"].values())

# %% [markdown]
# ## Sparse patterns: fewer scores, a reach that grows with depth
#
# Full causal attention computes $T(T+1)/2$ scores. A **sliding window** of $w$ keys
# computes about $Tw$; one layer then sees only $w$ tokens back, but $L$ layers
# stack: position $t$ reaches $L(w-1)$ tokens back. Two refinements (Child et al.
# 2019; Beltagy et al. 2020, Longformer, here their causal halves):
#
# * **dilated** window: the same $w$ keys, every $r$-th one,
#   $j \in \{t, t-r, \ldots, t-(w-1)r\}$: a span $(w-1)r + 1$ for the same cost;
# * **global** tokens: a few positions $g$ that every later query sees and that see
#   their whole past, on top of the window: a short path between any two tokens.
#
# In a model: `GPTConfig(window=w, dilation=r)` or `GPTConfig(window=w, global_positions=(0, ...))`;
# the masks are `dilated_window_mask` and `global_window_mask` in `functional/masks.py`.
# Worked example, $T = 8$, $w = 3$, $r = 2$:

# %%
from minitransformer.functional.masks import (causal_mask, dilated_window_mask, global_window_mask,
                                              sliding_window_mask)
from minitransformer.models import GPT, GPTConfig
from minitransformer.plots.masks import attention_patterns
from _lecture import show_png

T_sp, w_sp, r_sp = 8, 3, 2
dilated = dilated_window_mask(T_sp, w_sp, r_sp)
global_sliding = global_window_mask(T_sp, w_sp, (0,))
print("dilated window, w = 3, r = 2:\n", dilated.astype(int))
print("global position 0 + window 3:\n", global_sliding.astype(int))

def reach(mask, layers):
    """Which positions can reach which after ``layers`` layers: the boolean matrix power."""
    r = np.eye(len(mask), dtype=bool)
    for _ in range(layers):
        r = (r.astype(int) @ mask.astype(int)) > 0
    return r

T_reach = 16
reach_back = {}
for name, mask in [("sliding", sliding_window_mask(T_reach, w_sp)), ("dilated", dilated_window_mask(T_reach, w_sp, r_sp)),
                   ("full", causal_mask(T_reach))]:
    reach_back[name] = T_reach - 1 - int(np.argmax(reach(mask, 2)[-1]))
    print(f"T = {T_reach}, {name:8s}: {int(mask.sum()):3d} scores; the last token reaches back "
          f"{reach_back[name]} positions in 2 layers")

attention_patterns(T=16, window=4, dilation=2, global_positions=(0, 8), path=OUT / "10_sparse_patterns.png")
show_png(OUT / "10_sparse_patterns.png")

sparse_gpt = GPT(GPTConfig(vocab_size=10, block_size=T_sp, n_layer=1, n_head=2, d_model=16,
                           position="rope", window=w_sp, dilation=r_sp)).eval()
sparse_gpt.forward(np.arange(T_sp)[None] % 10)
sparse_probs = sparse_gpt.blocks[0].attn.sublayer.attention_probs()            # (1, H, T, T)

# %%
assert dilated.sum(axis=1).tolist() == [min(w_sp, t // r_sp + 1) for t in range(T_sp)]
assert np.array_equal(dilated[7], [0, 0, 0, 1, 0, 1, 0, 1])      # 7, 5, 3 (1 is past the span 5)
assert global_sliding[:, 0].all()                                 # everyone sees the global token
assert reach_back["sliding"] == 2 * (w_sp - 1) and reach_back["dilated"] == 2 * (w_sp - 1) * r_sp
assert np.all(sparse_probs[0][:, ~dilated] == 0)                  # nothing outside the pattern

# %% [markdown]
# ## Quiz
#
# Write your answer in each `answer_N = None  # your answer` cell and run the check
# below it: a wrong answer stops with a hint, an unanswered one says so
# (`lectures/_quiz.py`; the answers are stored as digests, not in plain sight).

# %%
from _quiz import check, summary

# %% [markdown]
# **Question 1.** A Vision Transformer cuts a 224 × 224 image into 16 × 16 patches. How
# many patch tokens does it read?

# %%
answer_1 = None  # your answer

# %%
check("1", answer_1, "b4bbe448fde336bb", hint="(H / p) · (W / p)")

# %% [markdown]
# **Question 2.** And if every PIXEL were a token instead, how long would the sequence be?

# %%
answer_2 = None  # your answer

# %%
check("2", answer_2, "649e9ac9f2711f06", hint="one token per pixel: about 50k, too long for full attention")

# %% [markdown]
# **Question 3.** How many numbers does one flattened 16 × 16 RGB patch hold?

# %%
answer_3 = None  # your answer

# %%
check("3", answer_3, "f7b856c054de7ccc", hint="p · p pixels, 3 colour channels each")

# %% [markdown]
# **Question 4.** A feature tokenizer for tables turns a row with three numerical and two
# categorical features, plus a [CLS] token, into how many tokens?

# %%
answer_4 = None  # your answer

# %%
check("4", answer_4, "e7f6c011776e8db7", hint="one token per feature, numerical or categorical, and one [CLS]")

# %% [markdown]
# **Question 5.** Position interpolation (the "SuperHOT" patch `theta = p * 0.25`): a
# model trained on 2048 positions is run on longer inputs with every position scaled by
# 0.25. Up to what length do the scaled positions stay within the trained range?

# %%
answer_5 = None  # your answer

# %%
check("5", answer_5, "864a936a35324151", hint="scaled position p · 0.25 must stay below 2048")

# %% [markdown]
# **Question 6.** Full attention over T = 4096 tokens costs how many times the score
# computations of T = 1024?

# %%
answer_6 = None  # your answer

# %%
check("6", answer_6, "b17ef6d19c7a5b1e", hint="T² scores")

# %% [markdown]
# **Question 7.** In Llama-2's attention maps (the survey deck), beyond the first two
# layers most heads attend heavily to which token: "first" or "last"?

# %%
answer_7 = None  # your answer

# %%
check("7", answer_7, "a7937b64b8caa58f", hint="the attention sink: the initial token")
summary()

# %% [markdown]
# ## What this lecture claimed, checked

# %%
assert N_patches == 196 and patch_numbers == 768
print("lecture 10: all claims check out")
