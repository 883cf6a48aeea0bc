"""The safetensors checkpoint format, read and written with NumPy alone.

A safetensors file, byte by byte:

    [0, 8)         N, the header length: an unsigned 64-bit little-endian integer
    [8, 8 + N)     the header: a UTF-8 JSON object
                       {name: {"dtype": "F32", "shape": [d0, d1, ...], "data_offsets": [begin, end]},
                        ...,
                        "__metadata__": {str: str}}            (optional)
    [8 + N, EOF)   the data buffer: each tensor's bytes in C order, little-endian;
                   data_offsets count from the start of THIS buffer, end exclusive

    f = SafetensorsFile("model.safetensors")    # reads and checks the header only
    f.keys(), f.shape(name), f.dtype(name)        # no tensor data read
    W = f["embeddings.word_embeddings.weight"]    # (30522, 384) float32, a fresh array
    tensors = load_safetensors(path)              # every tensor, as a dict
    save_safetensors(path, tensors, metadata={"format": "np"})

Decisions:
- The whole header is checked when the file is opened, before any tensor is
  handed out: a corrupt file fails at once with a ValueError (SafetensorsError)
  naming the file and the tensor, not later with a reshape error from NumPy.
- The file is memory-mapped (np.memmap): opening a 90 MB checkpoint reads a few
  kilobytes, and a tensor's bytes are copied only when it is asked for. The
  array handed out is a fresh, writable copy in native byte order, so nothing
  keeps the file open after ``close()``.
- BF16 (bfloat16: the top 16 bits of a float32) has no NumPy dtype. It is
  upcast to float32 exactly, by shifting each uint16 into the high half of a
  uint32 and reading those bits as float32.
- Reading and writing need no GPU; move the arrays with ``backend.to_device``.
"""
from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from ..validate import check_path

from ..backend import to_numpy

# safetensors dtype code -> NumPy dtype of the stored bytes (always little-endian).
# BF16 is stored as its raw 16 bits and BOOL as one byte each; both are converted on read.
STORED_DTYPES = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2",
    "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1",
    "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1",
    "BOOL": "u1",
}
# NumPy dtype -> the code save_safetensors writes (every code above but BF16).
CODE_OF_DTYPE = {np.dtype(np.float64): "F64", np.dtype(np.float32): "F32", np.dtype(np.float16): "F16",
                 np.dtype(np.int64): "I64", np.dtype(np.int32): "I32", np.dtype(np.int16): "I16",
                 np.dtype(np.int8): "I8", np.dtype(np.uint64): "U64", np.dtype(np.uint32): "U32",
                 np.dtype(np.uint16): "U16", np.dtype(np.uint8): "U8", np.dtype(np.bool_): "BOOL"}
METADATA_KEY = "__metadata__"
HEADER_ALIGN = 8   # the writer pads the header with spaces to this, so the buffer starts aligned


class SafetensorsError(ValueError):
    """A file that is not valid safetensors: the message names the file and the tensor."""


class TensorInfo(NamedTuple):
    """What the header says about one tensor; enough to find it without reading it."""
    dtype: str     # the safetensors code, e.g. "F32", "BF16"
    shape: tuple   # the tensor's dimensions
    begin: int     # first byte, counted from the start of the data buffer
    end: int       # one past the last byte


def bf16_to_float32(bits: np.ndarray) -> np.ndarray:
    """Exact float32 values of bfloat16 numbers given as their uint16 bit patterns.

    bfloat16 keeps the sign, the 8 exponent bits and the top 7 mantissa bits of a
    float32, so the float32 is those 16 bits followed by 16 zero bits.
    """
    return (bits.astype(np.uint32) << 16).view(np.float32)   # same shape as bits


class SafetensorsFile(Mapping):
    """A safetensors file opened lazily: a read-only mapping from tensor name to array.

    ``keys()``, ``len()``, ``in``, ``shape(name)``, ``dtype(name)`` and ``info(name)``
    use the header only; ``f[name]`` copies that one tensor out of the memory map.
    ``metadata`` is the header's ``__metadata__`` dict ({} when absent). Use it as a
    context manager, or call ``close()``, to release the map.
    """

    def __init__(self, path):
        self.path = os.fspath(path)
        header_length, self._infos, self.metadata = read_header(self.path)
        self._data_start = 8 + header_length
        self._map = np.memmap(self.path, dtype=np.uint8, mode="r")   # (file size,) bytes, not read yet

    def info(self, name: str) -> TensorInfo:
        if name not in self._infos:
            raise KeyError(f"{self.path}: no tensor named {name!r} (the file has {len(self._infos)} tensors)")
        return self._infos[name]

    def shape(self, name: str) -> tuple:
        return self.info(name).shape

    def dtype(self, name: str) -> str:
        """The stored dtype code ("F32", "BF16", ...). BF16 tensors are read as float32."""
        return self.info(name).dtype

    def __getitem__(self, name: str) -> np.ndarray:
        info = self.info(name)
        if self._map is None:
            raise ValueError(f"{self.path}: the file is closed; reopen it to read tensor {name!r}")
        raw = np.asarray(self._map[self._data_start + info.begin:self._data_start + info.end])  # (nbytes,) uint8 view
        stored = raw.view(STORED_DTYPES[info.dtype]).reshape(info.shape)         # still a view of the map
        if info.dtype == "BF16":
            return bf16_to_float32(stored)
        if info.dtype == "BOOL":
            return stored != 0
        return np.array(stored, dtype=stored.dtype.newbyteorder("="))   # the copy, in native byte order

    def __contains__(self, name) -> bool:   # Mapping's default would read the tensor
        return name in self._infos

    def __iter__(self):
        return iter(self._infos)

    def __len__(self) -> int:
        return len(self._infos)

    def close(self) -> None:
        self._map = None   # arrays handed out are copies: dropping the map releases the file

    def __enter__(self) -> "SafetensorsFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SafetensorsFile({self.path!r}, {len(self)} tensors)"


def load_safetensors(path, names=None) -> dict[str, np.ndarray]:
    """Every tensor of the file (or only ``names``), as {name: NumPy array} in file order.

    BF16 tensors come back as float32, BOOL as bool; the rest keep their dtype.
    A name that is not in the file raises KeyError.
    """
    with SafetensorsFile(path) as f:
        if names is None:
            names = list(f)
        elif isinstance(names, str):
            raise TypeError(f"names: expected a list of tensor names, got the str {names!r}")
        return {name: f[name] for name in names}


def read_header(path) -> tuple[int, dict[str, TensorInfo], dict]:
    """Read and check the header: (header length N, {name: TensorInfo}, metadata).

    Raises SafetensorsError (a ValueError) naming the file, and the tensor where
    there is one, for anything that would make a tensor unreadable.
    """
    path = os.fspath(path)
    file_size = os.path.getsize(path)
    if file_size < 8:
        raise SafetensorsError(f"{path}: truncated file: {file_size} bytes, "
                               f"fewer than the 8-byte header length that starts the format")
    with open(path, "rb") as f:
        header_length = int.from_bytes(f.read(8), "little")
        if header_length > file_size - 8:
            raise SafetensorsError(f"{path}: header length {header_length} bytes goes beyond the file "
                                   f"({file_size - 8} bytes after the 8-byte length): truncated or not safetensors")
        raw = f.read(header_length)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise SafetensorsError(f"{path}: header is not UTF-8 JSON ({err})") from None
    except RecursionError:       # JSON nested thousands deep: no header is, so the file is corrupt
        raise SafetensorsError(f"{path}: header is JSON nested too deeply to parse (not a safetensors "
                               f"header: it is an object of tensor entries, two levels deep)") from None
    if not isinstance(header, dict):
        raise SafetensorsError(f"{path}: header must be a JSON object, got a JSON {type(header).__name__}")
    metadata = header.pop(METADATA_KEY, {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise SafetensorsError(f"{path}: {METADATA_KEY} must be an object of strings, got {metadata!r}")
    buffer_length = file_size - 8 - header_length
    infos = {name: _parse_entry(path, name, entry, buffer_length) for name, entry in header.items()}
    _check_no_overlap(path, infos)
    return header_length, infos, metadata


def _parse_entry(path: str, name: str, entry, buffer_length: int) -> TensorInfo:
    """One header entry, checked against the format and the size of the data buffer."""
    where = f"{path}: tensor {name!r}"
    if not isinstance(entry, dict) or not {"dtype", "shape", "data_offsets"} <= entry.keys():
        raise SafetensorsError(f"{where}: expected an object with dtype, shape and data_offsets, got {entry!r}")
    dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if dtype not in STORED_DTYPES:
        raise SafetensorsError(f"{where}: unknown dtype {dtype!r}; known: {', '.join(STORED_DTYPES)}")
    if not isinstance(shape, list) or not all(_is_int(d) and d >= 0 for d in shape):
        raise SafetensorsError(f"{where}: shape must be a list of non-negative integers, got {shape!r}")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_int(o) for o in offsets)):
        raise SafetensorsError(f"{where}: data_offsets must be [begin, end] integers, got {offsets!r}")
    begin, end = offsets
    if begin < 0 or end < 0:
        raise SafetensorsError(f"{where}: negative data_offsets {offsets}: they would point into the header")
    if end < begin:
        raise SafetensorsError(f"{where}: reversed data_offsets {offsets}: end comes before begin")
    if end > buffer_length:
        raise SafetensorsError(f"{where}: data_offsets {offsets} run past the end of the data buffer "
                               f"({buffer_length} bytes): the file is truncated or the offsets are out of range")
    nbytes = math.prod(shape) * np.dtype(STORED_DTYPES[dtype]).itemsize
    if nbytes != end - begin:
        raise SafetensorsError(f"{where}: shape {tuple(shape)} of {dtype} needs {nbytes} bytes, "
                               f"but data_offsets {offsets} hold {end - begin}")
    return TensorInfo(dtype, tuple(shape), begin, end)


def _check_no_overlap(path: str, infos: dict[str, TensorInfo]) -> None:
    """Two tensors must not share bytes (empty tensors occupy none)."""
    spans = sorted((info.begin, info.end, name) for name, info in infos.items() if info.end > info.begin)
    for (_, end_a, name_a), (begin_b, _, name_b) in zip(spans, spans[1:]):
        if begin_b < end_a:
            raise SafetensorsError(f"{path}: tensor {name_b!r} overlaps tensor {name_a!r} in the data buffer "
                                   f"({name_b!r} begins at byte {begin_b}, {name_a!r} ends at {end_a})")


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def save_safetensors(path, tensors: Mapping, metadata: dict | None = None) -> None:
    """Write ``tensors`` ({name: array}) as a safetensors file, atomically.

    Tensors are laid out by decreasing item size, then by name, after a header
    padded to 8 bytes, so every tensor starts aligned to its item size (what the
    reference writer does too). The file is written under a temporary name in
    the same directory and renamed over ``path``: a failed save leaves the old
    file intact. Supported dtypes: those of CODE_OF_DTYPE (bfloat16 has no NumPy
    dtype, so BF16 is read but never written).
    """
    path = check_path("path", path)
    arrays, codes = _arrays_to_save(tensors)
    if metadata is not None and not (isinstance(metadata, dict)
                                     and all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())):
        raise TypeError(f"metadata: expected a dict of str to str, got {metadata!r}")
    order = sorted(arrays, key=lambda name: (-arrays[name].dtype.itemsize, name))
    header, offset = {}, 0
    if metadata:
        header[METADATA_KEY] = dict(metadata)
    for name in order:
        a = arrays[name]
        header[name] = {"dtype": codes[name], "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % HEADER_ALIGN)
    _write_atomically(os.fspath(path), [len(raw).to_bytes(8, "little"), raw]
                      + [arrays[name].reshape(-1).view(np.uint8).data for name in order])


def _arrays_to_save(tensors) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """({name: C-contiguous little-endian NumPy array}, {name: dtype code}), names and dtypes checked."""
    if not isinstance(tensors, Mapping):
        raise TypeError(f"tensors: expected a dict of name -> array, got {type(tensors).__name__}")
    arrays, codes = {}, {}
    for name, value in tensors.items():
        if not isinstance(name, str) or name == METADATA_KEY:
            raise TypeError(f"tensors: names must be str other than {METADATA_KEY!r}, got {name!r}")
        a = to_numpy(value)
        native = a.dtype.newbyteorder("=")
        if native not in CODE_OF_DTYPE:
            raise TypeError(f"tensors[{name!r}]: dtype {a.dtype} cannot be stored; "
                            f"supported: {', '.join(str(d) for d in CODE_OF_DTYPE)}")
        codes[name] = CODE_OF_DTYPE[native]
        # order="C" copies only when needed (np.ascontiguousarray would also turn 0-d into 1-d)
        arrays[name] = np.asarray(a, dtype=native.newbyteorder("<"), order="C")
    return arrays, codes


def _write_atomically(path: str, chunks) -> None:
    """Write the byte chunks to a temporary file beside ``path``, then rename it over ``path``."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".safetensors-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
