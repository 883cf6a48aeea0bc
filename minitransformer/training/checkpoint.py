"""Checkpoints: one ``.npz`` file holding the parameters, the optimizer state and
a JSON document (the model family and config, the tokenizer, the step, the random
generators' states), so that a run can be resumed bit for bit.

Writes are atomic: the file is written next to its destination under a temporary
name and renamed over it (``os.replace`` is atomic on POSIX and Windows), so a
failed or interrupted save leaves the previous checkpoint intact. A parameter or
optimizer buffer holding NaN or inf is refused (ValueError) before anything is
written: a diverged run never overwrites the last good checkpoint. A temporary left
by a save that a kill cut short (``.ckpt-*.npz.tmp``) is removed when the next run
into that folder starts (``remove_stale_temporaries``, which ``train`` calls).
"""
from __future__ import annotations

import glob
import json
import os
import tempfile
import zipfile
import zlib

import numpy as np

from ..validate import check_path

from ..backend import to_numpy

PARAM, OPTIM, META = "param/", "optim/", "meta.json"
TEMPORARY = ".ckpt-*.npz.tmp"       # _write_atomically's temporary names, beside the checkpoint


def save_checkpoint(path, model, *, optimizer_state: dict | None = None, meta: dict | None = None) -> None:
    """Write ``model``'s parameters, ``optimizer_state`` (name -> array or JSON-able) and ``meta``."""
    path = check_path("path", path)
    if not callable(getattr(model, "state_dict", None)):
        raise TypeError(f"model: expected a Module (with state_dict()), got {type(model).__name__}")
    for name, d in (("optimizer_state", optimizer_state), ("meta", meta)):
        if d is not None and not isinstance(d, dict):
            raise TypeError(f"{name}: expected a dict or None, got {type(d).__name__}")
    arrays = {PARAM + name: to_numpy(p) for name, p in model.state_dict().items()}
    optim_meta = {}
    for key, value in (optimizer_state or {}).items():
        if hasattr(value, "shape"):
            arrays[OPTIM + key] = to_numpy(value)
        else:
            optim_meta[key] = value
    for key, a in arrays.items():
        if a.dtype.kind in "fc" and not np.isfinite(a).all():
            what = f"parameter {key[len(PARAM):]!r}" if key.startswith(PARAM) else f"optimizer state {key[len(OPTIM):]!r}"
            raise ValueError(f"checkpoint: {what} holds non-finite values (NaN or inf); refusing to write "
                             f"{path}, which keeps its previous contents")
    doc = {**(meta or {}), "optimizer": optim_meta}
    arrays[META] = np.frombuffer(json.dumps(doc).encode("utf-8"), dtype=np.uint8)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    try:
        _write_atomically(path, directory, arrays)
    except OSError as e:            # disk full, read-only folder: one line, the old file untouched
        raise type(e)(f"checkpoint: cannot write {path} ({e.strerror or e}); "
                      f"the previous checkpoint there, if any, is intact") from None


def _write_atomically(path: str, directory: str, arrays: dict) -> None:
    """Write under a temporary name beside ``path``, then rename it over ``path``."""
    prefix, _, suffix = TEMPORARY.partition("*")
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=directory)
    try:
        os.chmod(tmp, 0o666 & ~_umask())        # mkstemp makes it 0600; a checkpoint is shared like any file
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def remove_stale_temporaries(path) -> list[str]:
    """Remove the temporaries of saves to ``path``'s folder that never finished (a kill between
    the write and the rename); returns their names. Called when a run starts: no save of
    this run is under way then, and one run at a time writes a run folder."""
    directory = os.path.dirname(os.path.abspath(check_path("path", path)))
    removed = []
    for tmp in sorted(glob.glob(os.path.join(glob.escape(directory), TEMPORARY))):
        try:
            os.remove(tmp)
            removed.append(os.path.basename(tmp))
        except FileNotFoundError:
            pass
    return removed


def _umask() -> int:
    """The process's umask (reading it means setting it: it is set straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def load_checkpoint(path) -> tuple[dict, dict, dict]:
    """Returns (parameters, optimizer_state, meta); a clear ValueError for a bad file."""
    path = check_path("path", path)
    if os.path.isdir(path):
        inside = os.path.join(path, "checkpoint.npz")
        raise IsADirectoryError(f"checkpoint: {path} is a folder, not a checkpoint file; the file train "
                                f"writes there is {inside} ({'it exists' if os.path.isfile(inside) else 'not there either'})")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"checkpoint: no file at {path}")
    try:
        files = _read_npz(path)
    except (OSError, ValueError, zipfile.BadZipFile, EOFError, zlib.error, NotImplementedError) as e:
        raise ValueError(f"checkpoint: {path} is not a readable .npz checkpoint "
                         f"(truncated or corrupted: {e})") from None
    if META not in files:
        raise ValueError(f"checkpoint: {path} has no {META} entry; not a minitransformer checkpoint")
    try:
        meta = json.loads(files.pop(META).tobytes().decode("utf-8"))
    except (ValueError, RecursionError) as e:      # not UTF-8, not JSON
        raise ValueError(f"checkpoint: {path}: {META} is not UTF-8 JSON ({e})") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("optimizer", {}), dict):
        raise ValueError(f"checkpoint: {path}: {META} is not a JSON object with an 'optimizer' object")
    params = {k[len(PARAM):]: v for k, v in files.items() if k.startswith(PARAM)}
    optim = {k[len(OPTIM):]: v for k, v in files.items() if k.startswith(OPTIM)}
    optim.update(meta.pop("optimizer", {}))
    return params, optim, meta


def _read_npz(path: str) -> dict:
    """Every array of the .npz at ``path``; each .npy header is checked against the bytes stored
    for it first, so a corrupted header claiming 10**12 entries is a ValueError, not a MemoryError."""
    fmt = np.lib.format
    arrays = {}
    with zipfile.ZipFile(path) as z:
        for info in z.infolist():
            with z.open(info) as f:
                version = fmt.read_magic(f)
                if version not in ((1, 0), (2, 0)):
                    raise ValueError(f"entry {info.filename!r}: .npy format version {version} is not one "
                                     f"numpy.savez writes")
                read_header = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
                shape, _, dtype = read_header(f)
                needed = int(np.prod(shape, dtype=object)) * dtype.itemsize
                if needed > info.file_size:
                    raise ValueError(f"entry {info.filename!r} claims shape {shape} of {dtype} "
                                     f"({needed} bytes) in {info.file_size} bytes")
            with z.open(info) as f:
                arrays[info.filename.removesuffix(".npy")] = fmt.read_array(f, allow_pickle=False)
    return arrays


def generator_state(rng) -> dict:
    """The JSON-able state of a NumPy generator (PCG64 state ints are plain Python ints)."""
    return rng.bit_generator.state


def set_generator_state(rng, state: dict) -> None:
    rng.bit_generator.state = state
