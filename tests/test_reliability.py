"""Nothing lost, nothing silently wrong: each class of bad input or failing disk, drawn once.

Data loss: a second `train` into a run folder, a disk that fills or a folder that
turns read-only during `train`, a truncated or corrupted checkpoint. Then the inputs
that used to be accepted silently, or refused with a message naming nothing: each
is refused at the entrance, with the argument's name (docs/reliability.md).
"""
import errno
import hashlib
import io
import json
import os
import zipfile

import numpy as np
import pytest

from minitransformer.cli import main
from minitransformer.models import GPT, GPTConfig
from minitransformer.training.checkpoint import load_checkpoint, save_checkpoint

TINY = ["--steps", "2", "--block-size", "8", "--batch-size", "2", "--n-layer", "1", "--n-head", "2",
        "--d-model", "16", "--eval-interval", "100", "--plain"]
SMALL = GPTConfig(vocab_size=7, block_size=8, n_layer=1, n_head=2, d_model=8)


def _data(tmp_path):
    path = tmp_path / "data.txt"
    path.write_text("abcab cabba bcaac " * 40)
    return str(path)


def _digest(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def _one_line(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture
def trained_run(tmp_path, capsys):
    """(--out folder, --data file) after one short `train`: the folder holds checkpoint.npz."""
    out, data = str(tmp_path / "run"), _data(tmp_path)
    assert main(["train", "--data", data, *TINY, "--out", out]) == 0
    capsys.readouterr()
    return out, data


# ---------------------------------------------------------------- data loss
def test_a_second_train_into_a_folder_holding_a_checkpoint_is_refused(trained_run, capsys):
    out, data = trained_run
    ckpt = os.path.join(out, "checkpoint.npz")
    before = _digest(ckpt)
    assert main(["train", "--data", data, *TINY, "--out", out]) == 2
    line = _one_line(capsys.readouterr().err)
    assert line.startswith("error: --out:") and "--resume" in line and "--overwrite" in line
    assert _digest(ckpt) == before
    assert main(["train", "--data", data, *TINY, "--out", out, "--resume", "--overwrite"]) == 2
    assert "--overwrite" in _one_line(capsys.readouterr().err)
    assert main(["train", "--data", data, *TINY, "--out", out, "--overwrite", "--seed", "1"]) == 0
    assert _digest(ckpt) != before


@pytest.mark.parametrize("failure", ["disk full", "read-only"])
def test_a_failing_disk_during_train_is_one_line_exit_1_and_the_checkpoint_survives(
        trained_run, capsys, monkeypatch, failure):
    out, data = trained_run
    ckpt = os.path.join(out, "checkpoint.npz")
    before = _digest(ckpt)
    if failure == "disk full":
        def savez(file, **arrays):                 # half the bytes written, then the disk is full
            file.write(b"\0" * 100)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        monkeypatch.setattr(np, "savez", savez)
    else:
        def mkstemp(*args, **kwargs):              # the folder turned read-only after the preflight
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
        import tempfile
        monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    assert main(["train", "--data", data, *TINY, "--out", out, "--overwrite", "--seed", "1"]) == 1
    line = _one_line(capsys.readouterr().err)
    assert ckpt in line and "intact" in line and os.strerror(errno.ENOSPC if failure == "disk full"
                                                              else errno.EACCES) in line
    assert _digest(ckpt) == before
    assert sorted(os.listdir(out)) == ["checkpoint.npz", "loss.png", "result.json"]   # no temporary left


def _truncated(path, tmp_path):
    bad = tmp_path / "bad.npz"
    data = open(path, "rb").read()
    bad.write_bytes(data[: len(data) // 2])
    return bad


def _corrupted(path, tmp_path):
    bad = tmp_path / "bad.npz"
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2: len(data) // 2 + 64] = b"x" * 64
    bad.write_bytes(bytes(data))
    return bad


@pytest.mark.parametrize("damage", [_truncated, _corrupted])
def test_a_damaged_checkpoint_is_one_line_naming_the_file(trained_run, capsys, tmp_path, damage):
    import minitransformer
    out, data = trained_run
    ckpt = os.path.join(out, "checkpoint.npz")
    bad = damage(ckpt, tmp_path)
    with pytest.raises(ValueError, match=str(bad)):
        minitransformer.load(bad)
    os.replace(bad, ckpt)
    assert main(["train", "--data", data, *TINY, "--out", out, "--resume"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert ckpt in line and "truncated or corrupted" in line


def _npz(path, entries: dict):
    """An .npz written by hand: ``entries`` maps a member name to its raw bytes."""
    with zipfile.ZipFile(path, "w") as z:
        for name, raw in entries.items():
            z.writestr(name, raw)
    return str(path)


def _npy_bytes(a) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, a)
    return buffer.getvalue()


def test_an_npy_header_claiming_10_12_entries_is_a_value_error_not_a_memory_error(tmp_path):
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False,
                                                  "shape": (10 ** 12,)})
    path = _npz(tmp_path / "huge.npz", {"param/W.npy": header.getvalue() + b"\0" * 64,
                                        "meta.json.npy": _npy_bytes(np.frombuffer(b"{}", np.uint8))})
    with pytest.raises(ValueError, match=r"huge\.npz.*claims shape \(1000000000000,\)"):
        load_checkpoint(path)


@pytest.mark.parametrize("meta, what", [(b"\xff\xfe not utf-8", "UTF-8"), (b"{not json", "JSON"),
                                        (b"[1, 2]", "JSON object")])
def test_checkpoint_metadata_that_is_not_a_utf8_json_object_names_the_file(tmp_path, meta, what):
    path = _npz(tmp_path / "m.npz", {"meta.json.npy": _npy_bytes(np.frombuffer(meta, np.uint8))})
    with pytest.raises(ValueError, match=rf"m\.npz.*meta\.json.*{what}"):
        load_checkpoint(path)


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_checkpoints_are_written_with_the_umask_s_mode(tmp_path, umask, mode):
    previous = os.umask(umask)
    try:
        save_checkpoint(tmp_path / "c.npz", GPT(SMALL, rng=0))
    finally:
        os.umask(previous)
    assert os.stat(tmp_path / "c.npz").st_mode & 0o777 == mode


def test_load_refuses_a_tokenizer_that_does_not_cover_the_model_s_vocabulary(tmp_path):
    import minitransformer
    from minitransformer.tokenizers import CharTokenizer
    tok = CharTokenizer.from_text("abcde")                                  # 5 tokens, the model has 7
    meta = {"family": "gpt", "config": SMALL.to_dict(), "tokenizer": tok.to_dict()}
    save_checkpoint(tmp_path / "c.npz", GPT(SMALL, rng=0), meta=meta)
    with pytest.raises(ValueError, match=r"c\.npz: the tokenizer has 5 tokens.*vocab_size 7"):
        minitransformer.load(tmp_path / "c.npz")


def test_train_resume_without_a_checkpoint_path_names_checkpoint_path():
    from minitransformer.training.loop import TrainConfig, train
    from minitransformer.training.tasks import LanguageModelTask
    ids = np.arange(200) % 7
    task = LanguageModelTask(ids[:150], ids[150:], block_size=8, batch_size=2)
    with pytest.raises(ValueError, match="checkpoint_path: resume=True needs"):
        train(GPT(SMALL, rng=0), task, TrainConfig(steps=1), resume=True, checkpoint_path=None)


# ---------------------------------------------------------------- the command line
@pytest.mark.parametrize("argv, flag", [(["--vocab-size", "500"], "--vocab-size: "),
                                        (["--d-model", "18", "--n-head", "4"], "--d-model: ")])
def test_train_flags_are_named_as_flags(tmp_path, capsys, argv, flag):
    out = str(tmp_path / "run")
    assert main(["train", "--data", _data(tmp_path), *TINY, *argv, "--out", out]) == 2
    assert _one_line(capsys.readouterr().err).startswith("error: " + flag)
    assert not os.path.exists(os.path.join(out, "checkpoint.npz"))


def test_figures_help_lists_pretrained_among_the_names(capsys):
    with pytest.raises(SystemExit):
        main(["figures", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "pretrained (the real MiniLM" in help_text
