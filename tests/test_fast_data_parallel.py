"""Data parallelism (the speed wing's fast/data_parallel.py): the parts' weighted gradients add up to the batch's.

    L = Σ_i N_i L_i / N   ⇒   ∂L/∂θ = Σ_i (N_i / N) ∂L_i/∂θ

checked against one forward and backward of the whole batch, in float64, for the model
families and their targets (none ignored, MLM's few kept, seq2seq's padded, the
classifiers' labels), over drawn batch sizes, replica counts and recomputation; plus what the
training loop relies on: the worker processes see each step's parameters, follow train/eval
mode, come out of errors (theirs, this process's, Ctrl-C) clean, a dead worker is named, and
resume stays bit for bit.
"""
import mmap
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from minitransformer.functional.cross_entropy import cross_entropy_backward, cross_entropy_forward
from minitransformer.layers import set_recompute
from minitransformer.optim import AdamW
from minitransformer.models import GPT, Encoder, EncoderConfig, GPTConfig, Seq2Seq, Seq2SeqConfig
from minitransformer.training.classification import tabular_task, vit_task
from minitransformer import fast
from minitransformer.fast import perf
from minitransformer.fast.data_parallel import DataParallel, n_replicas_for, split_batch
from minitransformer.fast.perf import blas_thread_control, blas_threads, release_free_heap
from minitransformer.fast.workers import replicate
from minitransformer.functional.twins import twin
from minitransformer.training.loop import TrainConfig, evaluate, make_optimizer, train, train_step
from minitransformer.training.loss import task_loss, task_loss_backward
from minitransformer.training.tasks import LanguageModelTask, MaskedLMTask, SequenceTaskData

V, T = 11, 8
RTOL = {np.float64: 1e-10, np.float32: 1e-4}   # the same sums in another order
ATOL = {np.float64: 1e-12, np.float32: 1e-6}


def _family(name: str, batch_size: int, seed: int):
    """(model, task) of a family, dropout 0: float64, the classifiers float32."""
    ids = np.random.default_rng(seed).integers(0, V - 1, 400)
    common = dict(block_size=T, n_layer=1, n_head=2, d_model=8, p_drop=0.0)
    if name == "gpt":
        model, task = GPT(GPTConfig(vocab_size=V, **common), rng=seed), \
            LanguageModelTask(ids[:300], ids[300:], T, batch_size)
    elif name == "mlm":                     # ~15% of the targets kept: the parts' N_i differ
        model, task = Encoder(EncoderConfig(vocab_size=V, **common), rng=seed), \
            MaskedLMTask(ids[:300], ids[300:], T, batch_size, V, mask_id=V - 1)
    elif name == "seq2seq":                 # padded targets (IGNORE_INDEX after EOS)
        model = Seq2Seq(Seq2SeqConfig(vocab_size=16, **{**common, "block_size": 8}), rng=seed)
        task = SequenceTaskData("reverse", 16, (1, 6), batch_size, seed=seed)
    else:                                   # classifiers: (inputs..., labels), tabular two inputs
        make = vit_task if name == "vit" else tabular_task
        model, task, _ = make(batch_size=batch_size, seed=seed, n_val=8, n_layer=1, n_head=2, d_model=8)
        return model, task                  # float32: their generated inputs are float32
    return model.astype(np.float64), task


def _whole_batch(model, task, batch):
    """The plain step's loss and gradients (one forward and backward of the whole batch)."""
    logits, targets = task.forward(model, batch)
    L, cache = cross_entropy_forward(logits, targets)
    model.backward(cross_entropy_backward(1.0, cache))
    grads = {name: g.copy() for name, _, g in model.parameters()}
    model.zero_grad()
    return float(L), grads


@pytest.mark.parametrize("recompute", [False, True], ids=["stored", "recompute"])
# every family and setting, always
@pytest.mark.parametrize("family", ["gpt", "mlm", "seq2seq", "vit", "tabular"])
@settings(max_examples=4, deadline=None)
@given(batch_size=st.integers(1, 7), n_replicas=st.integers(2, 4), seed=st.integers(0, 2**16))
def test_the_parts_gradients_add_up_to_the_whole_batchs(family, batch_size, n_replicas, recompute, seed):
    model, task = _family(family, batch_size, seed)
    batch = task.batch("train", np.random.default_rng(seed))
    L_whole, grads_whole = _whole_batch(model, task, batch)
    set_recompute(model, recompute)                 # the replicas copy the blocks' setting
    dtype = next(model.parameters())[1].dtype.type
    rtol, atol = RTOL[dtype], ATOL[dtype]
    with DataParallel(model, n_replicas) as parallel:
        L, backward = parallel.loss(task, batch)
        backward()
        assert L == pytest.approx(L_whole, rel=rtol, abs=atol)
        for name, _, g in model.parameters():
            np.testing.assert_allclose(g, grads_whole[name], rtol=rtol, atol=atol, err_msg=name)
        assert all(not g.any() for worker in parallel.workers for g in worker.grads)  # summed, cleared


def test_the_loops_twins_are_its_loss_and_backward_over_the_replicas():
    """The one seam by which data parallelism enters the core's loop: twin(task_loss) and
    twin(task_loss_backward), registered for the block, give the whole batch's loss and gradients
    (upstream dL scales them); another model, and the plain cache, take the plain functions."""
    model, task = _family("gpt", 5, 3)
    other, _ = _family("gpt", 5, 4)
    batch = task.batch("train", np.random.default_rng(3))
    L_whole, grads_whole = _whole_batch(model, task, batch)
    L_other, grads_other = _whole_batch(other, task, batch)
    rtol, atol = RTOL[np.float64], ATOL[np.float64]
    with DataParallel(model, 2) as parallel, fast.enabled(parallel.twins()):
        L, cache = twin(task_loss)(model, task, batch)
        twin(task_loss_backward)(model, 0.5, cache)
        assert L == pytest.approx(L_whole, rel=rtol, abs=atol)
        for name, _, g in model.parameters():
            np.testing.assert_allclose(g, 0.5 * grads_whole[name], rtol=rtol, atol=atol, err_msg=name)
        L, cache = twin(task_loss)(other, task, batch)                 # not the replicated model
        twin(task_loss_backward)(other, 1.0, cache)
        assert L == pytest.approx(L_other, rel=rtol, abs=atol)
        for name, _, g in other.parameters():
            np.testing.assert_allclose(g, grads_other[name], rtol=rtol, atol=atol, err_msg=name)
    assert twin(task_loss) is task_loss and twin(task_loss_backward) is task_loss_backward   # after the block


def test_the_plain_loop_takes_no_argument_that_only_the_wing_uses():
    import inspect
    for fn in (train, train_step, evaluate):
        assert "parallel" not in inspect.signature(fn).parameters, fn.__name__


def test_a_batch_with_every_target_ignored_has_loss_0_and_no_gradient():
    model, task = _family("mlm", 4, 0)
    inputs, labels = task.batch("train", np.random.default_rng(0))
    with DataParallel(model, 2) as parallel:
        L, backward = parallel.loss(task, (inputs, np.full_like(labels, -100)))
        backward()
    assert L == 0.0 and all(not g.any() for _, _, g in model.parameters())


def _parameters(replica):
    return {name: p.copy() for name, p, _ in replica.parameters()}


def _modes(replica):
    return [m.training for _, m in replica.named_modules()]


def _holds_caches(replica):
    return any(m._cache is not None for _, m in replica.named_modules())


def _blas_count(replica):
    return blas_thread_control()[0]()


class _FailsIn:
    """A task whose forward raises ``error`` in the process ``pid`` or in every other one."""

    def __init__(self, task, pid, error, here):
        self.task, self.pid, self.error, self.here = task, pid, error, here

    def forward(self, model, batch, device="cpu"):
        if (os.getpid() == self.pid) == self.here:
            raise self.error
        return self.task.forward(model, batch, device)


def test_replicate_puts_the_given_arrays_in_a_copy_of_the_model():
    model = GPT(GPTConfig(vocab_size=V, block_size=T, n_layer=1, n_head=2, d_model=8), rng=0)  # tied head
    params = [p.copy() for _, p, _ in model.parameters()]
    grads = [np.zeros_like(p) for p in params]
    replica = replicate(model, params, grads)
    triples = list(replica.parameters())
    assert [p for _, p, _ in triples] == params and [g for _, _, g in triples] == grads   # the same objects
    assert all(p is q for (_, p, _), q in zip(triples, params))
    assert all(p is not q for (_, p, _), (_, q, _) in zip(triples, model.parameters()))
    assert len(triples) == len(list(model.parameters()))          # the tied weight still one array


def test_the_workers_see_each_steps_parameters():
    model, task = _family("gpt", 4, 1)
    cfg = TrainConfig()
    optimizer = make_optimizer(model, cfg)
    batch = task.batch("train", np.random.default_rng(1))
    with DataParallel(model, 2) as parallel, fast.enabled(parallel.twins()):
        for _ in range(2):                    # the update happens in this process's arrays only
            train_step(model, task, batch, optimizer, 1e-2, cfg)
        L, _ = parallel.loss(task, batch)     # copies this step's parameters into the shared ones
        seen = parallel.call_workers(_parameters)[0]
        parallel.release_caches()
    assert all(np.array_equal(seen[name], p) for name, p, _ in model.parameters())
    assert L == pytest.approx(_whole_batch(model, task, batch)[0], rel=RTOL[np.float64])


def test_replicas_follow_the_models_train_and_eval_modes_and_blas_count():
    model, task = _family("gpt", 4, 2)
    with DataParallel(model, 2) as parallel:
        model.eval()
        parallel.loss(task, task.batch("train", np.random.default_rng(2)))
        assert parallel.call_workers(_modes) == [[False] * len(_modes(model))]
        model.train()
        parallel.loss(task, task.batch("train", np.random.default_rng(2)))
        assert parallel.call_workers(_modes) == [[True] * len(_modes(model))]
        if parallel.threads_per_replica is not None:
            assert parallel.call_workers(_blas_count) == [parallel.threads_per_replica]


@pytest.mark.parametrize("here", [False, True], ids=["in a worker", "in this process"])
@pytest.mark.parametrize("error", [RuntimeError("a part failed"), KeyboardInterrupt()], ids=["error", "Ctrl-C"])
def test_an_error_in_any_part_reaches_the_caller_and_leaves_every_replica_clean(here, error):
    model, task = _family("gpt", 5, 3)
    batch = task.batch("train", np.random.default_rng(3))
    failing = _FailsIn(task, os.getpid(), error, here)
    with DataParallel(model, 3) as parallel:
        with pytest.raises(type(error)):
            parallel.loss(failing, batch)
        assert not _holds_caches(model) and parallel.call_workers(_holds_caches) == [False, False]
        L, backward = parallel.loss(task, batch)      # the next step runs as if nothing happened
        backward()
        grads = {name: g.copy() for name, _, g in model.parameters()}
        model.zero_grad()
    L_whole, grads_whole = _whole_batch(model, task, batch)
    assert L == pytest.approx(L_whole, rel=RTOL[np.float64])
    for name, g in grads.items():
        np.testing.assert_allclose(g, grads_whole[name], rtol=RTOL[np.float64], atol=ATOL[np.float64])


def test_a_second_backward_is_refused_and_leaves_the_workers_clean():
    model, task = _family("gpt", 4, 5)
    batch = task.batch("train", np.random.default_rng(5))
    with DataParallel(model, 2) as parallel:
        _, backward = parallel.loss(task, batch)
        backward()
        with pytest.raises(RuntimeError, match="without a pending"):
            backward()                            # no cache left, here or in the worker
        assert parallel.call_workers(_holds_caches) == [False]
        assert all(not g.any() for g in parallel.workers[0].grads)


def test_a_task_that_cannot_be_pickled_and_a_dead_worker_are_named():
    model, task = _family("gpt", 4, 6)
    batch = task.batch("train", np.random.default_rng(6))
    with DataParallel(model, 2) as parallel:
        task.forward = lambda m, b, device="cpu": LanguageModelTask.forward(task, m, b, device)
        with pytest.raises(TypeError, match="pickle"):
            parallel.loss(task, batch)
        del task.forward
        parallel.loss(task, batch)
        parallel.release_caches()
        os.kill(parallel.workers[0].process.pid, signal.SIGKILL)
        parallel.workers[0].process.join()
        with pytest.raises(RuntimeError, match="worker process .* has ended"):
            parallel.loss(task, batch)


def test_the_wings_train_with_two_replicas_follows_the_plain_loop_and_resumes_bit_for_bit(tmp_path):
    """fast.train (the twins, two replicas) against the plain train: the same steps to float32
    rounding (the sums over two parts and the twins run in another order); with one replica and
    the wing's kernels off it is the plain loop, bit for bit; a resume continues exactly."""
    ids = np.random.default_rng(0).integers(0, V, 400)
    task = LanguageModelTask(ids[:300], ids[300:], block_size=T, batch_size=4)
    config = GPTConfig(vocab_size=V, block_size=T, n_layer=1, n_head=2, d_model=16, p_drop=0.0)
    cfg = TrainConfig(steps=8, warmup_steps=2, eval_interval=100, eval_batches=2, final_eval_batches=2)
    quiet, logs = (lambda s: None), []
    plain = train(GPT(config, rng=1), task, cfg, log=quiet)
    two = fast.train(GPT(config, rng=1), task, cfg, data_parallel=2, malloc=False, log=logs.append)
    if n_replicas_for(GPT(config, rng=1), task.batch("train", np.random.default_rng(0)), 2)[0] == 2:
        assert any(line.startswith("data parallel: 2 replicas") for line in logs)
    np.testing.assert_allclose([l for _, l in two.history], [l for _, l in plain.history], rtol=1e-5)
    np.testing.assert_allclose(two.evals, plain.evals, rtol=1e-5)      # the evaluations split too
    assert not fast.is_enabled()                                        # the twins for the run only
    with DataParallel(GPT(config, rng=1), 1) as one:                    # one replica: the model itself
        assert one.workers == []
    ckpt = str(tmp_path / "run.npz")
    fast.train(GPT(config, rng=1), task, cfg, data_parallel=2, malloc=False, checkpoint_path=ckpt,
               stop_after=3, log=quiet)
    resumed = fast.train(GPT(config, rng=7), task, cfg, data_parallel=2, malloc=False, checkpoint_path=ckpt,
                         resume=True, log=quiet)
    assert [l for _, l in resumed.history] == [l for _, l in two.history]   # exact


def test_when_data_parallelism_runs_and_why_not():
    model, task = _family("gpt", 4, 4)
    batch = task.batch("train", np.random.default_rng(4))
    if blas_thread_control() is not None and blas_thread_control()[0]() >= 2:
        assert n_replicas_for(model, batch, 2)[0] == 2
    assert n_replicas_for(model, batch, 1) == (1, "off (data_parallel = 1)")
    assert n_replicas_for(model, tuple(a[:1] for a in batch), 2)[0] == 1        # one example
    dropout = GPT(GPTConfig(vocab_size=V, block_size=T, n_layer=1, n_head=2, d_model=8, p_drop=0.1), rng=0)
    n, why = n_replicas_for(dropout, batch, 2)
    assert n == 1 and "dropout" in why
    with multiprocessing.get_context("fork").Pool(1) as pool:           # its workers are daemonic
        n, why = pool.apply(n_replicas_for, (model, batch, 2))
    assert n == 1 and "daemonic" in why
    with pytest.raises(ValueError, match="data_parallel"):
        n_replicas_for(model, batch, 0)
    with pytest.raises(TypeError, match=r"forget\[1\]: expected a NumPy array"):
        DataParallel(model, 2, forget=[np.zeros(3), [0.0]])
    with pytest.raises(ValueError, match="data_parallel"):
        fast.train(model, task, TrainConfig(steps=1), data_parallel=0)
    with pytest.raises(TypeError, match="data_parallel"):
        fast.train(model, task, TrainConfig(steps=1), data_parallel=True)


def test_split_batch_keeps_the_order_and_names_a_ragged_batch():
    x, y = np.arange(14).reshape(7, 2), np.arange(7)
    parts = split_batch((x, y), 3)
    assert [len(p[0]) for p in parts] == [3, 2, 2]
    np.testing.assert_array_equal(np.concatenate([p[0] for p in parts]), x)
    np.testing.assert_array_equal(np.concatenate([p[1] for p in parts]), y)
    assert len(split_batch((x, y), 10)) == 7                                   # never an empty part
    with pytest.raises(ValueError, match=r"batch: expected arrays with the same first axis, got lengths \[6, 7\]"):
        split_batch((x, y[:6]), 2)


@pytest.mark.skipif(blas_thread_control() is None, reason="NumPy's BLAS here is not an OpenBLAS (the count "
                    "cannot be set, and DataParallel leaves it alone: tested above)")
def test_blas_threads_sets_the_count_inside_the_block_only():
    get = blas_thread_control()[0]
    before = get()
    with blas_threads(1):
        assert get() == 1
    assert get() == before
    with pytest.raises(KeyError), blas_threads(1):
        raise KeyError("inside")
    assert get() == before
    with pytest.raises(ValueError, match="n: expected"), blas_threads(0):
        pass
    assert get() == before
    with DataParallel(GPT(GPTConfig(vocab_size=V, block_size=T, n_layer=1, n_head=2, d_model=8), rng=0), 2) as p:
        assert get() == max(1, before // 2) == p.threads_per_replica   # for the block's whole length
    assert get() == before


_ORPHAN = """
import numpy as np, sys, time
from minitransformer.models import GPT, GPTConfig
from minitransformer.fast.data_parallel import DataParallel
model = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, d_model=8), rng=0)
parallel = DataParallel(model, 3)                 # the second worker's fork inherits the first's pipe
print(*(worker.process.pid for worker in parallel.workers), flush=True)
time.sleep(60)
"""


def test_a_worker_ends_when_the_main_process_is_killed_outright(tmp_path):
    main = subprocess.Popen([sys.executable, "-c", _ORPHAN], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    workers = [int(pid) for pid in main.stdout.readline().split()]
    main.kill()                                   # SIGKILL: no atexit, no pipe closed by hand
    main.wait()
    deadline = time.monotonic() + 10
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [w for w in workers if _alive(w)]
    for w in left:                                # a failure leaves no process behind
        os.kill(w, signal.SIGKILL)
    assert len(workers) == 2 and left == []


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, or a pid reused, counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


_MAIN_ARRAYS = []        # set by the test below before the fork: what a worker inherited


def _inherited_sums(replica):
    return [float(np.abs(a).sum()) for a in _MAIN_ARRAYS]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="madvise(MADV_DONTNEED) is Linux's")
def test_workers_drop_their_copies_of_the_main_processs_arrays():
    _, task = _family("gpt", 4, 7)
    model = GPT(GPTConfig(vocab_size=V, block_size=T, n_layer=1, n_head=2, d_model=64, p_drop=0.0),
                rng=7).astype(np.float64)
    optimizer = AdamW(model.parameters(), 1e-3)
    big = [p for _, p, _ in model.parameters() if p.nbytes >= 3 * mmap.PAGESIZE]   # whole pages inside
    assert len(big) >= 3
    _MAIN_ARRAYS[:] = big + [optimizer.state["m"][name] for name, p, _ in optimizer.params if p.nbytes >= 3 * mmap.PAGESIZE]
    for a in _MAIN_ARRAYS:
        a[...] = 1.0
    try:
        with DataParallel(model, 2, forget=_state(optimizer)) as parallel:
            seen = parallel.call_workers(_inherited_sums)[0]
            batch = task.batch("train", np.random.default_rng(7))
            L, backward = parallel.loss(task, batch)           # the replica reads none of them
            backward()
    finally:
        here = _inherited_sums(None)
        _MAIN_ARRAYS.clear()
    assert _MAIN_ARRAYS == [] and all(h == a.size for h, a in zip(here, big))      # this process: untouched
    assert all(s < h for s, h in zip(seen, here))     # the worker: its whole pages read as zeros now
    assert L == pytest.approx(_whole_batch(model, task, batch)[0], rel=RTOL[np.float64])


def _state(optimizer) -> list:
    """The optimizer's state buffers, as fast.train passes them to DataParallel(forget=...)."""
    return [a for table in optimizer.state.values() for a in table.values()]


@pytest.mark.skipif(perf._glibc() is None, reason="malloc_trim is glibc's")
def test_the_heap_can_be_trimmed():
    if perf.tune_malloc():                            # 32 MB arrays from the heap, never trimmed
        freed = np.ones(4 * 2**20)
        del freed                                     # 32 MB free inside the heap now
        assert release_free_heap()                    # given back
