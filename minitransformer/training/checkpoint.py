"""Checkpoints: one ``.npz`` file holding the parameters, the optimizer state and
a JSON document (the model family and config, the tokenizer, the step, the random
generators' states), so that a run can be resumed bit for bit.

Writes are atomic: the file is written next to its destination under a temporary
name and renamed over it (``os.replace`` is atomic on POSIX and Windows), so a
failed or interrupted save leaves the previous checkpoint intact. A parameter or
optimizer buffer holding NaN or inf is refused (ValueError) before anything is
written: a diverged run never overwrites the last good checkpoint.
"""
from __future__ import annotations

import json
import os
import tempfile
import zipfile

import numpy as np

from ..validate import check_path

from ..backend import to_numpy

PARAM, OPTIM, META = "param/", "optim/", "meta.json"


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
    fd, tmp = tempfile.mkstemp(prefix=".ckpt-", suffix=".npz.tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def load_checkpoint(path) -> tuple[dict, dict, dict]:
    """Returns (parameters, optimizer_state, meta); a clear ValueError for a bad file."""
    path = check_path("path", path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"checkpoint: no file at {path}")
    try:
        with np.load(path, allow_pickle=False) as f:
            files = {k: f[k] for k in f.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
        raise ValueError(f"checkpoint: {path} is not a readable .npz checkpoint ({e})") from None
    if META not in files:
        raise ValueError(f"checkpoint: {path} has no {META} entry; not a minitransformer checkpoint")
    meta = json.loads(files.pop(META).tobytes().decode("utf-8"))
    params = {k[len(PARAM):]: v for k, v in files.items() if k.startswith(PARAM)}
    optim = {k[len(OPTIM):]: v for k, v in files.items() if k.startswith(OPTIM)}
    optim.update(meta.pop("optimizer", {}))
    return params, optim, meta


def generator_state(rng) -> dict:
    """The JSON-able state of a NumPy generator (PCG64 state ints are plain Python ints)."""
    return rng.bit_generator.state


def set_generator_state(rng, state: dict) -> None:
    rng.bit_generator.state = state
