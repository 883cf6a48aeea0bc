# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Lecture 4: where is each token? Position encodings
#
# Attention compares every query with every key and sums; nothing in it knows
# which token came first. Permute the tokens and the outputs are permuted the same
# way. So order has to be put in by hand. Four ways, all in this package:
#
# | scheme | where | what |
# |---|---|---|
# | sinusoidal (Vaswani et al. 2017) | added to the embeddings | a fixed table of sines and cosines |
# | learned (GPT-2, BERT) | added to the embeddings | a trained row per position |
# | RoPE (Su et al. 2021) | inside attention, on q and k | a rotation by an angle proportional to the position |
# | ALiBi (Press et al. 2022) | inside attention, on the scores | a penalty proportional to the distance |

# %%
import math

import matplotlib
matplotlib.use("Agg")                    # figures go to files, never to a window
import numpy as np
from matplotlib.figure import Figure

from _lecture import FAST, OUT, save_figure, show_png    # fast-mode switch; where figures go (lectures/_lecture.py)
from minitransformer.plots.positions import rope_figure, sinusoidal_encoding
from minitransformer.functional.alibi import alibi_bias, alibi_slopes
from minitransformer.functional.masks import causal_mask
from minitransformer.functional.rope import rope_forward
from minitransformer.functional.sinusoidal import sinusoidal_table
from minitransformer.layers import LearnedPositionEmbedding, MultiHeadAttention

np.set_printoptions(precision=4, suppress=True)

# %% [markdown]
# ## 0. Attention alone cannot tell the order
#
# Self-attention without a mask is **permutation-equivariant**: $\operatorname{Attn}(PX) = P\operatorname{Attn}(X)$
# for any permutation $P$ of the positions. Adding a position encoding to $X$ breaks this.

# %%
T, C = 5, 8
rng = np.random.default_rng(0)
x = rng.standard_normal((1, T, C))                         # (B, T, C) token vectors, no positions
attn = MultiHeadAttention(C, 2, rng=0, init_std=0.5).astype(np.float64)
perm = np.array([3, 0, 4, 1, 2])
y = attn.forward(x)
y_perm = attn.forward(x[:, perm])
print("no positions: Attn(Px) - P Attn(x) =", np.abs(y_perm - y[:, perm]).max())
PE = sinusoidal_table(T, C, dtype=np.float64)              # (T, C)
y_pos = attn.forward(x + PE)
y_pos_perm = attn.forward(x[:, perm] + PE)                 # the same tokens, in another order
attn._cache = None                                         # no backward follows
print("with positions:  difference =", np.abs(y_pos_perm - y_pos[:, perm]).max())

# %% [markdown]
# ### Deck erratum: equivariant, not invariant
#
# The survey deck says "attention is permutation invariant", the module deck that
# Transformers are "position invariant": "The cat sat = sat the cat". Invariance would
# mean $\operatorname{Attn}(PX) = \operatorname{Attn}(X)$; what holds is EQUIVARIANCE, the same outputs in the
# permuted order. Each token's output is the same whatever the order, so the model
# cannot tell the orders apart, but the outputs move with their tokens. (Pooling
# them, a sum or a mean over the positions, is invariant.)

# %%
print("Attn(Px) - Attn(x)   =", np.abs(y_perm - y).max(), "(invariance: 0)")
print("Attn(Px) - P Attn(x) =", np.abs(y_perm - y[:, perm]).max(), "(equivariance: 0)")
assert np.abs(y_perm - y).max() > 1e-3                                   # not invariant
assert np.allclose(y_perm, y[:, perm], rtol=0, atol=1e-12)               # equivariant
assert np.allclose(y_perm.sum(axis=1), y.sum(axis=1), rtol=0, atol=1e-12)   # the pooled sum is invariant

# %% [markdown]
# ### The naive position: add 10, 20, 30 ...
#
# The survey deck's first idea, "[The_] + 10, [detective_] + 20, [invest] + 30 ... but smarter":
# add the index times 10 to every number of the token's vector, $x_t + 10t\cdot\mathbf 1$. Why it
# fails, measured on random token vectors of unit scale:
#
# 1. It drowns the token. By the fourth position 30 is added to entries of size 1: two
#    DIFFERENT tokens at the same position point the same way (cosine near 1).
# 2. LayerNorm erases it. A constant added to every feature is removed by the mean
#    subtraction: $\mathrm{LN}(x + c\mathbf 1) = \mathrm{LN}(x)$, so a pre-norm block sees no
#    position at all.
# 3. It has no bound: a position never trained on adds a value never seen (position 1000: 10,000).
#
# The sinusoidal table fixes all three: entries in [−1, 1], a different pattern across the
# features (so the norm's mean subtraction leaves it), bounded at every position.

# %%
from minitransformer.functional.norm import layernorm_forward

tokens = np.random.default_rng(12).standard_normal((2, C))   # two different tokens, unit-scale entries
ones_C, zeros_C = np.ones(C), np.zeros(C)
for t in (0, 1, 3, 10):
    a, b = tokens[0] + 10 * t, tokens[1] + 10 * t          # the same position, + 10 t everywhere
    cosine = a @ b / (np.linalg.norm(a) * np.linalg.norm(b))
    print(f"position {t:2d}: cos(token A, token B) = {cosine:.4f}")
cos_far = (tokens[0] + 30) @ (tokens[1] + 30) / (np.linalg.norm(tokens[0] + 30) * np.linalg.norm(tokens[1] + 30))
naive_ln = [layernorm_forward(tokens[0] + 10 * t, ones_C, zeros_C)[0] for t in range(T)]
sin_table = sinusoidal_table(T, C, dtype=np.float64)
sin_ln = [layernorm_forward(tokens[0] + sin_table[t], ones_C, zeros_C)[0] for t in range(T)]
naive_spread = max(np.abs(v - naive_ln[0]).max() for v in naive_ln)
sin_spread = min(np.abs(sin_ln[t] - sin_ln[0]).max() for t in range(1, T))
print(f"after LayerNorm, token A at positions 0..{T - 1}: naive differ by at most {naive_spread:.1e}, "
      f"sinusoidal by at least {sin_spread:.3f}")
assert cos_far > 0.99 and naive_spread < 1e-12 and sin_spread > 0.01 and np.abs(sin_table).max() <= 1

# %% [markdown]
# ## 1. Sinusoidal encoding
#
# The paper's formula, with $i$ the index of a PAIR of columns ($i = 0 \dots d/2 - 1$):
#
# $$PE[pos, 2i] = \sin\!\left(\frac{pos}{10000^{2i/d}}\right), \qquad PE[pos, 2i+1] = \cos\!\left(\frac{pos}{10000^{2i/d}}\right).$$
#
# Both columns of a pair share one frequency $\omega_i = 10000^{-2i/d}$; wavelengths run
# from $2\pi$ (pair 0) to almost $2\pi \cdot 10000$ (the last pair).
#
# Loop-based pseudo-code for it is taught in several forms. Watch what `i` means:
#
# * **(A)** `i` is the COLUMN: `PE[pos, i] = sin(pos / 10000**(i/d)) if i even else cos(pos / 10000**((i-1)/d))`.
#   It looks different from the formula ($i/d$, not $2i/d$), but for the even column $i = 2k$
#   the exponent $i/d = 2k/d$ is the paper's with pair index $k$, and the odd column uses $i - 1 = 2k$. Correct.
# * **(B)** `i` used for BOTH: the column index plugged into the paper's $2i/d$,
#   `PE[pos, i] = sin(pos / 10000**(2*i/d)) if i even else cos(pos / 10000**(2*i/d))`.
#   The frequencies fall twice as fast and the sin and cos of a pair no longer match.
# * **(C)** `(i-1)` forgotten: `... else cos(pos / 10000**(i/d))`: each cos has a
#   slightly lower frequency than its sin partner.

# %%
max_len, d = 50, 16
table = sinusoidal_table(max_len, d, dtype=np.float64)     # (max_len, d) the library's


def loop_table(rule):
    """Fill a (max_len, d) table with Python loops and the math module, column by column."""
    PE_loop = np.zeros((max_len, d))
    for pos in range(max_len):
        for i in range(d):
            PE_loop[pos, i] = rule(pos, i)
    return PE_loop


variants = {
    "A (i = column, (i-1) for cos)": loop_table(
        lambda pos, i: math.sin(pos / 10000 ** (i / d)) if i % 2 == 0 else math.cos(pos / 10000 ** ((i - 1) / d))),
    "B (column index in 2i/d)": loop_table(
        lambda pos, i: math.sin(pos / 10000 ** (2 * i / d)) if i % 2 == 0 else math.cos(pos / 10000 ** (2 * i / d))),
    "C (i instead of i-1 for cos)": loop_table(
        lambda pos, i: math.sin(pos / 10000 ** (i / d)) if i % 2 == 0 else math.cos(pos / 10000 ** (i / d))),
}
for name, PE_v in variants.items():
    print(f"{name:32s} max |variant - sinusoidal_table| = {np.abs(PE_v - table).max():.2e}")

# %% [markdown]
# Why the pairs must share a frequency: then moving $k$ positions is a ROTATION of
# each pair, the same for every position,
#
# $$\begin{pmatrix} PE[p+k, 2i] \\ PE[p+k, 2i+1] \end{pmatrix} =
#   \begin{pmatrix} \cos\omega_i k & \sin\omega_i k \\ -\sin\omega_i k & \cos\omega_i k \end{pmatrix}
#   \begin{pmatrix} PE[p, 2i] \\ PE[p, 2i+1] \end{pmatrix},$$
#
# and $\sin\omega_i k$, $\cos\omega_i k$ are themselves the table's row $k$. So
# "k positions later" is a fixed linear map a layer can learn. We test the identity
# with the table's own entries, for every $p$, $k$ and pair:


# %%
def rotation_error(PE_v, k):
    """max |PE[p+k] - R(k) PE[p]| over p and pairs, R(k) read from row k of the same table."""
    s, c = PE_v[:, 0::2], PE_v[:, 1::2]                    # (max_len, d/2) sin and cos columns
    n = max_len - k
    s_next = s[:n] * c[k] + c[:n] * s[k]                   # sin(a + b) = sin a cos b + cos a sin b
    c_next = c[:n] * c[k] - s[:n] * s[k]                   # cos(a + b) = cos a cos b - sin a sin b
    return max(np.abs(s_next - s[k:]).max(), np.abs(c_next - c[k:]).max())


shift_errors = {name: max(rotation_error(PE_v, k) for k in (1, 3, 10)) for name, PE_v in variants.items()}
shift_errors["sinusoidal_table"] = max(rotation_error(table, k) for k in (1, 3, 10))
for name, err in shift_errors.items():
    print(f"{name:32s} shift-is-a-rotation error {err:.2e}")
sinusoidal_encoding(path=OUT / "04_sinusoidal.png")
show_png(OUT / "04_sinusoidal.png")

# %% [markdown]
# ### The module deck's example: pos = 2, embedding [1.0, 1.1, 1.2, 1.3]
#
# With $d = 4$ the two pairs have frequencies $1$ and $10000^{-2/4} = 1/100$, so row 2 of
# the table is $[\sin 2, \cos 2, \sin 0.02, \cos 0.02]$, added to the word's embedding.

# %%
deck_embedding = np.array([1.0, 1.1, 1.2, 1.3])
pe_4 = sinusoidal_table(3, 4, dtype=np.float64)            # (3, 4) positions 0, 1, 2
by_formula = np.array([math.sin(2), math.cos(2), math.sin(2 / 100), math.cos(2 / 100)])
print("PE[2] =", pe_4[2], "| embedding + PE[2] =", deck_embedding + pe_4[2])
assert np.allclose(pe_4[2], by_formula, rtol=0, atol=1e-15)

# %% [markdown]
# ### Deck erratum: the pseudo-code's cos needs (i − 1)/d
#
# The module deck's loop computes `cos(pos/10000^(i/d))` at the odd columns: variant (C)
# above. The cos of a pair must share its sin's frequency, `(i-1)/d` (variant A). At
# pos = 2 with d = 4, column 1 becomes $\cos(2/10000^{1/4}) = \cos 0.2$ instead of $\cos 2$:

# %%
def deck_loop_row(pos, d):
    """The deck's pseudo-code for one row, as written: i/d in the cos too."""
    return np.array([math.sin(pos / 10000 ** (i / d)) if i % 2 == 0 else math.cos(pos / 10000 ** (i / d))
                     for i in range(d)])


deck_row2 = deck_loop_row(2, 4)
print("deck's loop:", deck_row2, "->", deck_embedding + deck_row2)
print("the formula:", pe_4[2], "->", deck_embedding + pe_4[2])
assert math.isclose(deck_row2[1], math.cos(0.2)) and math.isclose(pe_4[2, 1], math.cos(2))
assert np.allclose(deck_row2[0::2], pe_4[2, 0::2]) and np.abs(deck_row2 - pe_4[2]).max() > 1.3

# %% [markdown]
# ### Deck erratum: the loop runs over range(maxT)
#
# The same pseudo-code opens with `for pos in maxT:`, but `maxT` is a number (the deck's
# example: 5000), and a number cannot be iterated over: the loop must run over
# `range(maxT)`, the positions $0 \dots \text{maxT} - 1$. With that and the $(i - 1)/d$ of the
# cos, the deck's loop gives the paper's table:

# %%
maxT, d_loop = 50, 16
PE_matrix = np.zeros((maxT, d_loop))
try:
    for pos in maxT:                                       # the deck's line, as written
        pass
    loop_error = None
except TypeError as error:
    loop_error = str(error)
print("for pos in maxT:", loop_error)
for pos in range(maxT):                                    # the fix
    for i in range(d_loop):
        if i % 2 == 0:
            PE_matrix[pos, i] = math.sin(pos / 10000 ** (i / d_loop))
        if i % 2 == 1:
            PE_matrix[pos, i] = math.cos(pos / 10000 ** ((i - 1) / d_loop))
print("range(maxT) and (i - 1)/d: max |loop - sinusoidal_table| =",
      np.abs(PE_matrix - sinusoidal_table(maxT, d_loop, dtype=np.float64)).max())
assert loop_error is not None and "not iterable" in loop_error
assert np.allclose(PE_matrix, sinusoidal_table(maxT, d_loop, dtype=np.float64), rtol=0, atol=1e-12)

# %% [markdown]
# ### Deck erratum: position 0 is not left alone
#
# The module deck says that at position 0 "no manipulation is done to the vector".
# $\sin 0 = 0$, but $\cos 0 = 1$: row 0 adds 1 to every odd column.

# %%
print("PE[0] =", table[0])
assert np.all(table[0, 0::2] == 0.0) and np.all(table[0, 1::2] == 1.0)

# %% [markdown]
# ### Deck erratum: 10000 is raised to the power i/d
#
# The architecture deck writes $\sin\!\big(\tfrac{t}{10^4}\,\tfrac{i}{d}\big)$: a product where the
# formula has a power, $\sin\!\big(t / 10000^{i/d}\big)$. Its frequencies $i/(10^4 d)$ are all
# below $10^{-4}$, so over 50 positions every row stays within $10^{-2}$ of row 0
# (sin ≈ 0, cos ≈ 1): the positions are indistinguishable.

# %%
deck_product = loop_table(lambda pos, i: math.sin(pos / 1e4 * i / d) if i % 2 == 0
                          else math.cos(pos / 1e4 * (i - 1) / d))
spread_deck = np.abs(deck_product - deck_product[0]).max()
spread_right = np.abs(table - table[0]).max()
print(f"largest change from row 0 over {max_len} positions: deck {spread_deck:.4f}, formula {spread_right:.4f}")
assert spread_deck < 1e-2 and spread_right > 1.0
assert np.abs(variants["A (i = column, (i-1) for cos)"] - table).max() < 1e-12   # the power: the paper's table

# %% [markdown]
# ### Deck erratum: the positional vector is not small
#
# The module deck calls the positional encoding "a small vector which is added to the
# embedding". Every row of the table has the same length: each pair of columns holds a
# sine and a cosine of one angle, $\sin^2 + \cos^2 = 1$, so
#
# $$\lVert PE[pos] \rVert = \sqrt{d/2} \quad\text{for every } pos, \qquad 16 \text{ at } d = 512 .$$
#
# A token embedding initialised as GPT-2's (entries of std 0.02) has rows of length about
# $0.02\sqrt d \approx 0.45$ at $d = 512$: the position is about $16/0.45 \approx 35$ times LONGER than
# the word it is added to. The 2017 paper multiplies its embeddings by $\sqrt d$ (section 3.4; here
# `Seq2SeqConfig(scale_embeddings=True)`): with std 0.02 that gives rows of about $0.02\,d \approx 10$,
# and with the std $d^{-1/2}$ that the paper's tensor2tensor code draws them with, about
# $\sqrt d \approx 23$: the same size as the position, not larger. Small it is in none of these.

# %%
from minitransformer.layers import Embedding

d_model_pe = 512
pe_norms = np.linalg.norm(sinusoidal_table(5000, d_model_pe, dtype=np.float64), axis=1)   # (5000,)
row_norms = {}
for label, init_std, scale in (("std 0.02 (GPT-2)", 0.02, 1.0),
                               ("std 0.02, times √d (the paper's scaling)", 0.02, math.sqrt(d_model_pe)),
                               ("std d^-1/2, times √d", d_model_pe ** -0.5, math.sqrt(d_model_pe))):
    E = Embedding(1000, d_model_pe, rng=0, init_std=init_std).astype(np.float64).W           # (V, d)
    row_norms[label] = float(np.linalg.norm(scale * E, axis=1).mean())
print(f"|PE[pos]| for pos = 0 .. 4999: min {pe_norms.min():.6f}, max {pe_norms.max():.6f} "
      f"(√(d/2) = {math.sqrt(d_model_pe / 2):.6f})")
for label, norm in row_norms.items():
    print(f"token embedding row, {label:42s} |E[w]| ≈ {norm:6.2f}: |PE| / |E[w]| = {pe_norms[0] / norm:5.1f}")
assert np.allclose(pe_norms, math.sqrt(d_model_pe / 2), rtol=1e-12)
assert 0.4 < row_norms["std 0.02 (GPT-2)"] < 0.5 and pe_norms[0] / row_norms["std 0.02 (GPT-2)"] > 30
assert all(pe_norms[0] / norm > 0.5 for norm in row_norms.values())    # never small beside the word

# %% [markdown]
# ## 2. Learned positions
#
# GPT-2 and BERT learn one row per position, $P = W[0 : T]$, trained like the token
# embeddings. Flexible, but there is no row for a position never trained: the
# table has `max_len` rows and a longer sequence is an error.

# %%
learned = LearnedPositionEmbedding(max_len=8, d_model=4, rng=0).astype(np.float64)
P = learned.forward(5)                                     # (T, C) rows 0..4
learned.backward(np.ones_like(P))                          # dP: every used row gets a gradient
print("rows with a gradient:", np.flatnonzero(np.abs(learned.grads["W"]).sum(axis=1)))
try:
    learned.forward(9)
except ValueError as error:
    too_long = str(error)
    print("T = 9:", too_long)

# %% [markdown]
# ## 3. RoPE: rotate the queries and keys
#
# RoPE leaves the embeddings alone. Inside attention, it rotates each pair
# $(x_{2j}, x_{2j+1})$ of a query or key at position $m$ by the angle $m\theta_j$,
# $\theta_j = 10000^{-2j/D}$:
#
# $$\begin{pmatrix} y_{2j} \\ y_{2j+1}\end{pmatrix} = \begin{pmatrix} \cos m\theta_j & -\sin m\theta_j \\ \sin m\theta_j & \cos m\theta_j \end{pmatrix}\begin{pmatrix} x_{2j} \\ x_{2j+1}\end{pmatrix}.$$
#
# Rotations compose, $R(m)^\top R(n) = R(n - m)$, so the score
# $\langle R(m) q, R(n) k\rangle = \langle q, R(n - m) k\rangle$ depends on the positions only
# through their DIFFERENCE: attention sees relative positions for free.
#
# First the smallest case: D = 2, one pair, $\theta_0 = 1$ radian per position. The
# vector (1, 0) at position m should become (cos m, sin m).

# %%
n_pos = 6
e0 = np.zeros((1, 1, n_pos, 2))
e0[..., 0] = 1.0                                           # (1, 0) at positions 0..5
rotated, _ = rope_forward(e0)                              # (1, 1, n_pos, 2)
print("RoPE of (1, 0) at positions 0..5:\n", rotated[0, 0])

# %% [markdown]
# Now a query q and a key k (D = 16), placed at every position m and n:

# %%
D, n_pos = 16, 24
q = rng.standard_normal(D)
k = rng.standard_normal(D)
Rq, _ = rope_forward(np.ascontiguousarray(np.broadcast_to(q, (1, 1, n_pos, D))))  # row m = R(m) q
Rk, _ = rope_forward(np.ascontiguousarray(np.broadcast_to(k, (1, 1, n_pos, D))))  # row n = R(n) k
scores = Rq[0, 0] @ Rk[0, 0].T                             # (n_pos, n_pos) scores[m, n]
spread_per_distance = max(np.ptp(np.diagonal(scores, offset)) for offset in range(-n_pos + 1, n_pos))
print("score at (m, n) = (0, 0), (5, 5), (17, 17):", scores[0, 0], scores[5, 5], scores[17, 17])
print("largest spread of the scores along any diagonal m - n = const:", spread_per_distance)
print("norms are kept: max | |R(m) q| - |q| | =", np.abs(np.linalg.norm(Rq[0, 0], axis=-1) - np.linalg.norm(q)).max())
rope_figure(path=OUT / "04_rope.png")
show_png(OUT / "04_rope.png")

# %% [markdown]
# ### Deck erratum: the score is Re⟨f(q, m), f(k, n)⟩ with a conjugate
#
# The survey deck writes RoPE as complex numbers, $f(x, m)_j = (x_{2j} + i x_{2j+1}) e^{i m\theta_j}$,
# and the score as "$\operatorname{Re}(f(q, m), f(k, n))$". The next line of its own derivation shows
# what is meant: the inner product with the second vector CONJUGATED,
# $\operatorname{Re}\sum_j f(q, m)_j\,\overline{f(k, n)_j}$, whose phases subtract to $(m - n)\theta_j$. Without the
# conjugate the phases add: the score would depend on $m + n$.

# %%
theta = 10000.0 ** (-2 * np.arange(D // 2) / D)            # (D/2,) θ_j
positions = np.arange(n_pos)


def f_complex(x, m):
    """RoPE as complex numbers: (x_2j + i x_2j+1) e^{i m θ_j}, (D/2,) complex."""
    return (x[0::2] + 1j * x[1::2]) * np.exp(1j * m * theta)


conjugated = np.array([[np.real(np.sum(f_complex(q, m) * np.conj(f_complex(k, n_)))) for n_ in positions]
                       for m in positions])                # (n_pos, n_pos)
no_conjugate = np.array([[np.real(np.sum(f_complex(q, m) * f_complex(k, n_))) for n_ in positions]
                         for m in positions])
spread_no_conj = max(np.ptp(np.diagonal(no_conjugate, o)) for o in range(-n_pos + 1, n_pos))
print("with the conjugate vs rope_forward's scores:", np.abs(conjugated - scores).max())
print("without it, largest spread along a diagonal m - n = const:", spread_no_conj)
assert np.allclose(conjugated, scores, rtol=0, atol=1e-12)
assert spread_no_conj > 1.0

# %% [markdown]
# ### Deck erratum: x_mᵀ W_qᵀ R_{n−m} W_k x_n
#
# The architecture deck (column vectors: $q_m = R_m W_q x_m$) ends its derivation with
# $x^\top W_q R_{\Theta, n-m} W_k x_n$. Transposing $R_m W_q x_m$ gives $x_m^\top W_q^\top R_m^\top$, and
# $R_m^\top R_n = R_{n-m}$: the score is $x_m^\top W_q^\top R_{n-m} W_k x_n$, with the index $m$ and the
# transpose of $W_q$. The block-diagonal $R_m$ built by hand equals `rope_forward`:

# %%
def rope_matrix(m, D):
    """R_m: (D, D) block diagonal, the pair j rotated by m θ_j."""
    R = np.zeros((D, D))
    for j in range(D // 2):
        c, s = math.cos(m * 10000.0 ** (-2 * j / D)), math.sin(m * 10000.0 ** (-2 * j / D))
        R[2 * j:2 * j + 2, 2 * j:2 * j + 2] = [[c, -s], [s, c]]
    return R


W_q, W_k = rng.standard_normal((D, D)), rng.standard_normal((D, D))      # (D, C), here C = D
x_m, x_n, m_pos, n_pos_ = rng.standard_normal(D), rng.standard_normal(D), 7, 3
rotated_q = rope_forward((W_q @ x_m)[None, None, None], offset=m_pos)[0][0, 0, 0]   # R_m W_q x_m
rotated_k = rope_forward((W_k @ x_n)[None, None, None], offset=n_pos_)[0][0, 0, 0]  # R_n W_k x_n
score_mn = rotated_q @ rotated_k
right_form = x_m @ W_q.T @ rope_matrix(n_pos_ - m_pos, D) @ W_k @ x_n
deck_form = x_m @ W_q @ rope_matrix(n_pos_ - m_pos, D) @ W_k @ x_n
print(f"q_mᵀ k_n = {score_mn:.6f} | x_mᵀ W_qᵀ R_(n-m) W_k x_n = {right_form:.6f} | deck's x_mᵀ W_q R W_k x_n = {deck_form:.6f}")
assert np.allclose(rope_matrix(m_pos, D) @ W_q @ x_m, rotated_q, rtol=0, atol=1e-12)
assert math.isclose(score_mn, right_form, rel_tol=1e-12) and not math.isclose(score_mn, deck_form, rel_tol=1e-3)

# %% [markdown]
# ## 4. ALiBi: a distance penalty on the scores
#
# ALiBi adds no position to any vector. Each head $h$ subtracts a multiple of the
# distance from its scores, so far-away keys count less:
#
# $$\text{scores}[h, i, j] \mathrel{+}= -m_h\,(i - j), \qquad m_h = 2^{-8(h+1)/H},\ h = 0 \dots H-1.$$
#
# (The paper counts heads from 1, $m_h = 2^{-8h/H}$; the code and every figure here count them from 0.)
#
# For H = 8 the slopes are $1/2, 1/4, \dots, 1/256$: some heads look far back, some
# only at the last few tokens. When H is not a power of two, the paper takes the
# slopes of the largest power of two $n < H$ and fills in every other slope of $2n$
# heads: H = 6 gives $[2^{-2}, 2^{-4}, 2^{-6}, 2^{-8}]$ followed by $[2^{-1}, 2^{-3}]$.

# %%
slopes8, slopes6 = alibi_slopes(8), alibi_slopes(6)
print("H = 8:", [f"1/{round(1 / s)}" for s in slopes8])
print("H = 6:", [f"1/{round(1 / s)}" for s in slopes6])
bias = alibi_bias(alibi_slopes(2), T=4, S=4, dtype=np.float64)   # (H, T, S)
print("head 0 (slope 1/16), bias × 16 = -(i - j); above the diagonal the causal mask hides it:\n",
      bias[0] * 16)

T_show = 12
bias_show = alibi_bias(alibi_slopes(4), T_show, T_show, dtype=np.float64)   # (4, T, T)
hidden = ~causal_mask(T_show)
fig = Figure(figsize=(13, 3.4), layout="constrained")
axes = fig.subplots(1, 4)
for h, ax in enumerate(axes):
    shown = np.where(hidden, np.nan, bias_show[h])        # the masked future left blank
    image = ax.imshow(shown, cmap="magma", vmin=bias_show.min(), vmax=0)
    ax.set_title(f"head {h}: slope 1/{round(1 / alibi_slopes(4)[h])}")
    ax.set_xlabel("key j")
axes[0].set_ylabel("query i")
fig.colorbar(image, ax=axes, label="bias added to the score")
save_figure(fig, "04_alibi.png")
print("figures in", OUT)

# %% [markdown]
# ### Deck erratum: BLOOM uses ALiBi, not RoPE
#
# The architecture deck lists BLOOM among the RoPE models; BLOOM uses ALiBi (and the
# survey deck spells it "ALBi"). Its largest model has 112 heads, not a power of two:
# the slopes are those of 64 heads, $2^{-8h/64}$, followed by every other slope of 128
# heads, $2^{-8h/128}$ for odd $h$, by the rule above. No vector is rotated; the bias
# is added to the scores.

# %%
bloom_slopes = alibi_slopes(112)
by_rule = [2.0 ** (-8 * h / 64) for h in range(1, 65)] + [2.0 ** (-8 * h / 128) for h in range(1, 97, 2)]
print(f"BLOOM, 112 heads: first {bloom_slopes[0]:.4f} = 2^(-1/8), head 64 {bloom_slopes[64]:.4f} = 2^(-1/16), "
      f"last {bloom_slopes[-1]:.5f}")
assert bloom_slopes == by_rule and len(bloom_slopes) == 112
bloom_bias = alibi_bias(bloom_slopes[:2], T=3, S=3, dtype=np.float64)   # (2, 3, 3) added to the scores
assert np.allclose(bloom_bias[0], -bloom_slopes[0] * np.array([[0, -1, -2], [1, 0, -1], [2, 1, 0]]))

# %% [markdown]
# ## What this lecture claimed, checked

# %%
# Without positions attention is permutation-equivariant; with them it is not.
assert np.allclose(y_perm, y[:, perm], rtol=0, atol=1e-12)
assert np.abs(y_pos_perm - y_pos[:, perm]).max() > 1e-3

# Of the loop variants, A (column index, i - 1 for the cos) is the paper's formula and
# equals sinusoidal_table; B and C differ from it by O(1).
assert np.abs(variants["A (i = column, (i-1) for cos)"] - table).max() < 1e-12
assert np.abs(variants["B (column index in 2i/d)"] - table).max() > 0.5
assert np.abs(variants["C (i instead of i-1 for cos)"] - table).max() > 0.5
# A shift by k is a rotation of each pair for the real table (and A), not for B or C.
assert shift_errors["sinusoidal_table"] < 1e-12 and shift_errors["A (i = column, (i-1) for cos)"] < 1e-12
assert shift_errors["B (column index in 2i/d)"] > 1e-2 and shift_errors["C (i instead of i-1 for cos)"] > 1e-2
# Each pair turns by ω_i = 10000^(-2i/d) per position (wavelength 2π/ω_i, from 2π up):
# read the angle of row 1 of the table, atan2(sin ω_i, cos ω_i).
omega = np.arctan2(table[1, 0::2], table[1, 1::2])                 # (d/2,)
assert np.allclose(omega, [10000.0 ** (-2 * i / d) for i in range(d // 2)], rtol=1e-12)

# Learned positions: only the rows used get a gradient; a position past max_len is an error.
assert np.array_equal(np.flatnonzero(np.abs(learned.grads["W"]).sum(axis=1)), np.arange(5))
assert "max_len=8" in too_long

# RoPE: (1, 0) at position m becomes (cos m, sin m); scores depend only on m - n; norms kept.
assert np.allclose(rotated[0, 0], np.stack([np.cos(np.arange(6)), np.sin(np.arange(6))], axis=1),
                   rtol=0, atol=1e-12)
assert spread_per_distance < 1e-12
assert np.allclose(np.linalg.norm(Rq[0, 0], axis=-1), np.linalg.norm(q), rtol=1e-12)

# ALiBi: the slopes by the rule, worked by hand; the bias is -slope · (i - j).
assert slopes8 == [2.0 ** -h for h in range(1, 9)]
assert slopes6 == [2.0 ** -2, 2.0 ** -4, 2.0 ** -6, 2.0 ** -8, 2.0 ** -1, 2.0 ** -3]
i_minus_j = np.array([[0, -1, -2, -3], [1, 0, -1, -2], [2, 1, 0, -1], [3, 2, 1, 0]])
assert np.array_equal(bias[0], -i_minus_j / 16) and np.array_equal(bias[1], -i_minus_j / 256)
print("lecture 4: all claims check out")

# %% [markdown]
# ## Quiz
#
# Write your answer in each `answer_N = None  # your answer` cell and run the check
# below it: a wrong answer stops with a hint, an unanswered one says so
# (`lectures/_quiz.py`; the answers are stored as digests, not in plain sight).

# %%
from _quiz import check, summary

# %% [markdown]
# **Question 1.** In the paper's sinusoidal encoding with $d = 4$, what is the frequency
# $\omega_1$ of the second pair of columns (pair index $i = 1$)?

# %%
answer_1 = None  # your answer

# %%
check("1", answer_1, "2ee17d46928b52c1", digits=3, hint="ω_i = 10000^(-2i/d), i the index of the PAIR")

# %% [markdown]
# **Question 2.** With RoPE, the score between a query at position m and a key at
# position n depends on: (a) m and n separately; (b) m − n only; (c) m + n. A letter.

# %%
answer_2 = None  # your answer

# %%
check("2", answer_2, "3e23e8160039594a", hint="R(m)ᵀ R(n) = R(n − m)")

# %% [markdown]
# **Question 3.** ALiBi with H = 8 heads: what is the slope of the first head?

# %%
answer_3 = None  # your answer

# %%
check("3", answer_3, "153a6f5f4d4b53db", digits=3, hint="m_h = 2^(-8(h+1)/H), head h = 0 .. H-1")

# %% [markdown]
# **Question 4.** ALiBi head with slope 1/4: what bias is added to the score of query
# i = 5 for key j = 2?

# %%
answer_4 = None  # your answer

# %%
check("4", answer_4, "e1beb3d59ccc92f2", digits=3, hint="−m · (i − j): farther keys count less")

# %% [markdown]
# **Question 5.** True or False: a model with learned positions and `max_len = 512` can
# read a sequence of 600 tokens.

# %%
answer_5 = None  # your answer

# %%
check("5", answer_5, "fcbcf165908dd18a", hint="is there a row in the table for position 599?")
summary()
