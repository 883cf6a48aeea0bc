# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Lecture 3: LayerNorm, residual connections, the position-wise FFN
#
# Around every attention layer of a Transformer sit three simple pieces:
#
# * **LayerNorm** rescales each position's feature vector to mean 0 and variance 1,
#   then applies a learned scale $\gamma$ and shift $\beta$;
# * the **residual connection** adds the sublayer's output to its input,
#   $y = x + F(x)$, so the gradient has a path that skips $F$;
# * the **position-wise feed-forward network** applies the same two-layer MLP to
#   every position on its own.
#
# The main event is LayerNorm's backward: derived one operation per line, then
# compared with the fused formula the library uses.

# %%

import matplotlib
matplotlib.use("Agg")                    # figures go to files, never to a window
import numpy as np
from matplotlib.figure import Figure

from _lecture import FAST, OUT, save_figure    # fast-mode switch; where figures go (lectures/_lecture.py)
from minitransformer.functional.norm import layernorm_backward, layernorm_forward
from minitransformer.gradcheck import check_module, check_pair
from minitransformer.layers import Dropout, FeedForward, LayerNorm, Residual

np.set_printoptions(precision=4, suppress=True)


def compare(name, mine, reference):
    """Print whether two arrays are exactly equal, close, and their largest difference."""
    exact = np.array_equal(mine, reference)
    close = np.allclose(mine, reference, rtol=0, atol=1e-12)
    diff = np.abs(mine - reference).max()
    print(f"{name:8s} exact: {exact!s:5s} | close (1e-12): {close!s:5s} | max difference {diff:.2e}")
    return diff

# %% [markdown]
# ## 1. LayerNorm, forward
#
# For one position, a row $x$ of $C$ features:
#
# $$\mu = \frac1C\sum_c x_c, \qquad \sigma^2 = \frac1C\sum_c (x_c - \mu)^2, \qquad
#   \hat x = \frac{x - \mu}{\sqrt{\sigma^2 + \varepsilon}}, \qquad y = \gamma \odot \hat x + \beta .$$
#
# The variance is the biased one (divide by C) and $\varepsilon$ sits INSIDE the root,
# as in PyTorch. One operation per line, on a (B, T, C) batch in float64:

# %%
B, T, C = 2, 3, 8
eps = 1e-5
rng = np.random.default_rng(0)
x = 2.0 + 3.0 * rng.standard_normal((B, T, C))             # (B, T, C) off-centre, wide rows
gamma = 1.0 + 0.1 * rng.standard_normal(C)                 # (C,)
beta = 0.1 * rng.standard_normal(C)                        # (C,)

mu = x.mean(axis=-1, keepdims=True)                        # (B, T, 1)
xmu = x - mu                                               # (B, T, C)
sq = xmu ** 2                                              # (B, T, C)
var = sq.mean(axis=-1, keepdims=True)                      # (B, T, 1) biased variance
var_eps = var + eps                                        # (B, T, 1)
rstd = var_eps ** -0.5                                     # (B, T, 1) 1/√(σ² + ε)
xhat = xmu * rstd                                          # (B, T, C)
y = gamma * xhat + beta                                    # (B, T, C)

y_lib, cache = layernorm_forward(x, gamma, beta, eps)
compare("y", y, y_lib)
print("each row of xhat: mean", np.abs(xhat.mean(-1)).max(), "(max |.|), variance", xhat.var(-1)[0])

# %% [markdown]
# The variance of $\hat x$ is $\sigma^2/(\sigma^2 + \varepsilon)$, a hair below 1: the
# price of the $\varepsilon$ that keeps a constant row (σ = 0) finite.
#
# ## 2. LayerNorm, backward: one operation per line
#
# Walk the forward lines in reverse. Each line $a = f(b, \dots)$ sends
# $db \mathrel{+}= (\partial a/\partial b)^\top da$. Where the forward broadcast a
# (B, T, 1) array over C features, the backward sums over C; where it averaged, the
# backward spreads $1/C$ back to every feature.

# %%
dy = rng.standard_normal((B, T, C))                        # a random upstream gradient

# y = gamma * xhat + beta
dbeta = dy.sum(axis=(0, 1))                                # (C,)
dgamma = (dy * xhat).sum(axis=(0, 1))                      # (C,)
dxhat = dy * gamma                                         # (B, T, C)
# xhat = xmu * rstd
dxmu = dxhat * rstd                                        # (B, T, C)   first path into xmu
drstd = (dxhat * xmu).sum(axis=-1, keepdims=True)          # (B, T, 1)   rstd was broadcast over C
# rstd = var_eps ** -0.5
dvar_eps = -0.5 * var_eps ** -1.5 * drstd                  # (B, T, 1)
# var_eps = var + eps
dvar = dvar_eps                                            # (B, T, 1)
# var = sq.mean(axis=-1)
dsq = np.broadcast_to(dvar / C, sq.shape)                  # (B, T, C)   the mean spreads 1/C
# sq = xmu ** 2
dxmu = dxmu + 2 * xmu * dsq                                # (B, T, C)   second path into xmu
# xmu = x - mu
dx = dxmu.copy()                                           # (B, T, C)
dmu = -dxmu.sum(axis=-1, keepdims=True)                    # (B, T, 1)
# mu = x.mean(axis=-1)
dx += dmu / C                                              # (B, T, C)

# %% [markdown]
# ## 3. The fused formula
#
# Collect the lines above for one row. With $\partial\mu/\partial x_i = 1/C$ and
# $\partial \mathrm{rstd}/\partial x_i = -\mathrm{rstd}^2\,\hat x_i / C$,
#
# $$\frac{\partial \hat x_j}{\partial x_i} = \mathrm{rstd}\Big(\delta_{ij} - \frac1C\Big) - \frac{\mathrm{rstd}}{C}\,\hat x_j \hat x_i ,$$
#
# and summing $d\hat x_j\, \partial \hat x_j/\partial x_i$ over $j$:
#
# $$dx = \mathrm{rstd}\,\Big(d\hat x - \operatorname{mean}(d\hat x) - \hat x \odot \operatorname{mean}(d\hat x \odot \hat x)\Big), \qquad d\hat x = dy \odot \gamma .$$
#
# That is `layernorm_backward` in `functional/norm.py`. Its cache keeps $\hat x$ and
# rstd (what the formula reads) instead of $x$: nothing is recomputed, and μ, σ²
# are not needed again. The step-by-step version and the fused one agree:

# %%
dx_lib, dgamma_lib, dbeta_lib = layernorm_backward(dy, cache)
differences = [compare("dx", dx, dx_lib), compare("dgamma", dgamma, dgamma_lib),
               compare("dbeta", dbeta, dbeta_lib)]

# %% [markdown]
# And both agree with central differences (float64, a random upstream gradient):

# %%
result = check_pair(layernorm_forward, layernorm_backward,
                    {"x": x, "gamma": gamma, "beta": beta}, kwargs={"eps": eps}, seed=0)
print(result)

# %% [markdown]
# A property the formula makes visible: in every row $dx$ is orthogonal to the
# all-ones vector. Shifting a row by a constant does not change $\hat x$, so the
# gradient can have no component along that direction. Scaling a row around its
# mean ALMOST does not change $\hat x$ either, the only trace being $\varepsilon$: from
# the formula, $\sum_c dx_c \hat x_c = \mathrm{rstd}\cdot\frac{\varepsilon}{\sigma^2+\varepsilon}\sum_c d\hat x_c \hat x_c$,
# small but not 0.

# %%
dxhat_lib = dy * gamma
along_xhat = (dx_lib * xhat).sum(-1, keepdims=True)                              # (B, T, 1)
along_xhat_formula = rstd * eps / (var + eps) * (dxhat_lib * xhat).sum(-1, keepdims=True)
print("max |Σ_c dx|:", np.abs(dx_lib.sum(-1)).max())
print("Σ_c dx ⊙ xhat, row 0:", along_xhat[0, 0, 0], "| from the ε formula:", along_xhat_formula[0, 0, 0])

# %% [markdown]
# ### Deck erratum: ε belongs under the root
#
# The module deck normalises with $\hat x = (x - \mu)/\sigma$, no $\varepsilon$ (the course notes
# have it). A row whose features are all equal (a padding vector, a constant
# embedding) has $\sigma = 0$: the deck's formula divides 0 by 0, LayerNorm returns
# $\beta$ there.

# %%
constant_row = np.full((1, 1, C), 0.7)                     # (1, 1, C) every feature the same
with np.errstate(invalid="ignore", divide="ignore"):
    deck_xhat = (constant_row - constant_row.mean(-1, keepdims=True)) / constant_row.std(-1, keepdims=True)
ln_constant, _ = layernorm_forward(constant_row, gamma, beta, eps)
print("deck (x - μ)/σ:", deck_xhat[0, 0, :3], "... | layernorm_forward:", ln_constant[0, 0, :3], "... = β")
assert np.all(np.isnan(deck_xhat))
assert np.allclose(ln_constant[0, 0], beta, rtol=0, atol=1e-15)

# %% [markdown]
# ## 4. Residual connections
#
# A pre-norm sublayer computes $y = x + F(\operatorname{Norm}(x))$. Its backward is
# $dx = dy + (\text{the gradient through } F \text{ and the norm})$: the identity
# branch hands $dy$ to the layer below untouched, however many layers are stacked.
# Two checks: with the FFN's output weights at 0 the block IS the identity and
# $dx = dy$ exactly; and with ordinary weights the `Residual` module's backward
# agrees with central differences.

# %%
ffn = FeedForward(C, 4 * C, "gelu", rng=0, init_std=0.3).astype(np.float64)
block = Residual(ffn, LayerNorm(C).astype(np.float64), Dropout(0.0), "pre")
W_2 = ffn.fc_out.W.copy()                                  # kept, to put back below
ffn.fc_out.W[...] = 0.0                                    # F(·) = 0: only the identity is left
y_block = block.forward(x)
dx_block = block.backward(dy)
print("F = 0: y == x:", np.array_equal(y_block, x), "| dx == dy:", np.array_equal(dx_block, dy))
ffn.fc_out.W[...] = W_2
block.zero_grad()
residual_check = check_module(block, np.ascontiguousarray(x[:, :2]), seed=1)
print(residual_check)

# %% [markdown]
# How much gradient survives a deep stack? Stack L blocks, each $x \mapsto x + F_l(\operatorname{Norm}(x))$,
# and compare with the same blocks without the skip, $x \mapsto F_l(\operatorname{Norm}(x))$.
# We backpropagate a random $dy$ from the top and measure $\lVert dx\rVert / \lVert dy\rVert$ at the bottom.

# %%
def stack_gradient(L, skip, seed=0):
    """‖dx‖/‖dy‖ through L pre-norm FFN blocks (with or without the residual), float64."""
    blocks = [(LayerNorm(C).astype(np.float64),
               FeedForward(C, 4 * C, "gelu", rng=seed + l).astype(np.float64)) for l in range(L)]
    h = np.random.default_rng(seed).standard_normal((B, T, C))
    for norm, f in blocks:
        out = f.forward(norm.forward(h))
        h = h + out if skip else out
    top = np.random.default_rng(seed + 1).standard_normal(h.shape)
    g = top
    for norm, f in reversed(blocks):
        through = norm.backward(f.backward(g))
        g = g + through if skip else through
    return np.linalg.norm(g) / np.linalg.norm(top)


depths = [1, 2, 4, 8] if FAST else [1, 2, 4, 8, 16, 32]
ratios = {skip: [stack_gradient(L, skip) for L in depths] for skip in (True, False)}
for L, with_skip, without in zip(depths, ratios[True], ratios[False]):
    print(f"L = {L:2d}: ‖dx‖/‖dy‖ with residuals {with_skip:8.3f} | without {without:.2e}")

fig = Figure(figsize=(6, 3.5), layout="constrained")
ax = fig.subplots()
ax.semilogy(depths, ratios[True], "o-", label="with residual connections")
ax.semilogy(depths, ratios[False], "s-", label="without")
ax.set_xlabel("number of blocks L")
ax.set_ylabel("‖dx‖ / ‖dy‖ at the bottom")
ax.set_title("Gradient reaching the first block")
ax.legend()
save_figure(fig, "03_residual_gradient.png")

# %% [markdown]
# Without the skip, the gradient has to pass through every $F_l$: with the small
# initial weights (std 0.02, as in GPT-2) a single block already cuts it by more
# than a factor of 100, and deeper stacks lose more (LayerNorm rescales the tiny
# activations, which limits the damage but does not undo it). With the skip, the
# identity term hands $dy$ down unchanged and the ratio stays near 1.

# %% [markdown]
# ### The module deck's claim: deeper plain stacks train worse
#
# The module deck puts it in two lines: "Theory: if we stack layers, we should get a lower
# training error. Practical: lol no." (He et al. 2016 saw it in CNNs: a deeper plain network
# had a HIGHER training error than a shallower one, so the trouble is optimisation, not
# overfitting.) The gradient ratio above is the cause; the training error is what one sees.
# Train stacks of the blocks above, with and without the skip, plus a linear read-out, to
# fit a fixed regression target $Y = \tanh(XA)\,B/\sqrt C$ on 256 fixed inputs, with Adam
# (lr 3e-3), and compare the mean squared error on the training set itself after the same
# number of steps. (Fast mode: 2 and 8 blocks, 100 steps; else 1 to 16 blocks, 300 steps.)

# %%
from minitransformer.layers import Linear, ModuleList
from minitransformer.layers.module import Module
from minitransformer.optim import Adam


class PlainBlock(Module):
    """x -> F(Norm(x)): the pre-norm block above without its skip."""

    def __init__(self, norm, ffn):
        super().__init__()
        self.add_child("norm", norm)
        self.add_child("ffn", ffn)

    def forward(self, x):
        return self.ffn.forward(self.norm.forward(x))               # (B, T, C)

    def backward(self, dy):
        return self.norm.backward(self.ffn.backward(dy))            # (B, T, C)


fit_rng = np.random.default_rng(100)
X_fit = fit_rng.standard_normal((1, 256, C))                        # (1, N, C) a fixed training set
A_fit, B_fit = fit_rng.standard_normal((C, C)), fit_rng.standard_normal((C, C))
Y_fit = np.tanh(X_fit @ A_fit) @ B_fit / np.sqrt(C)                 # (1, N, C) the targets


def training_error(L, skip, steps):
    """Mean squared error on (X_fit, Y_fit) over the last 10 of ``steps`` Adam steps: L blocks, a read-out."""
    blocks = []
    for l in range(L):
        norm, ffn = LayerNorm(C).astype(np.float64), FeedForward(C, 4 * C, "gelu", rng=l).astype(np.float64)
        blocks.append(Residual(ffn, norm, Dropout(0.0), "pre") if skip else PlainBlock(norm, ffn))
    stack = ModuleList([*blocks, Linear(C, C, rng=L).astype(np.float64)])
    optimizer, errors = Adam(stack.parameters(), lr=3e-3), []
    for _ in range(steps):
        h = X_fit
        for layer in stack:
            h = layer.forward(h)                                    # (1, N, C)
        errors.append(float(((h - Y_fit) ** 2).mean()))
        g = 2 * (h - Y_fit) / h.size                                # d(mean squared error)/dh
        stack.zero_grad()
        for layer in reversed(list(stack)):
            g = layer.backward(g)
        optimizer.step()
    return float(np.mean(errors[-10:]))


fit_depths = [2, 8] if FAST else [1, 2, 4, 8, 16]
fit_steps = 100 if FAST else 300
train_errors = {skip: {L: training_error(L, skip, fit_steps) for L in fit_depths} for skip in (False, True)}
print(f"training error after {fit_steps} Adam steps (predicting 0 scores {float((Y_fit ** 2).mean()):.3f}):")
for L in fit_depths:
    print(f"L = {L:2d}: plain stack {train_errors[False][L]:.3f} | with residuals {train_errors[True][L]:.3f}")

fig = Figure(figsize=(6, 3.5), layout="constrained")
ax = fig.subplots()
ax.plot(fit_depths, [train_errors[False][L] for L in fit_depths], "s-", label="plain stack")
ax.plot(fit_depths, [train_errors[True][L] for L in fit_depths], "o-", label="with residual connections")
ax.set(xscale="log", xticks=fit_depths, xticklabels=fit_depths, xlabel="number of blocks L",
       ylabel="training error (MSE)", title=f"Training error after {fit_steps} steps")
ax.legend()
save_figure(fig, "03_depth_training_error.png")

# Deeper plain stacks fit their own training set worse (2 blocks beat 8 by more than 2x);
# with the skip, 8 blocks fit better than 2, and far better than the plain 8.
deepest, shallow = max(fit_depths), 2
assert all(train_errors[False][L] > 2 * train_errors[False][shallow] for L in fit_depths if L >= 8)
assert all(train_errors[True][L] < train_errors[True][shallow] for L in fit_depths if L >= 8)
assert train_errors[True][deepest] < train_errors[False][deepest] / 2

# %% [markdown]
# ## 5. The position-wise feed-forward network
#
# $$\operatorname{FFN}(x) = \operatorname{act}(x W_1 + b_1)\, W_2 + b_2, \qquad W_1: (C, F),\ W_2: (F, C),\ F = 4C \text{ usually}.$$
#
# "Position-wise": the same weights, applied to each position alone; positions
# never mix here (only attention mixes them). So running the FFN on the whole
# (B, T, C) batch is the same as running it on each position separately, and
# permuting the positions permutes the outputs.

# %%
f = FeedForward(C, 4 * C, "relu", rng=3, init_std=0.3).astype(np.float64)
out_all = f.forward(x)                                     # (B, T, C)
out_each = np.concatenate([f.forward(x[:, t:t + 1]) for t in range(T)], axis=1)   # T separate calls
perm = np.array([2, 0, 1])
out_perm = f.forward(x[:, perm])
f._cache = None                                            # no backward follows these forwards
print("whole batch vs one position at a time:", np.abs(out_all - out_each).max())
print("permuted input -> permuted output:", np.abs(out_perm - out_all[:, perm]).max())
ffn_check = check_module(f, np.ascontiguousarray(x[:, :2]), seed=2)
print(ffn_check)
print("figures in", OUT)

# %% [markdown]
# ### Deck erratum: the shapes of W₁ and W₂ follow the side X is on
#
# The course notes write $\operatorname{FFN}(X) = W_2\, a(W_1 X + b_1) + b_2$ with the words as the
# columns of $X$ ($d \times n$), and give $W_1 \in \mathbb{R}^{d \times 4d}$, $W_2 \in \mathbb{R}^{4d \times d}$. Multiplying
# from the left, $W_1 X$ needs $W_1 \in \mathbb{R}^{4d \times d}$ and $W_2 \in \mathbb{R}^{d \times 4d}$; the deck's shapes
# belong to the row form $a(X W_1 + b_1) W_2 + b_2$ ($X$: $n \times d$), the one the library uses.

# %%
ffn_params = {name: value for name, value, _ in f.parameters()}   # name -> array
W1, b1, W2, b2 = (ffn_params[name] for name in ("fc_in.W", "fc_in.b", "fc_out.W", "fc_out.b"))
X_cols = x[0].T                                            # (d, n) one sequence, the words as columns
print("W1", W1.shape, "= (d, 4d) | X", X_cols.shape, "= (d, n)")
try:
    W1 @ X_cols                                            # the deck's W1 · X, W1 in R^(d x 4d)
    deck_shapes_work = True
except ValueError as error:
    deck_shapes_work = False
    print("W1 · X with W1 in R^(d x 4d) fails:", error)
hidden = np.maximum(0.0, W1.T @ X_cols + b1[:, None])      # (4d, n) W1ᵀ X + b1, W1ᵀ in R^(4d x d)
column_out = W2.T @ hidden + b2[:, None]                   # (d, n) W2ᵀ in R^(d x 4d)
print("column form (W1ᵀ, W2ᵀ) vs FeedForward's row form:", np.abs(column_out.T - out_all[0]).max())
assert W1.shape == (C, 4 * C) and not deck_shapes_work
assert np.allclose(column_out.T, out_all[0], rtol=0, atol=1e-12)

# %% [markdown]
# ### The FFN is a 1 × 1 convolution over positions
#
# The survey deck: "some people like to call it 1x1 convolution". Read the sequence as a
# signal of length T with C channels. A 1-D convolution with kernel size k and weights
# $K \in \mathbb{R}^{F \times C \times k}$ computes, at each position t,
# $\sum_{j, c} K[f, c, j]\, x[t + j - \lfloor k/2 \rfloor, c]$. With k = 1 there is one tap, at t itself:
# the output at t is $x_t K[:, :, 0]^\top$, a matrix product per position, which is $x_t W_1$
# with $K = W_1^\top$. The FFN is two such convolutions with the activation between them.
# A wider kernel (k = 3) would mix each position with its neighbours; k = 1 cannot.

# %%
def conv1d(x_seq, K, bias):
    """A 1-D convolution over positions, zero padding: x_seq (B, T, C_in), K (C_out, C_in, k) -> (B, T, C_out)."""
    k = K.shape[2]
    padded = np.pad(x_seq, ((0, 0), (k // 2, k - 1 - k // 2), (0, 0)))          # (B, T + k - 1, C_in)
    windows = np.lib.stride_tricks.sliding_window_view(padded, k, axis=1)       # (B, T, C_in, k)
    return np.einsum("btcj,ocj->bto", windows, K) + bias                        # (B, T, C_out)


conv_params = {name: value for name, value, _ in f.parameters()}               # the FFN of section 5
K1 = conv_params["fc_in.W"].T[:, :, None]                                      # (F, C, 1) = W₁ᵀ
K2 = conv_params["fc_out.W"].T[:, :, None]                                     # (C, F, 1) = W₂ᵀ
as_convolution = conv1d(np.maximum(0.0, conv1d(x, K1, conv_params["fc_in.b"])), K2, conv_params["fc_out.b"])
print("two 1 × 1 convolutions vs FeedForward:", np.abs(as_convolution - f.forward(x)).max())
f._cache = None                                                                # no backward follows
K3 = np.random.default_rng(7).standard_normal(K1.shape[:2] + (3,))             # (F, C, 3): neighbours too
x_nudged = x.copy()
x_nudged[:, 0] += 1.0                                                          # change position 0 only
reach_1x1 = np.abs(conv1d(x_nudged, K1, 0) - conv1d(x, K1, 0))[:, 1].max()     # effect on position 1
reach_3 = np.abs(conv1d(x_nudged, K3, 0) - conv1d(x, K3, 0))[:, 1].max()
print(f"changing position 0 moves position 1's output by {reach_1x1} (k = 1) and {reach_3:.3f} (k = 3)")
assert np.allclose(as_convolution, out_all, rtol=0, atol=1e-12) and reach_1x1 == 0 and reach_3 > 0

# %% [markdown]
# ### The survey's claim: the MLP holds the bulk of the parameters
#
# The survey deck says the point-wise MLP "contains the bulk of the parameters" (and is what
# grows into the experts of a sparse model). Per block, with $F = 4C$: attention has
# $4C^2 + 4C$ ($W_Q, W_K, W_V, W_O$ and their biases), the FFN $C \cdot 4C + 4C + 4C \cdot C + C = 8C^2 + 5C$,
# the two LayerNorms $4C$. The FFN's share, $(8C^2 + 5C)/(12C^2 + 13C)$, tends to $2/3$ as $C$
# grows. Counted on real blocks of the library (the paper's base size and GPT-2 small's),
# and from the presets for LLaMA-2, whose SwiGLU FFN has three $C \times F$ matrices and
# whose 70B model shares its keys and values between heads (grouped-query attention):

# %%
import math

from minitransformer.models import GPT, GPTConfig
from minitransformer.models.presets import count_parameters, preset


def ffn_share(d_model, n_head):
    """(FFN parameters, block parameters) of a library GPT block of width d_model, F = 4 d_model."""
    gpt = GPT(GPTConfig(vocab_size=1, block_size=1, n_layer=1, n_head=n_head, d_model=d_model), rng=0)
    block = {name: p.size for name, p, _ in gpt.parameters() if name.startswith("blocks.0.")}
    return sum(n for name, n in block.items() if ".ffn.sublayer." in name), sum(block.values())


shares = {}
for name, d_model, n_head in (("the paper's base", 512, 8), ("GPT-2 small", 768, 12)):
    ffn_count, block_count = ffn_share(d_model, n_head)
    shares[name] = ffn_count / block_count
    formula = (8 * d_model ** 2 + 5 * d_model) / (12 * d_model ** 2 + 13 * d_model)
    print(f"{name:16s} C = {d_model}: FFN {ffn_count:,} of {block_count:,} per block = {shares[name]:.4f} "
          f"(formula {formula:.4f})")
    assert math.isclose(shares[name], formula, rel_tol=1e-12)
for name in ("llama-2-7b", "llama-2-70b"):
    config = preset(name)
    block_count = count_parameters(preset(name, n_layer=2)) - count_parameters(preset(name, n_layer=1))
    shares[name] = 3 * config.d_model * config.d_ff / block_count              # W, V: C x F; W_2: F x C
    print(f"{name:16s} C = {config.d_model}, F = {config.d_ff}: the SwiGLU FFN holds {shares[name]:.4f} of a block")
assert all(0.66 < shares[name] < 0.67 for name in ("the paper's base", "GPT-2 small", "llama-2-7b"))
assert shares["llama-2-70b"] > 0.8                     # with 8 kv heads for 64, attention shrinks further

# %% [markdown]
# ## 6. Dropout: drop, and scale what is kept
#
# During training, dropout sets each entry to 0 with probability $p$ and divides the
# survivors by $1 - p$ ("inverted" dropout, `functional/dropout.py`):
#
# $$m_i \sim \text{Bernoulli}(1 - p), \qquad y = \frac{x \odot m}{1 - p}, \qquad
#   E[y_i] = x_i \cdot \frac{(1-p)}{1 - p} = x_i .$$
#
# Because the expectation is kept in training, evaluation uses the network as it is:
# dropout is the identity (`model.eval()`). Without the $1/(1-p)$ the next layer would
# see inputs $1 - p$ times smaller in training than at test time, and the test-time
# network would have to be rescaled instead (the 2014 paper's original recipe).
# The backward is the same mask and scale: $dx = dy \odot m / (1 - p)$.

# %%
import math

from minitransformer.functional.dropout import dropout_backward, dropout_forward

from _lecture import save_figure

p_drop = 0.1
x_drop = np.linspace(-2.0, 2.0, 8)                          # (8,) one fixed input
n_draws = 20000
x_rows = np.tile(x_drop, (n_draws, 1))                      # (n_draws, 8) the same x, n_draws times
draws, _ = dropout_forward(x_rows, p_drop, rng=np.random.default_rng(0))   # (n_draws, 8) a mask per row
kept_share = float((draws != 0).mean())
mean_y = draws.mean(axis=0)                                 # (8,) should be x
mean_unscaled = (draws * (1 - p_drop)).mean(axis=0)         # x ⊙ m without the scale: (1 - p) x
print(f"share kept {kept_share:.4f} (1 - p = {1 - p_drop}); kept entries are x / (1 - p) = x × {1 / (1 - p_drop):.4f}")
print("x         ", x_drop)
print("mean of y ", mean_y)
print("unscaled  ", mean_unscaled, "= (1 - p) x")

y_one, drop_cache = dropout_forward(x_drop, p_drop, rng=np.random.default_rng(0))
dy_drop = np.random.default_rng(1).standard_normal(8)
dx_drop = dropout_backward(dy_drop, drop_cache)
drop_layer = Dropout(p_drop, rng=0)
drop_layer.eval()
y_eval = drop_layer.forward(x_drop)
drop_layer.train()
y_train = drop_layer.forward(x_drop)
drop_layer.backward(np.ones_like(y_train))
print("eval mode:", "the identity" if y_eval is x_drop else "not the identity",
      "| training mode zeroes", int((y_train == 0).sum()), "of 8 entries this time")

se = np.abs(x_drop) * math.sqrt(p_drop / (1 - p_drop)) / math.sqrt(n_draws)   # std of a mean of n_draws
assert abs(kept_share - (1 - p_drop)) < 5 * math.sqrt(p_drop * (1 - p_drop) / draws.size)
assert np.all(np.abs(mean_y - x_drop) <= 5 * se + 1e-12)                      # E[y] = x
assert np.all(np.isclose(draws, 0) | np.isclose(draws, x_drop / (1 - p_drop), rtol=1e-12))
assert np.allclose(dx_drop, dy_drop * (y_one != 0) / (1 - p_drop), rtol=1e-12)  # same mask, same scale
assert y_eval is x_drop                                                        # eval: the identity, no copy

# %% [markdown]
# ## 7. LayerNorm vs BatchNorm: which axis?
#
# Both subtract a mean and divide by a standard deviation; they differ in WHAT they
# average over. On a batch $x$ of shape (B, T, C):
#
# * **LayerNorm** normalises each token on its own, over its $C$ features:
#   statistics of shape (B, T, 1). Every row (a token) gets mean 0, variance 1.
# * **BatchNorm** (Ioffe & Szegedy 2015, from CNNs) normalises each feature over the
#   batch, here the $B \cdot T$ tokens: statistics of shape (1, 1, C). Every column
#   (a feature) gets mean 0, variance 1.
#
# This package has no BatchNorm, so we write it by hand (training-mode statistics,
# no running averages, $\gamma = 1$, $\beta = 0$) and check it against LayerNorm of the
# TRANSPOSED matrix: normalising columns is normalising the rows of $x^\top$.
# Then the consequence for sequence models: a token's BatchNorm output depends on the
# other sequences in the batch (and on padding), its LayerNorm output does not.

# %%
B_n, T_n, C_n = 4, 5, 6
x_norm = 1.0 + 2.0 * np.random.default_rng(7).standard_normal((B_n, T_n, C_n))   # (B, T, C)


def batchnorm_by_hand(x, eps=1e-5):
    """BatchNorm over every axis but the last: each feature normalised over the B·T tokens."""
    mu = x.mean(axis=(0, 1), keepdims=True)                  # (1, 1, C)
    var = ((x - mu) ** 2).mean(axis=(0, 1), keepdims=True)   # (1, 1, C) biased variance
    return (x - mu) / np.sqrt(var + eps)                     # (B, T, C)


ln_out, _ = layernorm_forward(x_norm, np.ones(C_n), np.zeros(C_n), 1e-5)         # (B, T, C)
bn_out = batchnorm_by_hand(x_norm)                                                # (B, T, C)
columns_as_rows = x_norm.reshape(B_n * T_n, C_n).T                               # (C, B·T)
bn_via_ln = layernorm_forward(columns_as_rows, np.ones(B_n * T_n), np.zeros(B_n * T_n), 1e-5)[0]
bn_via_ln = bn_via_ln.T.reshape(B_n, T_n, C_n)
print("BatchNorm by hand vs LayerNorm of the transposed matrix:", np.abs(bn_out - bn_via_ln).max())
print("LayerNorm: per-token means", ln_out.mean(axis=-1).ravel()[:4], "... per-feature means", ln_out.mean(axis=(0, 1)))
print("BatchNorm: per-token means", bn_out.mean(axis=-1).ravel()[:4], "... per-feature means", bn_out.mean(axis=(0, 1)))

other_batch = x_norm.copy()
other_batch[1:] = 10.0 * np.random.default_rng(8).standard_normal((B_n - 1, T_n, C_n))   # other sequences
ln_again, _ = layernorm_forward(other_batch, np.ones(C_n), np.zeros(C_n), 1e-5)
bn_again = batchnorm_by_hand(other_batch)
ln_shift = np.abs(ln_again[0] - ln_out[0]).max()
bn_shift = np.abs(bn_again[0] - bn_out[0]).max()
print(f"sequence 0 unchanged, the others replaced: LayerNorm output of sequence 0 moves {ln_shift:.1e}, "
      f"BatchNorm's {bn_shift:.2f}")

fig = Figure(figsize=(11, 3.6), layout="constrained")
panels = fig.subplots(1, 3)
for ax, data, title in zip(panels, (x_norm, ln_out, bn_out),
                           ("x (B·T tokens × C features)", "LayerNorm: each ROW normalised",
                            "BatchNorm: each COLUMN normalised")):
    image = ax.imshow(data.reshape(B_n * T_n, C_n), cmap="coolwarm", vmin=-3, vmax=3, aspect="auto")
    ax.set(title=title, xlabel="feature c", ylabel="token b·T + t")
fig.colorbar(image, ax=panels, shrink=0.8)
save_figure(fig, "03_layernorm_vs_batchnorm.png")

assert np.allclose(bn_out, bn_via_ln, rtol=0, atol=1e-12)
assert np.allclose(ln_out.mean(axis=-1), 0, atol=1e-12) and np.allclose(bn_out.mean(axis=(0, 1)), 0, atol=1e-12)
assert np.allclose(ln_out.var(axis=-1), 1, atol=1e-4) and np.allclose(bn_out.var(axis=(0, 1)), 1, atol=1e-4)
assert np.abs(bn_out.mean(axis=-1)).max() > 0.1            # BatchNorm does not centre each token
assert ln_shift < 1e-12 and bn_shift > 0.1                  # only BatchNorm depends on the rest of the batch

# %% [markdown]
# ## What this lecture claimed, checked

# %%
# LayerNorm forward: the one-op-per-line version is the library's; xhat has mean 0
# and variance σ²/(σ² + ε) in every row.
assert np.allclose(y, y_lib, rtol=0, atol=1e-12)
assert np.allclose(xhat.mean(-1), 0.0, atol=1e-12)
assert np.allclose(xhat.var(-1), (var / (var + eps))[..., 0], rtol=1e-12, atol=0)

# LayerNorm backward: the step-by-step derivation and the fused formula agree to
# 1e-12 in float64, and both pass the central-difference check.
assert max(differences) <= 1e-12, differences
assert result.ok, str(result)
# dx is orthogonal to the ones vector, and its component along xhat is the ε term.
assert np.allclose(dx_lib.sum(-1), 0.0, atol=1e-12)
assert np.allclose(along_xhat, along_xhat_formula, rtol=1e-8, atol=0)

# Residual: with F = 0 the block is the identity in both directions; its backward is right.
assert np.array_equal(y_block, x) and np.array_equal(dx_block, dy)
assert residual_check.ok, str(residual_check)
# With the skip, the gradient reaching the bottom stays >= 1/2 of the top's at every depth;
# without it, it is below 1/100 of that already after one block, and lower in the deepest stack.
assert min(ratios[True]) >= 0.5
assert all(without < 1e-2 * with_skip for with_skip, without in zip(ratios[True], ratios[False]))
assert ratios[False][-1] < ratios[False][0]

# FFN: position-wise (per position = whole batch; permutation-equivariant), correct backward.
assert np.allclose(out_all, out_each, rtol=0, atol=1e-12)
assert np.allclose(out_perm, out_all[:, perm], rtol=0, atol=1e-12)
assert ffn_check.ok, str(ffn_check)
print("lecture 3: all claims check out")

# %% [markdown]
# ## Quiz
#
# Write your answer in each `answer_N = None  # your answer` cell and run the check
# below it: a wrong answer stops with a hint, an unanswered one says so
# (`lectures/_quiz.py`; the answers are stored as digests, not in plain sight).

# %%
from _quiz import check, summary

# %% [markdown]
# **Question 1.** LayerNorm on a (B, T, C) tensor: over which axis are the mean and
# variance taken? Answer with the axis index (0, 1 or 2).

# %%
answer_1 = None  # your answer

# %%
check("1", answer_1, "d4735e3a265e16ee", hint="each token is normalised on its own, over its features")

# %% [markdown]
# **Question 2.** How many trainable parameters has a LayerNorm over $C = 512$ features?

# %%
answer_2 = None  # your answer

# %%
check("2", answer_2, "e39eef82f61b21e2", hint="a scale γ and a shift β per feature")

# %% [markdown]
# **Question 3.** The FFN of the 2017 paper maps $d = 512 \to 4d \to d$ with biases.
# How many parameters does it have?

# %%
answer_3 = None  # your answer

# %%
check("3", answer_3, "2c97c29813062b5b", hint="W1 is d × 4d, W2 is 4d × d; plus b1 (4d) and b2 (d)")

# %% [markdown]
# **Question 4.** Inverted dropout with $p = 0.2$: in training, by what factor is a kept
# entry multiplied?

# %%
answer_4 = None  # your answer

# %%
check("4", answer_4, "ba8278dc94c9ee30", digits=3, hint="the expectation E[y] = x must be kept")

# %% [markdown]
# **Question 5.** A residual block computes $y = x + F(x)$. If $\partial F / \partial x = 0$,
# what is $\partial y / \partial x$ (a number)?

# %%
answer_5 = None  # your answer

# %%
check("5", answer_5, "6b86b273ff34fce1", hint="differentiate the skip path x")

# %% [markdown]
# **Question 6.** True or False: a token's BatchNorm output depends on the other
# sequences in the batch.

# %%
answer_6 = None  # your answer

# %%
check("6", answer_6, "b5bea41b6c623f7c", hint="over which axis does BatchNorm take its statistics?")

# %% [markdown]
# **Question 7** (from the deck). Why are $\gamma$ and $\beta$ vectors in $\mathbb{R}^C$ rather
# than two scalars? (a) so that each feature can get back its own scale and mean after
# normalisation; (b) to make the backward cheaper; (c) so that LayerNorm works for any
# batch size. A letter.

# %%
answer_7 = None  # your answer

# %%
check("7", answer_7, "ca978112ca1bbdca", hint="after normalising, every feature has mean 0 and variance 1: is that always wanted?")
summary()
