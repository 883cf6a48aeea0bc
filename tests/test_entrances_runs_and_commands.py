"""Runs and commands at their entrances: the printed recovery works as printed, a checkpoint
without a run's state is one line naming the file and the field, figures and load say which
families they take, a folder or an empty file is named as such, a closed pipe ends a command
quietly, and a save cut short leaves no temporary behind (one test per class; docs/reliability.md).
"""
import json
import os
import shlex
import subprocess
import sys
import threading

import numpy as np
import pytest

import minitransformer
from minitransformer.cli import EXIT_BROKEN_PIPE, main
from minitransformer.training.checkpoint import load_checkpoint, save_checkpoint
from minitransformer.training.tasks import LanguageModelTask
from test_reliability import TINY, _data, _one_line, trained_run  # noqa: F401 (a fixture)


def _interrupt_at(monkeypatch, n: int) -> None:
    """Ctrl-C in the n-th training forward of the main thread."""
    calls, forward = [0], LanguageModelTask.forward

    def interrupted(self, model, batch, device="cpu"):
        if model.training and threading.current_thread() is threading.main_thread():
            calls[0] += 1
            if calls[0] == n:
                raise KeyboardInterrupt
        return forward(self, model, batch, device)
    monkeypatch.setattr(LanguageModelTask, "forward", interrupted)


def _printed_command(err: str) -> str:
    assert "to continue:" in err, err
    return err.strip().splitlines()[-1].strip()


# ---------------------------------------------------------------- 1. the printed resume command
@pytest.mark.parametrize("flags", [
    ["--overwrite"],                                                  # the command kept it: refused with --resume
    ["--overwrite", "--checkpoint-every", "2", "--p-drop", "0.1"],    # dropout generators in the run state
    ["--allow-config-change", "--lr", "0.002"],
    ["--resume"],                                                     # a resumed run, interrupted again
], ids=["overwrite", "overwrite-dropout", "allow-config-change", "resumed"])
def test_the_printed_resume_command_continues_the_run_as_printed(tmp_path, monkeypatch, capsys, flags):
    data = str(tmp_path / "the data.txt")                             # a space: the command quotes it
    with open(data, "w") as f:
        f.write("abcab cabba bcaac " * 40)
    out = str(tmp_path / "run")
    steps = ["--steps", "6"]
    if "--overwrite" in flags or "--resume" in flags:                 # a folder holding a checkpoint already
        assert main(["train", "--data", data, *TINY, *steps, "--out", out, "--checkpoint-every", "2"]) == 0
        if "--resume" in flags:
            _interrupt_at(monkeypatch, 2)
            os.remove(os.path.join(out, "result.json"))
            assert main(["train", "--data", data, *TINY, *steps, "--out", out, "--overwrite"]) == 130
        monkeypatch.undo()
    capsys.readouterr()
    _interrupt_at(monkeypatch, 2 if "--resume" in flags else 3)
    assert main(["train", "--data", data, *TINY, *steps, "--out", out, *flags]) == 130
    command = _printed_command(capsys.readouterr().err)
    monkeypatch.undo()
    words = shlex.split(command)
    assert words[:4] == ["python", "-m", "minitransformer", "train"] and "--overwrite" not in words
    if flags == ["--overwrite"]:        # once exactly as printed, in a shell's place
        done = subprocess.run([sys.executable, *words[1:]], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert "resumed from" in done.stdout
    else:
        assert main(words[3:]) == 0, capsys.readouterr().err
        assert "resumed from" in capsys.readouterr().out
    assert load_checkpoint(os.path.join(out, "checkpoint.npz"))[2]["step"] == 6


# ---------------------------------------------------------------- 6. a checkpoint without a run's state
def _no_run_state(meta):
    return {k: meta[k] for k in ("family", "config", "tokenizer", "batch_size")}   # save_checkpoint's alone


RUN_STATE_DAMAGE = [
    ("save_checkpoint alone", _no_run_state, {}, "holds no run state to continue (no step, train_config"),
    ("step missing", lambda m: {k: v for k, v in m.items() if k != "step"}, {}, "(no step)"),
    ("step negative", lambda m: {**m, "step": -1}, {}, "field 'step': expected an integer >= 0, got -1"),
    ("step text", lambda m: {**m, "step": "abc"}, {}, "field 'step': expected an integer >= 0, got 'abc'"),
    ("step a bool", lambda m: {**m, "step": True}, {}, "field 'step': expected an integer >= 0, got True"),
    ("step beyond steps", lambda m: {**m, "step": 10 ** 6}, {}, "field 'step': the checkpoint is at step 1000000, "
                                                                "beyond steps=2"),
    ("train_config a list", lambda m: {**m, "train_config": []}, {}, "field 'train_config': expected a JSON object"),
    ("batch_rng an int", lambda m: {**m, "batch_rng": 0}, {}, "field 'batch_rng': expected a NumPy generator's"),
    ("batch_rng of MT19937", lambda m: {**m, "batch_rng": {"bit_generator": "MT19937", "state": {}}}, {},
     "field 'batch_rng': expected a NumPy generator's state"),
    ("dropout_rngs an int", lambda m: {**m, "dropout_rngs": 5}, {}, "field 'dropout_rngs': expected a list"),
    ("dropout_rngs one too many", lambda m: {**m, "dropout_rngs": m["dropout_rngs"] + [m["batch_rng"]]}, {},
     "field 'dropout_rngs': expected 1 generator states (the model's dropout layers), got 2"),
    ("history an int", lambda m: {**m, "history": 5}, {}, "field 'history': expected a list of [step, loss] rows"),
    ("history rows of one", lambda m: {**m, "history": [[1]]}, {}, "field 'history': expected a list"),
    ("evals text", lambda m: {**m, "evals": "x"}, {}, "field 'evals': expected a list of [step, loss, loss] rows"),
    ("optimizer step text", lambda m: m, {"step": "abc"}, "optimizer state: state['step']"),
]


def test_resuming_a_checkpoint_without_a_whole_run_state_is_one_line_naming_file_and_field(trained_run, capsys):
    from minitransformer.cli import _parser
    from minitransformer.cli.train import build
    from minitransformer.training.loop import BadRunState, train
    out, data = trained_run
    ckpt = os.path.join(out, "checkpoint.npz")
    model, _ = minitransformer.load(ckpt)
    _, optimizer_state, meta = load_checkpoint(ckpt)
    argv = ["train", "--data", data, *TINY, "--out", out, "--resume"]
    for label, damage, optimizer_change, expected in RUN_STATE_DAMAGE:
        save_checkpoint(ckpt, model, optimizer_state={**optimizer_state, **optimizer_change}, meta=damage(meta))
        assert main(argv) == 2, label
        line = _one_line(capsys.readouterr().err)
        assert line.startswith("error: resume: ") and ckpt in line and expected in line, (label, line)
        fresh, task, cfg, run_meta = build(_parser("train").parse_args(argv))      # the Python entrance
        with pytest.raises(BadRunState, match="resume: ") as refused:
            train(fresh, task, cfg, checkpoint_path=ckpt, resume=True, meta=run_meta, log=lambda line: None)
        assert ckpt in str(refused.value) and expected in str(refused.value), label


# ---------------------------------------------------------------- the stale temporaries of a killed save
def test_a_run_removes_the_temporaries_a_killed_save_left_in_its_folder(trained_run, capsys):
    out, data = trained_run
    stale = [os.path.join(out, name) for name in (".ckpt-k1ll3d.npz.tmp", ".ckpt-2.npz.tmp")]
    kept = [os.path.join(out, name) for name in (".ckpt-notes.txt", "checkpoint.npz.tmp")]  # not ours
    for path in stale + kept:
        with open(path, "wb") as f:
            f.write(b"PK\x03\x04 half a zip")
    assert main(["train", "--data", data, *TINY, "--out", out, "--overwrite"]) == 0
    printed = capsys.readouterr().out
    for path in stale:
        assert not os.path.exists(path) and f"removed {os.path.basename(path)}" in printed
    assert all(os.path.exists(path) for path in kept)


# ---------------------------------------------------------------- 4 and 12. checkpoints of every family
def _family_checkpoints(tmp_path) -> dict:
    """family -> a checkpoint as train writes it (parameters and meta; no steps run)."""
    from minitransformer.cli import _parser
    from minitransformer.cli.train import build
    paths = {}
    for family in ("gpt", "encoder", "seq2seq", "vit", "tabular"):
        text = ["--block-size", "8"] if family in ("gpt", "encoder") else []
        args = _parser("train").parse_args(["train", "--model", family, "--n-layer", "1", "--d-model", "16",
                                            "--steps", "1", *text])
        model, _, _, meta = build(args)
        paths[family] = str(tmp_path / f"{family}.npz")
        save_checkpoint(paths[family], model, meta={**meta, "history": [[1, 2.0]], "evals": []})
    return paths


def test_figures_refuse_a_checkpoint_of_another_family_in_one_line(tmp_path, capsys):
    paths = _family_checkpoints(tmp_path)
    for family in ("encoder", "seq2seq", "vit", "tabular"):
        for figure in ("attention-head", "attention-grid", "residual"):
            argv = ["figures", "--only", figure, "--checkpoint", paths[family], "--out", str(tmp_path / "f")]
            assert main(argv) == 2
            line = _one_line(capsys.readouterr().err)
            assert line.startswith("error: --checkpoint: ") and f"got family {family!r}" in line, line
        assert main(["figures", "--only", "loss", "--checkpoint", paths[family], "--out", str(tmp_path / "f")]) == 0
    capsys.readouterr()
    assert main(["figures", "--only", "residual", "--checkpoint", str(tmp_path / "missing.npz"),
                 "--out", str(tmp_path / "f")]) == 2
    assert _one_line(capsys.readouterr().err).startswith("error: --checkpoint: checkpoint: no file at")


def test_load_returns_the_tokenizer_of_every_text_run_and_the_docs_name_the_families_without(tmp_path):
    from minitransformer.training.load import FAMILIES, NO_TOKENIZER, load_model
    paths = _family_checkpoints(tmp_path)
    assert set(paths) == set(FAMILIES)
    for family, path in paths.items():
        model, tokenizer = minitransformer.load(path)
        assert (tokenizer is None) == (family in NO_TOKENIZER), family
        if tokenizer is not None:
            assert tokenizer.vocab_size == model.config.vocab_size - (family == "encoder")
    readme = open(os.path.join(os.path.dirname(__file__), "..", "README.md")).read()
    block = readme.split('minitransformer.load("runs/gpt/checkpoint.npz")', 1)[1].split("```", 1)[0]
    for text in (minitransformer.load.__doc__, load_model.__doc__, block):
        assert all(family in text for family in NO_TOKENIZER), text


def test_the_committed_gradient_check_figure_shows_the_gradients_the_command_draws():
    import struct
    from minitransformer.gradcheck.suite import layer_checks
    from minitransformer.plots._common import DPI
    from minitransformer.plots.gradients import gradcheck_errors
    fig, data = gradcheck_errors([(name, check()) for name, check in layer_checks(0)])   # figures' _gradcheck
    expected = tuple(int(round(v)) for v in fig.get_size_inches() * DPI)
    png = os.path.join(os.path.dirname(__file__), "..", "figures", "gradcheck_errors.png")
    with open(png, "rb") as f:
        size = struct.unpack(">II", f.read(24)[16:24])            # the IHDR chunk: width, height
    assert size == expected, (f"figures/gradcheck_errors.png is {size} pixels, the command draws {expected} "
                              f"({len(data['labels'])} gradients): rewrite it with figures --update-repo-figures "
                              "--only gradcheck")


@pytest.mark.parametrize("make_argv, expected", [
    (lambda d: ["train", "--data", str(d / "empty.txt"), *TINY, "--out", str(d / "r")],
     ["--data: ", "empty.txt", "is empty"]),
    (lambda d: ["train", "--data", str(d / "folder"), *TINY, "--out", str(d / "r")],
     ["--data: ", "got the folder", "folder"]),
    (lambda d: ["generate", "--checkpoint", str(d / "folder"), "--prompt", "a"],
     ["--checkpoint: ", "is a folder, not a checkpoint file", os.path.join("folder", "checkpoint.npz")]),
    (lambda d: ["figures", "--only", "residual", "--checkpoint", str(d / "folder"), "--out", str(d / "f")],
     ["--checkpoint: ", "is a folder, not a checkpoint file", "(not there either)"]),
], ids=["empty --data", "--data a folder", "generate --checkpoint a folder", "figures --checkpoint a folder"])
def test_an_empty_file_or_a_folder_is_named_as_such_with_its_flag(tmp_path, capsys, make_argv, expected):
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "folder").mkdir()
    assert main(make_argv(tmp_path)) == 2
    line = _one_line(capsys.readouterr().err)
    assert line.startswith("error: ") and all(part in line for part in expected), line
    with pytest.raises(IsADirectoryError, match="checkpoint.npz"):
        minitransformer.load(tmp_path / "folder")


# ---------------------------------------------------------------- 13. a reader that goes away
@pytest.mark.parametrize("argv", [["homework", "list"], ["lectures", "--list"], ["--help"], ["train", "--help"]])
def test_a_command_whose_reader_goes_away_exits_quietly(argv):
    child = subprocess.Popen([sys.executable, "-m", "minitransformer", *argv], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    child.stdout.close()                       # the reader is gone before the first line is written
    err = child.stderr.read().decode()
    assert child.wait(timeout=120) == EXIT_BROKEN_PIPE and err == "", err


def test_train_whose_reader_goes_away_saves_and_says_how_to_resume(trained_run, monkeypatch, capsys):
    out, data = trained_run

    class ClosedAfterTwoLines:
        """stdout whose reader leaves after two lines: every later write is EPIPE."""
        def __init__(self):
            self.lines = 0

        def write(self, text):
            self.lines += text.count("\n")
            if self.lines > 2:
                raise BrokenPipeError(32, "Broken pipe")
            return len(text)

        def flush(self):
            pass
    monkeypatch.setattr(sys, "stdout", ClosedAfterTwoLines())
    argv = ["train", "--data", data, *TINY, "--steps", "300", "--out", out, "--overwrite"]
    assert main(argv) == EXIT_BROKEN_PIPE
    err = capsys.readouterr().err
    assert "Traceback" not in err and "interrupted: step 100 of 300 saved" in err
    assert load_checkpoint(os.path.join(out, "checkpoint.npz"))[2]["step"] == 100
    monkeypatch.undo()
    assert main(shlex.split(_printed_command(err))[3:]) == 0


@pytest.mark.parametrize("lr", ["1e-5", "1e-300"])
def test_train_takes_an_lr_below_the_schedules_floor(tmp_path, capsys, lr):
    # The cosine decay ends at min_lr = 1e-4: a smaller --lr used to be refused naming lr, min_lr
    out = str(tmp_path / "run")
    assert main(["train", "--data", _data(tmp_path), *TINY, "--out", out, "--lr", lr]) == 0
    assert load_checkpoint(os.path.join(out, "checkpoint.npz"))[2]["train_config"]["min_lr"] == float(lr)


@pytest.mark.parametrize("command", ["gradcheck", "figures", "lectures", "generate"])
def test_ctrl_c_in_a_command_is_one_line_and_exit_130(monkeypatch, capsys, command):
    from minitransformer.cli import EXIT_INTERRUPTED, command_module

    def interrupted(args):
        raise KeyboardInterrupt
    monkeypatch.setattr(command_module(command), f"run_{command}", interrupted)
    argv = {"generate": ["--checkpoint", "c.npz", "--prompt", "a"], "lectures": ["--list"]}.get(command, [])
    assert main([command, *argv]) == EXIT_INTERRUPTED
    assert _one_line(capsys.readouterr().err) == "interrupted"
