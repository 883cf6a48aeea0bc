"""The training loop: resume is bit for bit, NaN stops cleanly, checkpoints are atomic and checked."""
import os
import threading

import numpy as np
import pytest

from minitransformer.training.checkpoint import load_checkpoint, save_checkpoint
from minitransformer.models import GPT, GPTConfig, Seq2Seq, Seq2SeqConfig
from minitransformer.training.tasks import LanguageModelTask, SequenceTaskData
from minitransformer.training.loop import TrainConfig, TrainingDiverged, train

CFG = GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, d_model=16, p_drop=0.1)


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


def test_recompute_trains_the_same_losses_and_may_change_on_resume(tmp_path):
    """TrainConfig(recompute=True): the same losses, bit for bit (dropout on); a run resumed with
    recompute switched on continues exactly, since recomputation is not part of the trajectory."""
    ckpt = str(tmp_path / "run.npz")
    whole = train(GPT(CFG, rng=1), _task(), _cfg(), log=lambda s: None)
    recomputed = train(GPT(CFG, rng=1), _task(), _cfg(recompute=True), log=lambda s: None)
    assert [l for _, l in recomputed.history] == [l for _, l in whole.history]
    train(GPT(CFG, rng=1), _task(), _cfg(), checkpoint_path=ckpt, stop_after=5, log=lambda s: None)
    resumed = train(GPT(CFG, rng=99), _task(), _cfg(recompute=True), checkpoint_path=ckpt, resume=True,
                    log=lambda s: None)
    assert [l for _, l in resumed.history] == [l for _, l in whole.history]
    with pytest.raises(TypeError, match="recompute: expected True or False"):
        TrainConfig(recompute="yes")


def test_seq2seq_resume_is_exact_too(tmp_path):
    cfg = Seq2SeqConfig(vocab_size=8, block_size=8, n_layer=1, n_head=2, d_model=16, p_drop=0.1)
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
    result = train(GPT(GPTConfig(**{**CFG.to_dict(), "p_drop": 0.0}), rng=0), task,
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


def test_a_command_imports_only_its_own_module():
    """`train` does not import the other commands (figures loads matplotlib's figure machinery);
    the help without a command still lists every command."""
    import subprocess
    import sys
    code = ("import sys; from minitransformer.cli import _parser; _parser('train'); "
            "print(sorted(m for m in sys.modules if m.startswith('minitransformer.cli.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['minitransformer.cli.train']"
    listing = subprocess.run([sys.executable, "-m", "minitransformer"], capture_output=True, text=True,
                             check=True).stdout
    for name in ("train", "generate", "figures", "gradcheck", "embed", "homework"):
        assert f"    {name}" in listing


# ---------------------------------------------------------------- fault injection: nothing lost
def _weights(path):
    return load_checkpoint(path)[0]


def _inf_gradient_at(monkeypatch, model, k):
    """From step k on, the backward leaves an inf in one gradient while the loss stays finite."""
    calls, backward = [0], model.backward

    def patched(d):
        out = backward(d)
        calls[0] += 1
        if calls[0] >= k:
            next(g for _, _, g in model.parameters())[0] = np.inf
        return out
    monkeypatch.setattr(model, "backward", patched)


def test_an_inf_gradient_stops_before_the_update_and_the_checkpoint_keeps_the_last_good_step(tmp_path, monkeypatch):
    ckpt = str(tmp_path / "run.npz")
    model = GPT(CFG, rng=1)
    _inf_gradient_at(monkeypatch, model, 4)
    with pytest.raises(TrainingDiverged) as e:
        train(model, _task(), _cfg(checkpoint_interval=1), checkpoint_path=ckpt, log=lambda s: None)
    msg = str(e.value)
    assert "the gradient norm is inf at step 4" in msg and "the weights are those of the step before" in msg
    params, _, meta = load_checkpoint(ckpt)
    assert meta["step"] == 3
    assert all(np.array_equal(params[k], v) for k, v in model.state_dict().items())   # memory == step 3
    assert all(np.isfinite(v).all() for v in params.values())


def test_a_non_finite_update_is_reported_truthfully_and_never_saved(tmp_path, monkeypatch):
    ckpt = str(tmp_path / "run.npz")
    model = GPT(CFG, rng=1)
    from minitransformer.optim import AdamW
    step = AdamW.step

    def exploding(self, lr=None, **kwargs):
        step(self, lr, **kwargs)
        if self.t == 3:
            self.params[0][1][...] = np.inf                # as an absurd lr would
    monkeypatch.setattr(AdamW, "step", exploding)
    with pytest.raises(TrainingDiverged, match=r"the update at step 3 .* made the weights non-finite.*NOT those"):
        train(model, _task(), _cfg(checkpoint_interval=1), checkpoint_path=ckpt, log=lambda s: None)
    params, optim, meta = load_checkpoint(ckpt)
    assert meta["step"] == 2 and all(np.isfinite(v).all() for v in params.values())


def test_save_checkpoint_refuses_non_finite_weights_or_optimizer_state(tmp_path):
    from minitransformer.optim import AdamW
    path = str(tmp_path / "c.npz")
    save_checkpoint(path, GPT(CFG, rng=1))
    old = open(path, "rb").read()
    bad = GPT(CFG, rng=2)
    bad.embed.tok.W[0, 0] = np.nan
    with pytest.raises(ValueError, match=r"parameter 'embed.tok.W' holds non-finite values .* refusing to write"):
        save_checkpoint(path, bad)
    good = GPT(CFG, rng=2)
    opt = AdamW(good.parameters(), 1e-3)
    next(iter(opt.state["m"].values()))[0] = np.inf
    with pytest.raises(ValueError, match=r"optimizer state 'm/.*' holds non-finite values"):
        save_checkpoint(path, good, optimizer_state=opt.state_dict())
    assert open(path, "rb").read() == old


def _interrupt_at(monkeypatch, task, k):
    """KeyboardInterrupt raised inside the forward of step k (the k-th training batch)."""
    calls, forward = [0], task.forward

    def patched(model, batch, device="cpu"):
        if model.training:
            calls[0] += 1
            if calls[0] == k:
                raise KeyboardInterrupt
        return forward(model, batch, device)
    monkeypatch.setattr(task, "forward", patched)


def test_ctrl_c_inside_a_step_saves_the_last_step_and_resume_is_still_exact(tmp_path, monkeypatch):
    from minitransformer.training.loop import TrainingInterrupted
    ckpt = str(tmp_path / "run.npz")
    whole = train(GPT(CFG, rng=1), _task(), _cfg(), log=lambda s: None)
    task = _task()
    _interrupt_at(monkeypatch, task, 7)
    with pytest.raises(TrainingInterrupted) as e:
        train(GPT(CFG, rng=1), task, _cfg(), checkpoint_path=ckpt, log=lambda s: None)
    assert e.value.step == 6 and e.value.saved and load_checkpoint(ckpt)[2]["step"] == 6
    resumed = train(GPT(CFG, rng=99), _task(), _cfg(), checkpoint_path=ckpt, resume=True, log=lambda s: None)
    assert [l for _, l in resumed.history] == [l for _, l in whole.history]   # step 7 replayed bit for bit


def test_resume_with_a_changed_config_names_the_difference(tmp_path):
    from minitransformer.training.loop import ResumeMismatch
    ckpt = str(tmp_path / "run.npz")
    meta = {"family": "gpt", "config": CFG.to_dict()}
    train(GPT(CFG, rng=1), _task(), _cfg(), checkpoint_path=ckpt, stop_after=5, meta=meta, log=lambda s: None)
    with pytest.raises(ResumeMismatch, match=r"lr: 0\.001 \(checkpoint\) vs 0\.01 \(now\).*--allow-config-change"):
        train(GPT(CFG, rng=1), _task(), _cfg(lr=1e-2), checkpoint_path=ckpt, resume=True, meta=meta,
              log=lambda s: None)
    with pytest.raises(ResumeMismatch, match=r"steps: 12 \(checkpoint\) vs 20 \(now\).*schedule"):
        train(GPT(CFG, rng=1), _task(), _cfg(steps=20), checkpoint_path=ckpt, resume=True, meta=meta,
              log=lambda s: None)
    width = "d_model"
    wide = GPTConfig(**{**CFG.to_dict(), width: 32})
    with pytest.raises(ResumeMismatch, match=rf"model differs.*{width}: 16 \(checkpoint\) vs 32 \(now\).*cannot change"):
        train(GPT(wide, rng=1), _task(), _cfg(), checkpoint_path=ckpt, resume=True, allow_config_change=True,
              meta={"family": "gpt", "config": wide.to_dict()}, log=lambda s: None)
    with pytest.raises(ResumeMismatch, match=r"model differs.*: \(16,\) \(checkpoint\) vs \(32,\) \(now\)"):
        train(GPT(wide, rng=1), _task(), _cfg(), checkpoint_path=ckpt, resume=True, log=lambda s: None)
    result = train(GPT(CFG, rng=1), _task(), _cfg(steps=20, eval_interval=7), checkpoint_path=ckpt, resume=True,
                   meta=meta, allow_config_change=True, log=lambda s: None)
    assert result.history[-1][0] == 20


# ---------------------------------------------------------------- the train command
TINY = ["--steps", "6", "--block-size", "8", "--batch-size", "2", "--n-layer", "1", "--n-head", "2",
        "--d-model", "16", "--eval-interval", "100"]


def _text_file(tmp_path, text="abcab cabba bcaac " * 40):
    path = tmp_path / "data.txt"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("argv, expected", [
    (["--steps", "0"], "error: --steps: expected a positive integer, got 0"),
    (["--batch-size", "-1"], "error: --batch-size: expected a positive integer, got -1"),
    (["--n-layer", "0"], "error: --n-layer: expected a positive integer, got 0"),
    (["--steps", "x"], "error: --steps: expected an integer, got 'x'"),
    (["--lr", "inf"], "error: --lr: expected a number in (0, inf), got inf"),
])
def test_train_command_refuses_bad_numbers_in_one_line(argv, expected, capsys):
    from minitransformer.cli import main
    with pytest.raises(SystemExit) as e:
        main(["train", *argv])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith(expected) and err.count("\n") == 1


def test_train_command_ctrl_c_saves_and_prints_the_resume_command(tmp_path, monkeypatch, capsys):
    import shlex
    from minitransformer.cli import main
    out, data = str(tmp_path / "run"), _text_file(tmp_path)
    calls, forward = [0], LanguageModelTask.forward

    def interrupted(self, model, batch, device="cpu"):
        # Ctrl-C reaches the main thread: the 4th training forward there (with data
        # parallelism, the other replicas run their parts on worker threads meanwhile)
        if model.training and threading.current_thread() is threading.main_thread():
            calls[0] += 1
            if calls[0] == 4:
                raise KeyboardInterrupt
        return forward(self, model, batch, device)
    monkeypatch.setattr(LanguageModelTask, "forward", interrupted)
    assert main(["train", "--data", data, *TINY, "--out", out]) == 130
    err = capsys.readouterr().err
    assert "interrupted: step 3 of 6 saved to" in err
    command = err.strip().splitlines()[-1].strip()
    assert command.startswith("python -m minitransformer train ") and command.endswith(f"--out {out} --resume")
    assert load_checkpoint(os.path.join(out, "checkpoint.npz"))[2]["step"] == 3
    monkeypatch.setattr(LanguageModelTask, "forward", forward)
    assert main(shlex.split(command)[3:]) == 0                       # the printed command continues the run
    assert os.path.isfile(os.path.join(out, "result.json"))
    assert "resumed from" in capsys.readouterr().out


def test_train_command_resume_with_another_lr_needs_the_flag(tmp_path, capsys):
    from minitransformer.cli import main
    out, data = str(tmp_path / "run"), _text_file(tmp_path)
    assert main(["train", "--data", data, *TINY, "--out", out, "--checkpoint-every", "2"]) == 0
    capsys.readouterr()
    assert main(["train", "--data", data, *TINY, "--out", out, "--resume", "--lr", "0.01"]) == 2
    err = capsys.readouterr().err
    assert "lr: 0.001 (checkpoint) vs 0.01 (now)" in err and "--allow-config-change" in err
    assert err.count("\n") == 1
    (tmp_path / "other").mkdir()
    other = _text_file(tmp_path / "other", "xyzxy zyxxy yzxxz " * 40)     # same vocabulary size, other text
    assert main(["train", "--data", other, *TINY, "--out", out, "--resume", "--allow-config-change"]) == 2
    assert "tokenizer: another vocabulary" in capsys.readouterr().err
    assert main(["train", "--data", data, *TINY, "--out", out, "--resume", "--lr", "0.01",
                 "--allow-config-change"]) == 0


def test_train_command_checks_data_and_out_before_training(tmp_path, capsys):
    from minitransformer.cli import main
    out = str(tmp_path / "run")
    # No 'T' in the data: the sample starts from the data's own first characters; result.json is written.
    assert main(["train", "--data", _text_file(tmp_path), *TINY, "--out", out]) == 0
    assert os.path.isfile(os.path.join(out, "result.json"))
    capsys.readouterr()
    assert main(["train", "--data", _text_file(tmp_path, "abc" * 5), *TINY, "--out", out, "--overwrite"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --data: the val split is too short for --block-size")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert main(["train", "--data", _text_file(tmp_path), *TINY, "--out", str(blocker / "sub")]) == 2
    assert capsys.readouterr().err.startswith("error: --out: cannot write in")


@pytest.fixture
def sigint_raises_keyboard_interrupt():
    """SIGINT set to Python's default handler for the test, whatever pytest inherited: started in the
    background (`pytest &`), a shell starts it with SIGINT ignored, and `train` rightly keeps that."""
    import signal
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, inherited)


def test_a_real_sigint_during_the_update_is_held_back_until_the_step_is_done(
        tmp_path, monkeypatch, sigint_raises_keyboard_interrupt):
    import signal
    from minitransformer.optim import AdamW
    from minitransformer.training.loop import TrainingInterrupted
    ckpt = str(tmp_path / "run.npz")
    whole = train(GPT(CFG, rng=1), _task(), _cfg(), log=lambda s: None)
    step = AdamW.step

    def ctrl_c_midway(self, lr=None, **kwargs):
        if self.t == 2:                                    # the update of step 3
            os.kill(os.getpid(), signal.SIGINT)            # delivered now, inside the update
        step(self, lr, **kwargs)
    monkeypatch.setattr(AdamW, "step", ctrl_c_midway)
    with pytest.raises(TrainingInterrupted) as e:
        train(GPT(CFG, rng=1), _task(), _cfg(), checkpoint_path=ckpt, log=lambda s: None)
    assert e.value.step == 3 and load_checkpoint(ckpt)[2]["step"] == 3
    monkeypatch.setattr(AdamW, "step", step)
    resumed = train(GPT(CFG, rng=99), _task(), _cfg(), checkpoint_path=ckpt, resume=True, log=lambda s: None)
    assert [l for _, l in resumed.history] == [l for _, l in whole.history]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler        # train put it back


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


def test_resume_compares_the_optimizer_and_the_seq2seq_task(tmp_path):
    from minitransformer.optim.optimizers import AdamW
    from minitransformer.training.loop import ResumeMismatch
    ckpt = str(tmp_path / "run.npz")
    train(GPT(CFG, rng=1), _task(), _cfg(), checkpoint_path=ckpt, stop_after=5, log=lambda s: None)
    for change, named in [(dict(betas=(0.8, 0.9)), r"betas: \[0\.9, 0\.99\] \(checkpoint\) vs \[0\.8, 0\.9\] \(now\)"),
                          (dict(weight_decay=0.0), r"weight_decay: 0\.1 \(checkpoint\) vs 0\.0 \(now\)"),
                          (dict(grad_clip=0.5), r"grad_clip: 1\.0 \(checkpoint\) vs 0\.5 \(now\)"),
                          (dict(min_lr=0.0), r"min_lr: 0\.0001 \(checkpoint\) vs 0\.0 \(now\)"),
                          (dict(warmup_steps=4), r"warmup_steps: 3 \(checkpoint\) vs 4 \(now\)")]:
        with pytest.raises(ResumeMismatch, match=rf"^resume: .*{named}.*--allow-config-change") as err:
            train(GPT(CFG, rng=1), _task(), _cfg(**change), checkpoint_path=ckpt, resume=True, log=lambda s: None)
        assert "\n" not in str(err.value)
    # an optimizer built by the caller with other hyperparameters than the checkpoint's
    model = GPT(CFG, rng=1)
    own = AdamW(model.parameters(), 1e-3, betas=(0.9, 0.99), weight_decay=0.1, eps=1e-6)
    with pytest.raises(ResumeMismatch, match=r"optimizer eps: 1e-08 \(checkpoint\) vs 1e-06 \(now\)"):
        train(model, _task(), _cfg(), optimizer=own, checkpoint_path=ckpt, resume=True, log=lambda s: None)
    result = train(model, _task(), _cfg(), optimizer=own, checkpoint_path=ckpt, resume=True,
                   allow_config_change=True, log=lambda s: None)
    assert result.history[-1][0] == 12 and own.eps == 1e-6          # continued with the new setting
    # the seq2seq task (and batch size) of the train command's meta
    cfg = Seq2SeqConfig(vocab_size=16, block_size=14, n_layer=1, n_head=2, d_model=16)
    meta = {"family": "seq2seq", "config": cfg.to_dict(), "task": "copy", "batch_size": 8}
    task = SequenceTaskData("copy", 16, (4, 12), 8, seed=0)
    ckpt2 = str(tmp_path / "s2s.npz")
    train(Seq2Seq(cfg, rng=2), task, _cfg(), checkpoint_path=ckpt2, stop_after=3, meta=meta, log=lambda s: None)
    with pytest.raises(ResumeMismatch, match=r"task: 'copy' \(checkpoint\) vs 'reverse' \(now\)"):
        train(Seq2Seq(cfg, rng=2), SequenceTaskData("reverse", 16, (4, 12), 8, seed=0), _cfg(),
              checkpoint_path=ckpt2, resume=True, meta={**meta, "task": "reverse"}, log=lambda s: None)
    with pytest.raises(ResumeMismatch, match=r"batch_size: 8 \(checkpoint\) vs 4 \(now\)"):
        train(Seq2Seq(cfg, rng=2), SequenceTaskData("copy", 16, (4, 12), 4, seed=0), _cfg(),
              checkpoint_path=ckpt2, resume=True, meta={**meta, "batch_size": 4}, log=lambda s: None)


def test_cli_resume_with_another_seq2seq_task_is_one_line_naming_it(tmp_path, capsys):
    from minitransformer.cli import main
    out = str(tmp_path / "run")
    args = ["train", "--model", "seq2seq", "--steps", "2", "--n-layer", "1", "--d-model", "16", "--n-head", "2",
            "--batch-size", "4", "--eval-interval", "100", "--out", out]
    assert main(args + ["--task", "copy"]) == 0
    capsys.readouterr()
    code = main(args + ["--task", "reverse", "--resume"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "task: 'copy' (checkpoint) vs 'reverse' (now)" in err and "Traceback" not in err


def test_a_sigint_ignored_by_the_caller_stays_ignored_during_and_after_train():
    """A process started with SIGINT ignored (nohup, a background job) must not become
    interruptible because train() installed its Ctrl-C guard."""
    import signal
    seen = []
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        train(GPT(CFG, rng=1), _task(), _cfg(steps=2, log_interval=1),
              log=lambda s: seen.append(signal.getsignal(signal.SIGINT)))
        after = signal.getsignal(signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert seen and all(h is signal.SIG_IGN for h in seen) and after is signal.SIG_IGN


def test_train_command_refuses_data_parallel_with_plain(tmp_path, capsys):
    from minitransformer.cli import main
    assert main(["train", "--plain", "--data-parallel", "2", "--steps", "1", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--data-parallel" in err and "--plain" in err


def test_train_command_without_the_wing_trains_the_plain_loop(tmp_path, monkeypatch, capsys):
    """A homework copy ships without minitransformer/fast/: the command says so and trains plain."""
    from minitransformer.cli import main
    from minitransformer.cli import train as cli_train
    from minitransformer.functional.twins import TWINS
    monkeypatch.setattr(cli_train, "find_spec", lambda name: None)
    assert main(["train", "--steps", "1", "--out", str(tmp_path)]) == 0
    assert "the speed wing (minitransformer/fast/) is absent" in capsys.readouterr().out
    assert TWINS == {}


def test_train_command_leaves_the_kernels_off_after_it(tmp_path):
    """The command trains with the wing's twins, for the run only: the process is plain again after."""
    from minitransformer.cli import main
    from minitransformer.functional.twins import TWINS
    assert main(["train", "--steps", "1", "--out", str(tmp_path)]) == 0
    assert TWINS == {}
