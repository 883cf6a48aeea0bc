# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Lecture 6: the tweaks since 2017
#
# Modern Transformers (GPT-2/3, LLaMA, Mistral, ...) keep the 2017 skeleton and
# change a handful of parts. Each is a config value in this package, not a new class:
#
# | part | 2017 | since | config |
# |---|---|---|---|
# | activation | ReLU | GELU (GPT-2, BERT), SwiGLU / GEGLU (PaLM, LLaMA) | `activation` |
# | norm | LayerNorm | RMSNorm (T5, LLaMA) | `norm` |
# | norm placement | after the residual sum (post) | before the sublayer (pre) | `norm_position` |
# | key/value heads | one per query head | shared by a group (GQA), or one (MQA) | `n_kv_head` |
# | attention span | all previous tokens | a sliding window (Mistral) | `window` |
# | output matrix | separate | tied to the token embeddings | `tie_weights` |

# %%
import math

import matplotlib
matplotlib.use("Agg")                    # figures go to files, never to a window
import numpy as np

from _lecture import FAST, OUT, show_png    # fast-mode switch; where figures go (lectures/_lecture.py)
from minitransformer.plots.activations import activation_curves, gelu_difference
from minitransformer.plots.gradients import prenorm_vs_postnorm
from minitransformer.plots.masks import attention_patterns
from minitransformer.training.data import load_text, train_val_split
from minitransformer.functional.activations import gelu_forward, relu_forward, silu_forward
from minitransformer.functional.attention import attention_forward
from minitransformer.functional.repeat_kv import repeat_kv_forward
from minitransformer.functional.cross_entropy import cross_entropy_backward, cross_entropy_forward
from minitransformer.functional.gated import geglu_forward, swiglu_forward
from minitransformer.functional.masks import sliding_window_mask
from minitransformer.functional.norm import layernorm_forward, rmsnorm_backward, rmsnorm_forward
from minitransformer.gradcheck import check_pair
from minitransformer.layers import FeedForward
from minitransformer.models import GPT, GPTConfig
from minitransformer.plots.gradients import block_gradient_norms
from minitransformer.training.tasks import LanguageModelTask
from minitransformer.tokenizers import CharTokenizer
from minitransformer.training.loop import TrainConfig, train

np.set_printoptions(precision=4, suppress=True)

# %% [markdown]
# ## 1. Activations: ReLU, GELU, SiLU, and the gated units
#
# $$\operatorname{ReLU}(x) = \max(x, 0), \qquad \operatorname{GELU}(x) = x\,\Phi(x) = \frac x2\Big(1 + \operatorname{erf}\frac{x}{\sqrt2}\Big), \qquad \operatorname{SiLU}(x) = x\,\sigma(x).$$
#
# GPT-2 uses a tanh approximation of GELU, $\frac x2\big(1 + \tanh(\sqrt{2/\pi}\,(x + 0.044715x^3))\big)$.
# The **gated** units (Shazeer 2020) make two projections $a = xW$, $b = xV$ and let
# one gate the other:
#
# $$\operatorname{GEGLU} = \operatorname{GELU}(a) \odot b, \qquad \operatorname{SwiGLU} = \operatorname{SiLU}(a) \odot b .$$
#
# The library's values at a few points, against the math module:

# %%
points = np.array([-3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0])


def gelu_math(v):
    return 0.5 * v * (1 + math.erf(v / math.sqrt(2)))


def gelu_tanh_math(v):
    return 0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)))


def silu_math(v):
    return v / (1 + math.exp(-v))


table = {"relu": (relu_forward(points)[0], [max(v, 0.0) for v in points]),
         "gelu": (gelu_forward(points)[0], [gelu_math(v) for v in points]),
         "gelu_tanh": (gelu_forward(points, "tanh")[0], [gelu_tanh_math(v) for v in points]),
         "silu": (silu_forward(points)[0], [silu_math(v) for v in points])}
for name, (lib, by_hand) in table.items():
    print(f"{name:9s} {lib}  max |library - math| = {np.abs(lib - by_hand).max():.1e}")

grid = np.linspace(-10, 10, 20001)
tanh_error = np.abs(gelu_forward(grid)[0] - gelu_forward(grid, "tanh")[0])
print(f"largest |GELU - GELU_tanh| on [-10, 10]: {tanh_error.max():.2e} at x = {grid[tanh_error.argmax()]:.2f}")
activation_curves(path=OUT / "06_activations.png")
show_png(OUT / "06_activations.png")
gelu_difference(path=OUT / "06_gelu_difference.png")
show_png(OUT / "06_gelu_difference.png")

# %% [markdown]
# The gated units take the two projections side by side, $h = [a \mid b]$ of width 2F,
# from ONE matrix product, and return width F:

# %%
rng = np.random.default_rng(0)
h = rng.standard_normal((3, 8))                            # (N, 2F), F = 4
a, b = h[:, :4], h[:, 4:]
geglu_by_hand = np.array([[gelu_math(ai) for ai in row] for row in a]) * b
swiglu_by_hand = np.array([[silu_math(ai) for ai in row] for row in a]) * b
print("GEGLU:  max |library - by hand| =", np.abs(geglu_forward(h)[0] - geglu_by_hand).max())
print("SwiGLU: max |library - by hand| =", np.abs(swiglu_forward(h)[0] - swiglu_by_hand).max())

# %% [markdown]
# ### SwiGLU with a general β
#
# The architecture deck writes $\operatorname{SwiGLU}(x, W, V, b, c, \beta) = \operatorname{Swish}_\beta(xW + b)
# \otimes (xV + c)$ with $\operatorname{Swish}_\beta(a) = a\,\sigma(\beta a)$; LLaMA and the paper take β = 1,
# which is SiLU, the SwiGLU above. `swiglu_beta_forward(h, beta)` keeps β as an input
# (`layers.activation.SwiGLUBeta` learns it): β = 1 gives SwiGLU exactly, a large β turns the
# gate into ReLU(a) ⊙ b (within 1/(eβ) of it per unit of b: $|a\,\sigma(\beta a) - \max(a, 0)| \le 1/(e\beta)$),
# β = 0 into a/2 ⊙ b. Its backward returns dβ too, checked here.

# %%
from minitransformer.functional.gated import swiglu_beta_backward, swiglu_beta_forward

h_beta = np.random.default_rng(21).standard_normal((3, 8))          # (N, 2F), F = 4
a_beta, b_beta = h_beta[:, :4], h_beta[:, 4:]
for beta_value in (0.0, 1.0, 2.0, 50.0):
    y_beta = swiglu_beta_forward(h_beta, np.array([beta_value]))[0]
    by_hand_beta = a_beta / (1 + np.exp(-beta_value * a_beta)) * b_beta   # Swish_β(a) ⊙ b
    print(f"β = {beta_value:4}: max |library - by hand| = {np.abs(y_beta - by_hand_beta).max():.1e}")
beta_check = check_pair(swiglu_beta_forward, swiglu_beta_backward, {"h": h_beta, "beta": np.array([1.7])}, seed=0)
print(beta_check)
assert np.array_equal(swiglu_beta_forward(h_beta, np.array([1.0]))[0], swiglu_forward(h_beta)[0])
gap_to_relu = np.abs(swiglu_beta_forward(h_beta, np.array([50.0]))[0] - np.maximum(a_beta, 0) * b_beta)
assert np.all(gap_to_relu <= np.abs(b_beta) / (math.e * 50.0))      # |a σ(βa) − ReLU(a)| <= 1/(eβ)
assert beta_check.ok

# %% [markdown]
# A gated FFN has THREE weight matrices ($W$, $V$, $W_2$) instead of two. To keep the
# parameter count, the hidden width shrinks from $F = 4C$ to $\tfrac23 F$ (as in the
# paper and in LLaMA): $3 \cdot C \cdot \tfrac23 F = 2 \cdot C \cdot F$.

# %%
C = 48
F_plain, F_gated = 4 * C, (2 * 4 * C) // 3                 # 192 and 128


def weight_count(module):
    return sum(p.size for name, p, _ in module.parameters() if p.ndim == 2)


ffn_counts = {"relu": weight_count(FeedForward(C, F_plain, "relu", rng=0)),
              "gelu": weight_count(FeedForward(C, F_plain, "gelu", rng=0)),
              "swiglu": weight_count(FeedForward(C, F_gated, "swiglu", rng=0)),
              "geglu": weight_count(FeedForward(C, F_gated, "geglu", rng=0))}
print("weights in the FFN (C = 48):", ffn_counts)

# %% [markdown]
# ## 2. RMSNorm
#
# $$y = \frac{x}{\sqrt{\operatorname{mean}(x^2) + \varepsilon}} \odot g .$$
#
# LayerNorm without the centring and without $\beta$: one reduction instead of two.
# On a row whose mean is already 0, $\operatorname{mean}(x^2) = \sigma^2$ and the two
# norms coincide. Its backward is checked like every other:

# %%
x = rng.standard_normal((2, 3, 8))
g = 1 + 0.1 * rng.standard_normal(8)
centred = x - x.mean(axis=-1, keepdims=True)               # rows with mean exactly 0 (up to round-off)
y_rms, _ = rmsnorm_forward(centred, g, eps=1e-5)
y_ln, _ = layernorm_forward(centred, g, np.zeros(8), eps=1e-5)
rms_by_hand = x[0, 0] / math.sqrt(sum(v * v for v in x[0, 0]) / 8 + 1e-5) * g
print("RMSNorm vs LayerNorm on centred rows:", np.abs(y_rms - y_ln).max())
print("RMSNorm row 0 vs the formula:", np.abs(rmsnorm_forward(x, g, eps=1e-5)[0][0, 0] - rms_by_hand).max())
rms_check = check_pair(rmsnorm_forward, rmsnorm_backward, {"x": x, "gamma": g}, kwargs={"eps": 1e-5})
print(rms_check)

# %% [markdown]
# ### Deck erratum: RMSNorm sums over x_i and needs ε; its β is an optional variant
#
# The architecture deck writes RMSNorm as $\gamma \odot \frac{x}{\mathrm{RMS}(x)} + \beta$ with
# $\mathrm{RMS}(x) = \sqrt{\frac1d\sum_i a_i^2}$. Two slips: the sum runs over the input's own
# entries $x_i$ (the $a_i$ of the paper are the same numbers under another name); and
# implementations add $\varepsilon$ under the root, without which an all-zero row (a
# zero-initialised embedding) gives 0/0. The $+\beta$ is not a slip but a variant: the
# paper's RMSNorm has the gain only, and its authors' code has a switch for a bias, off by
# default; LLaMA and T5 have $\gamma$ only ($C$ parameters, not $2C$), and so does this library.
# A $\beta$ shifts the output; it does not give back the re-centring that RMSNorm drops:
# LayerNorm's output does not move when a constant is added to the input row, RMSNorm's
# (with or without $\beta$) does.

# %%
from minitransformer.layers import RMSNorm

rms_layer = RMSNorm(8)
rms_names = [name for name, _, _ in rms_layer.parameters()]
zero_row = np.zeros((1, 8))
with np.errstate(invalid="ignore", divide="ignore"):
    deck_rms = zero_row / np.sqrt((zero_row ** 2).mean(axis=-1, keepdims=True)) * g   # no ε
lib_rms, _ = rmsnorm_forward(zero_row, g, eps=1e-5)
print("RMSNorm's parameters:", rms_names, "| deck on a zero row:", deck_rms[0, :3], "| library:", lib_rms[0, :3])
assert rms_names == ["gamma"]                              # γ only: no β
assert np.all(np.isnan(deck_rms)) and np.all(lib_rms == 0.0)
assert np.abs(rmsnorm_forward(x, g, eps=1e-5)[0][0, 0] - rms_by_hand).max() < 1e-12   # Σ over x_i, ε inside
beta_variant = 0.1 * rng.standard_normal(8)               # the deck's +β, a bias per feature


def rms_with_beta(rows):
    return rmsnorm_forward(rows, g, eps=1e-5)[0] + beta_variant


ln_shifted = layernorm_forward(x + 3.0, g, beta_variant, eps=1e-5)[0]   # (2, 3, 8) every row + 3
shift_ln = np.abs(ln_shifted - layernorm_forward(x, g, beta_variant, eps=1e-5)[0]).max()
shift_rms = np.abs(rms_with_beta(x + 3.0) - rms_with_beta(x)).max()
print(f"adding 3 to every input: LayerNorm's output moves {shift_ln:.1e}, RMSNorm + β's {shift_rms:.2f}")
assert shift_ln < 1e-12 and shift_rms > 0.1                # β does not re-centre

# %% [markdown]
# ## 3. Pre-norm or post-norm
#
# $$\text{post (2017, BERT)}: \ x_{l+1} = \operatorname{Norm}(x_l + F(x_l)), \qquad
#   \text{pre (GPT-2 onwards)}: \ x_{l+1} = x_l + F(\operatorname{Norm}(x_l)).$$
#
# In pre-norm, the residual stream is a clean identity path from the loss to every
# block. In post-norm, the gradient reaching block $l$ has crossed the norms of all
# the blocks above it. We measure $\lVert\partial L/\partial\theta_l\rVert$ for every block
# at initialisation, on one random batch: `block_gradient_norms` runs the forward,
# the cross-entropy and the backward, then takes the norm of each block's gradients.

# %%
n_layer = 6 if FAST else 12
norms = {}
for std in (0.02, 0.25):
    for position in ("pre", "post"):
        config = GPTConfig(vocab_size=64, block_size=32, n_layer=n_layer, n_head=4, d_model=64,
                           norm_position=position, init_std=std)
        model = GPT(config, rng=0, dtype=np.float64)
        batch_rng = np.random.default_rng(1)
        ids, targets = (batch_rng.integers(0, 64, (8, 32)) for _ in range(2))
        norms[std, position] = block_gradient_norms(model, ids, targets)      # (n_layer,)
        print(f"init std {std}, {position:4s}-norm: {np.round(norms[std, position], 3)}")
prenorm_vs_postnorm(n_layer=n_layer, path=OUT / "06_prenorm_vs_postnorm.png")
show_png(OUT / "06_prenorm_vs_postnorm.png")

# %% [markdown]
# What the numbers say. At GPT-2's init (std 0.02), pre-norm gives every block a
# gradient of about the same size. Post-norm's first block gets a far larger one:
# its norm rescales the raw embeddings (token plus position rows, entries of
# standard deviation about $0.02\sqrt2 \approx 0.03$) by a factor of about $1/(0.02\sqrt2) \approx 35$, and the
# gradient of that block is scaled up with them. With larger weights (std 0.25)
# the classic picture of Xiong et al. (2020) appears: post-norm's gradients GROW
# towards the output, which is why post-norm needs a learning-rate warmup, and
# pre-norm's shrink towards it. The exact profile depends on the initialisation:
# try other values of `init_std`.
#
# ## 4. Grouped-query attention
#
# At generation time every layer keeps the keys and values of all past tokens:
# that cache, not the weights, is what fills the memory with long contexts. GQA
# (Ainslie et al. 2023) lets a GROUP of $G = H/K$ query heads share one key/value
# head: $K$ kv heads instead of $H$. $K = 1$ is multi-query attention (Shazeer 2019).
#
# $$W_{qkv}: C \times (H + 2K)D \text{ parameters}, \qquad \text{KV cache: } 2 \cdot K \cdot D \text{ numbers per token per layer.}$$
#
# First, what GQA computes: query head $h$ uses kv head $\lfloor h/G \rfloor$. The library
# writes it as LLaMA's code does: `repeat_kv` copies each kv head G times, then
# ordinary multi-head attention runs (the layer caches only the K kv heads, and
# repeats them right before the product). Each query head attending its own kv
# head, one head at a time, must give the same result:

# %%
B, H, K_heads, T, D = 2, 4, 2, 5, 8
q = rng.standard_normal((B, H, T, D))
k = rng.standard_normal((B, K_heads, T, D))
v = rng.standard_normal((B, K_heads, T, D))
G = H // K_heads
out_gqa, _ = attention_forward(q, repeat_kv_forward(k, G)[0], repeat_kv_forward(v, G)[0])
out_per_head = np.concatenate([attention_forward(q[:, h:h + 1], k[:, h // G:h // G + 1], v[:, h // G:h // G + 1])[0]
                               for h in range(H)], axis=1)
print("GQA vs each query head on its own kv head:", np.abs(out_gqa - out_per_head).max())

# %% [markdown]
# Then what it costs and what it buys: three small GPTs, H = 4 query heads with
# K = 4, 2, 1 kv heads, trained the same way on the same text. We count the
# attention parameters, read the size of a real KV cache after a forward, and
# compare the validation loss.

# %%
text = load_text()
tokenizer = CharTokenizer.from_text(text)
ids_all = np.asarray(tokenizer.encode(text), dtype=np.int64)
train_ids, val_ids = train_val_split(ids_all)
lm_task = LanguageModelTask(train_ids, val_ids, block_size=32, batch_size=16)
gqa_steps = 15 if FAST else 300
gqa = {}
for n_kv in (4, 2, 1):
    config = GPTConfig(vocab_size=tokenizer.vocab_size, block_size=32, n_layer=2, n_head=4, d_model=64,
                       n_kv_head=n_kv)
    model = GPT(config, rng=0)
    attn_params = sum(p.size for name, p, _ in model.parameters() if ".attn.sublayer." in name)
    cache = model.new_cache()
    model.eval()
    model.forward(val_ids[None, :32], cache=cache)         # one sequence of T = 32 tokens
    model.train()
    cache_bytes = sum(kv.k.nbytes + kv.v.nbytes for kv in cache.self_attn)
    run = train(model, lm_task, TrainConfig(steps=gqa_steps, lr=3e-3, warmup_steps=gqa_steps // 10,
                                            eval_interval=gqa_steps, log_interval=gqa_steps,
                                            final_eval_batches=5 if FAST else 50), log=lambda line: None)
    gqa[n_kv] = (attn_params, cache_bytes, run.final_val_loss)
    print(f"K = {n_kv}: attention parameters {attn_params:6,d} | KV cache for 32 tokens {cache_bytes:6,d} bytes "
          f"| validation loss after {gqa_steps} steps {run.final_val_loss:.3f}")

# %% [markdown]
# The cache shrinks by $H/K$; the attention parameters by less (the queries and
# the output projection are unchanged). At this tiny scale the loss barely moves;
# the GQA paper reports the same for large models (quality close to multi-head,
# speed close to multi-query), with MQA losing a little more.
#
# ## 5. Sliding-window attention
#
# Each query sees only the $w$ most recent keys, itself included:
# $\text{mask}[i, j] = [\, i - w < j \le i \,]$. The cost per layer drops from $T^2/2$
# to $T w$ scores. Information still travels further than $w$: stacked layers
# relay it, $w - 1$ positions per layer, so after $L$ layers position $p$ can see
# back to $p - L(w - 1)$.

# %%
w, T_win = 3, 8
window = sliding_window_mask(T_win, w)                     # (T, T)
for i in range(T_win):
    print(f"query {i}: " + " ".join("✓" if window[i, j] else "·" for j in range(T_win)))
attention_patterns(path=OUT / "06_attention_patterns.png")
show_png(OUT / "06_attention_patterns.png")

config = GPTConfig(vocab_size=32, block_size=T_win, n_layer=2, n_head=2, d_model=16, window=w)
windowed = GPT(config, rng=0, dtype=np.float64)
windowed.eval()
ids = np.random.default_rng(2).integers(0, 32, (1, T_win))
logits = windowed.forward(ids)                             # (1, T, V)
ids_changed = ids.copy()
ids_changed[0, 0] = (ids[0, 0] + 1) % 32                   # change the FIRST token only
logits_changed = windowed.forward(ids_changed)
moved = np.abs(logits_changed - logits).max(axis=-1)[0]    # (T,) how much each position's output moved
print("change at each position after changing token 0:", moved)
reach = config.n_layer * (w - 1)                           # 2 · (3 - 1) = 4

# %% [markdown]
# With $w = 3$ and 2 layers, token 0 reaches positions $0 \dots 4$, and positions
# 5, 6, 7 do not move at all.
#
# ## 6. Weight tying
#
# The token embedding $E$ (V × C) maps ids to vectors; the output layer maps
# vectors to logits with a (C × V) matrix. Tying (Press & Wolf 2017) uses $E^\top$
# for the output: $V \cdot C$ fewer parameters. $E$ is then used twice, so its
# gradient is the SUM of the two paths, the embedding lookup and the logits:
# $dE = dE_{\text{embedding}} + dE_{\text{head}}$. We check it against an untied
# model that holds the same numbers in two separate matrices.

# %%
tied_config = GPTConfig(vocab_size=32, block_size=8, n_layer=1, n_head=2, d_model=16, tie_weights=True)
untied_config = GPTConfig(vocab_size=32, block_size=8, n_layer=1, n_head=2, d_model=16, tie_weights=False)
tied = GPT(tied_config, rng=0, dtype=np.float64)
untied = GPT(untied_config, rng=0, dtype=np.float64)
state = tied.state_dict()                                  # the tied matrix appears once, as embed.tok.W
untied.load_state_dict({**state, "head.W": state["embed.tok.W"]})
print("parameters: tied", tied.num_parameters(), "| untied", untied.num_parameters(),
      "| difference", untied.num_parameters() - tied.num_parameters(), "= V·C =", 32 * 16)

batch = np.random.default_rng(3).integers(0, 32, (2, 9))
for model in (tied, untied):
    loss, ce = cross_entropy_forward(model.forward(batch[:, :-1]), batch[:, 1:])
    model.backward(cross_entropy_backward(1.0, ce))
sum_of_paths = untied.embed.tok.grads["W"] + untied.head.grads["W"]
print("tied gradient vs (embedding path + head path):", np.abs(tied.embed.tok.grads["W"] - sum_of_paths).max())
print("figures in", OUT)

# %% [markdown]
# ## What this lecture claimed, checked

# %%
# Activations: the library matches the formulas evaluated with the math module; the tanh
# GELU is within 5e-4 of the exact one; GEGLU and SwiGLU are act(a) ⊙ b.
for name, (lib, by_hand) in table.items():
    assert np.allclose(lib, by_hand, rtol=1e-12, atol=1e-15), name
assert 4e-4 < tanh_error.max() < 5e-4
assert np.allclose(geglu_forward(h)[0], geglu_by_hand, rtol=1e-12, atol=1e-15)
assert np.allclose(swiglu_forward(h)[0], swiglu_by_hand, rtol=1e-12, atol=1e-15)
# A gated FFN with 2/3 of the width has the weights of a plain one: 2·C·4C.
assert ffn_counts["relu"] == ffn_counts["gelu"] == ffn_counts["swiglu"] == ffn_counts["geglu"] == 2 * C * 4 * C

# RMSNorm is the formula, equals LayerNorm on centred rows, and its backward is right.
assert np.allclose(rmsnorm_forward(x, g, eps=1e-5)[0][0, 0], rms_by_hand, rtol=1e-12)
assert np.allclose(y_rms, y_ln, rtol=0, atol=1e-12)
assert rms_check.ok, str(rms_check)

# Pre vs post at std 0.02: pre-norm's blocks within a factor 1.5 of each other; post-norm's
# first block more than 10 times the others. At std 0.25: post-norm grows towards the
# output, pre-norm shrinks towards it.
pre, post = norms[0.02, "pre"], norms[0.02, "post"]
assert pre.max() / pre.min() < 1.5
assert post[0] > 10 * np.median(post[1:])
pre, post = norms[0.25, "pre"], norms[0.25, "post"]
half = n_layer // 2
assert post[half:].mean() > post[:half].mean() and post[-1] > post[0]
assert pre[0] > 2 * pre[-1]

# GQA: the same as repeating the kv heads; parameters C·(H + 2K)·D + C·C (+ biases) and a
# KV cache of 2·K·D float32 numbers per token and layer; the loss went down for all three.
assert np.allclose(out_gqa, out_per_head, rtol=0, atol=1e-12)
for n_kv, (attn_params, cache_bytes, val_loss) in gqa.items():
    Cm, Hm, Dm, Lm = 64, 4, 16, 2
    assert attn_params == Lm * (Cm * (Hm + 2 * n_kv) * Dm + (Hm + 2 * n_kv) * Dm + Cm * Cm + Cm)
    assert cache_bytes == Lm * 2 * n_kv * Dm * 32 * 4
    assert val_loss < math.log(tokenizer.vocab_size)       # better than the uniform guess
if not FAST:
    assert max(v[2] for v in gqa.values()) - min(v[2] for v in gqa.values()) < 0.2   # close in quality

# Sliding window: row i sees min(i + 1, w) keys, the last ones; after 2 layers token 0
# reaches positions 0 .. 2(w - 1) and no further.
assert all(window[i].sum() == min(i + 1, w) and window[i, i] for i in range(T_win))
assert np.all(moved[:reach + 1] > 0) and np.all(moved[reach + 1:] == 0)

# Weight tying: V·C fewer parameters; the tied gradient is the sum of both paths.
assert untied.num_parameters() - tied.num_parameters() == 32 * 16
assert np.allclose(tied.embed.tok.grads["W"], sum_of_paths, rtol=0, atol=1e-12)
print("lecture 6: all claims check out")

# %% [markdown]
# ## Quiz
#
# Write your answer in each `answer_N = None  # your answer` cell and run the check
# below it: a wrong answer stops with a hint, an unanswered one says so
# (`lectures/_quiz.py`; the answers are stored as digests, not in plain sight).

# %%
import math

from _quiz import check, summary

# %% [markdown]
# **Question 1.** Grouped-query attention with 32 query heads and 8 key/value heads:
# what fraction of multi-head attention's KV cache does it need?

# %%
answer_1 = None  # your answer

# %%
check("1", answer_1, "9b76b3b4eb91b9e9", digits=3, hint="the cache holds keys and values per KV head")

# %% [markdown]
# **Question 2.** What does RMSNorm leave out of LayerNorm? (a) the division by a
# scale; (b) subtracting the mean (and the shift β); (c) the gain γ. A letter.

# %%
answer_2 = None  # your answer

# %%
check("2", answer_2, "3e23e8160039594a", hint="RMS(x) = √(mean(x²)): no μ anywhere")

# %% [markdown]
# **Question 3.** A causal sliding window of width w = 3 over T = 6 tokens: how many keys
# does the LAST query see?

# %%
answer_3 = None  # your answer

# %%
check("3", answer_3, "4e07408562bedb8b", hint="itself and the w − 1 tokens before it")

# %% [markdown]
# **Question 4.** GPT-2 small has $V = 50257$ and $C = 768$. How many parameters does
# tying the output matrix to the token embeddings save?

# %%
answer_4 = None  # your answer

# %%
check("4", answer_4, "3bb125cba8c82c9a", hint="the output projection is a C × V matrix")

# %% [markdown]
# **Question 5.** The 2017 paper puts the LayerNorm after the residual addition: "pre" or "post"?

# %%
answer_5 = None  # your answer

# %%
check("5", answer_5, "72231043bc1807e6", hint="x ← LN(x + F(x))")
summary()
