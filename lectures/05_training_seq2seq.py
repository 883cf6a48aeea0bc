# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Lecture 5: training the encoder-decoder
#
# The original Transformer (Vaswani et al. 2017) maps a source sequence to a target
# sequence. We train it on a task small enough to watch: **reverse** a sequence of
# symbols. Four ideas make the training work:
#
# 1. **teacher forcing**: the decoder reads the TRUE previous target tokens and
#    predicts every position in one forward pass;
# 2. **label smoothing**: the target distribution gives a little mass to every class;
# 3. a **warmup** of the learning rate;
# 4. at test time, **greedy decoding**: feed the model its own predictions, one token at a time.

# %%
import math

import matplotlib
matplotlib.use("Agg")                    # figures go to files, never to a window
import numpy as np

from _lecture import FAST, OUT, show_png    # fast-mode switch; where figures go (lectures/_lecture.py)
from minitransformer.plots.training import label_smoothing, loss_curve, lr_schedules
from minitransformer.training.data import BOS, EOS, IGNORE_INDEX, PAD, make_sequence_task
from minitransformer.functional.cross_entropy import cross_entropy_backward, cross_entropy_forward
from minitransformer.functional.softmax import softmax_forward
from minitransformer.generation.generate import generate_seq2seq, greedy_seq2seq
from minitransformer.models import Seq2Seq, Seq2SeqConfig
from minitransformer.optim import noam_schedule
from minitransformer.training.tasks import SequenceTaskData
from minitransformer.training.loop import TrainConfig, train

np.set_printoptions(precision=4, suppress=True)

NAMES = {PAD: "[PAD]", BOS: "[START]", EOS: "[END]"}          # the special tokens 0, 1, 2


def show(ids):
    """Token ids as text: the special tokens by name, the symbols 3 .. V-1 as numbers."""
    return " ".join(NAMES.get(int(t), str(int(t))) for t in ids if t != IGNORE_INDEX)

# %% [markdown]
# ## 1. Teacher forcing: `tgt_in` and `tgt_out`
#
# For a source $x_1 \dots x_L$ with target $y_1 \dots y_L$ (here $y = $ reversed $x$):
#
# * `tgt_in`  = [START] $y_1 \dots y_L$ — what the decoder reads,
# * `tgt_out` = $y_1 \dots y_L$ [END] — what it must predict, position by position:
#   `tgt_out[t] = tgt_in[t + 1]`, the target shifted left by one.
#
# Shorter sequences are padded: [PAD] in `src` (hidden by the key padding mask) and
# in `tgt_in` (it comes after the real tokens, so the causal mask hides it from them),
# and `-100` (`IGNORE_INDEX`) in `tgt_out`, which the loss skips. With the causal mask
# in the decoder, position t sees `tgt_in[: t + 1]` only, so all L + 1 predictions are
# made in ONE forward pass, each from the true prefix ("teacher forcing").

# %%
V = 13                                                     # [PAD], [START], [END] and 10 symbols 3..12
example = make_sequence_task("reverse", 3, (3, 6), V, np.random.default_rng(0))
for b in range(3):
    print(f"src     {show(example.src[b])}\ntgt_in  {show(example.tgt_in[b])}\n"
          f"tgt_out {show(example.tgt_out[b])}   (raw: {example.tgt_out[b].tolist()})\n")

# %% [markdown]
# ## 2. Label smoothing
#
# Plain cross-entropy pulls the predicted distribution $p$ towards a one-hot target.
# Label smoothing (Szegedy et al. 2016; the paper uses $\varepsilon = 0.1$) pulls it towards
#
# $$q = (1 - \varepsilon)\,\text{onehot}(y) + \varepsilon / V, \qquad
#   \ell = -\sum_c q_c \log p_c = (1-\varepsilon)(-\log p_y) + \varepsilon\,\operatorname{mean}_c(-\log p_c).$$
#
# The model is never asked for probability 1, which keeps logits from growing
# without bound. A consequence: the smallest possible loss is no longer 0 but the
# entropy of $q$, reached when $p = q$ (Gibbs' inequality: $-\sum q \log p \ge -\sum q \log q$).
# We check `cross_entropy_forward` against the formula evaluated with the math
# module, and read $q$ back from its gradient, $d\ell/dz = p - q$.

# %%
smoothing = 0.1
z = np.array([[2.0, -1.0, 0.5, 0.0, 1.0]])                 # (N=1, 5) logits
y = np.array([0])
loss, ce_cache = cross_entropy_forward(z, y, smoothing=smoothing)
Vz = z.shape[1]
p_math = [math.exp(zc) / sum(math.exp(zj) for zj in z[0]) for zc in z[0]]
q_math = [(1 - smoothing) * (c == y[0]) + smoothing / Vz for c in range(Vz)]
loss_math = -sum(qc * math.log(pc) for qc, pc in zip(q_math, p_math))
q_from_gradient = softmax_forward(z)[0][0] - cross_entropy_backward(1.0, ce_cache)[0]   # p - (p - q)
print(f"cross_entropy_forward: {float(loss):.12f} | formula: {loss_math:.12f}")
print("q read from the gradient:", q_from_gradient, "| formula:", np.array(q_math))


def entropy(probs):
    return -sum(pc * math.log(pc) for pc in probs if pc > 0)


q_V = [(1 - smoothing) * (c == 0) + smoothing / V for c in range(V)]  # the smoothed target for our task, V = 13
floor = entropy(q_V)
loss_at_q = float(cross_entropy_forward(np.log(np.array([q_V])), np.array([0]), smoothing=smoothing)[0])
print(f"with V = {V}: the smallest possible smoothed loss H(q) = {floor:.4f}; "
      f"the loss at p = q: {loss_at_q:.4f}")
label_smoothing(V=8, smoothing=smoothing, path=OUT / "05_label_smoothing.png")
show_png(OUT / "05_label_smoothing.png")

# %% [markdown]
# ## 3. Warmup
#
# Adam's early steps are noisy (its second-moment estimate has seen few gradients),
# and post-norm Transformers diverge with a large learning rate at the start. The
# paper warms up linearly and then decays as $1/\sqrt{\text{step}}$:
#
# $$\text{lr} = d_{\text{model}}^{-0.5}\cdot\min\!\left(\text{step}^{-0.5},\ \text{step}\cdot\text{warmup}^{-1.5}\right).$$
#
# The two terms meet at step = warmup, the peak: $(d_{\text{model}}\cdot\text{warmup})^{-1/2}$,
# $7.0 \times 10^{-4}$ for the paper's base model ($d_{\text{model}} = 512$, warmup 4000).
# This package's training loop uses the other common shape, linear warmup then a
# cosine decay (`TrainConfig.warmup_steps`); both are in the figure.

# %%
noam = noam_schedule(d_model=512, warmup_steps=4000)
print(f"lr(1000) = {noam(1000):.3e}, lr(4000) = {noam(4000):.3e} (peak), lr(16000) = {noam(16000):.3e}")
lr_schedules(path=OUT / "05_lr_schedules.png")
show_png(OUT / "05_lr_schedules.png")

# %% [markdown]
# ## 4. Training on the reverse task
#
# `SequenceTaskData` draws fresh random sequences for every batch (and keeps a
# fixed held-out set); `train` runs the loop: forward, cross-entropy, backward,
# gradient clipping, AdamW, with linear warmup and cosine decay. The model is the
# paper's architecture (post-norm, ReLU, sinusoidal positions, shared embeddings),
# just small.

# %%
steps, width, batch = (40, 32, 32) if FAST else (400, 64, 64)
config = Seq2SeqConfig(vocab_size=V, block_size=10, n_layer=2, n_head=4, d_model=width)
model = Seq2Seq(config, rng=0)
task = SequenceTaskData("reverse", V, (3, 8), batch, n_val=200, seed=0)
train_config = TrainConfig(steps=steps, lr=3e-3, warmup_steps=steps // 10, smoothing=smoothing,
                           eval_interval=steps, log_interval=max(steps // 5, 1), final_eval_batches=5)
print(f"{model.num_parameters():,} parameters, {steps} steps")
result = train(model, task, train_config)
losses = np.array([loss for _, loss in result.history])
print(f"training loss (smoothed, ε = {smoothing}): first 10 steps {losses[:10].mean():.3f}, "
      f"last 10 steps {losses[-10:].mean():.3f}; floor H(q) = {floor:.3f}")
print(f"held-out loss (no smoothing): {result.final_val_loss:.3f}")
loss_curve(result.history, result.evals, path=OUT / "05_loss.png")
show_png(OUT / "05_loss.png")

# %% [markdown]
# ## 5. Greedy decoding, step by step
#
# At test time there is no target to read. The encoder runs ONCE on the source;
# then the decoder starts from [START] and, at each step, appends the most probable
# next token, until it emits [END]:
#
# $$\hat y_{t+1} = \arg\max_v\ p(v \mid \hat y_{\le t}, x).$$

# %%
src, src_lengths, _, _ = task.val
row = 0
src_row = src[row:row + 1]                                 # (1, S)
model.eval()
memory = model.encode(src_row)                             # (1, S, C), computed once
mask = model.source_mask(src_row)                          # (1, S) True = real token
decoded = [BOS]
print("source:", show(src_row[0][:src_lengths[row]]))
print("output:", show(decoded), end=" ", flush=True)
for t in range(config.block_size - 1):
    logits = model.decoder.forward(np.array([decoded]), memory, mask)   # (1, t + 1, V) the whole prefix
    next_token = int(logits[0, -1].argmax())               # the last position predicts the next token
    decoded.append(next_token)
    print(show([next_token]), end=" ", flush=True)
    if next_token == EOS:
        break
print()

# %% [markdown]
# `generate.greedy_seq2seq` does the same for a whole batch, with a KV cache (each
# step feeds only the new token). With `trace=[]`, `generate_seq2seq` also records
# the most probable candidates at every step:

# %%
trace = []
library = generate_seq2seq(model, src_row, max_len=config.block_size - 1, bos_id=BOS, eos_id=EOS, trace=trace)
for t, step in enumerate(trace):
    top3 = ", ".join(f"{show([tok])} {p:.2f}" for tok, p in step.candidates[0][:3])
    print(f"step {t}: chose {show(step.tokens):8s} | top candidates: {top3}")

predictions = greedy_seq2seq(model, src, max_len=config.block_size - 1, bos_id=BOS, eos_id=EOS)   # (N, 9)
correct = [np.array_equal(predictions[i, :L], src[i, :L][::-1]) and predictions[i, L] == EOS
           for i, L in enumerate(src_lengths)]
accuracy = float(np.mean(correct))
print(f"held-out exact-match accuracy: {accuracy:.1%} of {len(src)} sequences")

# %% [markdown]
# Teacher forcing and step-by-step decoding are the same computation: the causal
# mask makes position t's logits depend on `tgt_in[: t + 1]` only, so the logits of
# one teacher-forced pass equal those of feeding the prefixes one by one.

# %%
tgt_prefix = np.array([decoded])                           # (1, t) our greedy output, as a target
full_pass = model.decoder.forward(tgt_prefix, memory, mask)              # (1, t, V) all at once
one_by_one = np.concatenate([model.decoder.forward(tgt_prefix[:, :t + 1], memory, mask)[:, -1:]
                             for t in range(tgt_prefix.shape[1])], axis=1)   # (1, t, V)
model.train()
print("teacher-forced pass vs prefix by prefix, max difference:", np.abs(full_pass - one_by_one).max())
print("figures in", OUT)

# %% [markdown]
# ## 6. Deck erratum: the warmup formula
#
# One of the course decks writes the schedule as
# $\text{lr} = \sqrt{1/d}\cdot\min\!\left(\sqrt{1/d},\ i\cdot\text{warmup}^{-1.5}\right)$.
# That is garbled: the first argument of the min must be $i^{-0.5}$ (the step), not
# $d^{-0.5}$. With $\sqrt{1/d}$ the schedule rises linearly until
# $i = \sqrt{1/d}\cdot\text{warmup}^{1.5}$ (11,180 steps for $d = 512$, warmup 4000), then stays
# flat for ever: no decay at all, and a plateau $1/d$ that is $\sqrt{\text{warmup}/d} \approx 2.8$ times the
# paper's peak $(d\cdot\text{warmup})^{-1/2}$.
# Both, side by side:

# %%
from matplotlib.figure import Figure

from _lecture import save_figure


def deck_noam(i, d=512, warmup=4000):
    """The deck's formula, as written: sqrt(1/d) * min(sqrt(1/d), i * warmup^-1.5)."""
    return math.sqrt(1 / d) * min(math.sqrt(1 / d), i * warmup ** -1.5)


lr_steps = np.arange(1, 40001, 100)
paper_lr = np.array([noam(int(i)) for i in lr_steps])
deck_lr = np.array([deck_noam(int(i)) for i in lr_steps])
deck_corner = math.sqrt(1 / 512) * 4000 ** 1.5              # where i · warmup^-1.5 reaches sqrt(1/d)
print(f"paper: peak {paper_lr.max():.2e} at step 4000, lr(40000) = {noam(40000):.2e}")
print(f"deck:  flat at {deck_noam(40000):.2e} = 1/d from step {deck_corner:,.0f} on; "
      f"lr(20000) = {deck_noam(20000):.2e}, lr(40000) = {deck_noam(40000):.2e}")
fig = Figure(figsize=(6, 3.5), layout="constrained")
ax = fig.subplots()
ax.plot(lr_steps, paper_lr, label=r"paper: $d^{-0.5}\min(i^{-0.5}, i\,w^{-1.5})$")
ax.plot(lr_steps, deck_lr, "--", label=r"deck: $d^{-0.5}\min(d^{-0.5}, i\,w^{-1.5})$")
ax.set(xlabel="step i", ylabel="learning rate", title="The warmup schedule: paper vs the deck's formula")
ax.legend()
save_figure(fig, "05_noam_erratum.png")
assert abs(noam(4000) - (512 * 4000) ** -0.5) < 1e-15 and noam(40000) < noam(4000)   # the paper's decays
assert deck_noam(20000) == deck_noam(40000) and math.isclose(deck_noam(40000), 1 / 512)                               # the deck's never does
assert abs(deck_noam(2000) - noam(2000)) < 1e-15                                      # same linear rise
assert math.isclose(deck_noam(40000) / noam(4000), math.sqrt(4000 / 512))

# %% [markdown]
# ## 7. Beam search
#
# Greedy decoding commits to the single most probable token at every step; a token
# that looks second best now may lead to a much better sequence. **Beam search** keeps
# the $W$ best prefixes ("beams") instead of one. At every step each beam is extended
# by every token; of the $W \cdot V$ extensions the $W$ with the highest
# $\sum_t \log p(y_t \mid y_{<t}, x)$ survive. A beam that emits [END] is set aside as a
# finished hypothesis. At the end, hypotheses are compared by
#
# $$\text{score}(y) = \frac{1}{|y|^{\alpha}} \sum_{t=1}^{|y|} \log p(y_t \mid y_{<t}, x),$$
#
# $|y|$ counting [END]. Every log-probability is negative, so the raw sum ($\alpha = 0$)
# prefers SHORT outputs; $\alpha = 1$ compares the mean log-probability per token.
# A worked example: $y_1$ has 3 tokens and $\sum \log p = -2.0$, $y_2$ has 6 tokens and $-2.6$.

# %%
from minitransformer.functional.softmax import log_softmax_forward
from minitransformer.generation.generate import beam_seq2seq


def length_penalised(sum_logp, length, alpha):
    return sum_logp / length ** alpha


for alpha in (0.0, 0.5, 1.0):
    s1, s2 = length_penalised(-2.0, 3, alpha), length_penalised(-2.6, 6, alpha)
    print(f"α = {alpha}: score(y1) = {s1:.3f}, score(y2) = {s2:.3f} -> {'y1' if s1 > s2 else 'y2'} wins")

# %% [markdown]
# On the trained reverse model: beam search of width 4 against greedy decoding on the
# held-out set. We recompute each output's score independently, by one teacher-forced
# pass of the decoder over [START] + output, and summing the log-probabilities of the
# output's tokens up to and including [END]. A beam of width 1 with $\alpha = 0$ is greedy
# decoding: the [END] that greedy takes is set aside as finished, and the live beam can
# only lose log-probability after it. With $\alpha = 1$ it is not: the live beam goes on
# past that [END], and a longer output with a better MEAN log-probability can win.
#
# What to expect: after the full run the model is so sure of each token (the task is
# easy) that beam and greedy give the same outputs; with fast mode's barely trained
# model, the beam finds outputs of higher score than greedy on most rows. Beam search
# pays off where the next-token distribution is spread over several good choices.

# %%
def sequence_score(src_rows, outputs, alpha=1.0):
    """Σ log p(y_t | y_<t, x) / |y|^α of each output row, by a teacher-forced decoder pass."""
    model.eval()
    tgt_in = np.concatenate([np.full((len(outputs), 1), BOS), outputs[:, :-1]], axis=1)   # (N, n)
    logp = log_softmax_forward(model.forward(src_rows, tgt_in).astype(np.float64))[0]      # (N, n, V)
    model.train()
    model.release_caches()
    picked = np.take_along_axis(logp, outputs[..., None], axis=-1)[..., 0]                # (N, n)
    length = (outputs == EOS).argmax(axis=1) + 1                                          # (N,) through [END]
    counted = np.arange(outputs.shape[1]) < length[:, None]                               # (N, n)
    return (picked * counted).sum(axis=1) / length ** alpha


n_beam_rows = 40 if FAST else 200
beam_src = src[:n_beam_rows]
max_len = config.block_size - 1
greedy_out = greedy_seq2seq(model, beam_src, max_len=max_len, bos_id=BOS, eos_id=EOS)          # (N, 9)
beam_out = beam_seq2seq(model, beam_src, max_len=max_len, bos_id=BOS, eos_id=EOS, beam_size=4)  # (N, 9)
beam1_out = beam_seq2seq(model, beam_src, max_len=max_len, bos_id=BOS, eos_id=EOS, beam_size=1, length_penalty=0.0)
beam1_mean = beam_seq2seq(model, beam_src, max_len=max_len, bos_id=BOS, eos_id=EOS, beam_size=1, length_penalty=1.0)
greedy_score, beam_score = sequence_score(beam_src, greedy_out), sequence_score(beam_src, beam_out)


def exact(outputs):
    return float(np.mean([np.array_equal(outputs[i, :L], beam_src[i, :L][::-1]) and outputs[i, L] == EOS
                          for i, L in enumerate(src_lengths[:n_beam_rows])]))


print(f"W = 1, α = 0 equals greedy on {np.mean((beam1_out == greedy_out).all(1)):.0%} of the rows; "
      f"W = 1, α = 1 on {np.mean((beam1_mean == greedy_out).all(1)):.0%}")
print(f"{n_beam_rows} held-out sources: exact match greedy {exact(greedy_out):.1%}, beam (W = 4) {exact(beam_out):.1%}")
print(f"mean score (α = 1): greedy {greedy_score.mean():.4f}, beam {beam_score.mean():.4f}; "
      f"beam scores at least as high on {np.mean(beam_score >= greedy_score - 1e-6):.0%} of the rows, "
      f"higher on {np.mean(beam_score > greedy_score + 1e-6):.0%}")
beam_trace = []
beam_seq2seq(model, src_row, max_len=max_len, bos_id=BOS, eos_id=EOS, beam_size=3, trace=beam_trace)
print("source:", show(src_row[0][:src_lengths[row]]))
for t, step in enumerate(beam_trace[:4]):
    print(f"step {t}: live beams (Σ log p) " + " | ".join(
        f"{show([tok])} from beam {parent} ({score:.3f})"
        for tok, parent, score in zip(step.tokens, step.parents, step.scores)))

assert np.array_equal(beam1_out, greedy_out)                         # W = 1, α = 0 is greedy decoding
assert np.all(np.isfinite(beam_score)) and np.all(beam_score <= 0)
assert np.mean(beam_score >= greedy_score - 1e-6) >= 0.9
assert all(np.all(np.diff(step.scores) <= 1e-12) for step in beam_trace)   # beams kept best first

# %% [markdown]
# ## 8. The loss deck's greedy example: "Where is University of Waterloo?"
#
# The loss deck (004) decodes an answer one word at a time, taking the most probable
# word at each step: [START] → It → is → at → Waterloo → [END]. A word-level
# vocabulary of the deck's eight words, and a one-layer encoder-decoder trained on
# that one pair until it has learnt it, reproduce the deck's six steps with the
# library's `generate_seq2seq`:

# %%
deck_words = ["Where", "is", "University", "of", "Waterloo", "?", "It", "at"]
word_id = {w: i + 3 for i, w in enumerate(deck_words)}    # ids 0, 1, 2 are [PAD], [START], [END]
id_word = {**NAMES, **{i: w for w, i in word_id.items()}}
question = [word_id[w] for w in "Where is University of Waterloo ?".split()]
answer = [word_id[w] for w in "It is at Waterloo".split()]


class OnePair:
    """A task of one (question, answer) pair, repeated: what `train` needs to learn it by heart."""
    batch_size = 4

    def batch(self, split, rng):
        src_b = np.tile(question, (self.batch_size, 1))                     # (B, 6)
        tgt_in_b = np.tile([BOS] + answer, (self.batch_size, 1))            # (B, 5) [START] It is at Waterloo
        tgt_out_b = np.tile(answer + [EOS], (self.batch_size, 1))           # (B, 5) It is at Waterloo [END]
        return src_b, np.full(self.batch_size, len(question)), tgt_in_b, tgt_out_b

    def forward(self, model, batch, device="cpu"):
        return model.forward(batch[0], batch[2]), batch[3]

    def tokens(self, batch):
        return int(batch[0].size + batch[2].size)


qa_config = Seq2SeqConfig(vocab_size=3 + len(deck_words), block_size=8, n_layer=1, n_head=2, d_model=16)
qa_model = Seq2Seq(qa_config, rng=0)
qa_result = train(qa_model, OnePair(), TrainConfig(steps=60, lr=1e-2, warmup_steps=5, eval_interval=60,
                                                   log_interval=60, final_eval_batches=1))
qa_trace = []
qa_out = generate_seq2seq(qa_model, np.array([question]), max_len=qa_config.block_size - 1, bos_id=BOS,
                          eos_id=EOS, trace=qa_trace)
prefix = ["[START]"]
for step_no, step in enumerate(qa_trace, start=1):
    word = id_word[int(step.tokens[0])]
    print(f"step {step_no}: Y = {' '.join(prefix):28s} Pr({word} | X, Y) = {step.candidates[0][0][1]:.3f}, the highest")
    prefix.append(word)
    if word == "[END]":
        break
print("answer:", " ".join(prefix))
assert prefix == ["[START]", "It", "is", "at", "Waterloo", "[END]"]
assert all(step.candidates[0][0][0] == step.tokens[0] for step in qa_trace[:5])   # each step took the argmax

# %% [markdown]
# ## 9. Deck errata on the decoder and its training
#
# ### Deck erratum: position i is trained on p(z_i | z_<i, x)
#
# The survey deck (001) trains "all $p(z_i \mid z_{1:i}, x)$ simultaneously". The condition
# must stop BEFORE $z_i$: a model that sees $z_i$ while predicting it only has to
# copy. With teacher forcing the decoder reads [START] $z_1 \dots z_{i-1}$ at the
# position that predicts $z_i$, so its logits there cannot depend on $z_i$. On the
# trained reverse model: change the third target token in `tgt_in` and only the
# positions after it move.

# %%
tf_src, _, tf_in, _ = task.val
tf_src, tf_in = tf_src[:1], tf_in[:1].copy()               # (1, S), (1, T) one held-out example
model.eval()
logits_before = model.forward(tf_src, tf_in)               # (1, T, V)
i_changed = 3                                              # tgt_in[3] holds z_3, predicted at position 2
tf_in[0, i_changed] = 3 + (tf_in[0, i_changed] - 3 + 1) % (V - 3)   # another symbol
logits_after = model.forward(tf_src, tf_in)
model.train()
model.release_caches()
moved = np.abs(logits_after - logits_before).max(axis=-1)[0]   # (T,) per position
print("largest logit change per decoder position:", moved)
assert np.all(moved[:i_changed] == 0.0)                    # the position predicting z_3 never saw it
assert np.all(moved[i_changed:] > 0.0)                     # the later ones do condition on it

# %% [markdown]
# ### Deck erratum: each decoder layer projects the encoder's output itself
#
# The module deck sends "the key, value tensors from the last encoder layer" to all
# the decoder layers. What the encoder hands over is its last layer's OUTPUT, the
# memory $M$ (S × C); every decoder layer $l$ makes its own keys and values from it,
# $K_l = M W_K^{(l)}$, $V_l = M W_V^{(l)}$, with its own weights. In the trained model the
# two decoder layers' keys differ, though both come from the same $M$:

# %%
params = {name: value for name, value, *_ in model.parameters()}   # name -> array
ca_memory = model.encode(tf_src)                           # (1, S, C) the last encoder layer's output
model.release_caches()
keys = []
for layer in range(config.n_layer):
    W_kv = params[f"decoder.blocks.{layer}.cross_attn.sublayer.W_kv"]      # (C, 2C) [W_K | W_V]
    b_kv = params[f"decoder.blocks.{layer}.cross_attn.sublayer.b_kv"]
    keys.append((ca_memory @ W_kv + b_kv)[..., :config.d_model])            # (1, S, C) K_l = M W_K + b
print("decoder layers with their own W_K, W_V:", sum(f"cross_attn.sublayer.W_kv" in n for n in params))
print("max |K_0 - K_1| =", np.abs(keys[0] - keys[1]).max())
assert sum("cross_attn.sublayer.W_kv" in n for n in params) == config.n_layer
assert not np.allclose(keys[0], keys[1])

# %% [markdown]
# ### Deck erratum: base and big both have N = 6 layers
#
# The survey deck says a stack has "typically N = 6 ("base"), N = 12 ("large")". In the
# 2017 paper both sizes have $N = 6$: "big" is wider ($d = 1024$, 16 heads, $d_{ff} = 4096$),
# not deeper. 12 and 24 layers are BERT-base and BERT-large. From the presets (the
# big model as the paper's Table 3 row):

# %%
from minitransformer.models.presets import count_parameters, preset

base_cfg = preset("transformer-base")
big_cfg = preset("transformer-base", d_model=1024, n_head=16, d_ff=4096, p_drop=0.3)
layer_counts = {"transformer base": base_cfg.n_layer, "transformer big": big_cfg.n_layer,
                "BERT-base": preset("bert-base").n_layer, "BERT-large": preset("bert-large").n_layer}
print(layer_counts, f"| parameters: base {count_parameters(base_cfg):,}, big {count_parameters(big_cfg):,}")
assert layer_counts["transformer base"] == layer_counts["transformer big"] == 6
assert (layer_counts["BERT-base"], layer_counts["BERT-large"]) == (12, 24)
# The paper's Table 3 gives 65M and 213M: a ratio of 213/65 = 3.28. Our base counts 63.1M
# (one shared vocabulary of 37000 tokens; the paper does not say how it counted, see
# docs/families.md), so our ratio is a little higher; within 5 % of the paper's.
big_over_base = count_parameters(big_cfg) / count_parameters(base_cfg)
print(f"big / base: {big_over_base:.3f} here, {213 / 65:.3f} from the paper's 213M / 65M")
assert abs(big_over_base / (213 / 65) - 1) < 0.05

# %% [markdown]
# ### Deck erratum: more than three hyper-parameters
#
# The loss deck lists "only three tunable hyper-parameters": $N$, $d$, $h$. The paper's
# own Table 3 varies more: base and big differ in $d_{ff}$ and the dropout $P_{drop}$ as well,
# and the rows of its ablation change $d_k$, $d_v$ and the label smoothing $\varepsilon_{ls}$;
# the warmup steps (4000) and Adam's $\beta_2 = 0.98$ are set in section 5. The fields in
# which our base and big presets differ:

# %%
from dataclasses import fields

differ = [f.name for f in fields(base_cfg) if getattr(base_cfg, f.name) != getattr(big_cfg, f.name)]
print("base vs big differ in:", differ)
assert set(differ) == {"d_model", "n_head", "d_ff", "p_drop"}
assert not set(differ) <= {"n_layer", "d_model", "n_head"}         # not only the deck's three

# %% [markdown]
# ## What this lecture claimed, checked

# %%
# Teacher forcing: tgt_out is tgt_in shifted left, ending in [END], then ignored positions;
# for "reverse" the target is the source backwards.
for b in range(3):
    L = example.src_lengths[b]
    assert np.array_equal(example.tgt_out[b, :L], example.tgt_in[b, 1:L + 1])
    assert example.tgt_out[b, L] == EOS and np.all(example.tgt_out[b, L + 1:] == IGNORE_INDEX)
    assert np.array_equal(example.tgt_out[b, :L], example.src[b, :L][::-1])

# Label smoothing: the library's loss is the formula; its gradient implies the target q;
# the loss at p = q is H(q), the floor no training loss can go under.
assert abs(float(loss) - loss_math) < 1e-12
assert np.allclose(q_from_gradient, q_math, rtol=0, atol=1e-12)
assert abs(loss_at_q - floor) < 1e-12
assert losses.min() >= floor

# Noam schedule: peak (512 · 4000)^-1/2 at step 4000, a linear rise before, 1/√step after.
assert abs(noam(4000) - (512 * 4000) ** -0.5) < 1e-15
assert noam(3999) < noam(4000) > noam(4001)
assert abs(noam(1000) - noam(4000) / 4) < 1e-15 and abs(noam(16000) - noam(4000) / 2) < 1e-15

# Training lowered the loss; the full run solves the task on held-out sequences.
assert losses[-10:].mean() < losses[:10].mean()
if not FAST:
    assert accuracy >= 0.9, accuracy

# Greedy decoding written out = the library's (with its KV cache), token for token.
assert library[0, :len(decoded) - 1].tolist() == decoded[1:]
assert [s.tokens[0] for s in trace] == decoded[1:]
# Teacher forcing computes the same logits as decoding prefix by prefix (float32 rounding).
assert np.allclose(full_pass, one_by_one, rtol=1e-4, atol=1e-5)
print("lecture 5: all claims check out")

# %% [markdown]
# ## Quiz
#
# Write your answer in each `answer_N = None  # your answer` cell and run the check
# below it: a wrong answer stops with a hint, an unanswered one says so
# (`lectures/_quiz.py`; the answers are stored as digests, not in plain sight).

# %%
from _quiz import check, summary

# %% [markdown]
# **Question 1.** The target is "a b c". What does the decoder have to predict,
# `tgt_out`? (A list of strings; write the end token as "[END]".)

# %%
answer_1 = None  # your answer

# %%
check("1", answer_1, "bc773ff55d6ce0b0", hint="tgt_out[t] = tgt_in[t + 1], and tgt_in starts with [START]")

# %% [markdown]
# **Question 2.** With label smoothing $\varepsilon = 0.1$ and $V = 13$ classes, what
# probability does the smoothed target $q$ give the correct class?

# %%
answer_2 = None  # your answer

# %%
check("2", answer_2, "598bdcf7a5a5febe", digits=3, hint="q = (1 - ε) onehot(y) + ε / V")

# %% [markdown]
# **Question 3.** The paper's schedule with $d_{\text{model}} = 512$ and 4000 warmup steps:
# what is the largest learning rate it reaches?

# %%
answer_3 = None  # your answer

# %%
check("3", answer_3, "a20b3d88db211ebf", digits=2, hint="the two terms of the min meet at step = warmup")

# %% [markdown]
# **Question 4.** Beam search ends with two hypotheses: $y_1$ of 4 tokens with
# $\sum\log p = -2.4$ and $y_2$ of 8 tokens with $\sum\log p = -3.2$. Which one wins with
# length penalty $\alpha = 1$: "y1" or "y2"?

# %%
answer_4 = None  # your answer

# %%
check("4", answer_4, "ad4063bd788deb6e", hint="divide each sum by its length: the mean log-probability per token")

# %% [markdown]
# **Question 5.** True or False: in training, with teacher forcing, the decoder runs
# one forward pass per target position.

# %%
answer_5 = None  # your answer

# %%
check("5", answer_5, "fcbcf165908dd18a", hint="the causal mask lets one pass make every position's prediction from the true prefix")

# %% [markdown]
# **Question 6** (the module deck's). What teacher-forcing ratio does a Transformer use in
# training? Give the share of the decoder's input tokens that are the ground truth rather
# than the model's own predictions, a number from 0 to 1.

# %%
answer_6 = None  # your answer

# %%
check("6", answer_6, "6b86b273ff34fce1", hint="look at section 1: where does every token of tgt_in come from?")
summary()
