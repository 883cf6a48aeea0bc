"""The residual-stream figure: its data are the model's own numbers (the last stream is the one the
model's final norm reads, the lens at the last layer is the model's loss, a contribution is the
sublayer's output), the model is left as it was, and the figures command draws it.

Expected values come from the model's forward pass and NumPy written out here (a log-softmax by
hand), never from plots/residual.py. Tolerance 1e-12: the same float64 operations in another order."""
import argparse

import numpy as np
import pytest

from minitransformer.cli import figures as cli_figures
from minitransformer.models import GPT, GPTConfig
from minitransformer.plots.residual import residual_stream, residual_stream_figure
from strategies import integer_ids

CONFIG = GPTConfig(vocab_size=13, block_size=8, n_layer=3, n_head=2, d_model=8)


def nll_by_hand(logits, targets):
    """Mean of −log softmax(logits)[target] over every position."""
    z = logits - logits.max(axis=-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    return -np.take_along_axis(logp, targets[..., None], axis=-1).mean()


def test_the_last_stream_and_the_last_lens_are_the_models_own(tmp_path, monkeypatch):
    model = GPT(CONFIG, rng=0).astype(np.float64).eval()                  # random weights
    ids, targets = integer_ids(1, (4, 8), 13), integer_ids(2, (4, 8), 13)
    read_by_norm_f = []
    forward = model.norm_f.forward
    monkeypatch.setattr(model.norm_f, "forward", lambda x: read_by_norm_f.append(x.copy()) or forward(x))
    logits = model.forward(ids)
    monkeypatch.undo()
    fig, data = residual_stream_figure(model, ids, targets, title="random weights", path=tmp_path / "r.png")
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"
    assert data["streams"].shape == (4, 4, 8, 8)                          # (L + 1, B, T, C)
    np.testing.assert_allclose(data["streams"][-1], read_by_norm_f[0], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(data["lens_loss"][-1], nll_by_hand(logits, targets), rtol=1e-12)
    norms = np.sqrt((data["streams"] ** 2).sum(axis=-1)).mean(axis=(1, 2))
    np.testing.assert_allclose(data["stream_norm"], norms, rtol=1e-12)
    assert data["lens_loss"].shape == (4,) and np.isfinite(data["lens_loss"]).all()


def test_a_contribution_is_the_sublayers_output_and_the_model_is_left_clean():
    model = GPT(CONFIG, rng=1).astype(np.float64)                         # left in training mode
    model.blocks[0].attn.dropout.p_drop = 0.5                             # eval mode must switch it off
    ids, targets = integer_ids(3, (2, 8), 13), integer_ids(4, (2, 8), 13)
    data = residual_stream(model, ids, targets)
    assert model.training and all(m._cache is None for _, m in model.named_modules())
    x0 = data["streams"][0]
    block = model.blocks[0]
    attention = block.attn.sublayer.forward(block.attn.norm.forward(x0))  # pre-norm: a_1 = Attn(Norm(x_0))
    np.testing.assert_allclose(data["attention_norm"][0], np.sqrt((attention ** 2).sum(-1)).mean(), rtol=1e-12)
    step = data["streams"][1] - x0                                        # x_1 − x_0 = a_1 + m_1
    assert np.sqrt((step ** 2).sum(-1)).mean() <= data["attention_norm"][0] + data["mlp_norm"][0] + 1e-12
    model.release_caches()


def test_residual_stream_refuses_what_is_not_a_gpt_batch():
    with pytest.raises(TypeError, match="model: expected a GPT"):
        residual_stream(object(), np.zeros((1, 2), np.int64), np.zeros((1, 2), np.int64))
    model = GPT(CONFIG, rng=0)
    with pytest.raises(ValueError, match=r"ids: expected 2 dimensions \(B, T\)"):
        residual_stream(model, np.zeros(4, np.int64), np.zeros(4, np.int64))
    with pytest.raises(ValueError, match="targets"):
        residual_stream(model, np.zeros((1, 4), np.int64), np.zeros((1, 3), np.int64))


def test_figures_command_draws_the_residual_stream(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    cli_figures.add_figures_arguments(parser)
    args = parser.parse_args(["--out", str(tmp_path), "--only", "residual", "--steps", "1"])
    assert cli_figures.run_figures(args) == 0
    assert (tmp_path / "residual_stream.png").read_bytes()[:4] == b"\x89PNG"
    assert "1 figures written" in capsys.readouterr().out
