"""Nothing lost, nothing silently wrong: each class of bad input or failing disk, drawn once.

Data loss: a second `train` into a run folder, a disk that fills or a folder that
turns read-only during `train`, a truncated or corrupted checkpoint. Then the inputs
that used to be accepted silently, or refused with a message naming nothing: each
is refused at the entrance, with the argument's name (docs/reliability.md).
"""
import errno
import hashlib
import io
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


@pytest.mark.parametrize("flag, value", [("--vocab-size", "500"), ("--block-size", "8"), ("--tokenizer", "bpe")])
def test_seq2seq_refuses_the_text_flags_it_would_ignore(tmp_path, capsys, flag, value):
    assert main(["train", "--model", "seq2seq", flag, value, "--out", str(tmp_path / "run")]) == 2
    assert _one_line(capsys.readouterr().err).startswith(f"error: {flag}: seq2seq trains on the generated")


def test_figures_help_lists_pretrained_among_the_names(capsys):
    with pytest.raises(SystemExit):
        main(["figures", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "pretrained (the real MiniLM" in help_text


# ---------------------------------------------------------------- inputs once accepted silently
F32, F64 = np.float32, np.float64
WRONG_DTYPES = [np.int64, np.bool_, np.complex128, np.object_, np.float32]   # against float64 weights


def _tiny(kind):
    from minitransformer.models import Encoder, EncoderConfig, Seq2Seq, Seq2SeqConfig
    if kind == "encoder":
        return Encoder(EncoderConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, d_model=8,
                                     type_vocab_size=2), rng=0)
    return Seq2Seq(Seq2SeqConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, d_model=8), rng=0)


def _dtype_cases():
    from minitransformer.functional.feature_tokenizer import feature_tokenizer_forward
    from minitransformer.functional.linear import linear_forward
    from minitransformer.functional.patches import patch_embed_forward
    from minitransformer.functional.pooler import pooler_forward
    ones = lambda shape, dt=F64: np.ones(shape, dtype=dt)                           # noqa: E731
    return {
        "linear x": lambda dt: linear_forward(ones((2, 3), dt), ones((3, 4)), ones(4)),
        "linear W": lambda dt: linear_forward(ones((2, 3)), ones((3, 4), dt), None),
        "linear b": lambda dt: linear_forward(ones((2, 3)), ones((3, 4)), ones(4, dt)),
        "patch_embed W": lambda dt: patch_embed_forward(ones((1, 4, 4, 1)), ones((4, 3), dt), None, 2),
        "patch_embed b": lambda dt: patch_embed_forward(ones((1, 4, 4, 1)), ones((4, 3)), ones(3, dt), 2),
        "pooler W": lambda dt: pooler_forward(ones((2, 3, 4)), ones((4, 4), dt), None),
        "pooler b": lambda dt: pooler_forward(ones((2, 3, 4)), ones((4, 4)), ones(4, dt)),
        "feature_tokenizer b_num": lambda dt: feature_tokenizer_forward(
            ones((2, 1)), np.zeros((2, 1), np.int64), ones((1, 3)), ones((1, 3), dt), ones((2, 3)), (2,)),
    }


@pytest.mark.parametrize("entrance", sorted(_dtype_cases()))
@pytest.mark.parametrize("dtype", WRONG_DTYPES, ids=lambda d: np.dtype(d).name)
def test_a_wrong_dtype_is_refused_not_promoted(entrance, dtype):
    name = entrance.split()[-1]
    blamed = "x|W" if entrance == "linear x" else name             # float32 x, float64 W: W is not x's dtype
    with pytest.raises(TypeError, match=rf"^({blamed}): expected"):
        _dtype_cases()[entrance](dtype)


def test_float16_stays_float16_and_mixing_it_with_float32_is_refused():
    from minitransformer.functional.linear import linear_forward
    h = np.ones((2, 3), np.float16)
    assert linear_forward(h, np.ones((3, 4), np.float16), np.ones(4, np.float16))[0].dtype == np.float16
    with pytest.raises(TypeError, match="W: expected dtype float16"):
        linear_forward(h, np.ones((3, 4), F32), None)


def test_upstream_gradients_of_the_wrong_shape_are_refused():
    from minitransformer.functional.embedding import embedding_backward, embedding_forward
    from minitransformer.functional.rope import rope_backward, rope_forward
    _, rope_cache = rope_forward(np.ones((2, 3, 4, 6)))
    for dy in (np.ones((1, 2, 3, 4, 6)), np.ones((5, 3, 4, 6)), np.ones((0, 3, 4, 6)), np.ones((2, 0, 4, 6)),
               np.ones((2, 4, 4, 6))):                          # rank + 1, another batch, empty, more heads
        with pytest.raises(ValueError, match=r"^dy: expected shape \(2, H', 4, 6\)"):
            rope_backward(dy, rope_cache)
    assert rope_backward(np.ones((2, 1, 4, 6)), rope_cache).shape == (2, 1, 4, 6)   # attention's q part
    _, embedding_cache = embedding_forward(np.array([[1, 2]]), np.ones((5, 3)))
    with pytest.raises(ValueError, match=r"^dout: expected shape \(1, 2, 3\)"):
        embedding_backward(np.ones((1, 2, 4)), embedding_cache)               # one column too many


def _setting_cases():
    from minitransformer.functional.norm import layernorm_forward
    from minitransformer.functional.rope import rope_forward
    from minitransformer.functional.shaw import relative_index
    from minitransformer.generation.generate import outside_nucleus
    from minitransformer.generation.streaming import streaming_nll
    from minitransformer.layers import LayerNorm, MultiHeadAttention, RoPE
    from minitransformer.layers.blocks import BlockSpec
    from minitransformer.layers.positions import LearnedPositionEmbedding
    from minitransformer.models import EncoderConfig, Seq2SeqConfig
    from minitransformer.models.presets import count_parameters
    small = dict(vocab_size=11, block_size=8, n_layer=1, n_head=2, d_model=8)
    rope_gpt = GPT(GPTConfig(**small, position="rope"), rng=0)

    def mutated():
        config = GPTConfig(**small)
        config.d_model = 9                                   # after construction: not a multiple of n_head
        return count_parameters(config)
    inf = float("inf")
    return {
        "layernorm eps=inf": (lambda: layernorm_forward(np.ones((2, 3)), np.ones(3), np.zeros(3), inf), "eps"),
        "LayerNorm eps=inf": (lambda: LayerNorm(3, eps=inf), "eps"),
        "BlockSpec eps=inf": (lambda: BlockSpec(d_model=8, n_head=2, d_ff=16, eps=inf), "eps"),
        "BlockSpec eps=None": (lambda: BlockSpec(d_model=8, n_head=2, d_ff=16, eps=None), "eps"),
        "BlockSpec init_std=inf": (lambda: BlockSpec(d_model=8, n_head=2, d_ff=16, init_std=inf), "init_std"),
        "MultiHeadAttention init_std=inf": (lambda: MultiHeadAttention(8, 2, init_std=inf), "init_std"),
        "LearnedPositionEmbedding init_std=inf": (lambda: LearnedPositionEmbedding(4, 8, init_std=inf),
                                                  "init_std"),
        "rope_forward base=inf": (lambda: rope_forward(np.ones((1, 1, 2, 4)), base=inf), "base"),
        "RoPE base=inf": (lambda: RoPE(base=inf), "base"),
        "GPTConfig rope_scale without RoPE": (lambda: GPTConfig(rope_scale=2), "rope_scale"),
        "relative_index S=None": (lambda: relative_index(3, None, 2), "S"),
        "streaming_nll n_sink=None": (lambda: streaming_nll(rope_gpt, np.ones((1, 5), np.int64), 4, n_sink=None),
                                      "n_sink"),
        "EncoderConfig pad_id=vocab_size": (lambda: EncoderConfig(**small, pad_id=11), "pad_id"),
        "Seq2SeqConfig pad_id=vocab_size": (lambda: Seq2SeqConfig(**small, pad_id=11), "pad_id"),
        "outside_nucleus top_p=0": (lambda: outside_nucleus(np.full((1, 4), 0.25), 0), "top_p"),
        "count_parameters on a mutated config": (mutated, "d_model"),
    }


@pytest.mark.parametrize("case", sorted(_setting_cases()))
def test_a_setting_out_of_its_domain_is_refused_by_name(case):
    call, name = _setting_cases()[case]
    with pytest.raises((ValueError, TypeError), match=rf"^{name}: .*expected"):
        call()


def test_clip_grad_norm_with_an_infinite_max_norm_measures_without_clipping():
    from minitransformer.optim.clipping import clip_grad_norm
    g = np.full(4, 3.0, F32)                                   # norm 6
    assert clip_grad_norm([g], float("inf")) == 6.0 and (g == 3.0).all()


def test_from_pretrained_refuses_a_pad_token_outside_the_vocabulary():
    from minitransformer.pretrained.bert import encoder_config_from_bert     # from_pretrained's config step
    config = {"model_type": "bert", "vocab_size": 11, "hidden_size": 8, "num_hidden_layers": 1,
              "num_attention_heads": 2, "intermediate_size": 16, "max_position_embeddings": 8,
              "hidden_act": "gelu", "pad_token_id": 11}
    with pytest.raises(ValueError, match=r"^config\.json: pad_token_id: expected an integer in \[0, 10\]"):
        encoder_config_from_bert(config)


def _mask_cases():
    from minitransformer.generation.generate import generate_seq2seq
    from minitransformer.pretrained.sentence import mean_pool
    encoder, seq2seq = _tiny("encoder"), _tiny("seq2seq")
    ids = np.ones((2, 4), np.int64)
    return {
        "Encoder.forward": (lambda m: encoder.forward(ids, attention_mask=m), "attention_mask"),
        "Seq2Seq.forward": (lambda m: seq2seq.forward(ids, ids, src_mask=m), "src_mask"),
        "generate_seq2seq": (lambda m: generate_seq2seq(seq2seq, ids, 3, 1, 2, src_mask=m), "src_mask"),
        "mean_pool": (lambda m: mean_pool(np.ones((2, 4, 3), F32), m), "attention_mask"),
    }


@pytest.mark.parametrize("case", sorted(_mask_cases()))
@pytest.mark.parametrize("mask, error", [(np.full((2, 4), 0.5), TypeError), (np.full((2, 4), 2), ValueError),
                                         (np.ones((2, 5), bool), ValueError), (None, TypeError)],
                         ids=["float", "int 2", "shape", "None"])
def test_a_mask_that_is_not_booleans_or_0_1_of_the_right_shape_is_refused(case, mask, error):
    call, name = _mask_cases()[case]
    if mask is None and case != "mean_pool":
        return                                                     # None there means: no mask
    with pytest.raises(error, match=rf"^{name}: expected"):
        call(mask)
    assert call(np.ones((2, 4), np.int64)) is not None             # the 0/1 tokenizers give is accepted


def _named_cases():
    from minitransformer.functional.pooler import pooler_forward
    from minitransformer.functional.softmax import softmax_forward
    from minitransformer.layers import LMHead
    encoder, seq2seq = _tiny("encoder"), _tiny("seq2seq")
    ids = np.ones((2, 4), np.int64)
    return {
        "Encoder.forward ids=None": (lambda: encoder.forward(None, attention_mask=np.ones((2, 4), bool)), "ids"),
        "Encoder.forward 0-d token_type_ids": (lambda: encoder.forward(ids, token_type_ids=np.array(1)),
                                               "token_type_ids"),
        "Encoder.forward token_type_ids of another shape": (
            lambda: encoder.forward(ids, token_type_ids=np.ones((2, 3), np.int64)), "token_type_ids"),
        "Seq2Seq.forward src out of vocabulary": (lambda: seq2seq.forward(ids * 99, ids), "src"),
        "Seq2Seq.forward tgt_in out of vocabulary": (lambda: seq2seq.forward(ids, ids * 99), "tgt_in"),
        "Seq2Seq.forward tgt_in float": (lambda: seq2seq.forward(ids, ids.astype(F64)), "tgt_in"),
        "LMHead.forward h of another width": (lambda: LMHead(8, 11, rng=0).forward(np.ones((2, 3, 7), F32)), "h"),
        "LMHead.forward h float64": (lambda: LMHead(8, 11, rng=0).forward(np.ones((2, 3, 8), F64)), "h"),
        "pooler_forward S=0": (lambda: pooler_forward(np.ones((2, 0, 4)), np.ones((4, 4)), None), "h"),
        "softmax over an empty axis": (lambda: softmax_forward(np.ones((2, 0), F32)), "x"),
    }


@pytest.mark.parametrize("case", sorted(_named_cases()))
def test_an_unclear_error_now_names_its_argument(case):
    call, name = _named_cases()[case]
    with pytest.raises((ValueError, TypeError), match=rf"^{name}: expected"):
        call()


# ---------------------------------------------------------------- files and objects
def test_char_tokenizer_refuses_a_dict_or_a_set_of_characters():
    from minitransformer.tokenizers import CharTokenizer
    for chars in ({"a": 1, "b": 0}, {"a", "b"}):
        with pytest.raises(TypeError, match="^chars: expected a str, list or tuple"):
            CharTokenizer(chars)
    assert CharTokenizer("ba").encode("ab") == [1, 0]


def test_a_crlf_vocabulary_reads_like_lf_and_a_lone_carriage_return_is_refused(tmp_path):
    from minitransformer.tokenizers.wordpiece import WordPieceTokenizer
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world"]
    (tmp_path / "lf.txt").write_bytes("\n".join(tokens).encode() + b"\n")
    (tmp_path / "crlf.txt").write_bytes("\r\n".join(tokens).encode() + b"\r\n")
    lf = WordPieceTokenizer.from_vocab_file(tmp_path / "lf.txt")
    crlf = WordPieceTokenizer.from_vocab_file(tmp_path / "crlf.txt")
    assert crlf.vocab == tokens and crlf.encode("hello world") == lf.encode("hello world") == [2, 5, 6, 3]
    (tmp_path / "cr.txt").write_bytes(b"[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhel\rlo\nworld\n")
    with pytest.raises(ValueError, match=r"cr\.txt: line 6 holds a carriage return"):
        WordPieceTokenizer.from_vocab_file(tmp_path / "cr.txt")


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_adam_refuses_a_non_finite_gradient_and_changes_no_weight(bad):
    from minitransformer.layers import Linear
    from minitransformer.optim import Adam
    layer = Linear(3, 2, rng=0)
    before = {name: p.copy() for name, p, _ in layer.parameters()}
    optimizer = Adam(layer.parameters(), lr=0.1)
    for _, _, g in layer.parameters():
        g[...] = 1.0
    layer.grads["W"][0, 1] = bad
    with pytest.raises(ValueError, match="step: the gradient of 'W' holds inf or NaN"):
        optimizer.step()
    assert optimizer.t == 0
    assert all(np.array_equal(p, before[name]) for name, p, _ in layer.parameters())
