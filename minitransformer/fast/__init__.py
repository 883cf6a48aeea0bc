"""The speed wing: everything that exists only to make a training step faster.

The core (functional/, layers/, models/, optim/, training/) is the reference a
student reads, and it never imports this package. Switching the wing on is one
visible line:

    from minitransformer import fast
    fast.enable()        # kernel twins for softmax, norms, GELU, attention, cross-entropy
    ...
    fast.disable()       # back to the plain forms

or ``with fast.enabled(): ...``; or, for a whole training run,

    result = fast.train(model, task, TrainConfig(...))   # the core's train() with the wing

The command line ``python -m minitransformer train`` runs ``fast.train`` (``--plain``:
the core's ``train``). What is here, and what each piece buys: docs/speed.md.

- ``kernels/``: twins of plain functional routines (same arguments, result and
  cache; fewer passes over memory), registered in the core's hook
  ``functional.twins.TWINS`` by ``enable()``;
- ``trainer.py``: ``train``, the core loop with the twins, data parallelism and malloc tuning;
- ``data_parallel.py``, ``workers.py``: the batch in parts over model replicas, the
  replicas past the first in forked worker processes;
- ``perf.py``: process settings (glibc's malloc thresholds, OpenBLAS's thread count);
- ``cuda_adamw.py``: ``FusedAdamW``, AdamW in one CUDA kernel per parameter (on a GPU,
  ``train`` uses it and leaves the NumPy twins off).
"""
from __future__ import annotations

from contextlib import contextmanager

from ..functional.twins import TWINS
from .kernels import pairs


def enable() -> None:
    """Route the Modules' hot calls through the kernel twins (process-wide, until ``disable()``)."""
    TWINS.update(pairs())


def disable() -> None:
    """Back to the plain forms everywhere."""
    TWINS.clear()


def is_enabled() -> bool:
    return bool(TWINS)


@contextmanager
def enabled(twins=None):
    """``with fast.enabled():`` the kernel twins inside the block, the previous state after it.
    ``twins``: these [(plain, twin)] pairs instead (fast.train adds its data-parallel pair)."""
    before = dict(TWINS)
    TWINS.update(pairs() if twins is None else twins)
    try:
        yield
    finally:
        TWINS.clear()
        TWINS.update(before)


from .trainer import train  # noqa: E402  (after enabled(), which it uses)
