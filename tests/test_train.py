"""The training loop: resume is bit for bit, NaN stops cleanly, checkpoints are atomic and checked."""
import os

import numpy as np
import pytest

from minitransformer.training.checkpoint import load_checkpoint, save_checkpoint
from minitransformer.models import GPT, GPTConfig, Seq2Seq, Seq2SeqConfig
from minitransformer.training.tasks import LanguageModelTask, SequenceTaskData
from minitransformer.training.loop import TrainConfig, TrainingDiverged, train

CFG = GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=16, dropout=0.1)


def _task():
    ids = np.random.default_rng(0).integers(0, 11, 400)
    return LanguageModelTask(ids[:300], ids[300:], block_size=8, batch_size=4)


def _cfg(**kw):
    return TrainConfig(**{**dict(steps=12, warmup_steps=3, eval_interval=5, eval_batches=2,
                                 final_eval_batches=2, log_interval=100), **kw})


def test_resume_after_interrupt_gives_the_same_losses(tmp_path):
    ckpt = str(tmp_path / "run.npz")
    whole = train(GPT(CFG, rng=1), _task(), _cfg(), log=lambda s: None)
    train(GPT(CFG, rng=1), _task(), _cfg(), checkpoint_path=ckpt, stop_after=5, log=lambda s: None)
    resumed = train(GPT(CFG, rng=99), _task(), _cfg(), checkpoint_path=ckpt, resume=True, log=lambda s: None)
    assert [l for _, l in resumed.history] == [l for _, l in whole.history]   # exact, not approximate
    assert resumed.final_val_loss == whole.final_val_loss


def test_seq2seq_resume_is_exact_too(tmp_path):
    cfg = Seq2SeqConfig(vocab_size=8, block_size=8, n_layer=1, n_head=2, n_embd=16, dropout=0.1)
    task = SequenceTaskData("reverse", 8, (2, 5), batch_size=4, n_val=8)
    ckpt = str(tmp_path / "s2s.npz")
    whole = train(Seq2Seq(cfg, rng=1), task, _cfg(), log=lambda s: None)
    train(Seq2Seq(cfg, rng=1), task, _cfg(), checkpoint_path=ckpt, stop_after=7, log=lambda s: None)
    resumed = train(Seq2Seq(cfg, rng=2), task, _cfg(), checkpoint_path=ckpt, resume=True, log=lambda s: None)
    assert [l for _, l in resumed.history] == [l for _, l in whole.history]


def test_a_non_finite_loss_stops_before_touching_the_weights():
    model = GPT(CFG, rng=1)
    model.embed.tok.W[3, 0] = np.nan                   # every batch reads token 3 somewhere
    before = {k: v.copy() for k, v in model.state_dict().items()}
    with pytest.raises(TrainingDiverged, match="the loss is nan"):
        train(model, _task(), _cfg(), log=lambda s: None)
    after = model.state_dict()
    assert all(np.array_equal(before[k], after[k], equal_nan=True) for k in before)


def test_loss_goes_down_on_a_learnable_stream():
    ids = np.tile(np.arange(11), 40)                  # a deterministic cycle: perfectly predictable
    task = LanguageModelTask(ids[:350], ids[350:], block_size=8, batch_size=8)
    result = train(GPT(GPTConfig(**{**CFG.to_dict(), "dropout": 0.0}), rng=0), task,
                   _cfg(steps=200, lr=1e-2, min_lr=1e-3, warmup_steps=10), log=lambda s: None)
    assert result.final_val_loss < 0.2 < np.log(11)


def test_checkpoint_round_trip_and_failed_save_keeps_the_old_file(tmp_path, monkeypatch):
    path = str(tmp_path / "c.npz")
    model = GPT(CFG, rng=1)
    save_checkpoint(path, model, meta={"family": "gpt", "config": CFG.to_dict()})
    params, _, meta = load_checkpoint(path)
    assert meta["config"] == CFG.to_dict()
    other = GPT(CFG, rng=2)
    other.load_state_dict(params)
    assert all(np.array_equal(a, b) for a, b in zip(other.state_dict().values(), model.state_dict().values()))
    old = open(path, "rb").read()
    monkeypatch.setattr(os, "replace", lambda *a: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(path, GPT(CFG, rng=3))
    assert open(path, "rb").read() == old
    assert [f for f in os.listdir(tmp_path) if f.endswith(".tmp")] == []


def test_corrupt_checkpoint_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip file")
    with pytest.raises(ValueError, match="not a readable .npz checkpoint"):
        load_checkpoint(str(bad))
    with pytest.raises(FileNotFoundError, match="no file at"):
        load_checkpoint(str(tmp_path / "missing.npz"))


def test_load_state_dict_names_a_mis_shaped_parameter():
    state = GPT(CFG, rng=1).state_dict()
    state["embed.tok.W"] = state["embed.tok.W"][:5]
    with pytest.raises(ValueError, match=r"state\['embed.tok.W'\]: expected shape \(11, 16\)"):
        GPT(CFG, rng=1).load_state_dict(state)


def test_train_command_errors_go_to_stderr_with_exit_2(tmp_path, capsys):
    from minitransformer.cli import main
    code = main(["train", "--resume", "--out", str(tmp_path / "nothing-here")])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert err.startswith("error: --resume: no checkpoint at ")


def test_the_final_evaluation_is_scaled_to_the_run():
    from minitransformer.training.loop import final_eval_batch_count
    default = TrainConfig()
    assert final_eval_batch_count(default) == 80                        # 2000 steps: 2000 // 25
    assert final_eval_batch_count(TrainConfig(steps=1)) == default.eval_batches        # a short run: few
    assert final_eval_batch_count(TrainConfig(steps=500, eval_batches=5)) == 20
    assert final_eval_batch_count(TrainConfig(steps=10**6)) == 200                     # capped
    assert final_eval_batch_count(TrainConfig(steps=1, final_eval_batches=7)) == 7     # named: as given
    with pytest.raises(ValueError, match="final_eval_batches"):
        TrainConfig(final_eval_batches=0)


def test_the_final_evaluation_logs_its_progress_and_count():
    lines = []
    result = train(GPT(CFG, rng=1), _task(), _cfg(steps=3, final_eval_batches=None), log=lines.append)
    assert result.final_eval_batches == 2                                # eval_batches of _cfg: 3 // 25 < 2
    assert any(line.startswith("final evaluation: 2 batches") for line in lines)
    assert any(line.startswith("final evaluation, val: loss") for line in lines)
    assert result.evals[-1] == (3, result.final_train_loss, result.final_val_loss)
    assert result.eval_seconds > 0


def test_train_command_with_one_step_completes(tmp_path, capsys):
    import json

    from minitransformer.cli import main
    assert main(["train", "--steps", "1", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "final evaluation: 20 batches of train, 20 of val" in out
    with open(tmp_path / "result.json") as f:
        result = json.load(f)
    assert result["final_eval_batches"] == 20 and np.isfinite(result["val_loss"])
