# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Lecture 1: attention is a soft dictionary lookup
#
# A Python `dict` answers a query by finding the ONE key equal to it and returning
# that key's value. Attention answers a query by comparing it with EVERY key,
# turning the similarities into weights that sum to 1, and returning the weighted
# average of the values:
#
# $$\text{lookup}(q) = \sum_j w_j\, v_j, \qquad w = \operatorname{softmax}(s), \qquad s_j = \text{similarity}(q, k_j).$$
#
# Nothing is ever "not found": a query between two keys gets a blend of their values.
# The similarity a Transformer uses is the dot product, scaled: $s_j = q \cdot k_j / \sqrt{D}$.
#
# Run as a script (`python lectures/01_attention.py`) or open as a notebook with jupytext.
# `MINITRANSFORMER_FAST=1` makes every lecture small and quick (the tests use it).

# %%
import math

import matplotlib
matplotlib.use("Agg")                    # figures go to files, never to a window
import numpy as np
from matplotlib.figure import Figure

from minitransformer.functional.attention import attention_forward
from minitransformer.functional.softmax import softmax_backward, softmax_forward

from _lecture import FAST, OUT, save_figure    # fast-mode switch; where figures go (lectures/_lecture.py)
np.set_printoptions(precision=4, suppress=True)

# %% [markdown]
# ## 1. The colour table
#
# A small dictionary from colours to the wavelength of their light, in nanometres.
# Each colour's key is its direction on the colour wheel (hue angle $\theta$),
# a 2-D vector of length $r$: $k = r(\cos\theta, \sin\theta)$.
#
# | colour | hue $\theta$ | value (nm) |
# |---|---|---|
# | red    | 0°   | 700 |
# | yellow | 60°  | 580 |
# | green  | 120° | 530 |
# | blue   | 240° | 470 |
#
# The query is **orange**, hue 30°, exactly between red and yellow. Its score with
# key $c$ is $s_c = q\cdot k_c/\sqrt{2} = r^2\cos(\theta_q - \theta_c)/\sqrt 2$: red and
# yellow both sit 30° away, so they get the same score and the same weight.

# %%
colours = ["red", "yellow", "green", "blue"]
hue = np.radians([0.0, 60.0, 120.0, 240.0])                # (4,) the keys' angles
wavelength = np.array([[700.0], [580.0], [530.0], [470.0]])  # (4, 1) the values
orange = math.radians(30.0)


def colour_lookup(r):
    """Attention of the orange query over the four colour keys, vectors of length r."""
    K = r * np.stack([np.cos(hue), np.sin(hue)], axis=1)   # (4, 2)
    q = r * np.array([[math.cos(orange), math.sin(orange)]])  # (1, 2)
    out, cache = attention_forward(q[None, None], K[None, None], wavelength[None, None])
    return out[0, 0, 0, 0], cache.probs[0, 0, 0]           # the blended value, the 4 weights


for r in (1.0, 3.0):
    value, w = colour_lookup(r)
    print(f"r = {r}: weights " + ", ".join(f"{c} {wc:.4f}" for c, wc in zip(colours, w))
          + f"  ->  blended value {value:.1f} nm")

# %% [markdown]
# With short vectors ($r = 1$) the scores are close together and green and blue
# still get a share: the blend is pulled below 640 nm. With $r = 3$ the scores are
# nine times further apart and the weight concentrates on the two nearest keys:
# red and yellow get almost 1/2 each, and the answer is almost their average,
# (700 + 580)/2 = 640 nm. (Real orange light is about 600–620 nm: the analogy is
# about the mechanism, not about physics.) Longer vectors = a sharper lookup.

# %%
value3, w3 = colour_lookup(3.0)
fig = Figure(figsize=(7, 3), layout="constrained")
ax = fig.subplots()
ax.bar(colours, w3, color=["tab:red", "gold", "tab:green", "tab:blue"])
ax.set_ylabel("attention weight")
ax.set_title(f"Orange query (r = 3): blended value {value3:.1f} nm")
save_figure(fig, "01_colour_weights.png")

# %% [markdown]
# ## 2. Vectors: keys, values and three queries
#
# Keys and values are rows of two matrices. Here the scores are the plain dot
# products $s = q K^\top$ (no scaling yet), written out with NumPy once:

# %%
K = np.array([[10, 0, 0], [0, 10, 0], [0, 0, 10], [0, 0, 10]], dtype=np.float64)   # (S, D) = (4, 3)
V = np.array([[1, 0, 1], [10, 0, 2], [100, 5, 0], [1000, 6, 0]], dtype=np.float64)  # (S, 3)
Q = np.array([[0, 10, 0], [0, 0, 10], [10, 10, 0]], dtype=np.float64)               # (T, D) = (3, 3)


def plain_attention(Q, K, V, scale=1.0):
    """softmax(Q Kᵀ · scale) V, written out: the one place a lecture spells out a softmax."""
    s = Q @ K.swapaxes(-1, -2) * scale                     # (..., T, S) scores
    e = np.exp(s - s.max(axis=-1, keepdims=True))          # subtract the row max: no overflow
    w = e / e.sum(axis=-1, keepdims=True)                  # (..., T, S) each row sums to 1
    return w @ V, w                                        # (..., T, Dv), the weights


out_plain, w_plain = plain_attention(Q, K, V)
print("weights (rows: queries, columns: keys)\n", w_plain)
print("outputs\n", out_plain)

# %% [markdown]
# Worked by hand:
#
# * $q = [0, 10, 0]$ scores $[0, 100, 0, 0]$: all the weight on key 2, the output is its value $[10, 0, 2]$.
# * $q = [0, 0, 10]$ scores $[0, 0, 100, 100]$: keys 3 and 4 tie, half each:
#   $\tfrac12([100, 5, 0] + [1000, 6, 0]) = [550, 5.5, 0]$.
# * $q = [10, 10, 0]$ scores $[100, 100, 0, 0]$: keys 1 and 2 tie:
#   $\tfrac12([1, 0, 1] + [10, 0, 2]) = [5.5, 0, 1.5]$.
#
# The library's `attention_forward` takes batched, multi-head arrays (B, H, T, D)
# and divides the scores by $\sqrt D = \sqrt 3$. The scores become 57.7 instead of
# 100, still so far apart that the losing keys get $e^{-57.7} \approx 10^{-25}$:
# the same outputs to double precision.

# %%
out_lib, cache = attention_forward(Q[None, None], K[None, None], V[None, None])   # (1, 1, T, 3)
expected = np.array([[10, 0, 2], [550, 5.5, 0], [5.5, 0, 1.5]])
print("attention_forward:\n", out_lib[0, 0])
print("max |library - hand-worked| =", np.abs(out_lib[0, 0] - expected).max())

# %% [markdown]
# ## 3. Scaled dot-product attention
#
# $$\operatorname{Attention}(Q, K, V) = \operatorname{softmax}\!\left(\frac{Q K^\top}{\sqrt{D}}\right) V$$
#
# with $Q$ (T, D) holding T queries, $K$ (S, D) and $V$ (S, D_v) holding S keys and
# values; the softmax runs along each row (over the keys). With a batch and
# several heads every array gains two leading axes, (B, H, ·, ·), and `@` runs over
# them at once. The plain version above and the library agree on random inputs:

# %%
rng = np.random.default_rng(0)
B, H, T, S, D = 2, 3, 4, 5, 8
q = rng.standard_normal((B, H, T, D))
k = rng.standard_normal((B, H, S, D))
v = rng.standard_normal((B, H, S, D))
out_lib, cache = attention_forward(q, k, v)                           # (B, H, T, D)
out_mine, w_mine = plain_attention(q, k, v, scale=1 / math.sqrt(D))   # (B, H, T, D)
print("shapes: out", out_lib.shape, " P", cache.probs.shape)
print("max |plain - library| =", np.abs(out_mine - out_lib).max())

# %% [markdown]
# ## 4. Why divide by $\sqrt{D}$
#
# Take $q, k \in \mathbb{R}^D$ with independent entries of mean 0 and variance 1.
# Each product $q_i k_i$ has mean 0 and variance $E[q_i^2]E[k_i^2] = 1$, and the
# $D$ products are independent, so
#
# $$\operatorname{Var}(q\cdot k) = D, \qquad \operatorname{Var}\!\left(\frac{q\cdot k}{\sqrt D}\right) = 1.$$
#
# Measured on random vectors (n pairs per D). The sample variance of $n$ draws has
# relative standard error $\sqrt{(\kappa - 1)/n}$, with $\kappa = 3 + 6/D$ the
# kurtosis of $q \cdot k$ (each product has fourth moment 9); we call a measurement
# consistent with the formula when it is within 5 standard errors.

# %%
dims = [4, 16, 64, 256, 1024]
n = 1000 if FAST else 8000
rng = np.random.default_rng(1)
measured = {}
for d in dims:
    qd = rng.standard_normal((n, d))
    kd = rng.standard_normal((n, d))
    dot = np.einsum("nd,nd->n", qd, kd)                    # (n,) q·k for each pair
    measured[d] = (dot.var(), (dot / math.sqrt(d)).var())
    tol = 5 * math.sqrt((2 + 6 / d) / n)                   # 5 relative standard errors
    print(f"D = {d:5d}: Var(q·k) = {measured[d][0]:8.1f} (formula {d}), "
          f"Var(q·k/√D) = {measured[d][1]:.3f} (formula 1), tolerance ±{tol:.1%}")

# %% [markdown]
# Why it matters: the softmax of large scores **saturates**. Give a query T = 16
# random keys. Unscaled, the scores have standard deviation $\sqrt D$ (32 at D = 1024):
# one key takes nearly all the weight, the softmax is almost flat around that
# point, and almost no gradient flows back through it. We measure the mean largest
# weight, and how much of a random upstream gradient $dy$ the softmax's backward
# lets through, $\lVert dx\rVert / \lVert dy\rVert$ with $dx$ from `softmax_backward`.

# %%
T_keys = 16
saturation = {}
for d in dims:
    qd = rng.standard_normal((n, 1, d))
    kd = rng.standard_normal((n, T_keys, d))
    scores = (qd @ kd.swapaxes(-1, -2))[:, 0]              # (n, T_keys)
    dy = rng.standard_normal(scores.shape)
    row = {}
    for name, s in (("unscaled", scores), ("scaled", scores / math.sqrt(d))):
        p, p_cache = softmax_forward(s)                    # (n, T_keys)
        dx = softmax_backward(dy, p_cache)
        ratio = np.linalg.norm(dx, axis=-1) / np.linalg.norm(dy, axis=-1)
        row[name] = (p.max(axis=-1).mean(), ratio.mean())
    saturation[d] = row
    print(f"D = {d:5d}: largest weight unscaled {row['unscaled'][0]:.3f}, scaled {row['scaled'][0]:.3f} | "
          f"gradient let through unscaled {row['unscaled'][1]:.4f}, scaled {row['scaled'][1]:.4f}")

fig = Figure(figsize=(11, 3.8), layout="constrained")
ax1, ax2 = fig.subplots(1, 2)
ax1.loglog(dims, [measured[d][0] for d in dims], "o-", label="Var(q·k), measured")
ax1.loglog(dims, dims, "k:", label="D (formula)")
ax1.loglog(dims, [measured[d][1] for d in dims], "s-", label="Var(q·k/√D), measured")
ax1.set_xlabel("head dim D")
ax1.set_ylabel("variance")
ax1.set_title("The dot product's variance grows like D")
ax1.legend()
ax2.semilogx(dims, [saturation[d]["unscaled"][0] for d in dims], "o-", label="largest weight, unscaled")
ax2.semilogx(dims, [saturation[d]["scaled"][0] for d in dims], "s-", label="largest weight, scaled")
ax2.semilogx(dims, [saturation[d]["unscaled"][1] for d in dims], "o--", label="gradient through, unscaled")
ax2.semilogx(dims, [saturation[d]["scaled"][1] for d in dims], "s--", label="gradient through, scaled")
ax2.set_xlabel("head dim D")
ax2.set_title(f"Softmax over {T_keys} keys: saturation without the scale")
ax2.legend(fontsize=8)
save_figure(fig, "01_scaling.png")
print("figures in", OUT)

# %% [markdown]
# Scaled, the scores keep variance 1 whatever D: the largest weight and the
# gradient that gets through stay the same from D = 4 to D = 1024. Unscaled, the
# largest weight heads to 1 and the gradient to 0 as D grows. (Even unsaturated, a
# softmax over 16 keys passes only a few per cent of $\lVert dy\rVert$: with weights near 1/16,
# $dx = p \odot (dy - \textstyle\sum p\, dy)$ is about $\lVert dy\rVert/16$. What matters is the trend.)

# %% [markdown]
# ## 5. Deck erratum: divide by $\sqrt{d_k}$, not by $d_k$
#
# One of the course decks derives $\operatorname{Var}(q^\top k) = d_k$ correctly and then says
# "we divide by $d_k$". Dividing a quantity by $c$ divides its variance by $c^2$: to bring
# a variance of $d_k$ down to 1 we divide by $\sqrt{d_k}$, as the paper's formula (and the
# deck's own equation) does. Dividing by $d_k$ gives $\operatorname{Var}(q^\top k / d_k) = 1/d_k$: the
# scores shrink towards 0 as $d_k$ grows and the softmax tends to the uniform $1/T$,
# the opposite failure of saturation. Both, measured on the same random queries and keys:

# %%
from _lecture import save_figure

erratum_rng = np.random.default_rng(5)
by_divisor = {}
for d in dims:
    qd = erratum_rng.standard_normal((n, 1, d))
    kd = erratum_rng.standard_normal((n, T_keys, d))
    raw = (qd @ kd.swapaxes(-1, -2))[:, 0]                 # (n, T_keys) q·k
    for name, divisor in (("√D (paper)", math.sqrt(d)), ("D (deck)", d)):
        s_div = raw / divisor
        by_divisor[name, d] = (s_div.var(), softmax_forward(s_div)[0].max(axis=-1).mean())
    print(f"D = {d:5d}: Var(q·k/√D) = {by_divisor['√D (paper)', d][0]:.3f}, "
          f"Var(q·k/D) = {by_divisor['D (deck)', d][0]:.5f} (1/D = {1 / d:.5f}) | largest weight "
          f"{by_divisor['√D (paper)', d][1]:.3f} vs {by_divisor['D (deck)', d][1]:.3f} (uniform 1/{T_keys} = {1 / T_keys:.4f})")

fig = Figure(figsize=(6, 3.5), layout="constrained")
ax = fig.subplots()
for name, style in (("√D (paper)", "o-"), ("D (deck)", "s--")):
    ax.semilogx(dims, [by_divisor[name, d][1] for d in dims], style, label=f"scores divided by {name}")
ax.axhline(1 / T_keys, color="gray", linestyle=":", label=f"uniform, 1/{T_keys}")
ax.set(xlabel="head dim D", ylabel="mean largest attention weight",
       title="Dividing by D flattens attention as D grows")
ax.legend()
save_figure(fig, "01_divide_by_d_erratum.png")
for d in dims:
    tol = 5 * math.sqrt((2 + 6 / d) / n)      # 5 standard errors, counting only the n independent queries
    assert abs(by_divisor["√D (paper)", d][0] - 1) < tol
    assert abs(by_divisor["D (deck)", d][0] * d - 1) < tol            # Var(q·k/D) = 1/D
assert by_divisor["D (deck)", 1024][1] < 1.1 / T_keys                  # nearly uniform at D = 1024
assert by_divisor["√D (paper)", 1024][1] > 2 / T_keys                  # the paper's keeps its contrast

# %% [markdown]
# ## What this lecture claimed, checked

# %%
# The orange query: red and yellow (both 30° away) get equal weights, and the weights
# are softmax(r² cos(Δθ)/√2), computed here with the math module, key by key.
for r in (1.0, 3.0):
    value, w = colour_lookup(r)
    s = [r * r * math.cos(orange - h) / math.sqrt(2) for h in hue]
    by_hand = [math.exp(si) / sum(math.exp(sj) for sj in s) for si in s]
    assert np.allclose(w, by_hand, rtol=1e-12, atol=0), (w, by_hand)
    assert abs(w[0] - w[1]) < 1e-12                        # red and yellow tie
    assert abs(value - float(w @ wavelength[:, 0])) < 1e-9  # the output is the weighted average
assert abs(colour_lookup(3.0)[0] - 640.0) < 1.0            # r = 3: almost the average of red and yellow
assert colour_lookup(1.0)[0] < colour_lookup(3.0)[0] - 5   # r = 1: green and blue pull it down

# The three vector queries give the hand-worked values, plain and through the library.
assert np.allclose(out_plain, expected, atol=1e-9)
assert np.allclose(attention_forward(Q[None, None], K[None, None], V[None, None])[0][0, 0], expected, atol=1e-9)

# Scaled dot-product attention: the written-out version equals attention_forward,
# and every row of P is a distribution over the keys.
assert np.allclose(out_mine, out_lib, rtol=0, atol=1e-12)
assert np.allclose(cache.probs.sum(axis=-1), 1.0, atol=1e-12)

# Var(q·k) = D and Var(q·k/√D) = 1, within 5 standard errors of the sample variance.
for d in dims:
    tol = 5 * math.sqrt((2 + 6 / d) / n)
    assert abs(measured[d][0] / d - 1) < tol, (d, measured[d])
    assert abs(measured[d][1] - 1) < tol, (d, measured[d])

# Saturation: unscaled at D = 1024 one key takes > 90% of the weight and the softmax lets
# through less than a quarter of the gradient the scaled one does; scaled, both measures
# stay within a narrow band for every D.
assert saturation[1024]["unscaled"][0] > 0.9
assert saturation[1024]["unscaled"][1] < 0.25 * saturation[1024]["scaled"][1]
scaled_max = [saturation[d]["scaled"][0] for d in dims]
scaled_grad = [saturation[d]["scaled"][1] for d in dims]
assert max(scaled_max) - min(scaled_max) < 0.1 and max(scaled_grad) - min(scaled_grad) < 0.1
print("lecture 1: all claims check out")

# %% [markdown]
# ## Quiz
#
# Write your answer in each `answer_N = None  # your answer` cell and run the check
# below it: a wrong answer stops with a hint, an unanswered one says so
# (`lectures/_quiz.py`; `MINITRANSFORMER_QUIZ_SOLUTIONS=1` fills in the solutions).

# %%
from _quiz import check, summary

# %% [markdown]
# **Question 1.** $q, k \in \mathbb{R}^{64}$ with independent entries of mean 0 and variance 1.
# What is the variance of $q \cdot k$?

# %%
answer_1 = None  # your answer

# %%
check("1", answer_1, 64 * 1 * 1, hint="a sum of D independent products, each of variance E[q²] E[k²]")

# %% [markdown]
# **Question 2.** By what number must the scores be divided, for $D = 64$, to bring their
# variance back to 1?

# %%
answer_2 = None  # your answer

# %%
check("2", answer_2, math.sqrt(64), hint="dividing by c divides the variance by c²")

# %% [markdown]
# **Question 3.** A query has scores $[2, 2, 0]$ against three keys (already scaled).
# What attention weight does the first key get? (3 decimals are enough.)

# %%
answer_3 = None  # your answer

# %%
check("3", answer_3, math.exp(2) / (2 * math.exp(2) + math.exp(0)), abs_tol=5e-4,
      hint="softmax: exp(s_j) / Σ exp(s_i)")

# %% [markdown]
# **Question 4.** Without the scaling, what happens to the softmax as $D$ grows?
# (a) it becomes uniform; (b) it saturates: one key takes nearly all the weight and
# little gradient gets through; (c) nothing changes. Answer with a letter.

# %%
answer_4 = None  # your answer

# %%
check("4", answer_4, "b" if saturation[dims[-1]]["unscaled"][0] > 0.5 else "a",
      hint="look at the largest weight, unscaled, in section 4's figure")

# %% [markdown]
# **Question 5.** True or False: each output row of attention is a weighted average of
# the value vectors, with weights that are non-negative and sum to 1.

# %%
answer_5 = None  # your answer

# %%
check("5", answer_5, True, hint="what are the rows of softmax(scores)?")
summary()
