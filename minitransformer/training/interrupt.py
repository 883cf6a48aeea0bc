"""Ctrl-C during ``train``: never half an update, and the last completed step saved.

``SigintGuard`` holds a SIGINT back while the optimizer updates the weights and raises
it right after, so the weights are always those of a whole step. ``save_interrupted``
then saves the last completed step (with the random generators as they were when the
interrupted step began, so a resume replays it bit for bit) and raises
``TrainingInterrupted``, which says whether it was saved.
"""
from __future__ import annotations

import signal
import threading

from .resume import save_run


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C during ``train``: ``step`` steps are done; ``saved`` says whether they are in ``checkpoint_path``."""

    def __init__(self, message: str, step: int, checkpoint_path, saved: bool):
        super().__init__(message)
        self.step, self.checkpoint_path, self.saved = step, checkpoint_path, saved


class SigintGuard:
    """Holds Ctrl-C back while ``active`` (the optimizer update) and raises it at ``check()``.

    Outside the update a Ctrl-C raises KeyboardInterrupt at once, as usual. Installed in
    the main thread only (``signal`` allows no other), and only where SIGINT is not
    ignored: a process started with SIGINT ignored (``nohup``, a background job) keeps it so.
    """

    def __init__(self):
        self.active = self.pending = False
        self.previous = None

    def __enter__(self):
        if (threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN):
            self.previous = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc):
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
        return False

    def _handler(self, signum, frame):
        if self.active:
            self.pending = True
        else:
            raise KeyboardInterrupt

    def check(self):
        if self.pending:
            self.pending = False
            raise KeyboardInterrupt


def save_interrupted(path, model, optimizer, batch_rng, states, done, result, cfg, meta, log):
    """Save step ``done`` (if there is a path), then raise TrainingInterrupted.

    ``states``: the generators' states when step done + 1 began (None if it had not): a
    Ctrl-C inside a forward or backward leaves the weights of step ``done``, but the
    generators have moved on.
    """
    model.zero_grad()
    model.release_caches()
    if not path:
        raise TrainingInterrupted(f"interrupted after step {done}; no checkpoint path, nothing saved",
                                  done, path, False) from None
    try:
        save_run(path, model, optimizer, batch_rng, done, result, cfg, meta, generator_states=states)
    except (ValueError, OSError) as e:
        raise TrainingInterrupted(f"interrupted after step {done}; the checkpoint could not be saved ({e})",
                                  done, path, False) from None
    log(f"interrupted: step {done} saved to {path}")
    raise TrainingInterrupted(f"interrupted after step {done}; saved to {path}", done, path, True) from None
