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

from _lecture import FAST, OUT, save_figure    # fast-mode switch; where figures go (lectures/_lecture.py)
from minitransformer.functional.attention import attention_forward
from minitransformer.functional.softmax import softmax_backward, softmax_forward

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
# and divides the scores by $\sqrt D = \sqrt 3$. The scores become $100/\sqrt 3 \approx 57.7$ instead of
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
# ## 6. The module deck's own examples, with its numbers
#
# ### The RGB colour table
#
# The module deck (003) looks colours up in a table whose values are RGB triples.
# Here each colour NAME is a key, a one-hot vector of length $r$ over the six names;
# a query mixes the names it means. "Yellow" matches one key exactly; "orange" is
# half red, half yellow, and with $r = 10$ the four other keys get weight
# $e^{-r^2/\sqrt 6} \approx 10^{-18}$: the lookup is the deck's $0.5\,(255, 0, 0) + 0.5\,(255, 255, 0)$.

# %%
rgb_names = ["red", "green", "blue", "yellow", "black", "white"]
rgb_values = np.array([[255, 0, 0], [0, 255, 0], [0, 0, 255], [255, 255, 0], [0, 0, 0], [255, 255, 255]],
                      dtype=np.float64)                    # (6, 3) the values V
r_rgb = 10.0
rgb_keys = r_rgb * np.eye(6)                               # (6, 6) one key per colour name
rgb_queries = r_rgb * np.array([np.eye(6)[3],                       # "yellow"
                                np.eye(6)[0] + np.eye(6)[3]])       # "orange" = red + yellow
rgb_out, rgb_cache = attention_forward(rgb_queries[None, None], rgb_keys[None, None], rgb_values[None, None])
rgb_weights = rgb_cache.probs[0, 0]                        # (2, 6)
for name, w, value in zip(["yellow", "orange"], rgb_weights, rgb_out[0, 0]):
    print(f"Q = {name:6s} weights " + ", ".join(f"{c} {wc:.3f}" for c, wc in zip(rgb_names, w))
          + f"  ->  RGB {np.round(value, 6)}")

# %% [markdown]
# ### Deck erratum: half of 255 is 127.5
#
# The deck writes $0.5\,(255, 0, 0) + 0.5\,(255, 255, 0) = (255, 128, 0)$. The weighted
# average is $(255, 127.5, 0)$: attention returns the average itself, not a rounded
# colour (128 is what an 8-bit image would store after rounding).

# %%
deck_orange = np.array([255.0, 128.0, 0.0])
right_orange = 0.5 * rgb_values[0] + 0.5 * rgb_values[3]   # (3,) the weighted average
print("deck:", deck_orange, " weighted average:", right_orange, " attention:", np.round(rgb_out[0, 0, 1], 9))
assert np.allclose(rgb_out[0, 0, 0], [255, 255, 0], rtol=0, atol=1e-9)          # yellow: exact match
assert np.allclose(rgb_out[0, 0, 1], right_orange, rtol=0, atol=1e-9)          # orange: (255, 127.5, 0)
assert right_orange[1] == 127.5 and not np.allclose(rgb_out[0, 0, 1], deck_orange, atol=0.1)

# %% [markdown]
# ### One word's attention, step by step
#
# The deck's walk-through: three words "main chhaatr hoon" ($S = 3$), each a vector
# of $D = 4$ numbers, and for now $d_h = D$. Row vectors, as in the deck:
#
# 1. $q_1 = w_1 W^Q$, and $k_j = w_j W^K$, $v_j = w_j W^V$ for every word $j$;
# 2. unnormalised similarities $s'_{1j} = q_1 \cdot k_j$, divided by $\sqrt{d_h}$;
# 3. $a_{1j} = \operatorname{softmax}_j(s'_{1j}/\sqrt{d_h})$, then $z_1 = \sum_j a_{1j} v_j$.
#
# The matrix form $Z = \operatorname{softmax}(QK^\top/\sqrt{d_h})\,V$ does all words at once:
# its first row is $z_1$ ("It's the same!").

# %%
words = ["main", "chhaatr", "hoon"]
walk_rng = np.random.default_rng(3)
S_w, D_w = len(words), 4
X_w = walk_rng.standard_normal((S_w, D_w))                 # (S, D) the word encodings w_1 .. w_3
W_Q, W_K, W_V = (0.5 * walk_rng.standard_normal((D_w, D_w)) for _ in range(3))   # (D, d_h) each, d_h = D
q_1 = X_w[0] @ W_Q                                         # (d_h,) q_1 = w_1 W^Q
k_w = [X_w[j] @ W_K for j in range(S_w)]                   # k_j = w_j W^K
v_w = [X_w[j] @ W_V for j in range(S_w)]                   # v_j = w_j W^V
s_prime = [float(q_1 @ k_w[j]) for j in range(S_w)]        # s'_1j = q_1 · k_j
s_scaled = [s / math.sqrt(D_w) for s in s_prime]
a_1 = [math.exp(s) / sum(math.exp(t) for t in s_scaled) for s in s_scaled]
z_1 = sum(a_1[j] * v_w[j] for j in range(S_w))             # (d_h,) z_1 = Σ_j a_1j v_j
Z_w, walk_cache = attention_forward((X_w @ W_Q)[None, None], (X_w @ W_K)[None, None], (X_w @ W_V)[None, None])
print("s'_1j =", np.round(s_prime, 4), "| a_1j =", np.round(a_1, 4), "| z_1 =", np.round(z_1, 4))
print("row 1 of the matrix form:", Z_w[0, 0, 0], "| shapes: P", walk_cache.probs.shape[2:], "Z", Z_w.shape[2:])
assert np.allclose(Z_w[0, 0, 0], z_1, rtol=0, atol=1e-12)
assert np.allclose(walk_cache.probs[0, 0, 0], a_1, rtol=0, atol=1e-12)

# %% [markdown]
# ### Deck erratum: the attention matrix is S × S, the output S × d_h
#
# The module deck labels $\sigma(QK^\top/\sqrt{d_h}) \in \mathbb{R}^{S \times d_h}$ on one slide. The softmax
# changes no shape: $QK^\top$ is $(S \times d_h)(d_h \times S) = S \times S$, one weight per (query, key)
# pair, and only the product with $V$ ($S \times d_h$) gives $Z \in \mathbb{R}^{S \times d_h}$. With $S \ne d_h$:

# %%
S_shape, d_h_shape = 5, 3
shape_rng = np.random.default_rng(4)
Q_s, K_s, V_s = (shape_rng.standard_normal((1, 1, S_shape, d_h_shape)) for _ in range(3))
Z_s, shape_cache = attention_forward(Q_s, K_s, V_s)
print("softmax(QKᵀ/√d_h):", shape_cache.probs.shape[2:], " Z:", Z_s.shape[2:], " deck's label:", (S_shape, d_h_shape))
assert shape_cache.probs.shape[2:] == (S_shape, S_shape) != (S_shape, d_h_shape)
assert Z_s.shape[2:] == (S_shape, d_h_shape)

# %% [markdown]
# ### Deck erratum: the output averages with the softmax weights, not the scores
#
# The survey deck (001) defines the scores $\hat a_i = q\cdot k_i$ and the weights
# $a_i = \operatorname{softmax}(\hat a)_i$, then writes the output as $z = \sum_i \hat a_i v_i$, with the SCORES.
# That is no average: the scores can be negative, do not sum to 1, and grow with
# the length of $q$. The output is $z = \sum_i a_i v_i$:

# %%
q_c = np.array([[0.0, 0.0, 10.0]])                         # section 2's query [0, 0, 10]
a_hat = (q_c @ K.T)[0]                                     # (4,) scores â_i = q · k_i
a_soft = softmax_forward(a_hat / math.sqrt(3))[0]          # (4,) the weights, scaled as the library does
z_deck = a_hat @ V                                         # Σ â_i v_i
z_right = a_soft @ V                                       # Σ a_i v_i
z_lib = attention_forward(q_c[None, None], K[None, None], V[None, None])[0][0, 0, 0]
print("scores â:", a_hat, "sum", a_hat.sum(), "| weights a:", np.round(a_soft, 6), "sum", a_soft.sum())
print("deck Σ â_i v_i =", z_deck, "| Σ a_i v_i =", z_right, "| attention_forward:", z_lib)
assert np.allclose(z_right, z_lib, rtol=0, atol=1e-9) and np.allclose(z_right, [550, 5.5, 0], atol=1e-9)
assert np.allclose(z_deck, 200 * z_right)                  # the scores sum to 200 here, not to 1

# %% [markdown]
# ### Deck erratum: the softmax runs over a row, not over one score
#
# The loss deck (004) expands each output row as
# $\operatorname{softmax}(\langle q_1, k_1\rangle/\sqrt d)\,v_1^\top + \dots + \operatorname{softmax}(\langle q_1, k_n\rangle/\sqrt d)\,v_n^\top$.
# Read literally, the softmax of ONE number is $e^s/e^s = 1$, and the row would be
# $v_1 + \dots + v_n$. The weight of $v_j$ is the $j$-th entry of the softmax of the whole
# row of scores, $[\operatorname{softmax}(q_1 K^\top/\sqrt d)]_j$:

# %%
row_scores = (Q_s[0, 0, :1] @ K_s[0, 0].T)[0] / math.sqrt(d_h_shape)     # (S,) one query's scores
one_by_one = np.array([softmax_forward(np.array([s]))[0][0] for s in row_scores])   # softmax of each score alone
whole_row = softmax_forward(row_scores)[0]                 # (S,) softmax over the row
print("softmax of each score alone:", one_by_one, "| softmax of the row:", np.round(whole_row, 4))
assert np.all(one_by_one == 1.0)
assert np.allclose(whole_row @ V_s[0, 0], Z_s[0, 0, 0], rtol=0, atol=1e-12)
assert not np.allclose(one_by_one @ V_s[0, 0], Z_s[0, 0, 0])

# %% [markdown]
# ### Deck erratum: q·k has mean 0 and variance d_k
#
# The course notes (000) say $q^\top k$ "has mean and variance of $d_k$". Its mean is
# $\sum_i E[q_i]E[k_i] = 0$; only its VARIANCE is $d_k$. Measured on section 4's draws
# (5 standard errors: the mean's is $\sqrt{d_k/n}$):

# %%
mean_rng = np.random.default_rng(6)
for d in (16, 256):
    dots = np.einsum("nd,nd->n", mean_rng.standard_normal((n, d)), mean_rng.standard_normal((n, d)))
    print(f"d_k = {d:3d}: mean {dots.mean():7.3f} (deck: {d}, right: 0) | variance {dots.var():7.1f} (d_k = {d})")
    assert abs(dots.mean()) < 5 * math.sqrt(d / n) < d / 2          # 0, nowhere near d_k
    assert abs(dots.var() / d - 1) < 5 * math.sqrt((2 + 6 / d) / n)

# %% [markdown]
# ### Deck erratum: √d_h is the one divisor that keeps the variance 1
#
# The module deck says "there isn't actually anything special about the division
# value $\sqrt{d_h}$", any value $> 1$ would do. Section 4 showed what is special:
# $\sqrt{d_h}$ is the standard deviation of $q \cdot k$, so the scaled scores have variance 1
# for EVERY head width. A fixed divisor (8, right only for $d_h = 64$) leaves the variance
# $d_h/64$: too peaky for wide heads, too flat for narrow ones.

# %%
for d in dims:
    fixed = measured[d][0] / 8 ** 2                         # Var(q·k / 8) = Var(q·k) / 64
    print(f"d_h = {d:5d}: Var(q·k/√d_h) = {measured[d][1]:.3f} | Var(q·k/8) = {fixed:8.3f} (d_h/64 = {d / 64:.3f})")
    tol = 5 * math.sqrt((2 + 6 / d) / n)
    assert abs(measured[d][1] - 1) < tol and abs(fixed / (d / 64) - 1) < tol

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
# (`lectures/_quiz.py`; the answers are stored as digests, not in plain sight).

# %%
from _quiz import check, summary

# %% [markdown]
# **Question 1.** $q, k \in \mathbb{R}^{64}$ with independent entries of mean 0 and variance 1.
# What is the variance of $q \cdot k$?

# %%
answer_1 = None  # your answer

# %%
check("1", answer_1, "a68b412c4282555f", hint="a sum of D independent products, each of variance E[q²] E[k²]")

# %% [markdown]
# **Question 2.** By what number must the scores be divided, for $D = 64$, to bring their
# variance back to 1?

# %%
answer_2 = None  # your answer

# %%
check("2", answer_2, "2c624232cdd22177", hint="dividing by c divides the variance by c²")

# %% [markdown]
# **Question 3.** A query has scores $[2, 2, 0]$ against three keys (already scaled).
# What attention weight does the first key get? (3 significant digits.)

# %%
answer_3 = None  # your answer

# %%
check("3", answer_3, "9c860be98ade1acc", digits=3, hint="softmax: exp(s_j) / Σ exp(s_i)")

# %% [markdown]
# **Question 4.** Without the scaling, what happens to the softmax as $D$ grows?
# (a) it becomes uniform; (b) it saturates: one key takes nearly all the weight and
# little gradient gets through; (c) nothing changes. Answer with a letter.

# %%
answer_4 = None  # your answer

# %%
check("4", answer_4, "3e23e8160039594a", hint="look at the largest weight, unscaled, in section 4's figure")

# %% [markdown]
# **Question 5.** True or False: each output row of attention is a weighted average of
# the value vectors, with weights that are non-negative and sum to 1.

# %%
answer_5 = None  # your answer

# %%
check("5", answer_5, "b5bea41b6c623f7c", hint="what are the rows of softmax(scores)?")

# %% [markdown]
# **Question 6** (the module deck's review). Self-attention, one head, over $S = 6$ tokens with
# $d_h = 16$: what is the shape of the attention matrix $\sigma(QK^\top/\sqrt{d_h})$? (A list [rows, columns].)

# %%
answer_6 = None  # your answer

# %%
check("6", answer_6, "b9177d892ba92a03", hint="one row per query, one column per key")

# %% [markdown]
# **Question 7** (the module deck's review). And the shape of the output $Z$? (A list [rows, columns].)

# %%
answer_7 = None  # your answer

# %%
check("7", answer_7, "922188857c73477a", hint="each row of the attention matrix averages the rows of V (S × d_h)")
summary()
