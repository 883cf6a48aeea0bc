# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Lecture 7: a GPT, end to end
#
# Everything of the previous lectures, assembled into a decoder-only language
# model and trained on text: the English help topics that ship with Python
# (no download). Then we sample from it and look at where it attends.
#
# $$x_0 = E[\text{ids}] + P[0{:}T], \qquad x_l = \text{Block}_l(x_{l-1}), \qquad
#   \text{logits} = \operatorname{LayerNorm}(x_L)\, E^\top, \qquad
#   p(\text{token}_{t+1} \mid \text{tokens}_{\le t}) = \operatorname{softmax}(\text{logits}_t).$$
#
# Each block is pre-norm: $x + \operatorname{Attn}(\operatorname{LN}(x))$ with the causal mask, then
# $x + \operatorname{FFN}(\operatorname{LN}(x))$. Without `MINITRANSFORMER_FAST=1` this lecture trains for
# a minute or two on a laptop CPU.

# %%
import math

import matplotlib
matplotlib.use("Agg")                    # figures go to files, never to a window
import numpy as np

from _lecture import FAST, OUT, show_png    # fast-mode switch; where figures go (lectures/_lecture.py)
from minitransformer.plots.attention import attention_grid, attention_map
from minitransformer.plots.training import loss_curve
from minitransformer.training.data import load_text, random_batch, train_val_split
from minitransformer.functional.cross_entropy import cross_entropy_forward
from minitransformer.functional.softmax import softmax_forward
from minitransformer.generation.generate import generate
from minitransformer.models import GPT, GPTConfig
from minitransformer.training.tasks import LanguageModelTask
from minitransformer.tokenizers import CharTokenizer
from minitransformer.training.loop import TrainConfig, train

np.set_printoptions(precision=3, suppress=True)

# %% [markdown]
# ## 1. The data: characters
#
# The simplest tokenizer: one token per character, ids in sorted character
# order. The first 90% of the text trains, the last 10% validates (a contiguous
# split: neighbouring windows overlap, so a shuffled split would leak).

# %%
text = load_text()                                         # Python's own help topics
tokenizer = CharTokenizer.from_text(text)
ids = np.asarray(tokenizer.encode(text), dtype=np.int64)
train_ids, val_ids = train_val_split(ids, 0.1)
V = tokenizer.vocab_size
print(f"{len(text):,} characters, {V} distinct; {len(train_ids):,} for training, {len(val_ids):,} for validation")
print("a sample of the text:", repr(text[10000:10120]))

# %% [markdown]
# ## 2. The model
#
# Its parameters, counted by hand: the token table $V C$ and the position table
# $T_{\max} C$; per block two LayerNorms ($2 \cdot 2C$), attention ($C \cdot 3C + 3C$ for
# $W_{qkv}$, $C^2 + C$ for $W_o$), the FFN ($C \cdot 4C + 4C$ and $4C \cdot C + C$); the final
# LayerNorm $2C$; the output matrix is the token table itself (tied), so it adds nothing.

# %%
if FAST:
    config = GPTConfig(vocab_size=V, block_size=32, n_layer=2, n_head=4, d_model=32)
    steps, batch_size, lr = 30, 8, 3e-3
else:
    config = GPTConfig(vocab_size=V, block_size=64, n_layer=4, n_head=4, d_model=128)
    steps, batch_size, lr = 1000, 12, 1e-3
model = GPT(config, rng=0)
C, T_max, L = config.d_model, config.block_size, config.n_layer
by_hand = V * C + T_max * C + L * (4 * C + (3 * C * C + 3 * C) + (C * C + C) + (4 * C * C + 4 * C)
                                   + (4 * C * C + C)) + 2 * C
print(f"{model.num_parameters():,} parameters (by hand: {by_hand:,})")

# %% [markdown]
# Before any training the predictions are nearly uniform, so the loss should be
# close to $\ln V$, the cross-entropy of the uniform guess: the weights are small
# (std 0.02), the final LayerNorm gives $h$ entries of unit scale, and the logits
# $h E^\top$ then have a standard deviation of only about $0.02\sqrt C$ (the cell prints it
# beside the measured spread, and asserts they agree within 30 %).
# Logits that small move the loss from $\ln V$ by a few hundredths at most.

# %%
task = LanguageModelTask(train_ids, val_ids, config.block_size, batch_size)
x, y = random_batch(train_ids, config.block_size, batch_size, np.random.default_rng(0))   # (B, T) each
initial_logits = model.forward(x)                          # (B, T, V)
initial_loss = float(cross_entropy_forward(initial_logits, y)[0])
model.zero_grad()
logit_spread = float(initial_logits.std())
print(f"loss at initialisation {initial_loss:.4f}; ln V = {math.log(V):.4f}; "
      f"std of the logits {logit_spread:.3f}, 0.02·√C = {0.02 * math.sqrt(C):.3f}")
assert abs(logit_spread / (0.02 * math.sqrt(C)) - 1) < 0.3

# %% [markdown]
# ### The whole model on one screen
#
# The Modules hide the wiring behind small classes. `minitransformer/models/gpt_reference.py`
# writes the same GPT as one function of functional calls: the forward top to bottom, then
# the backward in exact reverse order, each line naming the forward line it reverses.
# Read it next to this lecture; here we check that it IS the model: same loss, same
# gradient for every parameter, in float64.

# %%
import inspect

from minitransformer.functional.cross_entropy import cross_entropy_backward
from minitransformer.models.gpt_reference import gpt_loss_and_gradients

source = inspect.getsource(gpt_loss_and_gradients)
print(f"{len(source.splitlines())} lines:\n" + source[:1200] + "...")
small = GPTConfig(vocab_size=V, block_size=16, n_layer=2, n_head=4, d_model=32, init_std=0.3)
small_model = GPT(small, rng=1, dtype=np.float64)
xs, ys = random_batch(train_ids, 16, 3, np.random.default_rng(1))                     # (3, 16) each
loss_modules, ce_cache = cross_entropy_forward(small_model.forward(xs), ys)
small_model.backward(cross_entropy_backward(1.0, ce_cache))
loss_ref, grads_ref = gpt_loss_and_gradients(small_model.state_dict(), xs, ys, small)
worst = max(float(np.abs(grads_ref[name] - g).max() / np.abs(g).max())
            for name, _, g in small_model.parameters())
print(f"loss: modules {float(loss_modules):.12f}, one screen {float(loss_ref):.12f}; "
      f"worst relative gradient difference {worst:.1e}")
assert abs(float(loss_modules) - float(loss_ref)) < 1e-12 and worst < 1e-10

# %% [markdown]
# ### The same step, operation by operation, in a browser
#
# `minitransformer.trace` records every functional call of one training step (the forward,
# the loss, the backward) with its numbers, and `write_page` turns the record into one HTML
# file to step through with the arrow keys: per operation the equation of its docstring, the
# line that called it and the routine's code, the values as heatmaps (the attention maps with
# the characters on both axes), and in the backward each gradient beside the forward value it
# belongs to. The forward is the order of `gpt_reference.py`'s lines; the backward runs it in
# reverse, each backward linked to the forward it reverses. From the command line:
# `python -m minitransformer trace --out trace.html` (a tiny GPT; `--checkpoint runs/gpt` for
# the model `train` wrote, `--model encoder|seq2seq|vit` for the other families).

# %%
from minitransformer.trace import trace_step, write_page

x1, y1 = xs[:1], ys[:1]                                    # one window of 16 characters
small_model.zero_grad()
t = trace_step(small_model, "gpt", {"x": x1, "targets": y1},
               {"tokens": list(tokenizer.decode(x1[0])), "task": "predict the next character",
                "vocab": [tokenizer.decode([i]) for i in range(V)]})
page = OUT / "07_trace.html"
size = write_page(t, page)
forwards = [s for s in t.top() if s.routine.direction == "forward"]
backwards = [s for s in t.top() if s.routine.direction == "backward"]
print(f"{len(t.steps)} steps ({len(forwards)} forward routines, {len(backwards)} backward), "
      f"{size / 1e6:.2f} MB: open {page} in a browser")
print("forward: ", " → ".join(s.op.replace("_forward", "") for s in forwards[:8]), "...")
print("backward:", " → ".join(s.op.replace("_backward", "") for s in backwards[:8]), "...")
assert [s.reverses for s in backwards] == [s.index for s in forwards][::-1]   # exactly the reverse order
assert abs(t.meta["loss"] - float(cross_entropy_forward(small_model.forward(x1), y1)[0])) < 1e-12

# %% [markdown]
# ## 3. Training
#
# `train` runs the loop of `minitransformer/training/loop.py`: a random batch of windows,
# forward, cross-entropy, backward, gradient clipping, AdamW, linear warmup then
# cosine decay, and an evaluation on both splits at the end.

# %%
train_config = TrainConfig(steps=steps, lr=lr, warmup_steps=steps // 10, eval_interval=max(steps // 2, 1),
                           log_interval=max(steps // 10, 1), eval_batches=5 if FAST else 20,
                           final_eval_batches=5 if FAST else 50)
result = train(model, task, train_config)
losses = np.array([loss for _, loss in result.history])
print(f"trained {steps} steps in {result.seconds:.1f} s: train loss {result.final_train_loss:.3f}, "
      f"validation loss {result.final_val_loss:.3f} (from {initial_loss:.3f})")
loss_curve(result.history, result.evals, path=OUT / "07_loss.png")
show_png(OUT / "07_loss.png")

# %% [markdown]
# ## 4. Sampling
#
# To generate, feed a prompt, turn the logits of the last position into
# probabilities, pick a token, append it, repeat. Greedy picks the most probable
# token; sampling draws from $\operatorname{softmax}(\text{logits}/\tau)$, where the temperature $\tau < 1$
# sharpens the distribution. First, the model's top guesses after a prompt:

# %%
prompt = "The "
prompt_ids = np.array([tokenizer.encode(prompt)])          # (1, T0)
model.eval()
p_next = softmax_forward(model.forward(prompt_ids)[0, -1])[0]   # (V,) p(next | "The ")
model.train()
top = np.argsort(-p_next)[:5]
print("after 'The ':", ", ".join(f"{tokenizer.decode([t])!r} {p_next[t]:.3f}" for t in top))

sample = generate(model, prompt_ids, max_new_tokens=60 if FAST else 200, strategy="sample",
                  temperature=0.8, rng=np.random.default_rng(0), use_cache=False)   # crops to the last block_size
print("sampled (τ = 0.8):\n" + tokenizer.decode(sample[0]))
n_greedy = config.block_size - prompt_ids.shape[1]        # stay within the context: no cropping
greedy = generate(model, prompt_ids, max_new_tokens=n_greedy)
greedy_no_cache = generate(model, prompt_ids, max_new_tokens=n_greedy, use_cache=False)
print("greedy:\n" + tokenizer.decode(greedy[0]))

# %% [markdown]
# `generate` keeps a KV cache: each new token is one more position for every
# layer, instead of re-running the whole prefix. With `use_cache=False` it re-runs
# the prefix each step, the textbook way; within the context length (block_size
# positions) the tokens must be the same. Beyond it, the cached version stops,
# because learned positions cannot slide, and the uncached one crops the prefix to
# its last block_size tokens: that is how the sample above grew longer than the context.
#
# ## 5. Where does it look?
#
# After a forward pass in eval mode, each attention layer keeps its probabilities
# $P$ (B, H, T, T): `model.blocks[l].attn.sublayer.attention_probs()`. Each row is a
# distribution over the keys, and the causal mask leaves the upper triangle 0.

# %%
phrase = "The return statement"
phrase_ids = np.array([tokenizer.encode(phrase)])          # (1, T)
model.eval()
model.forward(phrase_ids)
P = [block.attn.sublayer.attention_probs().copy() for block in model.blocks]   # L × (1, H, T, T)
model.train()
for l, P_l in enumerate(P):
    last = P_l[0, :, -1]                                   # (H, T) where the last character looks
    print(f"layer {l}: each head's favourite key for the last character 't':",
          [repr(phrase[j]) + f"@{j}" for j in last.argmax(axis=-1)])
attention_grid(model, phrase_ids, list(phrase), path=OUT / "07_attention_grid.png")
show_png(OUT / "07_attention_grid.png")
attention_map(P[-1][0, 0], list(phrase), title="Last layer, head 0", path=OUT / "07_attention_head.png")
show_png(OUT / "07_attention_head.png")
print("figures in", OUT)

# %% [markdown]
# In the grid (after the full run), look for a few recurring shapes: a band just
# below the diagonal (a head that reads the previous character), vertical stripes
# (every later character looking at one key, such as the space that starts the
# current word), and broad, diffuse rows (a head averaging over the recent past).
# With fast mode's 30 steps the model has not learned enough to show them.
#
# ## What this lecture claimed, checked

# %%
# The parameter count by hand; the loss at initialisation is within 0.1 of ln V.
assert model.num_parameters() == by_hand
assert abs(initial_loss - math.log(V)) < 0.1

# Training lowered the loss; the full run gets well below the uniform guess ln V.
assert losses[-5:].mean() < losses[:5].mean()
assert result.final_val_loss < initial_loss
if not FAST:
    assert result.final_val_loss < 2.5, result.final_val_loss

# Generation: the prompt is kept, every new id is a character of the vocabulary, and
# greedy decoding gives the same tokens with and without the KV cache.
assert sample[0, :prompt_ids.shape[1]].tolist() == prompt_ids[0].tolist()
assert sample.shape[1] == prompt_ids.shape[1] + (60 if FAST else 200)   # no eos_id: all tokens made
assert sample.min() >= 0 and sample.max() < V
assert np.array_equal(greedy, greedy_no_cache)
assert abs(p_next.sum() - 1) < 1e-5

# Attention: rows are distributions (float32 rounding), the future is exactly 0.
T_phrase = len(phrase)
future = np.triu(np.ones((T_phrase, T_phrase), dtype=bool), k=1)   # key j > query i
for P_l in P:
    assert P_l.shape == (1, config.n_head, T_phrase, T_phrase)
    assert np.allclose(P_l.sum(axis=-1), 1.0, atol=1e-5)
    assert np.all(P_l[..., future] == 0.0)
print("lecture 7: all claims check out")

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
# **Question 1.** A character-level model over $V = 65$ characters, untrained: what loss
# do you expect (2 decimals)?

# %%
answer_1 = None  # your answer

# %%
check("1", answer_1, "8c201fc73fb27167", digits=3, hint="the cross-entropy of the uniform guess")

# %% [markdown]
# **Question 2.** How many parameters does one GPT block of width $C = 128$ have (two
# LayerNorms, attention with biases, the FFN $C \to 4C \to C$)?

# %%
answer_2 = None  # your answer

# %%
check("2", answer_2, "3556b2c0df14c9fe", hint="12 C² + 13 C")

# %% [markdown]
# **Question 3.** The KV cache of a model with L = 4 layers and width C = 128, for one
# sequence of T = 64 tokens: how many numbers does it hold?

# %%
answer_3 = None  # your answer

# %%
check("3", answer_3, "0f255ec16482c343", hint="a key AND a value of width C, per layer and per position")

# %% [markdown]
# **Question 4.** Sampling with temperature τ → 0 becomes: (a) uniform sampling;
# (b) greedy decoding; (c) top-p sampling. A letter.

# %%
answer_4 = None  # your answer

# %%
check("4", answer_4, "3e23e8160039594a", hint="softmax(logits / τ) as τ shrinks")

# %% [markdown]
# **Question 5.** True or False: with the causal mask, the attention weight of query i on
# a key j > i is exactly 0.

# %%
answer_5 = None  # your answer

# %%
check("5", answer_5, "b5bea41b6c623f7c", hint="the masked scores are −∞ before the softmax")
summary()
