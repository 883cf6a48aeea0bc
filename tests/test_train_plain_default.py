"""train() called from Python is the plain loop a student reads: it starts no process, changes
no process-wide setting (glibc's malloc, OpenBLAS's threads), updates the model's own
parameter arrays in place, and keeps textbook AdamW state, one array per parameter."""
import ctypes
import multiprocessing
import os
import subprocess

import numpy as np
import pytest

from minitransformer.fast.perf import blas_thread_control
from minitransformer.functional.twins import TWINS
from minitransformer.models import GPT, GPTConfig
from minitransformer.training.loop import TrainConfig, make_optimizer, train
from minitransformer.training.tasks import LanguageModelTask

V, T = 13, 8


def _run():
    ids = np.random.default_rng(0).integers(0, V, 400)
    task = LanguageModelTask(ids[:300], ids[300:], block_size=T, batch_size=4)
    model = GPT(GPTConfig(vocab_size=V, block_size=T, n_layer=1, n_head=2, d_model=16, p_drop=0.0), rng=1)
    cfg = TrainConfig(steps=3, warmup_steps=1, eval_interval=100, eval_batches=1, final_eval_batches=1)
    return model, task, cfg


def test_train_starts_no_process_and_loads_no_c_library(monkeypatch):
    """No fork, no subprocess, and no ctypes library opened (which is how mallopt or
    openblas_set_num_threads would be reached): any of them raises here."""
    def refuse(what):
        def call(*args, **kwargs):
            raise AssertionError(f"train() called {what}")
        return call
    monkeypatch.setattr(os, "fork", refuse("os.fork"))
    monkeypatch.setattr(multiprocessing.Process, "start", refuse("Process.start"))
    monkeypatch.setattr(subprocess, "Popen", refuse("subprocess.Popen"))
    monkeypatch.setattr(ctypes, "CDLL", refuse("ctypes.CDLL"))
    model, task, cfg = _run()
    result = train(model, task, cfg, log=lambda s: None)
    assert [step for step, _ in result.history] == [1, 2, 3]
    assert multiprocessing.active_children() == []


def test_train_leaves_the_blas_thread_count_and_the_kernels_as_they_were():
    control = blas_thread_control()
    before = control[0]() if control else None
    seen = []
    model, task, cfg = _run()
    cfg.log_interval = 1
    train(model, task, cfg, log=lambda s: seen.append(control[0]() if control else None))
    assert seen and set(seen) == {before}               # during every step and after: untouched
    assert TWINS == {}                                  # the plain forms ran: the wing stays off


def test_the_callers_arrays_stay_the_models_and_are_updated_in_place():
    model, task, cfg = _run()
    name, W, _ = next((n, p, g) for n, p, g in model.parameters() if p.ndim == 2 and "emb" not in n)
    W_before = W.copy()
    train(model, task, cfg, log=lambda s: None)
    now = dict((n, p) for n, p, _ in model.parameters())[name]
    assert now is W                                     # the same array object, the model's
    assert W.base is None                               # its own memory, no view of a flat buffer
    assert not np.array_equal(W, W_before)              # and the steps changed it in place


def test_the_optimizer_keeps_textbook_state_one_array_per_parameter():
    model, task, cfg = _run()
    optimizer = make_optimizer(model, cfg)
    train(model, task, cfg, optimizer=optimizer, log=lambda s: None)
    names = [n for n, _, _ in model.parameters()]
    assert set(optimizer.state) == {"m", "v"} and optimizer.t == 3
    for buffer in ("m", "v"):
        table = optimizer.state[buffer]
        assert list(table) == names
        for (n, p, _), a in zip(model.parameters(), table.values()):
            assert a.shape == p.shape and a.dtype == p.dtype and a.base is None, (buffer, n)
    state = optimizer.state_dict()                       # the checkpoint's keys: per parameter name
    assert {k for k in state if "/" in k} == {f"{b}/{n}" for b in ("m", "v") for n in names}


@pytest.mark.parametrize("field", ["data_parallel", "tune_malloc"])
def test_the_wings_settings_are_not_train_configs(field):
    with pytest.raises(TypeError, match=field):
        TrainConfig(**{field: 1})
