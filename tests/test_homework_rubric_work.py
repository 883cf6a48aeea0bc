"""The cases draw what the docstrings promise, and the rubric pays for work done.

    cases       any leading axes, a Module's backward called twice, G != r grouped heads,
                dropout's random path (a property: the keep fraction within 5σ), every
                cross-entropy target ignored: each with a bug planted by hand that fails
                there, and the catalogue's message it gets
    rubric      a trivially right case (zeros, a copy of the input) counts only beside a
                right case of the same function that is not trivial; a right forward keeps
                its points when the backward raises or is not written; a backward that
                calls its own forward raises (it runs with its forward unavailable), loses
                its gradients and is flagged in the report, the JSON and the gradebook
    red team    tests/redteam_attacks.py's rubric findings, graded again (before: numerical
                backwards 62.65 for 17.1 honest, mha 9.13 for 3.04, the identity body 1.0,
                zero loss 2.0)
"""
from __future__ import annotations

import numpy as np
import pytest

import redteam_attacks as attacks
from minitransformer.functional import cross_entropy as CE
from minitransformer.functional.norm import layernorm_forward
from minitransformer.homework import classroom
from minitransformer.homework.child import BLOCKED
from minitransformer.homework.evaluate import FORWARD_IN_BACKWARD
from minitransformer.homework.export import export
from minitransformer.homework.grade import grade
from minitransformer.homework.graded import Local
from minitransformer.homework.handout import DERIVED, page
from minitransformer.homework.properties import dropout_random_path, keep_bound
from minitransformer.homework.report import format_result, gradescope
from minitransformer.homework.result import Result
from minitransformer.homework.rubric import TRIVIAL_NOTE, UNCHANGED, items, score
from minitransformer.homework.sandbox import Limits, StudentError
from test_mistakes import _assert_named, _diagnoses, _message

LIMITS = Limits(timeout=20.0, budget=120.0)
SEED = attacks.SEED


# ------------------------------------------------------------------ planted bugs, by hand
def layernorm_pair_axes_01():
    """A student's LayerNorm whose parameter gradients sum over axes (0, 1): right on (B, T, C) only."""
    def forward(x, gamma, beta, eps=1e-5):
        mu = x.mean(-1, keepdims=True)
        rstd = 1 / np.sqrt(x.var(-1, keepdims=True) + eps)
        xhat = (x - mu) * rstd
        return xhat * gamma + beta, (xhat, rstd, gamma)

    def backward(dy, cache):
        xhat, rstd, gamma = cache
        dxhat = dy * gamma
        dx = rstd * (dxhat - dxhat.mean(-1, keepdims=True) - xhat * (dxhat * xhat).mean(-1, keepdims=True))
        return dx, (dy * xhat).sum(axis=(0, 1)), dy.sum(axis=(0, 1))
    return forward, backward


def cross_entropy_zero_over_zero():
    """A student's cross-entropy whose mean divides by N_kept even when it is 0."""
    def forward(logits, targets, ignore_index=-100, smoothing=0.0):
        z = logits.reshape(-1, logits.shape[-1])
        t = targets.reshape(-1)
        logp = z - z.max(1, keepdims=True)
        logp -= np.log(np.exp(logp).sum(1, keepdims=True))
        kept = t != ignore_index
        nll = -np.take_along_axis(logp, np.where(kept, t, 0)[:, None], 1)[:, 0]
        loss = (1 - smoothing) * nll - smoothing * logp.mean(1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.asarray((loss * kept).sum() / kept.sum()), CE.cross_entropy_forward(
                logits, targets, ignore_index, smoothing)[1]

    def backward(dloss, cache):
        V = cache.logp.shape[1]
        q = (1 - cache.smoothing) * np.eye(V)[cache.targets] + cache.smoothing / V
        with np.errstate(invalid="ignore", divide="ignore"):
            d = (np.exp(cache.logp) - q) * cache.keep[:, None] * dloss / cache.keep.sum()
        return d.reshape(cache.logits_shape)
    return forward, backward


def repeat_kv_modulo():
    """A student's repeat_kv as a loop over the query heads with kv head h % G (for h // r)."""
    def forward(x, r):
        B, G, S, D = x.shape
        out = np.empty((B, G * r, S, D), x.dtype)
        for h in range(G * r):
            out[:, h] = x[:, h % G]
        return out, (x.shape, r)

    def backward(dout, cache):
        (B, G, S, D), r = cache
        dx = np.zeros((B, G, S, D), dout.dtype)
        for h in range(G * r):
            dx[:, h % G] += dout[:, h]
        return dx
    return forward, backward


def assigning_W_o(module):
    """MultiHeadAttention.backward with grads["W_o"] = dW_o: one call's gradient kept, the earlier lost."""
    backward = module.backward

    def assigned(dy):
        before = module.grads["W_o"].copy()
        dx = backward(dy)
        module.grads["W_o"] -= before                 # what `grads["W_o"] = dW_o` leaves
        return dx
    module.backward = assigned


def with_repeat_kv(module, forward, backward):
    """The Module calling the student's repeat_kv (the student's module's globals; the reference's here)."""
    import minitransformer.layers.attention as layer
    method = module.backward

    def repeat(k, v):
        r = module.n_head // module.n_kv_head
        (k_heads, cache), (v_heads, _) = forward(k, r), forward(v, r)
        return k_heads, v_heads, cache

    def backward_with_students(dy):
        reference, layer.repeat_kv_backward = layer.repeat_kv_backward, backward
        try:
            return method(dy)
        finally:
            layer.repeat_kv_backward = reference
    module._repeat_kv, module.backward = repeat, backward_with_students


def dropout_keeping_p():
    """A student's dropout whose random mask is the DROP mask: u < p_drop keeps a fraction p_drop."""
    def forward(x, p_drop, rng=None, training=True, mask=None):
        m = mask if mask is not None else rng.random(x.shape) < p_drop
        return x * m / (1 - p_drop), (m, 1 / (1 - p_drop))

    def backward(dy, cache):
        m, scale = cache
        return dy * m * scale
    return forward, backward


LEADING = "layernorm: any leading axes, x (N, C) to (A, B, T, U, C)"
IGNORED = "cross_entropy: every target ignored (loss 0, gradient 0)"
TWICE = "mha: backward called twice, no zero_grad (the gradients add up)"
GROUPED = "mha: grouped heads (n_kv_head=2 < n_head=4)"
G3R2 = "repeat_kv: G=3 kv heads, r=2 query heads each (H=6: h // r, never h % G or h // G)"

# catalogue entry -> (case, tensor, forward, backward, module patch) of its planted bug
PLANTED_HERE = {
    "layernorm-dgamma-fixed-axes": (LEADING, "dgamma", *layernorm_pair_axes_01(), None),
    "ce-all-ignored-zero-over-zero": (IGNORED, "out", *cross_entropy_zero_over_zero(), None),
    "mha-gradient-assigned": (TWICE, "dW_o", None, None, assigning_W_o),
    "mha-kv-heads-modulo": (GROUPED, "dx", None, None, lambda module: with_repeat_kv(module, *repeat_kv_modulo())),
    "dropout-keeps-p": (None, None, None, None, None),            # a judged case: test below
}


@pytest.mark.parametrize("name", [n for n, planted in PLANTED_HERE.items() if planted[0] is not None])
def test_a_bug_the_new_cases_draw_is_named(name):
    case, tensor, forward, backward, patch = PLANTED_HERE[name]
    _assert_named(_diagnoses(case, forward, backward, module_patch=patch), tensor, name)


def test_the_right_code_passes_every_new_case():
    for case in (LEADING, IGNORED, G3R2):
        for student, messages in _diagnoses(case):
            assert messages == {}, (case, messages)
    for case in (TWICE, GROUPED):
        for student, messages in _diagnoses(case, module_patch=lambda module: None):
            assert messages == {}, (case, messages)


def test_dgamma_over_axes_01_passes_on_b_t_c_and_fails_on_other_leading_axes():
    forward, backward = layernorm_pair_axes_01()
    assert _diagnoses("layernorm: x (B, T, C)", forward, backward)[0][1] == {}
    assert "dgamma" in _diagnoses(LEADING, forward, backward)[0][1]


def test_an_all_ignored_cross_entropy_says_zero_over_zero_not_the_attention_words():
    forward, backward = cross_entropy_zero_over_zero()
    for _, messages in _diagnoses(IGNORED, forward, backward):
        assert messages["out"] == messages["dlogits"] == _message("ce-all-ignored-zero-over-zero")
        assert "0/0" in messages["out"] and "safe max" not in messages["dlogits"]


def test_grouped_heads_mapped_modulo_g_fail_repeat_kv_when_g_differs_from_r():
    forward, backward = repeat_kv_modulo()
    results = _diagnoses(G3R2, forward, backward)
    _assert_named(results, "out", "repeat-kv-tiled")
    assert "h // r" in _message("repeat-kv-tiled")


# ------------------------------------------------------------------ dropout's random path: a property
def _random_case(seed=0):
    from minitransformer.homework.registry import find_case
    return find_case("dropout: the random path, a mask drawn from rng (keeps 1 - p_drop of 4,096 entries)").draw(
        np.random.default_rng(seed))


@pytest.mark.parametrize("how", ["reference", "binomial", "uniform below 1 - p"])
def test_any_mask_that_keeps_one_minus_p_passes_the_random_path(how):
    from minitransformer.functional.dropout import dropout_backward, dropout_forward
    case = _random_case()
    x, p, rng = case.inputs["x"], case.kwargs["p_drop"], case.kwargs["rng"]
    if how == "reference":
        out, cache = dropout_forward(x, p, rng)
        m = cache.mask
    else:
        m = rng.binomial(1, 1 - p, x.shape).astype(bool) if how == "binomial" else rng.random(x.shape) < 1 - p
        out = x * m / (1 - p)
    dy = np.random.default_rng(1).standard_normal(x.shape)
    judged = dropout_random_path({"x": x, "p_drop": p}, {"out": out, "dx": dy * m / (1 - p)}, dy, 1e-7)
    assert judged == {"out": (True, ""), "dx": (True, "")}


def test_a_mask_that_keeps_p_drop_fails_and_is_named(tmp_path):
    forward, backward = dropout_keeping_p()
    case = _random_case()
    x, p = case.inputs["x"], case.kwargs["p_drop"]
    out, cache = forward(x, p, case.kwargs["rng"])
    judged = dropout_random_path({"x": x, "p_drop": p}, {"out": out}, None, 1e-7)
    assert not judged["out"][0] and "keeps" in judged["out"][1]
    assert abs(float((out != 0).mean()) - p) <= keep_bound(p, x.size)
    folder = tmp_path / "sub" / "minitransformer" / "functional"     # and through the grader, its message
    folder.mkdir(parents=True)
    (folder / "dropout.py").write_text(DROPOUT_KEEPS_P)
    result = grade(tmp_path / "sub", ["dropout"], limits=LIMITS, seed=SEED)[0]
    rows = {r.name: r for r in result.rows}
    random_out = rows["dropout: the random path, a mask drawn from rng (keeps 1 - p_drop of 4,096 entries) · out"]
    assert not random_out.ok and random_out.diagnosis == _message("dropout-keeps-p")
    assert all(r.ok for name, r in rows.items() if "random path" not in name)   # a given mask: right


DROPOUT_KEEPS_P = '''
def dropout_forward(x, p_drop, rng=None, training=True, mask=None):
    if not training or p_drop == 0:
        return x, DropoutCache(None, 1.0)
    m = mask if mask is not None else rng.random(x.shape) < p_drop
    return x * m / (1 - p_drop), DropoutCache(m, 1 / (1 - p_drop))


def dropout_backward(dy, cache):
    if cache.mask is None:
        return dy
    return dy * cache.mask * cache.scale
'''


# ------------------------------------------------------------------ the rubric
def test_a_trivial_case_counts_only_beside_a_right_case_of_the_same_function():
    eval_case = "dropout: eval mode (training=False) is the identity"
    only_eval = {(eval_case, "out"): True, (eval_case, "dx"): True, (eval_case, UNCHANGED): True}
    earned, marks = score("dropout", only_eval, trivial=[eval_case])
    assert earned == 0
    assert next(m for m in marks if m.name == eval_case).note == TRIVIAL_NOTE.format(function="dropout_forward")
    main = "dropout: training with a given keep-mask"
    with_work = {**only_eval, (main, "out"): True}
    points = {i.name: i.points for i in items("dropout")}
    assert score("dropout", with_work, trivial=[eval_case])[0] == pytest.approx(
        points[f"{main} · forward"] + points[eval_case] + points["inputs and upstream gradient left unchanged"])
    assert score("dropout", only_eval)[0] > 0            # the same outcomes without the trivial mark: paid


def test_a_right_forward_keeps_its_points_beside_a_backward_not_written(tmp_path):
    folder = tmp_path / "sub" / "minitransformer" / "functional"
    folder.mkdir(parents=True)
    (folder / "norm.py").write_text(LAYERNORM_FORWARD_ONLY)
    result = grade(tmp_path / "sub", ["layernorm"], limits=LIMITS, seed=SEED)[0]
    points = {i.name: i.points for i in items("layernorm")}
    assert result.status == "not implemented"
    assert result.score == pytest.approx(points["layernorm: x (B, T, C) · forward"]
                                         + points["inputs and upstream gradient left unchanged"])
    assert [m.name for m in result.rubric if m.passed] == ["layernorm: x (B, T, C) · forward",
                                                           "inputs and upstream gradient left unchanged"]


LAYERNORM_FORWARD_ONLY = '''
def layernorm_forward(x, gamma, beta, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    rstd = 1 / (x.var(-1, keepdims=True) + eps) ** 0.5
    xhat = (x - mu) * rstd
    return xhat * gamma + beta, LayerNormCache(xhat, rstd, gamma)


def layernorm_backward(dy, cache):
    raise NotImplementedError("layernorm_backward")
'''


# ------------------------------------------------------------------ a backward that calls its own forward
def test_in_process_a_backward_calling_its_forward_raises_and_the_forward_comes_back():
    import minitransformer.functional.norm as norm
    x, gamma, beta = np.ones((2, 3)) + np.arange(3), np.ones(3), np.zeros(3)
    _, cache = layernorm_forward(x, gamma, beta)

    def numerical_backward(dy, cache):
        return norm.layernorm_forward(x, gamma, beta)[0]
    with pytest.raises(StudentError) as raised:
        Local().echo(numerical_backward, (np.ones((2, 3)), cache), {}, "functional.norm:layernorm_forward")
    assert raised.value.type == BLOCKED and "layernorm_forward" in str(raised.value)
    assert norm.layernorm_forward is layernorm_forward                   # put back
    value, _, _ = Local().call("functional.norm:layernorm_backward", (np.ones((2, 3)), cache), {},
                               blocked="functional.norm:layernorm_forward")
    assert value[0].shape == (2, 3)                                       # the reference's backward runs


@pytest.fixture(scope="module")
def solutions(tmp_path_factory):
    folder = tmp_path_factory.mktemp("solutions")
    export(["all"], folder, with_solutions=True)
    return folder


PAIRS = ["softmax", "layernorm", "attention"]            # 30/30 by numerical backwards before


def test_numerical_backwards_earn_the_forwards_only_and_are_flagged(solutions, tmp_path):
    """Before: a backward by central differences of the student's own forward scored 30/30 on softmax,
    layernorm and attention (62.65 over every pair, for 17.1 with the forwards alone)."""
    attacks.numerical_submission(solutions, tmp_path / "forwards", PAIRS, backward_body="raise ValueError('no')\n")
    attacks.numerical_submission(solutions, tmp_path / "numerical", PAIRS)
    honest = {r.id: r.score for r in grade(tmp_path / "forwards", PAIRS, limits=LIMITS, seed=SEED)}
    got = grade(tmp_path / "numerical", PAIRS, limits=LIMITS, seed=SEED)
    assert {r.id: r.score for r in got} == honest and 0 < sum(honest.values()) < 10
    for r in got:
        forward = {"softmax": "softmax_forward", "layernorm": "layernorm_forward",
                   "attention": "attention_forward"}[r.id]
        assert r.flags == [FORWARD_IN_BACKWARD.format(forward=forward)]
        assert f"FLAG (for the instructor): {r.flags[0]}" in format_result(r)
    assert gradescope(got)["extra_data"]["flags"] == {r.id: r.flags for r in got}
    chosen = [a for a in attacks.ASSIGNMENTS if a.id in PAIRS]
    row = classroom._row("student", got, [], chosen, 0.0,
                         classroom.statuses(tmp_path / "numerical", chosen, got))
    assert "flagged: softmax: the backward calls its own forward (softmax_forward)" in row[-1]


def test_an_mha_backward_by_differences_of_the_module_earns_repeat_kv_only(solutions, tmp_path):
    """Before: 9.13 of 10, for 3.04 with repeat_kv alone."""
    honest, got = attacks.mha(tmp_path, solutions)
    assert got == honest and 0 < honest < 5


def test_the_solutions_keep_full_marks_and_no_flag_a_backward_may_call_other_functions(solutions):
    """rope_backward calls _pairs, attention_backward softmax_backward (answered by the grader), gelu's
    the tanh helper: functions that are not their own forward."""
    for r in grade(solutions, ["rope", "attention", "gelu", "dropout", "mha"], limits=LIMITS, seed=SEED):
        assert (r.score, r.flags) == (r.max_score, []), (r.id, r.message)


def test_the_identity_body_and_a_zero_loss_earn_nothing(tmp_path):
    """Before: the identity everywhere earned dropout 1/3 (eval mode), a zero loss cross_entropy 2/10
    (every target ignored)."""
    attacks.trivial_submission(tmp_path / "identity", "identity")
    assert attacks.total(tmp_path / "identity", ["dropout", "cross_entropy"]) == 0
    assert attacks.zero_loss(tmp_path) == (0.0, 0)


def test_the_handout_says_a_backward_is_derived_and_the_report_shows_a_trivial_note():
    assert DERIVED in page("softmax") and DERIVED not in page("causal_mask")
    mark = score("dropout", {("dropout: eval mode (training=False) is the identity", "out"): True},
                 trivial=["dropout: eval mode (training=False) is the identity"])[1]
    text = format_result(Result("dropout", 3, 0.0, "fail", rubric=mark))
    assert "right, but a zero or a copy of the input is right here" in text
