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
# ---- section: position interpolation (end) ----

# ---- section: attention sinks (begin) ----
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
from minitransformer.layers import SinkKVCache
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
# ---- section: attention sinks (end) ----

# ---- section: sparse patterns (begin) ----
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
# ---- section: sparse patterns (end) ----

# ---- section: quiz (begin) ----
# ---- section: quiz (end) ----

# %% [markdown]
# ## What this lecture claimed, checked

# %%
assert N_patches == 196 and patch_numbers == 768
print("lecture 10: all claims check out")
