# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Lecture 2: multi-head attention and masks
#
# One attention computes one set of weights per query. **Multi-head** attention
# runs H of them side by side, each in its own D = C / H dimensional subspace,
# so one head can track the previous word while another tracks the subject:
#
# $$\text{head}_h = \operatorname{Attention}(X W_q^{(h)}, X W_k^{(h)}, X W_v^{(h)}), \qquad
#   \operatorname{MultiHead}(X) = [\text{head}_1, \dots, \text{head}_H]\, W_o .$$
#
# **Masks** decide which keys a query may see: the causal mask hides the future, the
# key padding mask hides padding, and a query whose every key is hidden outputs 0.
# Shape legend: B batch, T queries, S keys, C = d_model, H heads, D = C/H head dim.

# %%

import matplotlib
matplotlib.use("Agg")                    # figures go to files, never to a window
import numpy as np

from _lecture import FAST, OUT, show_png    # fast-mode switch; where figures go (lectures/_lecture.py)
from minitransformer.plots.attention import attention_map
from minitransformer.plots.masks import causal_table, key_padding_figure
from minitransformer.functional.attention import attention_forward
from minitransformer.functional.linear import linear_forward
from minitransformer.functional.masks import causal_mask, combine_masks, key_padding_mask
from minitransformer.gradcheck import check_module
from minitransformer.layers import Causal, MultiHeadAttention

np.set_printoptions(precision=3, suppress=True)

# %% [markdown]
# ## 1. Heads are slices of one big projection
#
# `MultiHeadAttention` keeps ONE matrix $W_{qkv}$ of shape (C, 3C), so the three
# projections are a single matrix product; its column blocks are $W_q, W_k, W_v$,
# and head h owns the columns $hD \dots (h+1)D - 1$ of each block. We run the layer,
# then redo it head by head from those slices with `attention_forward`, a loop
# over heads that the layer itself never writes (it uses one batched product).

# %%
tokens = ["I", "am", "a", "student"]
B, T, C, H = 1, len(tokens), 8, 2
D = C // H
rng = np.random.default_rng(0)
x = rng.standard_normal((B, T, C))                         # (B, T, C) stand-in word vectors
mha = MultiHeadAttention(C, H, rng=0, init_std=0.5).astype(np.float64)
y = mha.forward(x)                                         # (B, T, C)

qkv, _ = linear_forward(x, mha.W_qkv, mha.b_qkv)           # (B, T, 3C) = [Q | K | V]
heads = []
for h in range(H):
    cols = slice(h * D, (h + 1) * D)
    q_h = qkv[:, :, 0 * C:1 * C][:, :, cols]               # (B, T, D)
    k_h = qkv[:, :, 1 * C:2 * C][:, :, cols]
    v_h = qkv[:, :, 2 * C:3 * C][:, :, cols]
    o_h, _ = attention_forward(q_h[:, None], k_h[:, None], v_h[:, None])   # (B, 1, T, D)
    heads.append(o_h[:, 0])
y_by_hand, _ = linear_forward(np.concatenate(heads, axis=-1), mha.W_o, mha.b_o)   # (B, T, C)
print("y from the layer:", y.shape, "| head by head, max difference:", np.abs(y - y_by_hand).max())
print("parameters:", mha.num_parameters(), "= 4C² + 4C =", 4 * C * C + 4 * C, "(the same for any H)")

# %% [markdown]
# ## 2. The causal mask
#
# A language model predicts token t + 1 from tokens ≤ t, and all positions are
# trained at once, so position t must not see the tokens after it. The mask is a
# boolean (T, S) table, True = "may attend"; attention turns False into a score of
# $-\infty$ before the softmax, so those keys get weight exactly 0:
#
# $$\text{mask}[i, j] = [\, j \le i \,].$$

# %%
mask = causal_mask(T)                                      # (T, T) bool
width = max(len(t) for t in tokens) + 2
print("query \\ key".ljust(width + 4) + "".join(t.center(width) for t in tokens))
for i, t in enumerate(tokens):
    print(t.ljust(width + 4) + "".join(("✓" if mask[i, j] else "✗").center(width) for j in range(T)))
causal_table(tokens, path=OUT / "02_causal_table.png")
show_png(OUT / "02_causal_table.png")

causal = MultiHeadAttention(C, H, pattern=Causal(), rng=0, init_std=0.5).astype(np.float64)
y_causal = causal.forward(x)
P = causal.attention_probs()                               # (B, H, T, T)
print("head 0 attention with the causal mask (rows: queries):\n", P[0, 0])

# %% [markdown]
# What the mask buys: change the LAST token and the outputs at the earlier
# positions do not move, because no earlier query could see it.

# %%
x_changed = x.copy()
x_changed[:, -1] += 10.0                                   # a very different last token
y_changed = causal.forward(x_changed)
print("change at positions 0..T-2:", np.abs(y_changed[:, :-1] - y_causal[:, :-1]).max(),
      "| at the last position:", np.abs(y_changed[:, -1] - y_causal[:, -1]).max())

# %% [markdown]
# ### Deck erratum: hide the future with −∞ before the softmax, keep the diagonal
#
# The survey deck masks "in the attention weights for $z_i$, set all entries $i{:}N$ to 0".
# Two things go wrong if done literally on the scores: a score of 0 still gets weight
# $e^0 / \sum$, so the future keeps a share, and entry $i$ itself (the token's own key)
# is dropped. The mask hides keys $j > i$ only, with a score of $-\infty$ (weight exactly
# 0 after the softmax; equivalently, zero the future weights AFTER the softmax and
# renormalise the row):

# %%
from minitransformer.functional.softmax import softmax_forward

scores_m = rng.standard_normal((T, T))                     # (T, T) one head's scores
deck_scores = scores_m.copy()
for i in range(T):
    deck_scores[i, i:] = 0.0                               # "set entries i:N to 0"
deck_P = softmax_forward(deck_scores)[0]                   # (T, T)
right_P = softmax_forward(np.where(causal_mask(T), scores_m, -np.inf))[0]
future = ~causal_mask(T)                                   # (T, T) True above the diagonal
print("deck's weights (rows: queries):\n", deck_P)
print("weight on the future: deck", deck_P[future].sum(), "| −∞ mask", right_P[future].sum())
assert np.all(deck_P[future] > 0) and np.all(right_P[future] == 0.0)
assert np.all(np.diagonal(right_P) > 0)                    # the token sees itself
v_m = rng.standard_normal((T, 2))
v_changed = v_m.copy()
v_changed[-1] += 10.0                                      # change the LAST token's value
assert not np.allclose((deck_P @ v_m)[0], (deck_P @ v_changed)[0])   # the deck's token 0 sees the last token
assert np.allclose((right_P @ v_m)[:-1], (right_P @ v_changed)[:-1], rtol=0, atol=0)

# %% [markdown]
# ## 3. Key padding
#
# Sentences in a batch have different lengths; the short ones are padded to the
# longest. Padding tokens carry no meaning, so no query may attend them. The key
# padding mask has shape (B, 1, 1, S): one row per sequence, broadcast over heads
# and queries. `MultiHeadAttention` takes it as (B, S), True = real token, and
# combines it with the causal mask (logical AND).

# %%
sentences = [["I", "am", "a", "student"], ["you", "are"]]
lengths = np.array([len(s) for s in sentences])            # (B,)
S = int(lengths.max())
padding = key_padding_mask(lengths, S)                     # (B, 1, 1, S)
print("key padding mask (B, S):\n", padding[:, 0, 0])
print("padding AND causal for sequence 1:\n", combine_masks(causal_mask(S), padding)[1, 0])
key_padding_figure(["I am a student", "you are"], path=OUT / "02_key_padding.png")
show_png(OUT / "02_key_padding.png")

xb = rng.standard_normal((2, S, C))                        # (B, S, C)
real = padding[:, 0, 0]                                    # (B, S) True = real token
y_pad = causal.forward(xb, key_padding_mask=real)
P_pad = causal.attention_probs()                           # (B, H, S, S)
print("sequence 1, head 0 (the PAD columns 2 and 3 are 0):\n", P_pad[1, 0])
xb_changed = xb.copy()
xb_changed[1, 2:] = 100.0                                  # whatever sits in the padding ...
y_pad_changed = causal.forward(xb_changed, key_padding_mask=real)
print("... the real positions do not notice:", np.abs(y_pad_changed[1, :2] - y_pad[1, :2]).max())

# %% [markdown]
# A query that may see NO key has no distribution to take. The convention here:
# its weights are all 0, it outputs 0 and passes 0 gradient, never NaN (a softmax
# of all $-\infty$ would be 0/0).

# %%
q1 = rng.standard_normal((1, 1, 2, D))
k1 = rng.standard_normal((1, 1, 3, D))
v1 = rng.standard_normal((1, 1, 3, D))
nothing_for_query_1 = np.array([[True, False, True], [False, False, False]])   # (T, S)
o1, c1 = attention_forward(q1, k1, v1, mask=nothing_for_query_1)
print("weights:\n", c1.probs[0, 0], "\noutput of the query with no key:", o1[0, 0, 1])

# %% [markdown]
# ## 4. Cross-attention: T queries, S keys
#
# In the encoder-decoder, each decoder position (T of them) queries the encoder's
# output, the **memory**, S positions long: $Q = X W_q$ from the decoder,
# $K = M W_k$ and $V = M W_v$ from the memory. The weights form a (T × S) matrix
# per head, with T ≠ S in general; there is no causal mask (the whole source is
# known), only the source's padding mask. The backward returns two gradients:
# one for the decoder states and one for the memory.

# %%
src_tokens = ["je", "suis", "un", "étudiant", "."]
tgt_tokens = ["<s>", "I", "am"]
Tq, Sk = len(tgt_tokens), len(src_tokens)
cross = MultiHeadAttention(C, H, cross=True, rng=1, init_std=0.5).astype(np.float64)
x_dec = rng.standard_normal((2, Tq, C))                    # (B, T, C) decoder states
memory = rng.standard_normal((2, Sk, C))                   # (B, S, C) encoder output
src_real = np.array([[True] * 5, [True, True, True, False, False]])   # (B, S) sequence 1 has 3 tokens
y_cross = cross.forward(x_dec, memory, key_padding_mask=src_real)
P_cross = cross.attention_probs()                          # (B, H, T, S)
dx, dmemory = cross.backward(rng.standard_normal(y_cross.shape))
print("y", y_cross.shape, "| P", P_cross.shape, "| dx", dx.shape, "| dmemory", dmemory.shape)
print("sequence 1, head 0 (source positions 3, 4 are padding):\n", P_cross[1, 0])
attention_map(P_cross[0, 0], tgt_tokens, src_tokens,
                    title="Cross-attention, head 0 (random weights): T × S", path=OUT / "02_cross_attention.png")
show_png(OUT / "02_cross_attention.png")

# %% [markdown]
# The backward of cross-attention, checked against central differences in
# float64, for the decoder states, the memory and every parameter:

# %%
small = MultiHeadAttention(4, 2, cross=True, rng=2, init_std=0.5).astype(np.float64)
x_small = rng.standard_normal((2, 3, 4))
m_small = rng.standard_normal((2, 5, 4))
result = check_module(small, x_small, m_small, seed=0,
                      forward_kwargs={"key_padding_mask": src_real})
print(result)
print("figures in", OUT)

# %% [markdown]
# ## What this lecture claimed, checked

# %%
# Heads are column slices of W_qkv: the head-by-head computation equals the layer,
# and the parameter count does not depend on H.
assert np.allclose(y_by_hand, y, rtol=0, atol=1e-12)
assert mha.num_parameters() == 4 * C * C + 4 * C
assert MultiHeadAttention(C, 1, rng=0).num_parameters() == MultiHeadAttention(C, 4, rng=0).num_parameters()

# The causal mask is the lower triangle, j <= i, and hidden keys get weight exactly 0.
assert np.array_equal(mask, [[j <= i for j in range(T)] for i in range(T)])
assert np.all(P[..., ~mask] == 0.0)
assert np.allclose(P.sum(axis=-1), 1.0, atol=1e-12)
# Changing the last token changes only the last position's output.
assert np.allclose(y_changed[:, :-1], y_causal[:, :-1], rtol=0, atol=1e-12)
assert np.abs(y_changed[:, -1] - y_causal[:, -1]).max() > 1e-3

# Padding: PAD keys get weight 0; the real positions ignore what the padding holds.
assert np.all(P_pad[1, :, :, 2:] == 0.0)
assert np.allclose(y_pad_changed[1, :2], y_pad[1, :2], rtol=0, atol=1e-12)
# A query with no visible key: zero weights, zero output, no NaN.
assert np.all(c1.probs[0, 0, 1] == 0.0) and np.all(o1[0, 0, 1] == 0.0) and np.isfinite(o1).all()

# Cross-attention: a (T × S) matrix per head, rows sum to 1 over the real source
# tokens, padding columns get 0, two gradients of the right shapes, and they are correct.
assert P_cross.shape == (2, H, Tq, Sk) and Tq != Sk
assert np.allclose(P_cross.sum(axis=-1), 1.0, atol=1e-12)
assert np.all(P_cross[1, :, :, 3:] == 0.0)
assert dx.shape == x_dec.shape and dmemory.shape == memory.shape
assert np.all(dmemory[1, 3:] == 0.0)                       # padded memory receives no gradient
assert result.ok, str(result)
print("lecture 2: all claims check out")

# %% [markdown]
# ## Quiz
#
# Write your answer in each `answer_N = None  # your answer` cell and run the check
# below it: a wrong answer stops with a hint, an unanswered one says so
# (`lectures/_quiz.py`; the answers are stored as digests, not in plain sight).

# %%
from _quiz import check, summary

# %% [markdown]
# **Question 1.** $d_{\text{model}} = 512$ split into 8 heads: what is the width of one head?

# %%
answer_1 = None  # your answer

# %%
check("1", answer_1, "a68b412c4282555f", hint="the heads are slices of one projection")

# %% [markdown]
# **Question 2.** With the causal mask on T = 4 tokens, how many (query, key) pairs may
# attend (✓ in the table)?

# %%
answer_2 = None  # your answer

# %%
check("2", answer_2, "4a44dc15364204a8", hint="query i sees keys 0 .. i: count the lower triangle with its diagonal")

# %% [markdown]
# **Question 3.** Cross-attention from T = 5 decoder positions to S = 7 encoder positions:
# what is the shape of one head's attention matrix? (A list [rows, columns].)

# %%
answer_3 = None  # your answer

# %%
check("3", answer_3, "374dd749c07f4c58", hint="one row per query, one column per key")

# %% [markdown]
# **Question 4.** How many parameters do $W_Q, W_K, W_V, W_O$ of multi-head attention
# with $C = 512$ have, biases included? (The number of heads does not matter. Why?)

# %%
answer_4 = None  # your answer

# %%
check("4", answer_4, "f986f0b69933ad69", hint="four C × C matrices and four biases of C")

# %% [markdown]
# **Question 5.** True or False: in cross-attention the queries come from the decoder,
# the keys and values from the encoder's output.

# %%
answer_5 = None  # your answer

# %%
check("5", answer_5, "b5bea41b6c623f7c", hint="the decoder asks, the source answers")

# %% [markdown]
# **Question 6** (the module deck's review). Why several heads rather than one head of the
# full width? (a) several heads have more parameters; (b) each head's softmax row is one
# weighting of the positions, so several heads can attend to different positions for
# different reasons at the same time (some near, some far); (c) several heads make attention
# cheaper. A letter.

# %%
answer_6 = None  # your answer

# %%
check("6", answer_6, "3e23e8160039594a", hint="count the parameters first (question 4), then think of one softmax row")

# %% [markdown]
# **Question 7** (the module deck's review). $D = 64$ and 4 heads: what is the dimension of each head?

# %%
answer_7 = None  # your answer

# %%
check("7", answer_7, "b17ef6d19c7a5b1e", hint="d_h = D / heads")

# %% [markdown]
# **Question 8** (the module deck's review: training vs testing). (a) In training the whole
# target goes into the decoder at once, so the causal mask must hide each position's later
# tokens; when generating, tokens come one at a time and the later ones do not exist yet;
# (b) the mask is needed only at test time, to stop the model from cheating; (c) training
# masks the encoder, testing the decoder. A letter.

# %%
answer_8 = None  # your answer

# %%
check("8", answer_8, "ca978112ca1bbdca", hint="which tokens does the decoder see in one training pass?")
summary()
