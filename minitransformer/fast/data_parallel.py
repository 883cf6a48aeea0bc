"""Data parallelism on the cores of one CPU: the batch cut in parts, one model replica per part.

    with DataParallel(model, n_replicas=2) as parallel:   # replica 0: the model; the others: worker processes
        loss, backward = parallel.loss(task, batch)   # each part's forward and loss, at the same time
        backward()                                    # each part's backward; model.grads = their sum

How the core's loop meets it: ``parallel.twins()`` pairs the loop's two calls,
``training.loss.task_loss`` and ``task_loss_backward``, with ``parallel.task_loss`` and
``parallel.task_loss_backward`` (the same arguments and results; the cache is the parts'
backward); ``fast.train`` registers them in the core's hook ``functional.twins.TWINS``
for the run, as ``fast.enable()`` registers the kernel twins. The core takes no argument
for it.

The math. The loss is a mean over the batch's kept targets (cross_entropy.py). Cut
the batch into parts i, with N_i kept targets and mean loss L_i each, N = Σ_i N_i:

    L = Σ_i N_i L_i / N          so          ∂L/∂θ = Σ_i (N_i / N) ∂L_i/∂θ

Each part runs its own forward and backward, with the upstream gradient
dL_i = N_i / N in place of 1, and the parts' gradients are added up. It is the idea
that trains one model on many GPUs (a part per GPU; the sum is the "all-reduce"),
here with the cores of one CPU.

Why it is faster. A step is matrix products, which OpenBLAS spreads over every core,
and elementwise passes (exp, tanh, the norms), which NumPy runs on ONE core. With a
replica per core, each replica's products on one BLAS thread (perf.blas_threads),
both kinds of work use every core.

Why processes, not threads. NumPy lets go of the GIL inside its loops but holds it for
the Python between them and for each call's set-up: two threads that each make some
9,000 NumPy calls a step wait for each other there (the steps with a worker process
against a worker thread: benchmarks/RESULTS.md). So replicas 1, 2 ... live in worker processes,
each with its own interpreter and its own GIL (the reason PyTorch's
DistributedDataParallel runs a process per GPU). Replica 0 is the model itself, in
this process.

What is shared, and how: workers.py (the parameters in shared memory, copied in at every
``loss``; each worker's gradients there too, added into the model's by ``backward``; the
parts, the task and the train/eval modes through a pipe; what a worker gives back of
the memory it inherited, and why).

The ``with`` block holds OpenBLAS at one thread a replica in this process for its
whole length, not only while the parts run: a product on two BLAS threads anywhere in
between (the gradient norm's dot products) wakes OpenBLAS's worker thread, which then
spins on a core for milliseconds, just when the next step's parts want both cores.
The workers hold their count for their whole life.

When (``n_replicas_for``): NumPy arrays, a model without dropout (each replica would
draw from its own copy of the dropout generators: two parts would get the same
masks, and a resumed run could not replay the draws), at least 2 examples in a
batch, an OpenBLAS whose thread count this process can set, and the "fork" start
method in a process that may start others (not a daemonic one, such as a
multiprocessing pool's worker). Otherwise one replica: the plain step. The numbers are those of one replica
up to rounding (the sums run in another order): tests/test_fast_data_parallel.py.
"""
from __future__ import annotations

import multiprocessing
import weakref
from contextlib import ExitStack
from typing import NamedTuple

import numpy

from ..layers.module import Module
from ..validate import check_int, check_items
from ..training.loss import task_loss, task_loss_backward
from .perf import blas_thread_control, blas_threads
from .workers import Worker, shared_like, stop


class PartsCache(NamedTuple):
    backward: object         # dL -> None: every part's backward with upstream dL · N_i / N, summed into model.grads


def n_replicas_for(model, batch, requested: int) -> tuple[int, str]:
    """(replicas to use, why): ``requested`` where it can run (module docstring), else fewer."""
    requested = check_int("data_parallel", requested, low=1)
    if requested == 1:
        return 1, "off (data_parallel = 1)"
    arrays = batch if isinstance(batch, (tuple, list)) else (batch,)
    params = [p for _, p, _ in model.parameters()]
    if not all(isinstance(a, numpy.ndarray) for a in list(arrays) + params):   # CuPy's are not
        return 1, "off (the batch or the parameters are not NumPy arrays)"
    if any(_draws_dropout(m) for _, m in model.named_modules()):
        return 1, "off (the model has dropout: the replicas would draw the same masks)"
    if "fork" not in multiprocessing.get_all_start_methods():
        return 1, "off (this system cannot fork worker processes)"
    if multiprocessing.current_process().daemon:
        return 1, "off (this is a daemonic process, which may not start worker processes)"
    control = blas_thread_control()
    if control is None:
        return 1, "off (NumPy's BLAS is not an OpenBLAS whose thread count can be set)"
    cores = control[0]()                                   # the threads OpenBLAS uses now
    B = len(arrays[0])
    n = min(requested, cores, B)
    if n < 2:
        return 1, f"off ({cores} BLAS thread{'s' * (cores != 1)}, {B} example{'s' * (B != 1)} a batch)"
    k = _blas_threads_each(cores, n)
    return n, (f"{n} replicas, this process and {n - 1} worker process{'es' * (n > 2)}, "
               f"{k} BLAS thread{'s' * (k != 1)} each")


def _blas_threads_each(cores: int, n_replicas: int) -> int:
    """OpenBLAS threads a replica gets: the cores OpenBLAS had, shared out (at least 1)."""
    return max(1, cores // n_replicas)


def _draws_dropout(module) -> bool:
    """True for a module that draws dropout masks: a generator and a probability above 0
    (a Dropout of p_drop = 0 keeps its generator but draws nothing; attention keeps none then)."""
    return getattr(module, "rng", None) is not None and getattr(module, "p_drop", 1.0) > 0


def split_batch(batch, n: int) -> list[tuple]:
    """``batch`` (a tuple of arrays with the same first axis B) cut into min(n, B) parts
    along that axis, as equal as can be (numpy.array_split)."""
    sizes = {len(a) for a in batch}
    if len(sizes) != 1:
        raise ValueError(f"batch: expected arrays with the same first axis, got lengths {sorted(sizes)}")
    B = sizes.pop()
    parts = [numpy.array_split(a, min(n, B)) for a in batch]
    return [tuple(p[i] for p in parts) for i in range(min(n, B))]


class DataParallel:
    """``n_replicas`` replicas of ``model``: the model itself here, the others in worker processes.

    ``forget``: more arrays of this process that the workers never read (the optimizer's state
    buffers, as ``fast.train`` passes them): each worker gives its copy of their memory back (module
    docstring, "Memory"). Create the DataParallel after the optimizer, and pass it."""

    def __init__(self, model, n_replicas: int = 2, forget=()):
        if not isinstance(model, Module):
            raise TypeError(f"model: expected a Module (GPT, Encoder, ...), got {type(model).__name__}")
        n_replicas = check_int("n_replicas", n_replicas, low=1)
        self.model, self.n_replicas = model, n_replicas
        self.params = [p for _, p, _ in model.parameters()]
        self.grads = [g for _, _, g in model.parameters()]
        forget = check_items("forget", forget)
        for i, a in enumerate(forget):
            if not isinstance(a, numpy.ndarray):
                raise TypeError(f"forget[{i}]: expected a NumPy array (an optimizer's state buffer), got {type(a).__name__}")
        parent_only = self.params + self.grads + forget   # the workers drop their copies
        control = blas_thread_control()                   # None: the BLAS's threads stay as they are
        self.threads_per_replica = _blas_threads_each(control[0](), n_replicas) if control and n_replicas > 1 else None
        self.shared_params = shared_like(self.params) if n_replicas > 1 else []
        self.workers = [Worker(model, self.shared_params, self.threads_per_replica, parent_only)
                        for _ in range(n_replicas - 1)]
        self._task = None                                 # the task the workers hold
        self._settings = ExitStack()                      # what __enter__ set, undone by close()
        self._finalizer = weakref.finalize(self, stop, self.workers)

    def loss(self, task, batch, smoothing: float = 0.0):
        """(L, backward): the batch's mean loss (a Python float) and a function that runs every
        part's backward and leaves the sum of the parts' gradients in the model's ``grads``."""
        parts = split_batch(batch, self.n_replicas)
        workers = self.workers[:len(parts) - 1]
        if workers and task is not self._task:
            self._run(self.workers, [("task", task)] * len(self.workers), lambda: None)
            self._task = task
        for shared, p in zip(self.shared_params, self.params):
            shared[...] = p                               # the workers' parameters: this step's
        modes = [m.training for _, m in self.model.named_modules()]
        results = self._run(workers, [("loss", part, smoothing, modes) for part in parts[1:]],
                            lambda: task_loss(self.model, task, parts[0], smoothing))
        caches = [results[0][1]] + [None] * len(workers)  # the workers keep theirs
        n_kept = [results[0][1].n_kept] + [n_i for _, n_i in results[1:]]
        N = sum(n_kept)
        L = sum(n_i * L_i for n_i, (L_i, _) in zip(n_kept, results)) / N if N else 0.0
        weights = [n_i / N if N else 0.0 for n_i in n_kept]

        def backward(dL: float = 1.0):
            self._run(workers, [("backward", dL * w) for w in weights[1:]],
                      lambda: task_loss_backward(self.model, dL * weights[0], caches[0]))
            for worker in workers:
                for g, g_i in zip(self.grads, worker.grads):
                    g += g_i                                # ∂L/∂θ = Σ_i (N_i / N) ∂L_i/∂θ
                    g_i[...] = 0
        return L, backward

    # ------------------------------------------------------- the core loop's twins
    def twins(self) -> list:
        """[(plain, twin)] for the core's hook (functional.twins.TWINS): the loop's loss and its backward."""
        return [(task_loss, self.task_loss), (task_loss_backward, self.task_loss_backward)]

    def task_loss(self, model, task, batch, smoothing: float = 0.0, device="cpu"):
        """Twin of training.loss.task_loss: (L, cache) with the batch cut over the replicas; the cache
        is a ``PartsCache`` (the parts' backward), which ``task_loss_backward`` here takes. Another
        model than this one's: the plain function. In eval mode no backward follows: every replica's
        caches are dropped at once."""
        if model is not self.model:
            return task_loss(model, task, batch, smoothing, device)
        L, backward = self.loss(task, batch, smoothing)
        if not model.training:
            self.release_caches()
        return L, PartsCache(backward)

    def task_loss_backward(self, model, dL: float, cache) -> None:
        """Twin of training.loss.task_loss_backward: every part's backward, the sum in ``model.grads``."""
        if not isinstance(cache, PartsCache):
            return task_loss_backward(model, dL, cache)
        cache.backward(dL)

    def release_caches(self) -> None:
        """Drop every replica's forward caches (after a ``loss`` that no backward follows)."""
        self._run(self.workers, [("release",)] * len(self.workers), self.model.release_caches)

    def call_workers(self, fn, *args) -> list:
        """[fn(replica, *args)] run in each worker process on its replica (``fn`` picklable: a
        module-level function); for tests and benchmarks that look inside the workers."""
        return self._run(self.workers, [("call", fn, args)] * len(self.workers), lambda: None)[1:]

    def _run(self, workers, messages, own_work) -> list:
        """[own_work()] + the workers' replies to ``messages`` (one each); the workers run while this
        process does its own work. On an error anywhere (or Ctrl-C) every worker is waited for, every
        replica's caches are dropped and the workers' gradients cleared, then it is raised."""
        try:
            tickets = [worker.send(*message) for worker, message in zip(workers, messages)]
            first = own_work()
            return [first] + [worker.receive(ticket) for worker, ticket in zip(workers, tickets)]
        except BaseException:
            self.model.release_caches()                   # the model's gradients: the caller's to clear
            for worker in self.workers:
                try:
                    worker.receive(worker.send("release"), raising=False)
                except RuntimeError:
                    pass                                  # a worker that has ended: the error says why
            raise

    def close(self) -> None:
        """Stop the worker processes, give OpenBLAS its thread count back (if the block set it)."""
        self._finalizer()
        self._settings.close()

    def __enter__(self):
        """OpenBLAS at ``threads_per_replica`` threads until the block ends (module docstring)."""
        if self.threads_per_replica is not None:
            self._settings.enter_context(blas_threads(self.threads_per_replica))
        return self

    def __exit__(self, *exc):
        self.close()
        return False
