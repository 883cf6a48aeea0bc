# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Lecture 12: scaling up: experts, distillation, compute-optimal training, BLEU
#
# The survey deck names three ways the field made Transformers bigger or cheaper, and the
# loss deck ends on a table of BLEU scores and training costs. This lecture builds each one
# with the package and runs it on the bundled text or the toy tasks:
#
# | section | what | in the package |
# |---|---|---|
# | sparse experts | "sparse / MoE FFN": a router sends each token to k of E feed-forward experts | `functional/router.py`, `functional/moe.py`, `layers/moe.py`, `GPTConfig(ffn="moe")` |
# | distillation | DistilBERT: a small student learns a trained teacher's softened distribution | `functional/distillation.py` |
# | compute-optimal | Chinchilla: "train bigger models longer", the fitted law and a sweep of our own | `models/scaling.py`, `models/costs.py` |
# | BLEU | the results table's metric and its training-cost column; T5's text-to-text prefixes | `metrics/bleu.py`, `training/tasks.TextToTextTasks` |
#
# Without `MINITRANSFORMER_FAST=1` the training runs take a few minutes on a laptop CPU.

# %%
import math

import matplotlib
matplotlib.use("Agg")                    # figures go to files, never to a window
from matplotlib.figure import Figure
import numpy as np

from _lecture import FAST, OUT, save_figure    # fast-mode switch; where figures go (lectures/_lecture.py)
from _quiz import check, summary
from minitransformer.functional.activations import gelu_forward
from minitransformer.functional.cross_entropy import cross_entropy_backward, cross_entropy_forward
from minitransformer.functional.distillation import distillation_backward, distillation_forward
from minitransformer.functional.moe import moe_backward, moe_forward
from minitransformer.functional.router import expert_capacity, load_balancing_forward
from minitransformer.functional.softmax import softmax_forward
from minitransformer.generation.generate import greedy_seq2seq
from minitransformer.gradcheck import check_pair
from minitransformer.metrics import corpus_bleu, modified_precision
from minitransformer.models import GPT, GPTConfig, Seq2Seq, Seq2SeqConfig
from minitransformer.models.costs import active_parameters, matmul_parameters
from minitransformer.models.presets import count_parameters, preset
from minitransformer.models.scaling import (CHINCHILLA, chinchilla_loss, compute_optimal, fit_power_law,
                                            training_compute)
from minitransformer.optim import AdamW
from minitransformer.tokenizers import CharTokenizer
from minitransformer.training.data import BOS, EOS, load_text, random_batch, train_val_split
from minitransformer.training.loop import TrainConfig, train
from minitransformer.training.tasks import LanguageModelTask, TextToTextTasks
np.set_printoptions(precision=3, suppress=True)

text = load_text()                                         # Python's own help topics
tokenizer = CharTokenizer.from_text(text)
ids = np.asarray(tokenizer.encode(text), dtype=np.int64)
train_ids, val_ids = train_val_split(ids, 0.1)
V = tokenizer.vocab_size

# %% [markdown]
# ## 1. A sparse mixture of experts
#
# The feed-forward sublayer holds most of a block's parameters. A mixture of experts keeps
# E of them and lets a small router pick k per token (Shazeer et al. 2017; Switch
# Transformer, Fedus et al. 2022, with k = 1): E times the parameters, while each token
# pays for k experts only.
#
# $$s = X W_r,\quad p = \mathrm{softmax}(s),\quad e_{n,1..k} = \text{top-}k(p_n),\quad
#   g_{n,j} = p_{n,e_{n,j}},\quad y_n = \sum_j g_{n,j}\,\mathrm{FFN}_{e_{n,j}}(x_n).$$
#
# Six tokens, three experts, k = 1: the router's probabilities, each token's expert and gate.

# %%
rng = np.random.default_rng(0)
N, C, E, F = 6, 4, 3, 8
x = rng.standard_normal((N, C))
W_r = rng.standard_normal((C, E))
W_in, b_in = 0.5 * rng.standard_normal((E, C, F)), np.zeros((E, F))
W_out, b_out = 0.5 * rng.standard_normal((E, F, C)), np.zeros((E, C))
y, moe_cache = moe_forward(x, W_r, W_in, b_in, W_out, b_out, top_k=1)
p = softmax_forward(x @ W_r)[0]
for n in range(N):
    print(f"token {n}: p = {p[n]}  ->  expert {moe_cache.expert[n, 0]}, gate {moe_cache.gate[n, 0]:.3f}")
by_hand = [p[n, e] * (gelu_forward(x[n] @ W_in[e] + b_in[e])[0] @ W_out[e] + b_out[e])   # g · FFN_e(x_n)
           for n, e in enumerate(moe_cache.expert[:, 0])]
assert np.allclose(y, np.array(by_hand), rtol=1e-12)

# %% [markdown]
# ### Capacity: what happens to the tokens an expert cannot take
#
# For fixed-size batches each expert takes at most $c = \lceil \text{capacity\_factor}\cdot N k / E\rceil$
# tokens; the slots go to first choices before second choices, then in token order. A token
# past its expert's capacity is **dropped**: that expert does not see it and its share of the
# output is 0. In a block the FFN sits inside a residual connection, $x + \mathrm{FFN}(x)$, so a
# token dropped by all its experts leaves the layer unchanged: it skips the FFN, it is not lost.

# %%
for factor in (None, 1.0, 0.5):
    y_c, cache_c = moe_forward(x, W_r, W_in, b_in, W_out, b_out, top_k=1, capacity_factor=factor)
    dropped = ~cache_c.kept[:, 0]
    slots = expert_capacity(N, E, 1, factor)
    print(f"capacity_factor {factor}: {slots} slot{'s' if slots != 1 else ''} per expert, loads {np.bincount(cache_c.expert[:, 0], minlength=E)}, "
          f"dropped tokens {np.flatnonzero(dropped).tolist()}")
residual_out = x + y_c                                     # the block's x + FFN(x)
assert dropped.any() and np.array_equal(residual_out[dropped], x[dropped]) and np.all(y_c[dropped] == 0)

# %% [markdown]
# ### The load-balancing loss
#
# Left alone, a router sends most tokens to a few experts (the others then never learn).
# Switch Transformer adds, with a small weight α ($\alpha = 0.01$ there),
#
# $$\text{aux} = E \sum_i f_i P_i,\qquad f_i = \text{the fraction of assignments to expert } i,\quad
#   P_i = \text{the mean router probability of } i,$$
#
# which is 1 when both are uniform and E when every token goes to one expert with certainty.
# Its gradient reaches the router through $P$; $f$ counts choices and is held constant.

# %%
uniform, even = np.full((8, 4), 0.25), (np.arange(8) % 4)[:, None]
collapsed, one_expert = np.tile([0.0, 1.0, 0.0, 0.0], (8, 1)), np.ones((8, 1), dtype=np.int64)
aux_even = float(load_balancing_forward(uniform, even)[0])
aux_collapsed = float(load_balancing_forward(collapsed, one_expert)[0])
print(f"aux, an even split over 4 experts: {aux_even}; everything on one expert: {aux_collapsed}; "
      f"this router: {float(moe_cache.aux):.3f}")
assert aux_even == 1.0 and aux_collapsed == 4.0

# %% [markdown]
# ### The backward through the gate
#
# Which experts a token visits is a step function of the router logits: between ties it does
# not change (derivative 0), at a tie it jumps (no derivative). The gates and the experts'
# outputs are smooth, so the backward treats the choice, the capacity mask and the counts
# $f$ as constants and differentiates the rest: $dg_{n,j} = dy_n\cdot\mathrm{FFN}_{e_{n,j}}(x_n)$
# flows into the softmax and $W_r$. The router learns which expert to prefer through the
# gates. The gradient check passes away from ties; at a tie the output jumps:

# %%
moe = lambda **kw: moe_forward(**kw, top_k=2, capacity_factor=1.0)   # noqa: E731
moe_check = check_pair(moe, moe_backward, {"x": x, "W_r": W_r, "W_in": W_in, "b_in": b_in, "W_out": W_out,
                                           "b_out": b_out}, seed=0)
print(moe_check)
n0 = 0
first, second = moe_cache.expert[n0, 0], np.argsort(-p[n0])[1]       # its expert and the runner-up
gap = (x @ W_r)[n0, first] - (x @ W_r)[n0, second]      # raise the runner-up's logit past the winner's
outputs = []
for shift in (gap - 1e-6, gap + 1e-6):
    W_shifted = W_r.copy()
    W_shifted[:, second] += shift * x[n0] / (x[n0] @ x[n0])    # moves token 0's logit of `second` by `shift`
    outputs.append(moe_forward(x, W_shifted, W_in, b_in, W_out, b_out, top_k=1)[0][n0])
jump = np.abs(outputs[1] - outputs[0]).max()
print(f"token 0 switches from expert {first} to {second}: a logit change of 2e-6 moves its output by {jump:.3f}")
assert moe_check.ok and jump > 1e-3

# %% [markdown]
# ### A GPT with MoE blocks
#
# `GPTConfig(ffn="moe", n_experts=..., top_k=..., capacity_factor=...)` puts a mixture in every
# block; the rest of the model and the training loop stay as they are: `train` adds the
# layers' α · aux to the loss (`training/loss.py`). Here a dense GPT and its MoE twin (4
# experts, k = 2) train on the help topics, the same steps and batches.

# %%
width, layers = (32, 2) if FAST else (64, 4)
steps, batch_size = (30, 8) if FAST else (600, 16)
dense_config = GPTConfig(vocab_size=V, block_size=32, n_layer=layers, n_head=4, d_model=width)
moe_config = GPTConfig(**{**dense_config.to_dict(), "ffn": "moe", "n_experts": 4, "top_k": 2,
                          "capacity_factor": 1.25})
task = LanguageModelTask(train_ids, val_ids, 32, batch_size)
train_config = TrainConfig(steps=steps, lr=3e-3, warmup_steps=max(steps // 10, 1), eval_interval=steps,
                           log_interval=max(steps // 3, 1), eval_batches=4, final_eval_batches=4 if FAST else 20)
dense_gpt, moe_gpt = GPT(dense_config, rng=0), GPT(moe_config, rng=0)
dense_result = train(dense_gpt, task, train_config)
moe_result = train(moe_gpt, task, train_config)
print(f"validation loss after {steps} steps: dense {dense_result.final_val_loss:.3f}, "
      f"MoE {moe_result.final_val_loss:.3f}")

# %% [markdown]
# Parameters: the mixture holds E FFNs per block and a router, but a token multiplies by the
# router and k experts only. `count_parameters` counts all of them, `active_parameters` the
# ones one token's forward pass uses (the N of "2N FLOPs per token", `models/costs.py`).

# %%
total_dense, total_moe = count_parameters(dense_config), count_parameters(moe_config)
per_token_dense, per_token_moe = active_parameters(dense_config), active_parameters(moe_config)
print(f"dense: {total_dense:,} parameters, {per_token_dense:,} used per token")
print(f"MoE:   {total_moe:,} parameters, {per_token_moe:,} used per token "
      f"({per_token_moe / total_moe:.0%} of its total)")
assert total_moe == moe_gpt.num_parameters() and per_token_dense == matmul_parameters(dense_config)
assert per_token_moe < total_moe and per_token_moe > per_token_dense

# %% [markdown]
# Which expert does each character go to? One sentence through the trained MoE GPT; each
# layer's first choice per character (`routing`, what the last forward decided).

# %%
sentence = "The for statement is used to iterate over the elements"
moe_gpt.eval()
moe_gpt.forward(np.array([tokenizer.encode(sentence[:32])]))
routes = np.stack([block.ffn.sublayer.routing.expert[0, :, 0] for block in moe_gpt.blocks])   # (L, T)
print("   " + " ".join(sentence[:32]))
for l, row in enumerate(routes):
    print(f"L{l} " + " ".join(str(e) for e in row))
loads = [np.bincount(block.ffn.sublayer.routing.expert[0].ravel(), minlength=4) for block in moe_gpt.blocks]
print("assignments per expert, layer by layer:", [load.tolist() for load in loads])
fig = Figure(figsize=(10, 1.2 + 0.4 * len(routes)))
ax = fig.subplots()
ax.imshow(routes, cmap="tab10", vmin=0, vmax=9, aspect="auto")
ax.set_xticks(range(32), list(sentence[:32]))
ax.set_yticks(range(len(routes)), [f"layer {l}" for l in range(len(routes))])
ax.set_title("the first-choice expert of each character (colour = expert)")
save_figure(fig, "12_moe_routing.png")

# %% [markdown]
# ## 2. Distillation (DistilBERT)
#
# A trained teacher's output says more than its top token: how likely every other token
# is. The student matches the teacher's distribution softened by a temperature τ:
#
# $$L_\text{soft} = \tau^2\,\frac1N\sum_n \mathrm{KL}\big(\mathrm{softmax}(z_t/\tau)\,\big\|\,
#   \mathrm{softmax}(z_s/\tau)\big),\qquad \frac{\partial L_\text{soft}}{\partial z_s} =
#   \frac{\tau}{N}\big(q_s - q_t\big).$$
#
# Without the τ² the gradient would shrink like 1/τ² (for large τ, $q_s - q_t \approx (z_s -
# z_t)/(V\tau)$); with it, the soft loss can be added to the hard-label cross-entropy at any
# temperature. Measured on random logits:

# %%
z_s, z_t = rng.standard_normal((8, V)), rng.standard_normal((8, V))
for tau in (1.0, 2.0, 4.0, 8.0):
    _, kd = distillation_forward(z_s, z_t, tau)
    g = np.linalg.norm(distillation_backward(1.0, kd))
    print(f"τ = {tau}: |dL/dz_s| = {g:.4f} with τ², {g / tau ** 2:.5f} without")
grad_norms = {tau: np.linalg.norm(distillation_backward(1.0, distillation_forward(z_s, z_t, tau)[1]))
              for tau in (4.0, 8.0)}
assert 0.8 < grad_norms[8.0] / grad_norms[4.0] < 1.25

# %% [markdown]
# The teacher: the dense GPT of section 1. The student: one layer at half the width. Two
# students train the same steps on the same batches: one on the hard labels alone,
# one on $\tfrac12 L_\text{hard} + \tfrac12 L_\text{soft}$ at τ = 2. The distilled one should sit
# closer to the teacher (a smaller KL on held-out text); what that buys in validation loss
# after so few steps is for the printout to say.

# %%
student_config = GPTConfig(vocab_size=V, block_size=32, n_layer=1, n_head=2, d_model=width // 2)
dense_gpt.eval()


def train_student(with_teacher: bool, tau: float = 2.0):
    """``steps`` AdamW steps; the loss: the cross-entropy, or half of it and half the soft loss."""
    student, batches = GPT(student_config, rng=1), np.random.default_rng(5)
    optimizer = AdamW(student.parameters(), lr=3e-3)
    for _ in range(steps):
        xb, yb = random_batch(train_ids, 32, batch_size, batches)
        z_s = student.forward(xb)
        hard, ce_cache = cross_entropy_forward(z_s, yb)
        dz = cross_entropy_backward(0.5 if with_teacher else 1.0, ce_cache)
        if with_teacher:
            z_t = dense_gpt.forward(xb)
            dense_gpt.release_caches()                              # the teacher is not trained
            soft, kd_cache = distillation_forward(z_s, z_t, tau)
            dz = dz + distillation_backward(0.5, kd_cache)
        student.backward(dz)
        optimizer.step()
        student.zero_grad()
    return student.eval()


def held_out(student, n_batches: int = 4 if FAST else 20):
    """(validation cross-entropy, KL(teacher ‖ student) at τ = 1) on fixed held-out batches."""
    batches, ce, kl = np.random.default_rng(9), [], []
    for _ in range(n_batches):
        xb, yb = random_batch(val_ids, 32, batch_size, batches)
        z_s, z_t = student.forward(xb), dense_gpt.forward(xb)
        ce.append(float(cross_entropy_forward(z_s, yb)[0]))
        kl.append(float(distillation_forward(z_s, z_t, 1.0)[0]))
        student.release_caches(), dense_gpt.release_caches()
    return np.mean(ce), np.mean(kl)


hard_student, distilled_student = train_student(False), train_student(True)
teacher_ce = held_out(dense_gpt)[0]
(hard_ce, hard_kl), (distilled_ce, distilled_kl) = held_out(hard_student), held_out(distilled_student)
print(f"teacher: {dense_gpt.num_parameters():,} parameters, validation loss {teacher_ce:.3f}")
print(f"student: {hard_student.num_parameters():,} parameters "
      f"({hard_student.num_parameters() / dense_gpt.num_parameters():.0%} of the teacher)")
print(f"  hard labels only: validation loss {hard_ce:.3f}, KL to the teacher {hard_kl:.3f}")
print(f"  distilled (τ = 2): validation loss {distilled_ce:.3f}, KL to the teacher {distilled_kl:.3f}")
assert distilled_kl < hard_kl

# %% [markdown]
# ## 3. Compute-optimal scaling (Chinchilla)
#
# Hoffmann et al. (2022) trained 400-odd models and fitted their final losses with one formula
# in the parameters N and the training tokens D:
#
# $$L(N, D) = E + \frac{A}{N^{\alpha}} + \frac{B}{D^{\beta}},\qquad E = 1.69,\ A = 406.4,\
#   B = 410.7,\ \alpha = 0.34,\ \beta = 0.28.$$
#
# Training costs $C \approx 6ND$ FLOPs. Minimising $L$ along $ND = C/6$ gives $N_\text{opt} =
# G\,(C/6)^{\beta/(\alpha+\beta)}$, $D_\text{opt} = G^{-1}(C/6)^{\alpha/(\alpha+\beta)}$,
# $G = (\alpha A/\beta B)^{1/(\alpha+\beta)}$ (`models/scaling.py` derives it): both grow with
# the budget at nearly the same rate, the deck's "bigger models trained longer".

# %%
print(f"the fit: {CHINCHILLA}")
for C_budget in (1e21, 5.76e23, 1e25):
    N_opt, D_opt = compute_optimal(C_budget)
    print(f"C = {C_budget:.2e} FLOPs: N = {N_opt:.3g} parameters, D = {D_opt:.3g} tokens "
          f"(D/N = {D_opt / N_opt:.0f}), predicted loss {chinchilla_loss(N_opt, D_opt):.3f}")
chinchilla_C = 6 * 70e9 * 1.4e12                                     # Chinchilla itself: 70B on 1.4T tokens
N_70b = compute_optimal(chinchilla_C)[0]
print(f"Chinchilla (70B parameters, 1.4T tokens) used C = {chinchilla_C:.2e}; this fit's N for that budget: "
      f"{N_70b:.3g}; L(70B, 1.4T) = {chinchilla_loss(70e9, 1.4e12):.3f}")
gopher_like = chinchilla_loss(280e9, 300e9)                          # Gopher: 280B on 300B tokens
print(f"Gopher's shape (280B parameters, 300B tokens, C = {6 * 280e9 * 300e9:.2e}): L = {gopher_like:.3f}")
assert chinchilla_loss(70e9, 1.4e12) < gopher_like                    # the smaller, longer-trained model wins
assert N_70b < 70e9

# %% [markdown]
# The parametric fit puts the optimum for Chinchilla's own budget below the 70B parameters
# DeepMind trained (the line above); the paper's two other approaches (a sweep of final
# losses per budget, and iso-FLOP profiles) put it near 70B, with fewer tokens per parameter.
# Either way the 280B-parameter Gopher, trained on 300B tokens with about the same compute,
# was too large for its data: the fitted law gives the smaller, longer-trained model the
# lower loss.

# %% [markdown]
# Our own sweep: three tiny GPTs of different widths train on the help topics with the same
# loop; every step's compute is `training_compute` (the FLOPs per token of `models/costs.py`,
# training, times the tokens seen). Early in training a small model is the better use of a
# budget, later a larger one overtakes it; the lower envelope of the curves is the
# compute-efficient frontier, and on log-log axes it is close to a straight line: a power law
# $L \approx k\,C^{-\gamma}$.

# %%
sweep_widths = (8, 16, 32) if FAST else (16, 32, 64, 128)
sweep_steps = 40 if FAST else 400
curves = {}
for d in sweep_widths:
    config = GPTConfig(vocab_size=V, block_size=32, n_layer=2, n_head=2, d_model=d)
    result = train(GPT(config, rng=0), LanguageModelTask(train_ids, val_ids, 32, 8),
                   TrainConfig(steps=sweep_steps, lr=3e-3, warmup_steps=sweep_steps // 10, eval_interval=sweep_steps,
                               log_interval=sweep_steps, final_eval_batches=1), log=lambda *_: None)
    losses = np.array([loss for _, loss in result.history])
    smoothed = np.convolve(losses, np.ones(5) / 5, mode="valid")        # mean of 5 steps
    steps_done = np.arange(5, sweep_steps + 1)                           # the step each mean ends at
    compute = np.array([training_compute(config, int(s) * 8 * 32) for s in steps_done])
    curves[d] = (compute, smoothed)
    print(f"d_model {d}: {count_parameters(config):,} parameters, {training_compute(config, 1):,} FLOPs a token; "
          f"loss {smoothed[0]:.3f} -> {smoothed[-1]:.3f}")
points = sorted((c, l) for compute, smoothed in curves.values() for c, l in zip(compute, smoothed))
frontier, best = [], math.inf
for c, l in points:                                                      # lower than everything cheaper
    if l < best:
        frontier.append((c, l))
        best = l
frontier = frontier[len(frontier) // 4:]                                 # past the first steps' warm-up
law = fit_power_law([c for c, _ in frontier], [l for _, l in frontier])
print(f"frontier: {len(frontier)} points, L ≈ {law.k:.3g} · C^(-{law.gamma:.3f}), R² = {law.r2:.3f}")
fig = Figure(figsize=(6, 4))
ax = fig.subplots()
for d, (compute, smoothed) in curves.items():
    ax.plot(compute, smoothed, label=f"d_model {d}")
fc = np.array([c for c, _ in frontier])
ax.plot(fc, law(fc), "k--", label=f"fit: {law.k:.3g} C^-{law.gamma:.3f}")
ax.set_xscale("log"), ax.set_yscale("log")
ax.set_xlabel("training compute C (FLOPs)"), ax.set_ylabel("training loss (mean of 5 steps)")
ax.legend()
save_figure(fig, "12_scaling_sweep.png")
assert law.gamma > 0 and law.r2 > 0.5

# %% [markdown]
# ## 4. BLEU, and the results table
#
# The loss deck's table compares translation systems by BLEU (Papineni et al. 2002): the
# geometric mean of the modified n-gram precisions (n = 1..4), each n-gram's count clipped at
# the most times it appears in one reference, times a brevity penalty for output shorter than
# the references, all summed over the corpus before dividing:
#
# $$\mathrm{BLEU} = \mathrm{BP}\cdot\exp\Big(\tfrac14\sum_{n=1}^4 \log p_n\Big),\qquad
#   \mathrm{BP} = \min\big(1,\ e^{1 - r/c}\big).$$
#
# The paper's own example of clipping, then sacreBLEU's documented example:

# %%
refs = ["the cat is on the mat".split(), "there is a cat on the mat".split()]
clipped, total = modified_precision(refs, "the the the the the the the".split(), 1)
print(f'"the the the the the the the": plain unigram precision 7/7, modified {clipped}/{total}')
split = lambda s: s[:-1].split() + ["."]                            # noqa: E731  the final period: a token
sacre_refs = [["The dog bit the man.", "The dog had bit the man."], ["It was not unexpected.", "No one was surprised."],
              ["The man bit him first.", "The man had bitten the dog."]]
sacre_sys = ["The dog bit the man.", "It wasn't surprising.", "The man had just bitten him."]
sacre = corpus_bleu([[split(r) for r in rs] for rs in sacre_refs], [split(s) for s in sacre_sys])
print(f"BLEU = {100 * sacre.bleu:.2f} " + "/".join(f"{100 * q:.1f}" for q in sacre.precisions)
      + f" (BP = {sacre.brevity_penalty:.3f} hyp_len = {sacre.hyp_length} ref_len = {sacre.ref_length})")
assert (clipped, total) == (2, 7) and round(100 * sacre.bleu, 2) == 48.53

# %% [markdown]
# ### The table's training-cost column
#
# The Transformer paper estimates a model's training cost as time × GPUs × each GPU's
# sustained single-precision throughput, 9.5 TFLOPS for a P100 (its footnote). The base model
# trained 12 hours on 8 P100s, the big one 3.5 days:

# %%
P100 = 9.5e12                                              # FLOP/s, the paper's figure
base_cost = 12 * 3600 * 8 * P100
big_cost = 3.5 * 24 * 3600 * 8 * P100
print(f"base: 12 h × 8 × 9.5 TFLOPS = {base_cost:.2e} FLOPs (the table: 3.3e18)")
print(f"big:  3.5 days × 8 × 9.5 TFLOPS = {big_cost:.2e} FLOPs (the table: 2.3e19)")
base = preset("transformer-base")
tokens_seen = 100_000 * 25_000                             # 100k steps of about 25,000 target tokens
six_nd = 6 * count_parameters(base) * tokens_seen
print(f"6 N D for the base model ({count_parameters(base):,} parameters, {tokens_seen:.2e} target tokens): "
      f"{six_nd:.2e} FLOPs, {six_nd / base_cost:.0%} of the GPU-time estimate")
assert f"{base_cost:.1e}" == "3.3e+18" and f"{big_cost:.1e}" == "2.3e+19"

# %% [markdown]
# ### BLEU on the toy tasks, one text-to-text model (T5)
#
# T5 writes every task as text to text and names the task in the input: "translate English
# to German: ...", "summarize: ...". `TextToTextTasks` does that with the toy tasks: one
# encoder-decoder learns "reverse" and "sort" at once, each source led by its task's prefix
# token. BLEU then scores the greedy outputs per task against the right answers (one
# reference each), beside the exact-match rate.

# %%
symbols = 10
data = TextToTextTasks(("reverse", "sort"), symbols, (3, 6), 32, n_val=100, seed=0)
t5_steps = 400 if FAST else 2000
t5 = Seq2Seq(Seq2SeqConfig(vocab_size=data.vocab_size, block_size=8, n_layer=2, n_head=4,
                           d_model=32 if FAST else 64), rng=0)
train(t5, data, TrainConfig(steps=t5_steps, lr=3e-3, warmup_steps=t5_steps // 10, eval_interval=t5_steps,
                            log_interval=max(t5_steps // 3, 1), final_eval_batches=2))
t5.eval()
bleu = {}
for name, val in data.val.items():
    outputs = greedy_seq2seq(t5, val.src, max_len=7, bos_id=BOS, eos_id=EOS)
    hypotheses = [list(row[:list(row).index(EOS)] if EOS in row else row) for row in outputs]
    references = [[list(val.tgt_out[i, :L - 1])] for i, L in enumerate(val.src_lengths)]
    bleu[name] = corpus_bleu(references, hypotheses)
    exact = np.mean([h == r[0] for h, r in zip(hypotheses, references)])
    print(f"{name}: BLEU {100 * bleu[name].bleu:.1f} (precisions "
          + "/".join(f"{100 * q:.0f}" for q in bleu[name].precisions) + f"), exact match {exact:.0%}")
source = data.val["sort"].src[0, 1:data.val["sort"].src_lengths[0]]
answers = {}
for name in data.tasks:
    prefixed = np.concatenate([[data.prefix_id(name)], source])[None, :]
    answers[name] = greedy_seq2seq(t5, prefixed, 7, BOS, EOS)[0].tolist()
    print(f"prefix {name!r} + {source.tolist()} -> {answers[name]}")
assert all(0.0 <= score.bleu <= 1.0 for score in bleu.values()) and bleu["sort"].precisions[0] > 0.3
assert answers["reverse"] != answers["sort"]                # the prefix alone chooses the task

# %% [markdown]
# ## Quiz

# %% [markdown]
# **Question 1.** A Switch layer routes every token of a batch to one expert, and its router
# gives that expert probability 1. What is the load-balancing loss aux with E = 8 experts?

# %%
answer_1 = None  # your answer

# %%
check("1", answer_1, "2c624232cdd22177", hint="E Σ f_i P_i with f and P all on one expert")

# %% [markdown]
# **Question 2.** 1,024 tokens, 8 experts, k = 2, capacity factor 1.25: how many slots has each expert?

# %%
answer_2 = None  # your answer

# %%
check("2", answer_2, "88820462180e5c89", hint="⌈factor · N k / E⌉")

# %% [markdown]
# **Question 3.** The modified unigram precision of "the the the the" against the one reference
# "the cat on the mat"? (A fraction, 3 significant digits.)

# %%
answer_3 = None  # your answer

# %%
check("3", answer_3, "153a6f5f4d4b53db", digits=3, hint="clip each word's count at its count in the reference")

# %% [markdown]
# **Question 4.** The Transformer big model's training cost by the paper's rule: 3.5 days on 8 P100s of
# 9.5 TFLOPS each, in FLOPs (2 significant digits)?

# %%
answer_4 = None  # your answer

# %%
check("4", answer_4, "8e24901747491482", digits=2, hint="seconds × GPUs × FLOP/s")

# %% [markdown]
# **Question 5.** Distillation at τ = 4: by what factor is the KL term multiplied?

# %%
answer_5 = None  # your answer

# %%
check("5", answer_5, "b17ef6d19c7a5b1e", hint="τ²")
summary()

# %% [markdown]
# ## What this lecture claimed, checked

# %%
# Mixture of experts: the gated sum by hand, capacity drops pass through the residual,
# the balance loss at its two ends, the gradient away from ties and the jump at one.
assert np.allclose(y, np.array(by_hand), rtol=1e-12) and np.array_equal(residual_out[dropped], x[dropped])
assert aux_even == 1.0 and aux_collapsed == 4.0 and moe_check.ok and jump > 1e-3
assert per_token_moe < total_moe and total_moe == moe_gpt.num_parameters()
assert np.isfinite(moe_result.final_val_loss) and moe_result.final_val_loss < math.log(V)
# Distillation: τ² keeps the gradient's size; the distilled student is closer to its teacher.
assert 0.8 < grad_norms[8.0] / grad_norms[4.0] < 1.25 and distilled_kl < hard_kl
# Chinchilla: the smaller model trained longer has the lower predicted loss; our sweep's
# frontier falls with compute.
assert chinchilla_loss(70e9, 1.4e12) < gopher_like and law.gamma > 0
# BLEU: the published examples; the table's cost column from GPU time.
assert round(100 * sacre.bleu, 2) == 48.53 and (clipped, total) == (2, 7)
assert f"{base_cost:.1e}" == "3.3e+18" and f"{big_cost:.1e}" == "2.3e+19"
# T5's prefixes: one model, two tasks, the prefix picks the answer.
assert answers["reverse"] != answers["sort"]
if not FAST:                        # what the full runs achieved when this was written, checked again
    assert distilled_ce < hard_ce and min(score.bleu for score in bleu.values()) > 0.9
print("lecture 12: all claims check out")
