"""Lecture figures: each figure's data against its formula, PNGs written, the figures command.

The expected values are computed here with the math module or written out by
definition (loops, np.tril), never with the library code the figure calls.
Tolerances: 1e-12 where float64 formulas are compared (a few ulps of round-off
in exp/erf/sin), exact equality for boolean masks.
"""
import argparse
import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from minitransformer.cli import figures as cli_figures
from minitransformer.cli import main
from minitransformer.functional.cross_entropy import cross_entropy_backward, cross_entropy_forward
from minitransformer.functional.linear import linear_backward, linear_forward
from minitransformer.gradcheck import check_pair
from minitransformer.models import GPT, GPTConfig
from minitransformer.plots.activations import activation_curves, gelu_difference
from minitransformer.plots.alibi import alibi_figure
from minitransformer.plots.attention import attention_grid, attention_map, collect_attention
from minitransformer.plots.gqa import gqa_figure, kv_head_of_query
from minitransformer.plots.gradients import block_gradient_norms, gradcheck_errors, prenorm_vs_postnorm
from minitransformer.plots.masks import attention_patterns, causal_table, key_padding_figure
from minitransformer.plots.positions import rope_figure, sinusoidal_encoding
from minitransformer.plots.training import label_smoothing, loss_curve, lr_schedules
from minitransformer.plots.masks import dilated_window_mask, global_window_mask
from strategies import normal_array

ROOT = Path(__file__).resolve().parents[1]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
TINY = GPTConfig(vocab_size=13, block_size=8, n_layer=2, n_head=2, d_model=8)


def assert_png(path):
    data = path.read_bytes()
    assert len(data) > 1000 and data.startswith(PNG_SIGNATURE)


# ------------------------------------------------------------------ training figures
def test_loss_curve_smoothing_is_the_debiased_moving_average(tmp_path):
    rng = np.random.default_rng(0)
    history = [(s, 3.0 + rng.standard_normal()) for s in range(1, 41)]
    beta = 0.9
    _, data = loss_curve(history, [(20, 3.1, 3.2), (40, 2.9, 3.0)], path=tmp_path / "loss.png", smoothing=beta)
    L = np.array([loss for _, loss in history])
    # closed form of the recursion: a weighted mean with weights β^(t-k)(1-β), divided by 1 - β^t
    expected = [sum(beta ** (t - k) * (1 - beta) * L[k - 1] for k in range(1, t + 1)) / (1 - beta ** t)
                for t in range(1, 41)]
    np.testing.assert_allclose(data["smoothed"], expected, rtol=1e-12)
    np.testing.assert_array_equal(data["eval_val"], [3.2, 3.0])
    assert_png(tmp_path / "loss.png")


def test_loss_curve_of_a_constant_loss_is_flat_and_accepts_no_evals():
    _, data = loss_curve([(s, 2.5) for s in range(1, 11)], [])
    np.testing.assert_allclose(data["smoothed"], 2.5, rtol=1e-12)   # no start-up bias towards 0
    assert data["eval_step"].shape == (0,)


def test_loss_curve_errors_name_the_argument():
    with pytest.raises(ValueError, match="history: expected at least one"):
        loss_curve([], [])
    with pytest.raises(ValueError, match=r"evals: expected a list of \(step, train_eval, val_eval\)"):
        loss_curve([(1, 2.0)], [(1, 2.0)])
    with pytest.raises(TypeError, match="path: expected a file path"):
        loss_curve([(1, 2.0)], [], path=3)


def test_noam_curves_follow_the_formula_and_peak_at_warmup():
    settings_ = [(512, 400), (256, 1000)]
    _, data = lr_schedules(noam_settings=settings_, noam_steps=3000, cosine=(1e-3, 10, 100, 1e-4))
    for (d, w), lr in zip(settings_, data["noam_lr"]):
        assert int(np.argmax(lr)) + 1 == w                             # steps count from 1
        for s in (1, w // 2, w, 2 * w, 3000):
            assert lr[s - 1] == pytest.approx(d ** -0.5 * min(s ** -0.5, s * w ** -1.5), rel=1e-12)


def test_warmup_cosine_curve_hits_its_landmarks():
    _, data = lr_schedules(noam_settings=[(64, 10)], noam_steps=20, cosine=(1e-3, 10, 110, 1e-4))
    lr = data["cosine_lr"]
    assert lr[0] == pytest.approx(1e-4, rel=1e-12)                     # max_lr · 1 / warmup
    assert lr[9] == pytest.approx(1e-3, rel=1e-12)                     # the peak at step = warmup
    assert lr[59] == pytest.approx((1e-3 + 1e-4) / 2, rel=1e-12)       # halfway through the decay
    assert lr[109] == pytest.approx(1e-4, rel=1e-12)                   # min_lr at the last step


@settings(max_examples=8)
@given(V=st.integers(2, 12), data=st.data(), smoothing=st.sampled_from([0.0, 0.05, 0.1, 0.5, 1.0]))
def test_label_smoothing_target_is_the_formula(V, data, smoothing):
    target = data.draw(st.integers(0, V - 1))
    _, d = label_smoothing(V=V, target=target, smoothing=smoothing)
    onehot = np.eye(V)[target]
    np.testing.assert_allclose(d["smoothed"], (1 - smoothing) * onehot + smoothing / V, atol=1e-15)
    np.testing.assert_allclose(d["hard"], onehot, atol=1e-15)
    assert d["smoothed"].sum() == pytest.approx(1.0, abs=1e-15)


# ------------------------------------------------------------------ position figures
def test_sinusoidal_heatmap_is_the_formula():
    _, data = sinusoidal_encoding(max_len=50, d_model=16, dims=(0, 3, 15))
    for pos, col in [(0, 0), (1, 0), (7, 3), (49, 14), (23, 15), (10, 8)]:
        i = col // 2
        angle = pos / 10000 ** (2 * i / 16)
        expected = math.sin(angle) if col % 2 == 0 else math.cos(angle)
        assert data["PE"][pos, col] == pytest.approx(expected, abs=1e-12)
    np.testing.assert_array_equal(data["curves"], data["PE"][:, [0, 3, 15]])


def test_rope_score_depends_only_on_the_relative_position():
    _, data = rope_figure(D=8, n_positions=12, pair=1, n_rotations=5, seed=3)
    scores, distance = data["scores"], data["distance"]
    for k in range(-11, 12):
        on_diagonal = scores[distance == k]
        assert np.ptp(on_diagonal) < 1e-12 * np.abs(scores).max()     # one value per m - n
    # m = n: no rotation is left between them, the plain dot product
    assert scores[5, 5] == pytest.approx(float(data["q"] @ data["k"]), rel=1e-12)


def test_rope_rotation_turns_the_pair_by_m_theta():
    _, data = rope_figure(D=8, n_positions=4, pair=1, n_rotations=6)
    theta = 10000 ** (-2 * 1 / 8)
    assert data["theta"] == pytest.approx(theta, rel=1e-15)
    for m, (a, b) in enumerate(data["rotation"]):
        assert a == pytest.approx(math.cos(m * theta), abs=1e-12)
        assert b == pytest.approx(math.sin(m * theta), abs=1e-12)


def test_alibi_figure_bias_is_minus_slope_times_distance(tmp_path):
    _, data = alibi_figure(H=8, T=6, path=tmp_path / "alibi.png")
    np.testing.assert_array_equal(data["slopes"], [1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128, 1 / 256])
    for h in range(8):
        for i in range(6):
            for j in range(6):
                assert data["bias"][h, i, j] == -data["slopes"][h] * (i - j)
    np.testing.assert_array_equal(data["visible"], np.tril(np.ones((6, 6), dtype=bool)))
    assert_png(tmp_path / "alibi.png")


def test_alibi_figure_follows_the_paper_for_six_heads_and_checks_its_arguments():
    _, data = alibi_figure(H=6, T=3)      # 4 slopes of 4 heads, then every other slope of 8 heads
    np.testing.assert_array_equal(data["slopes"], [2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8, 2 ** -1, 2 ** -3])
    with pytest.raises(ValueError, match="H: expected an integer"):
        alibi_figure(H=0)
    with pytest.raises(TypeError, match="T: expected an integer"):
        alibi_figure(T=2.5)


# -------------------------------------------------------------- activation figures
def _phi(x):
    return math.exp(-x * x / 2) / math.sqrt(2 * math.pi)


def _Phi(x):
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def _sigmoid(x):
    return 1 / (1 + math.exp(-x))


def test_activation_curves_match_the_math_module():
    _, data = activation_curves(ranges=((-1, 1), (-10, 10)), n_points=21)
    c = math.sqrt(2 / math.pi)
    expected = {
        "ReLU": (lambda x: max(x, 0.0), lambda x: float(x > 0)),
        "GELU (exact, erf)": (lambda x: x * _Phi(x), lambda x: _Phi(x) + x * _phi(x)),
        "GELU (tanh)": (lambda x: 0.5 * x * (1 + math.tanh(c * (x + 0.044715 * x ** 3))), None),
        "SiLU": (lambda x: x * _sigmoid(x), lambda x: _sigmoid(x) * (1 + x * (1 - _sigmoid(x)))),
    }
    for label, (f, df) in expected.items():
        for r in range(2):
            for n in range(0, 21, 4):
                x = float(data["x"][r, n])
                assert data["y"][label][r, n] == pytest.approx(f(x), abs=1e-12), (label, x)
                if df is not None:
                    assert data["dydx"][label][r, n] == pytest.approx(df(x), abs=1e-12), (label, x)


def test_tanh_gelu_slope_matches_a_central_difference_of_its_value():
    # the derivative drawn comes from the backward; here it is checked against the curve itself
    _, data = activation_curves(ranges=((-3, 3),), n_points=601)
    x, y, dy = data["x"][0], data["y"]["GELU (tanh)"][0], data["dydx"]["GELU (tanh)"][0]
    numeric = (y[2:] - y[:-2]) / (x[2:] - x[:-2])
    np.testing.assert_allclose(dy[1:-1], numeric, atol=1e-4)          # O(h²), h = 0.01


def test_gelu_difference_is_small_and_vanishes_at_zero():
    _, data = gelu_difference(lo=-6, hi=6, n_points=1201)
    np.testing.assert_array_equal(data["difference"], data["tanh"] - data["exact"])
    assert np.abs(data["difference"]).max() < 5e-4                    # the docstring's bound
    assert np.abs(data["dydx_difference"]).max() < 1e-3
    assert data["difference"][600] == 0.0                              # x = 0: both are 0


# -------------------------------------------------------------------- mask figures
def test_causal_table_is_the_lower_triangle_over_the_sentence():
    _, data = causal_table("I am a student".split())
    assert data["tokens"] == ["I", "am", "a", "student"]
    np.testing.assert_array_equal(data["mask"], np.tril(np.ones((4, 4), dtype=bool)))


def test_key_padding_figure_hides_exactly_the_padding():
    sentences = ("I am a student", "you are", "we are here")
    _, data = key_padding_figure(sentences, shown=1)
    lengths = [len(s.split()) for s in sentences]
    expected = np.array([[j < n for j in range(4)] for n in lengths])
    np.testing.assert_array_equal(data["padding_mask"], expected)
    assert data["tokens"][1] == ["you", "are", "PAD", "PAD"]
    np.testing.assert_array_equal(data["combined"], np.tril(np.ones((4, 4), dtype=bool)) & expected[1])


@given(T=st.integers(1, 12), window=st.integers(1, 5), dilation=st.integers(1, 4))
def test_dilated_window_keeps_every_r_th_key_of_the_window(T, window, dilation):
    mask = dilated_window_mask(T, window, dilation)
    expected = [[any(i - j == k * dilation for k in range(window)) for j in range(T)] for i in range(T)]
    np.testing.assert_array_equal(mask, expected)


@given(T=st.integers(1, 12), window=st.integers(1, 4), data=st.data())
def test_global_tokens_see_and_are_seen_by_the_whole_causal_past(T, window, data):
    g = data.draw(st.lists(st.integers(0, T - 1), max_size=2))
    mask = global_window_mask(T, window, g)
    expected = [[j <= i and (i - j < window or i in g or j in g) for j in range(T)] for i in range(T)]
    np.testing.assert_array_equal(mask, expected)


def test_attention_patterns_and_their_costs():
    _, data = attention_patterns(T=10, window=3, dilation=2, global_positions=(0,))
    assert data["full"].sum() == 10 * 11 // 2                          # T(T+1)/2 causal pairs
    assert data["sliding"].sum() == 3 * 10 - 3                         # rows 0, 1 have fewer keys
    np.testing.assert_array_equal(data["dilated"], dilated_window_mask(10, 3, 2))
    assert data["global"][:, 0].all()                                  # every query sees the global key


# ------------------------------------------------------------------ attention maps
def test_attention_grid_collects_causal_distributions_and_leaves_the_model_clean(tmp_path):
    model = GPT(TINY, rng=0)
    model.train()
    ids = np.array([1, 5, 2, 7, 7, 0])
    _, data = attention_grid(model, ids, list("abcdef"), path=tmp_path / "grid.png")
    P = data["probs"]
    assert P.shape == (2, 2, 6, 6)
    np.testing.assert_allclose(P.sum(-1), 1.0, rtol=1e-6)             # float32 rows sum to 1
    assert (P[..., np.triu_indices(6, 1)[0], np.triu_indices(6, 1)[1]] == 0).all()   # no future key
    assert model.training                                              # flag restored
    with pytest.raises(RuntimeError, match="without a pending"):
        model.backward(np.zeros((1, 6, 13), np.float32))               # no cache left behind
    assert_png(tmp_path / "grid.png")


def test_collect_attention_uses_eval_mode_and_is_repeatable():
    model = GPT(GPTConfig(**{**TINY.to_dict(), "p_drop": 0.5}), rng=0)
    ids = np.array([[3, 1, 4, 1, 5]])
    np.testing.assert_array_equal(collect_attention(model, ids), collect_attention(model, ids))


def test_attention_map_checks_its_labels():
    probs = np.full((3, 3), 1 / 3)
    _, data = attention_map(probs, ["a", "b", "c"])
    np.testing.assert_array_equal(data["probs"], probs)
    with pytest.raises(ValueError, match="tokens: expected 3 labels"):
        attention_map(probs, ["a", "b"])
    with pytest.raises(TypeError, match="model: expected a GPT"):
        collect_attention(object(), np.array([1, 2]))


# -------------------------------------------------------------- gradient figures
def test_block_gradient_norm_is_the_slope_along_the_gradient():
    # ‖g‖² = dL/dθ · g: a central difference of the loss along g itself (float64)
    model = GPT(TINY, rng=1, dtype=np.float64)
    rng = np.random.default_rng(0)
    ids, targets = rng.integers(0, 13, (2, 8)), rng.integers(0, 13, (2, 8))
    norms = block_gradient_norms(model, ids, targets)
    for l, block in enumerate(model.blocks):
        loss, cache = cross_entropy_forward(model.forward(ids), targets)
        model.backward(cross_entropy_backward(1.0, cache))
        grads = {name: g.copy() for name, _, g in block.parameters()}
        model.zero_grad()
        params = {name: p for name, p, _ in block.parameters()}

        def loss_at(h):
            for name, p in params.items():
                p += h * grads[name]
            value = float(cross_entropy_forward(model.forward(ids), targets)[0])
            for name, p in params.items():
                p -= h * grads[name]
            return value
        h = 1e-6 / max(norms[l], 1e-12)                                 # a step of length 1e-6
        slope = (loss_at(h) - loss_at(-h)) / (2 * h)
        assert slope == pytest.approx(norms[l] ** 2, rel=1e-6)         # O(h²) truncation, float64


def test_prenorm_vs_postnorm_shows_the_documented_trends(tmp_path):
    _, data = prenorm_vs_postnorm(path=tmp_path / "norms.png")
    pre, post = data["pre"], data["post"]
    assert pre.shape == post.shape == (2, 12) and np.all(np.isfinite(pre)) and np.all(pre > 0)
    assert post[1, -1] > 1.5 * post[1, 0]      # std 0.25: post-norm grows towards the output
    assert pre[1, 0] > 1.5 * pre[1, -1]        # ... and pre-norm shrinks towards it
    assert post[0, 0] > 5 * post[0, 1:].max()  # std 0.02: post-norm's first block stands out
    assert_png(tmp_path / "norms.png")


def test_gradcheck_errors_report_every_tensor_and_flag_a_wrong_backward():
    x, W, b = normal_array(0, (3, 4)), normal_array(1, (4, 2)), normal_array(2, (2,))
    good = check_pair(linear_forward, linear_backward, {"x": x, "W": W, "b": b})

    def wrong_backward(dy, cache):
        dx, dW, db = linear_backward(dy, cache)
        return dx, 2 * dW, db                                          # a factor-2 bug in dW
    bad = check_pair(linear_forward, wrong_backward, {"x": x, "W": W, "b": b})
    _, data = gradcheck_errors([("linear", good), ("buggy linear", bad)])
    assert data["labels"] == ["linear: x", "linear: W", "linear: b",
                              "buggy linear: x", "buggy linear: W", "buggy linear: b"]
    np.testing.assert_array_equal(data["rel_error"], [r.rel_error for r in good.rows + bad.rows])
    np.testing.assert_array_equal(data["ok"], [True, True, True, True, False, True])
    assert data["rel_error"][4] == pytest.approx(0.5, rel=1e-6)        # |2g - g| / |2g|


# ------------------------------------------------------------- grouped-query attention
def test_gqa_figure_shares_kv_heads_by_blocks_and_measures_the_cache(tmp_path):
    _, data = gqa_figure(n_head=8, variants=(("MHA", 8), ("GQA", 2), ("MQA", 1)), head_dim=16,
                         path=tmp_path / "gqa.png")
    np.testing.assert_array_equal(data["kv_of_query"], [[0, 1, 2, 3, 4, 5, 6, 7],
                                                        [0, 0, 0, 0, 1, 1, 1, 1],
                                                        [0, 0, 0, 0, 0, 0, 0, 0]])
    # 2 (K and V) · G heads · D numbers · 4 bytes (float32) per token per layer
    np.testing.assert_array_equal(data["cache_bytes"], [2 * 8 * 16 * 4, 2 * 2 * 16 * 4, 2 * 1 * 16 * 4])
    assert data["names"] == ["MHA", "GQA", "MQA"]
    assert_png(tmp_path / "gqa.png")


@given(G=st.sampled_from([1, 2, 3, 6]))
@settings(max_examples=4, deadline=None)
def test_kv_head_of_query_is_h_over_group_size(G):
    assert kv_head_of_query(6, G).tolist() == [h // (6 // G) for h in range(6)]


def test_gqa_figure_rejects_a_kv_head_count_that_does_not_divide_the_heads():
    with pytest.raises(ValueError, match="variants: expected .* G dividing n_head=8"):
        gqa_figure(n_head=8, variants=(("GQA", 3),))
    with pytest.raises(ValueError, match="n_kv_head: expected a divisor of n_head=4, got 3"):
        kv_head_of_query(4, 3)


# ----------------------------------------------------------------- files and command
def test_a_figure_is_deterministic_byte_for_byte(tmp_path):
    rope_figure(seed=1, path=tmp_path / "a.png")
    rope_figure(seed=1, path=tmp_path / "b.png")
    assert (tmp_path / "a.png").read_bytes() == (tmp_path / "b.png").read_bytes()


def _args(tmp_path, *argv):
    """The parsed command line ``figures --out tmp_path ARGV...``."""
    parser = argparse.ArgumentParser()
    cli_figures.add_figures_arguments(parser)
    return parser.parse_args(["--out", str(tmp_path), *argv])


def test_figures_command_writes_and_lists_the_files(tmp_path, capsys):
    # --steps 1: the tiny GPT's training runs end to end, as fast as it can
    assert main(["figures", "--out", str(tmp_path), "--only", "causal", "smoothing", "loss", "--steps", "1"]) == 0
    out = capsys.readouterr().out
    for name in ("causal_mask.png", "label_smoothing.png", "loss_curve.png"):
        assert_png(tmp_path / name)
        assert str(tmp_path / name) in out
    assert "3 figures written" in out


def test_figures_command_reads_a_checkpoint(tmp_path, capsys):
    from minitransformer.training.checkpoint import save_checkpoint
    from minitransformer.tokenizers import CharTokenizer
    tokenizer = CharTokenizer.from_text("The list.")
    config = GPTConfig(**{**TINY.to_dict(), "vocab_size": tokenizer.vocab_size})
    save_checkpoint(tmp_path / "ckpt.npz", GPT(config, rng=0),
                    meta={"family": "gpt", "config": config.to_dict(), "tokenizer": tokenizer.to_dict(),
                          "history": [[1, 2.5], [2, 2.4]], "evals": [[2, 2.4, 2.6]]})
    args = _args(tmp_path, "--only", "loss", "attention-head", "attention-grid",
                 "--checkpoint", str(tmp_path / "ckpt.npz"), "--text", "The list.")
    assert cli_figures.run_figures(args) == 0
    assert "training" not in capsys.readouterr().out                   # nothing was trained
    for name in ("loss_curve.png", "attention_head.png", "attention_grid.png"):
        assert_png(tmp_path / name)
    bad_text = _args(tmp_path, "--only", "attention-grid", "--checkpoint", str(tmp_path / "ckpt.npz"),
                     "--text", "xyz")                                  # 'x' is not in the vocabulary
    assert cli_figures.run_figures(bad_text) == 2
    assert "--text:" in capsys.readouterr().err


def test_figures_command_reports_a_bad_checkpoint(tmp_path, capsys):
    code = cli_figures.run_figures(_args(tmp_path, "--only", "attention-grid",
                                         "--checkpoint", str(tmp_path / "missing.npz")))
    assert code == 2
    assert "error:" in capsys.readouterr().err
    assert not list(tmp_path.glob("*.png"))


def test_figures_command_skips_a_figure_that_cannot_be_imported_and_says_so(tmp_path, capsys, monkeypatch):
    def missing(path, source, args):
        raise ImportError("No module named 'minitransformer.plots.nothing'", name="minitransformer.plots.nothing")
    causal = next(figure for figure in cli_figures.FIGURES if figure[0] == "causal")
    monkeypatch.setattr(cli_figures, "FIGURES", (("nothing", "nothing.png", missing), causal))
    assert cli_figures.run_figures(_args(tmp_path)) == 1
    out = capsys.readouterr().out
    assert "skipped" in out and "minitransformer.plots.nothing" in out
    assert_png(tmp_path / "causal_mask.png")


def test_figures_command_rejects_a_bad_step_count(tmp_path, capsys):
    from minitransformer.cli import main
    with pytest.raises(SystemExit) as exit_:                 # the parser refuses it, in one line
        main(["figures", "--out", str(tmp_path), "--steps", "0"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and len(err.strip().splitlines()) == 1
    assert err.startswith("error: --steps: expected a positive integer, got 0")


def test_figures_command_defaults_to_a_folder_in_the_current_directory(tmp_path, capsys, monkeypatch):
    tracked = (ROOT / "figures" / "causal_mask.png").read_bytes()
    monkeypatch.chdir(tmp_path)
    assert main(["figures", "--only", "causal"]) == 0
    assert_png(tmp_path / "minitransformer_figures" / "causal_mask.png")
    assert "1 figures written to minitransformer_figures" in capsys.readouterr().out
    assert (ROOT / "figures" / "causal_mask.png").read_bytes() == tracked      # the repository's untouched


def test_update_repo_figures_writes_the_repository_gallery_only_when_asked(tmp_path, capsys, monkeypatch):
    repo = tmp_path / "repo"
    (repo / "figures").mkdir(parents=True)
    monkeypatch.setattr(cli_figures, "REPO_FIGURES", repo / "figures")
    monkeypatch.chdir(tmp_path)
    code = cli_figures.run_figures(_args_without_out("--update-repo-figures", "--only", "causal"))
    assert code == 2 and "expected a source checkout" in capsys.readouterr().err
    (repo / "pyproject.toml").write_text("")                                 # now it is a checkout
    assert cli_figures.run_figures(_args_without_out("--update-repo-figures", "--only", "causal")) == 0
    assert_png(repo / "figures" / "causal_mask.png")
    assert not (tmp_path / "minitransformer_figures").exists()
    code = cli_figures.run_figures(_args(tmp_path / "x", "--update-repo-figures", "--only", "causal"))
    assert code == 2 and "expected no --out with it" in capsys.readouterr().err


def _args_without_out(*argv):
    parser = argparse.ArgumentParser()
    cli_figures.add_figures_arguments(parser)
    return parser.parse_args(list(argv))


# ------------------------------------------------------------------------- the gallery
def _gallery():
    """The figures/*.png the README's gallery section shows."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Figure gallery", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"\(figures/([\w.-]+\.png)\)", section)


def test_the_gallery_lists_every_figure_in_figures_and_nothing_else():
    listed = _gallery()
    on_disk = sorted(p.name for p in (ROOT / "figures").glob("*.png"))
    assert len(listed) == len(set(listed)), "a figure is listed twice"
    assert sorted(listed) == on_disk, (f"not in the gallery: {sorted(set(on_disk) - set(listed))}; "
                                       f"listed but missing: {sorted(set(listed) - set(on_disk))}")


def test_figures_holds_every_figure_the_command_draws():
    on_disk = {p.name for p in (ROOT / "figures").glob("*.png")}
    drawn = {filename for _, filename, _ in cli_figures.FIGURES}
    drawn |= {"minilm_attention_maps.png", "minilm_attention_sink.png"}       # plots/pretrained.py
    assert drawn <= on_disk, f"run `figures --update-repo-figures`: missing {sorted(drawn - on_disk)}"
