"""What an export without the derivations leaves out: the backward's formula of each function it stubs.

``homework export ... --without-derivations`` hands out an assignment without its answer in
plain sight. A stub keeps the equation of the forward, the Inputs/Returns with their shapes,
the conventions a result must keep (0 on ignored rows, a hidden key gets 0) and what the cache
holds; it loses the lines that give a backward's formula, wherever in the copy they are:

- ``PASSAGES[target]``: the passages that derive ``target``'s backward (or, for a forward that
  computes its derivative, as GELU's does, that derivative): in its docstring, its module's
  docstring, its cache's field comments, and where another module's derivation quotes it
  (attention's docstring quotes softmax's backward). Each is a ``Passage(module, old, new)``:
  the exact text ``old`` of that module's file, replaced by ``new`` (a function named instead
  of its formula where another derivation goes on: ``dscores = softmax_backward(dP)``).
- ``LECTURES[assignment]``: the lectures that derive or state the assignment's backward,
  left out of the copy (its ``minitransformer/lectures/``).

``strip(dest, targets)`` applies the passages of ``targets`` to the copy's package in
``dest``, longest first, so a passage inside a longer one (softmax's line inside attention's
derivation) is gone with it; a passage found in none of the copy's text is a table that no
longer matches the source (``StaleTable``), so a reworded docstring can never keep its formula
silently. This table is the instructor's: it holds every formula, so it is in no copy
(export.TRUSTED).
"""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple


class Passage(NamedTuple):
    module: str      # dotted path inside the package, e.g. "functional.norm"
    old: str         # the exact text in that module's file
    new: str = ""    # what stands there in a copy without the derivations


class StaleTable(LookupError):
    """A passage the copy's source does not hold: the docstring changed, the table did not."""


F = "functional"

_ELEMENTWISE = Passage(f"{F}.activations", "; the backward is\nthen one multiply, dx = dy ⊙ dy/dx, reversing y = f(x).", ".")
_SOFTMAX_IN_ATTENTION = Passage(f"{F}.attention", "dscores = P ⊙ (dP - Σ_keys dP ⊙ P)     (softmax_backward)",
                                "dscores = softmax_backward(dP)")
_SOFTMAX_IN_SHAW = Passage(f"{F}.shaw", "de = P ⊙ (dP - Σ_j dP ⊙ P)", "de = softmax_backward(dP)")
_SOFTMAX_MODULE = Passage(f"{F}.softmax", """Backward of y = softmax(x), with the Jacobian ∂y_i/∂x_j = y_i (δ_ij - y_j):
    dx = y * (dy - Σ_j dy_j y_j)          (efficient form, O(n) per row)
    dx = J dy,  J = diag(y) - y yᵀ        (full Jacobian, for teaching; O(n²))
""")
_SHIFT = Passage(f"{F}.softmax", """ The subtraction of m needs no backward line: its gradient is zero
(softmax is unchanged by a shift of the row).""")
_NORM_MODULE = Passage(f"{F}.norm", """Both backward passes are the fused one-line formulas; the docstrings show how
they follow from the chain rule (the lecture does it step by step).

""")
_BLOCK_MODULE = Passage("layers.blocks", """Backward runs the sublayers in exact reverse order; each Residual adds its
identity-branch gradient. The cross-attention's memory gradient is returned so
the model can send it back into the encoder.

""")
_ATTENTION_MODULE = Passage(f"{F}.attention", """Backward (each line reverses the forward line on its left):
    out = P̃ V                      dP̃ = dout Vᵀ,   dV = P̃ᵀ dout
    P̃ = P ⊙ m / (1 - p_drop)       dP = dP̃ ⊙ m / (1 - p_drop)             (dropout_backward)
    P = softmax(scores)            dscores = P ⊙ (dP - Σ_keys dP ⊙ P)     (softmax_backward)
    scores = ... + bias            dbias = dscores summed over bias's broadcast axes
    scores = Q (K/√D)ᵀ             dQ = dscores (K/√D),   d(K/√D) = dscoresᵀ Q
    K/√D = K · 1/√D                dK = d(K/√D) / √D

Where the mask was False, P = 0 exactly, hence dscores = 0 and dP's entry does not
matter: a hidden key receives exactly zero gradient. The mask's -inf is a constant:
it has no gradient of its own.""", "A hidden key (where the mask is False) receives exactly zero gradient.")
_SHAW_MODULE = Passage(f"{F}.shaw", """Backward (each line reverses the forward line on its left; scale = 1/√D):
    o = P v + Σ_j P_ij a^V_ij     dv = Pᵀ do,   dP = do vᵀ + (do_i · a^V_ij)_ij,
                                  da^V_ij = Σ_{b,h} P_ij do_i
    P = softmax(e)                de = P ⊙ (dP - Σ_j dP ⊙ P)
    e = (q kᵀ + q·a^K) scale      dq = (de k + Σ_j de_ij a^K_ij) scale,   dk = deᵀ q scale,
                                  da^K_ij = Σ_{b,h} de_ij q_i scale
    a = table[r]                  dtable[m] = Σ_{(i,j): r_ij = m} da_ij     (a scatter-add)

A row m of a table gets gradient from every (i, j) whose clipped distance is m, so
the two edge rows collect every far pair and an interior row only its diagonal.

""")
_LOG_SOFTMAX = (
    Passage(f"{F}.softmax", """Backward of z = log_softmax(x), with ∂z_i/∂x_j = δ_ij - softmax(x)_j:
    dx = dz - softmax(x) * Σ_j dz_j
"""),
    Passage(f"{F}.softmax", "dx = dz - softmax(x) Σ_j dz_j. Inputs:", "Inputs:"),
    Passage(f"{F}.softmax", "log-probabilities; softmax is recomputed as exp(z) in backward", "log-probabilities"),
    _SHIFT,
)
_SOFTMAX = (
    _SOFTMAX_MODULE, _SHIFT, _SOFTMAX_IN_ATTENTION, _SOFTMAX_IN_SHAW,
    Passage(f"{F}.softmax", "dx = y ⊙ (dy - Σ_j dy_j y_j). Inputs:", "Inputs:"),
)
_REPEAT_KV = (
    Passage(f"{F}.repeat_kv", "    dK[:, g]    = Σ_{i < r} dK_rep[:, g·r + i]       the gradient sums each group\n"),
    Passage(f"{F}.repeat_kv", """Backward: the r copies of kv head g all fed the loss, so its gradient is the sum of
theirs: reshape (B, H, S, D) into (B, G, r, S, D) and sum over r. That is the
adjoint of the copy, exactly as a fan-out in any network adds its gradients.

"""),
    Passage(f"{F}.repeat_kv", ": each kv head's gradient is the sum over its r copies.", "."),
    Passage("layers.attention", "; the backward sums the r copies'\ngradients back into each kv head.", "."),
    Passage(f"{F}.attention", ", and sums their gradients after (functional/repeat_kv.py)", " (functional/repeat_kv.py)"),
)
_EMBEDDING = (
    Passage(f"{F}.embedding", """Backward. Each output row is a copy of one row of W, so W's gradient collects
the upstream rows by id, with repeated ids ADDING up:

    dW[v] = Σ_{n : ids_n = v} dout_n                        (V, C)

A plain ``dW[ids] += dout`` is wrong: with a repeated id only one of the writes
survives. ``add.at`` is correct but slow on NumPy (an unbuffered loop). Two fast
exact ways, chosen by the vocabulary size (timings: benchmarks/RESULTS.md):

- small V (<= ONE_HOT_MAX_V): dW = onehot(ids)ᵀ @ dout, one BLAS product of
  cost N·V·C.
- large V: sort the ids, sum each run of equal ids with ``add.reduceat``, write
  the sums into the rows of a zero dW. Cost N·C + N log N and no (N, V) one-hot
  (ids (16, 256), V = 30522: it would be 500 MB).

The one-hot product's cost grows with V and the sort's does not, so the one-hot
product is used only up to a small V (the threshold 128).""",
            "Backward: embedding_backward computes dW (V, C) with _one_hot_scatter, one matrix product, up to\n"
            "V = ONE_HOT_MAX_V (128), and with _sorted_scatter, which sorts the ids and makes no (N, V) array,\n"
            "above."),
    Passage(f"{F}.embedding", "dW[v] = Σ of dout over the positions whose id is v (repeated ids accumulate).\n\n    ",
            ""),
    Passage(f"{F}.embedding", "dW = onehotᵀ @ dout with onehot[n, v] = (ids_n == v): one matrix product.",
            "embedding_backward's dW for a small vocabulary, as one matrix product."),
    Passage(f"{F}.embedding", "Sort the ids, sum each run of equal ids, write the sums to their rows of dW.",
            "embedding_backward's dW for a large vocabulary, from the sorted ids, with no (N, V) array."),
    Passage(f"{F}.shaw", "dtable[m] = Σ_{(i,j): r_ij = m} da_ij     (a scatter-add)", "dtable = embedding_backward(da)"),
    Passage(f"{F}.shaw", """A row m of a table gets gradient from every (i, j) whose clipped distance is m, so
the two edge rows collect every far pair and an interior row only its diagonal.

"""),
)
_CROSS_ENTROPY = (
    Passage(f"{F}.cross_entropy", """Backward (the softmax and the log cancel into a simple difference):

    dz_n = dL · (softmax(z_n) - q_n) / N_kept        on kept rows,   0 on ignored rows

"""),
    Passage(f"{F}.cross_entropy", """dlogits = dL · (softmax - q) / N_kept on kept rows, 0 on ignored rows.

    q = (1 - ε) · onehot(y) + ε / V, the smoothed target distribution.
""", "dlogits is 0 on ignored rows.\n\n"),
    Passage(f"{F}.cross_entropy", "; softmax = exp(log p) is\nrecomputed in backward (one pass) rather than stored as a second (N, V) array.",
            "."),
    Passage(f"{F}.cross_entropy", "log-probabilities. softmax = exp(logp) is recomputed in", "log-probabilities"),
    Passage(f"{F}.cross_entropy", "\n                            # backward (one pass) rather than stored as a second (N, V) array"),
    Passage("plots.training", """read off the library's gradient rather than typed in: dL/dz = (softmax(z) - q) / N, so
    with one row (N = 1) q = softmax(z) - dL/dz.""", "read off the library's gradient rather than typed in."),
    Passage("plots.training", "q = softmax(z) - dL/dz for one row of logits z = 0 (any z gives the same q).",
            "q, the target the gradient implies, for one row of logits z = 0 (any z gives the same q)."),
)

PASSAGES = {
    f"{F}.linear:linear_backward": (
        Passage(f"{F}.linear", """

Backward (each line reverses the forward line y = x @ W + b):
    dx = dy @ Wᵀ                       (..., d_in)
    dW = xᵀ dy   summed over the rows  (d_in, d_out)
    db = Σ_rows dy                     (d_out,)"""),),
    f"{F}.activations:relu_backward": (
        Passage(f"{F}.activations", "relu(x) = max(x, 0)                        relu'(x) = [x > 0]      (0 at the kink x = 0)",
                "relu(x) = max(x, 0)"),
        Passage(f"{F}.activations", "bool [x > 0] = relu'(x), 1 byte", "bool [x > 0], 1 byte"),
        Passage(f"{F}.activations", '"""dx = dy ⊙ [x > 0]. Inputs:', '"""Inputs:'),
        _ELEMENTWISE,
    ),
    f"{F}.activations:gelu_forward": (
        Passage(f"{F}.activations", "gelu(x) = x Φ(x)                           gelu'(x) = Φ(x) + x φ(x)",
                "gelu(x) = x Φ(x)"),
        Passage(f"{F}.activations", "gelu'(x), computed in forward from Φ and φ;", "gelu'(x), computed in forward;"),
    ),
    f"{F}.activations:_gelu_tanh_forward": (
        Passage(f"{F}.activations", "        gelu_tanh'(x) = σ(2u) + x σ(2u) (1 - σ(2u)) · 2u',   2u' = 2√(2/π) (1 + 3·0.044715 x²)\n"),
        Passage(f"{F}.activations", "; dydx = σ(2u) + y (1 - σ(2u)) 2u'.", "; dydx its derivative."),
        Passage(f"{F}.activations", "# 2√(2/π): 2u' = _TWO_C (1 + 3k x²)", "# 2√(2/π)"),
        Passage(f"{F}.activations", """# tanh-GELU computes u and 2u' from x clipped to ±100: beyond, σ(2u) is exactly
                 # 0 or 1 even in float64 (|2u| > 7e4), so y and dydx do not change, but x³ and
                 # 2u' stay finite and σ + y (1 - σ) 2u' never meets 0 · ∞ (NaN at |x| = 1e20 in float32)""",
                """# tanh-GELU works on x clipped to ±100: beyond, σ(2u) is exactly 0 or 1 even
                 # in float64 (|2u| > 7e4), so y and dydx do not change, and x³ and the derivative
                 # stay finite (no 0 · ∞, which is NaN at |x| = 1e20 in float32)"""),
    ),
    f"{F}.activations:gelu_backward": (
        Passage(f"{F}.activations", "dx = dy ⊙ gelu'(x) (either form: the cache holds its derivative).",
                "The cache holds gelu'(x), of either form."),
        _ELEMENTWISE,
    ),
    f"{F}.softmax:softmax_forward": (),
    f"{F}.softmax:softmax_backward": _SOFTMAX,
    f"{F}.softmax:softmax_backward_jacobian": _SOFTMAX + (
        Passage(f"{F}.softmax", "through the full Jacobian J = diag(y) - y yᵀ (teaching form)",
                "through the full (n, n) Jacobian of each row (teaching form)"),),
    f"{F}.softmax:log_softmax_backward": _LOG_SOFTMAX,
    f"{F}.cross_entropy:cross_entropy_backward": _CROSS_ENTROPY,
    f"{F}.norm:layernorm_backward": (
        _NORM_MODULE,
        Passage(f"{F}.norm", ", for dxhat = dy ⊙ gamma", ""),
        Passage(f"{F}.norm", """        dbeta  = Σ_rows dy                        dgamma = Σ_rows dy ⊙ xhat
        dxhat  = dy ⊙ gamma
        dx     = rstd/C · (C·dxhat - Σ_c dxhat - xhat · Σ_c (dxhat ⊙ xhat))

    How dx follows, within one row: ∂μ/∂x_i = 1/C, ∂σ²/∂x_i = 2(x_i - μ)/C, hence
    ∂rstd/∂x_i = -rstd³ (x_i - μ)/C = -rstd² xhat_i / C and

        ∂xhat_j/∂x_i = rstd (δ_ij - 1/C) - rstd xhat_j xhat_i / C.

    Summing dxhat_j ∂xhat_j/∂x_i over j gives the line above. The code evaluates
    it with 1/C moved inside: dx = rstd · (dxhat - mean(dxhat) - xhat · mean(dxhat ⊙ xhat)).
    The last three lines together reverse the forward lines from mu to xhat.

"""),
    ),
    f"{F}.norm:rmsnorm_backward": (
        _NORM_MODULE,
        Passage(f"{F}.norm", """        dgamma = Σ_rows dy ⊙ xhat          dxhat = dy ⊙ gamma
        dx     = rstd/C · (C·dxhat - xhat · Σ_c (dxhat ⊙ xhat))

    How dx follows: ∂rstd/∂x_i = -rstd³ x_i / C, so
    ∂xhat_j/∂x_i = rstd (δ_ij - xhat_j xhat_i / C); LayerNorm's formula without the
    mean terms, since nothing is centred. Evaluated as rstd · (dxhat - xhat · mean(dxhat ⊙ xhat)).

"""),
    ),
    f"{F}.embedding:embedding_backward": _EMBEDDING,
    f"{F}.embedding:_one_hot_scatter": _EMBEDDING,
    f"{F}.embedding:_sorted_scatter": _EMBEDDING,
    f"{F}.dropout:dropout_backward": (
        Passage(f"{F}.dropout", "\n\nBackward, reversing y = x ⊙ m / (1 - p_drop):   dx = dy ⊙ m / (1 - p_drop)."),
        Passage(f"{F}.dropout", "dx = dy ⊙ m / (1 - p_drop); on the identity path dx is dy itself (no copy).",
                "On the identity path dx is dy itself (no copy)."),
        Passage(f"{F}.attention", "dP = dP̃ ⊙ m / (1 - p_drop)             (dropout_backward)",
                "dP = dropout_backward(dP̃)"),
    ),
    f"{F}.attention:attention_backward": (_ATTENTION_MODULE,),
    f"{F}.shaw:shaw_attention_backward": (_SHAW_MODULE,),
    f"{F}.rope:rope_backward": (
        Passage(f"{F}.rope", """

Backward: the rotation is linear and orthogonal, so dx = R(m)ᵀ dy, the rotation
by -mθ_j:
    dx_a =  dy_a cos(mθ_j) + dy_b sin(mθ_j)
    dx_b = -dy_a sin(mθ_j) + dy_b cos(mθ_j)"""),
        Passage(f"{F}.rope", '"""dx = the rotation of dy by -mθ_j.\n\n    Inputs:', '"""Inputs:'),
    ),
    "layers.attention:MultiHeadAttention.backward": (
        Passage("layers.attention", """        Reverses forward's lines in the opposite order, from the cache
        MHACache(proj, proj_kv, rope, attn, out, positions, repeat):
            y = merge_heads(o) W_o + b_o          -> do, dW_o, db_o    (linear_backward on ``out``)
            o = attention(q, k, v, mask, bias)    -> dq, dk, dv        (self.positions.attend_backward:
                                                                         attention_backward, plus a
                                                                         relative scheme's table gradients)
            k, v = repeat_kv(k), repeat_kv(v)     -> dk, dv summed over each group (G < H only)
            self: q, k = RoPE(q, k)               -> rotate dq, dk back (self.positions.rotate_backward)
                  [q | k | v] = x W_qkv + b_qkv   -> dx, dW_qkv, db_qkv (one linear_backward on the
                                                                         merged [dq | dk | dv])
            cross: q = x W_q + b_q                -> dx, dW_q, db_q
                   [k | v] = memory W_kv + b_kv   -> dmemory, dW_kv, db_kv
""", "        The cache: MHACache(proj, proj_kv, rope, attn, out, positions, repeat).\n"),
    ),
    f"{F}.repeat_kv:repeat_kv_backward": _REPEAT_KV,
    "layers.residual:Residual.backward": (
        Passage("layers.residual", """Backward: the residual branch and the identity branch both receive the
gradient, and their contributions add (``dx = dy + dF``).

"""),
        Passage("layers.residual", ":   dx = dy (the identity) + norm_backward(f_backward(dropout_backward(dy)))", ""),
        Passage("layers.residual", ":   ds = norm_backward(dy); dx = ds + f_backward(dropout_backward(ds))", ""),
        Passage("layers.residual", "\n        The identity branch passes the gradient through unchanged and ADDS to the sublayer's.", ""),
    ),
    "layers.blocks:DecoderBlock.backward": (
        _BLOCK_MODULE,
        Passage("layers.blocks", """;
        the backward runs the three Residuals in the reverse order, and only cross_attn
        returns a gradient for the memory.""", "."),
    ),
    "layers.blocks:EncoderBlock.backward": (_BLOCK_MODULE,),
}

# assignment -> the lectures that derive or state its backward (left out of a copy without them)
LECTURES = {
    "softmax": ("01_attention.py",),               # dx = p ⊙ (dy - Σ p dy), beside the saturation figure
    "cross_entropy": ("05_training_seq2seq.py",    # q read back from the gradient, dℓ/dz = p - q
                      "12_scaling_up.py"),         # distillation: ∂L/∂z_s = τ/N (q_s - q_t), the same form
    "layernorm": ("03_layernorm_residual_ffn.py",),    # derived line by line, then the fused formula
    "dropout": ("03_layernorm_residual_ffn.py",),      # dx = dy ⊙ m / (1 - p)
    "block": ("03_layernorm_residual_ffn.py",),        # the residual's dx = dy + (the gradient through F)
    "embedding": ("10_beyond_text.py",),               # a table row's gradient: a scatter-add of its readers
}


def passages(targets) -> list:
    """The passages of ``targets`` (Targets or "module:qualname"), each once, the longest first."""
    found = [p for t in targets for p in PASSAGES.get(str(t), ())]
    return sorted(dict.fromkeys(found), key=lambda p: -len(p.old))


def lectures(ids) -> list:
    """The lecture files left out of a copy of the assignments ``ids`` without the derivations."""
    return sorted({name for i in ids for name in LECTURES.get(i, ())})


def strip_text(text: str, targets) -> str:
    """``text`` (a handout: its cache tables quote the caches' comments) with the one-line passages of
    ``targets`` replaced wherever they occur."""
    for p in passages(targets):
        if "\n" not in p.old:
            text = text.replace(p.old, p.new)
    return text


def _replace(text: str, p: Passage) -> str:
    """``text`` with ``p`` applied; a paragraph cut between two others leaves one blank line, not two."""
    i = text.index(p.old)
    text = text[:i] + p.new + text[i + len(p.old):]
    if not p.new and text[i - 2:i] == "\n\n" and text[i:i + 1] == "\n":
        text = text[:i] + text[i + 1:]
    return text


def strip(dest: Path, targets) -> None:
    """Apply the passages of ``targets`` to the package copied into ``dest`` (its minitransformer/)."""
    chosen = passages(targets)
    files = {p.module: (Path(dest) / Path(*p.module.split("."))).with_suffix(".py") for p in chosen}
    texts = {m: path.read_text(encoding="utf-8") for m, path in files.items()}
    original = dict(texts)
    for p in chosen:
        count = texts[p.module].count(p.old)
        if count > 1:
            raise StaleTable(f"{p.module}: {p.old[:60]!r}... occurs {count} times; a passage must be unique")
        if count == 1:
            texts[p.module] = _replace(texts[p.module], p)
        elif p.old not in original[p.module]:       # else it went with a longer passage around it
            raise StaleTable(f"{p.module}: {p.old[:60]!r}... is not in the source: update homework/derivations.py")
    for m, text in texts.items():
        if text != original[m]:
            files[m].write_text(text, encoding="utf-8")


HIDDEN = ("{tensors}: a mistake the catalogue knows, whose message would state the backward's formula; "
          "without the derivations this copy does not say it: derive the backward from the forward again")


def without_formulas(records: list, ids) -> list:
    """The assignments' ``records`` (assignment.Assignment.record, the copy's mark) with the catalogue's
    message of every backward mistake of the assignments ``ids`` said without the formula: a message
    names the right backward to say what the student missed, and the local check prints it."""
    hidden = []
    for r in records:
        if r["id"] in ids:
            r = dict(r, mistakes=[dict(m, message=HIDDEN.format(tensors=", ".join(m["tensors"])))
                                  if "out" not in m["tensors"] else m for m in r["mistakes"]])
        hidden.append(r)
    return hidden
