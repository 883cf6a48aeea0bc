"""The rest of a data-parallel step in shares (training/sharded_update.py).

Each process sums and updates its share of the parameters; every number gets the
same arithmetic as when the training process does it all, so the weights must come
out the same bit for bit, whatever the number of processes.
"""
import os

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from minitransformer.models import GPT, GPTConfig
from minitransformer.optim import AdamW
from minitransformer.training import sharded_update
from minitransformer.training.data_parallel import DataParallel
from minitransformer.training.loop import TrainConfig, make_optimizer, train_step
from minitransformer.training.sharded_update import _equal_slices, _groups
from minitransformer.training.tasks import LanguageModelTask
from minitransformer.training.workers import is_shared

V, T = 11, 8


def _model_and_task(seed, dtype=np.float64, batch_size=6):
    ids = np.random.default_rng(seed).integers(0, V, 400)
    task = LanguageModelTask(ids[:300], ids[300:], T, batch_size)
    config = GPTConfig(vocab_size=V, block_size=T, n_layer=1, n_head=2, d_model=16, p_drop=0.0)
    return GPT(config, rng=seed).astype(dtype), task


def _weights_after_steps(sharded, n_replicas, seed, dtype, n_steps=3):
    """The model's parameters after n_steps train_steps, the update in shares or not."""
    model, task = _model_and_task(seed, dtype)
    cfg = TrainConfig(grad_clip=0.05)                       # small: every step clips
    optimizer = make_optimizer(model, cfg)
    rng = np.random.default_rng(seed)
    with DataParallel(model, n_replicas, optimizer=optimizer if sharded else None) as parallel:
        assert (parallel._shards is not None) == sharded
        for step in range(1, n_steps + 1):
            train_step(model, task, task.batch("train", rng), optimizer, 1e-2 / step, cfg, parallel=parallel)
        assert all(not g.any() for worker in parallel.workers for g in worker.grads)   # summed, cleared
    return {name: p.copy() for name, p, _ in model.parameters()}, optimizer.state_dict()


@pytest.mark.parametrize("n_replicas", [2, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@settings(max_examples=3, deadline=None)
@given(seed=st.integers(0, 2**16))
def test_the_update_in_shares_gives_the_same_weights_bit_for_bit(n_replicas, dtype, seed):
    weights, state = _weights_after_steps(True, n_replicas, seed, dtype)
    weights_one, state_one = _weights_after_steps(False, n_replicas, seed, dtype)
    for name in weights:
        np.testing.assert_array_equal(weights[name], weights_one[name], err_msg=name)
    for key in state:                                       # the optimizer's state too, m and v of every share
        np.testing.assert_array_equal(state[key], state_one[key], err_msg=key)


def test_make_optimizer_puts_parameters_gradients_and_state_in_shared_memory():
    model, _ = _model_and_task(0)
    optimizer = make_optimizer(model, TrainConfig())
    assert all(is_shared(p) and is_shared(g) for _, p, g in model.parameters())
    assert all(is_shared(a) for table in optimizer.state.values() for a in table.values())
    with DataParallel(model, 2, optimizer=optimizer) as parallel:
        assert parallel.shared_params is parallel.params     # the workers read the model's own arrays
    private = AdamW(model.parameters(), 1e-3)               # state in private memory: no shares
    with DataParallel(model, 2, optimizer=private) as parallel:
        assert parallel._shards is None


def test_optimizer_parts_update_as_the_whole_optimizer():
    model, _ = _model_and_task(1)
    twin, _ = _model_and_task(1)
    optimizer, whole = make_optimizer(model, TrainConfig()), make_optimizer(twin, TrainConfig())
    groups = _groups(optimizer.params, 3)
    parts = [optimizer.part(names) for names in groups]
    rng = np.random.default_rng(1)
    for step in range(3):
        for (_, _, g), (_, _, g_twin) in zip(model.parameters(), twin.parameters()):
            g[...] = g_twin[...] = rng.standard_normal(g.shape)
        optimizer.begin_step(1e-2)
        for part in parts:
            part.t, part.lr = optimizer.t, optimizer.lr
            part.apply_update()
        whole.step(1e-2)
    for (name, p, _), (_, p_twin, _) in zip(model.parameters(), twin.parameters()):
        np.testing.assert_array_equal(p, p_twin, err_msg=name)
    assert sorted(n for names in groups for n in names) == sorted(n for n, _, _ in optimizer.params)


def test_shares_by_hand():
    assert _equal_slices(10, 3) == [(0, 3), (3, 6), (6, 10)]
    params = [(f"p{i}", np.zeros(size), None) for i, size in enumerate([10, 5, 30, 5, 40, 10])]
    assert _groups(params, 2) == [["p0", "p1", "p2", "p3"], ["p4", "p5"]]          # 50 | 50 of 100
    assert _groups(params, 3) == [["p0", "p1", "p2"], ["p3"], ["p4", "p5"]]        # 45 | 5 | 50: whole parameters


def _failing_update(self, t, lr):
    if os.getpid() != _MAIN_PID[0]:
        raise ValueError("a worker's share failed")
    return _REAL_UPDATE(self, t, lr)


_MAIN_PID = [os.getpid()]
_REAL_UPDATE = sharded_update.Shard.update


def test_an_error_in_a_workers_share_of_the_update_reaches_the_caller(monkeypatch):
    model, task = _model_and_task(2)
    cfg = TrainConfig()
    optimizer = make_optimizer(model, cfg)
    _MAIN_PID[0] = os.getpid()
    monkeypatch.setattr(sharded_update.Shard, "update", _failing_update)   # before the fork: the worker's too
    with DataParallel(model, 2, optimizer=optimizer) as parallel:
        with pytest.raises(ValueError, match="a worker's share failed") as info:
            train_step(model, task, task.batch("train", np.random.default_rng(2)), optimizer, 1e-3, cfg,
                       parallel=parallel)
        assert "in a data-parallel worker process" in "".join(getattr(info.value, "__notes__", []))
        monkeypatch.undo()
