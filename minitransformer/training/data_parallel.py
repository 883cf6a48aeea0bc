"""Data parallelism on the cores of one CPU: the batch cut in parts, one model replica per part.

    with DataParallel(model, n_replicas=2) as parallel:   # replicas share the model's parameters
        loss, backward = parallel.loss(task, batch)   # each part's forward and loss, a thread each
        backward()                                    # each part's backward; model.grads = their sum

The math. The loss is a mean over the batch's kept targets (cross_entropy.py). Cut
the batch into parts i, with N_i kept targets and mean loss L_i each, N = Σ_i N_i:

    L = Σ_i N_i L_i / N          so          ∂L/∂θ = Σ_i (N_i / N) ∂L_i/∂θ

Each part runs its own forward and backward, with the upstream gradient
dL_i = N_i / N in place of 1, and the parts' gradients are added up. It is the idea
that trains one model on many GPUs (a part per GPU; the sum is the "all-reduce"),
here with the threads of one CPU.

Why it is faster. A step is matrix products, which OpenBLAS spreads over every core,
and elementwise passes (exp, tanh, the norms), which NumPy runs on ONE core. With a
replica per core, each replica's products on one BLAS thread (perf.blas_threads),
both kinds of work use every core. NumPy lets go of the GIL inside its loops, so the
threads run at the same time except for the Python between the calls. Measured on
2 cores (AMD Zen 3, AVX2), steps of the default GPT: benchmarks/RESULTS.md.

The ``with`` block holds OpenBLAS at one thread a replica for its whole length, not
only while the parts run: a product on two BLAS threads anywhere in between (the
gradient norm's dot products) wakes OpenBLAS's worker thread, which then spins on a
core for milliseconds, just when the next step's parts want both cores (measured: the
parts took 1.8x as long right after a step on two BLAS threads). Outside a ``with``
block ``loss`` works too, with the BLAS threads as they are.

What is shared. A replica is a deep copy of the model whose parameters ARE the
model's arrays (the optimizer updates them in place: every replica sees each
update); its gradients and forward caches are its own. Each module's train/eval
mode is copied from the model at every ``loss`` call.

When (``n_replicas_for``): NumPy arrays, a model without dropout (each replica would
draw from its own copy of the dropout generators: two parts would get the same
masks, and a resumed run could not replay the draws), at least 2 examples in a
batch, and an OpenBLAS whose thread count this process can set. Otherwise one
replica: the plain step. The numbers are those of one replica up to rounding (the
sums run in another order): tests/test_data_parallel.py.
"""
from __future__ import annotations

import copy
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack

import numpy

from ..functional._kernels import fast
from ..functional.cross_entropy import cross_entropy_backward, cross_entropy_forward
from ..validate import check_int
from .perf import blas_thread_control, blas_threads


def n_replicas_for(model, batch, requested: int) -> tuple[int, str]:
    """(replicas to use, why): ``requested`` where it can run (module docstring), else fewer."""
    requested = check_int("data_parallel", requested, low=1)
    if requested == 1:
        return 1, "off (data_parallel = 1)"
    arrays = batch if isinstance(batch, (tuple, list)) else (batch,)
    params = [p for _, p, _ in model.parameters()]
    if not all(type(a) is numpy.ndarray for a in list(arrays) + params):
        return 1, "off (the batch or the parameters are not NumPy arrays)"
    if any(_draws_dropout(m) for _, m in model.named_modules()):
        return 1, "off (the model has dropout: the replicas would draw the same masks)"
    control = blas_thread_control()
    if control is None:
        return 1, "off (NumPy's BLAS is not an OpenBLAS whose thread count can be set)"
    cores = control[0]()                                   # the threads OpenBLAS uses now
    B = len(arrays[0])
    n = min(requested, cores, B)
    if n < 2:
        return 1, f"off ({cores} BLAS thread{'s' * (cores != 1)}, {B} example{'s' * (B != 1)} a batch)"
    k = _blas_threads_each(cores, n)
    return n, f"{n} replicas, a thread and {k} BLAS thread{'s' * (k != 1)} each"


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


def replicate(model):
    """A deep copy of ``model`` whose parameters are ``model``'s own arrays (not copies);
    its gradients start at zero, and no forward cache is carried over."""
    shared = {id(p): p for _, p, _ in model.parameters()}  # deepcopy's memo: these stay themselves
    replica = copy.deepcopy(model, memo=shared)
    replica.release_caches()
    replica.zero_grad()
    return replica


class DataParallel:
    """``n_replicas`` replicas of ``model`` (the first is ``model`` itself), a thread each."""

    def __init__(self, model, n_replicas: int = 2):
        n_replicas = check_int("n_replicas", n_replicas, low=1)
        self.model = model
        self.replicas = [model] + [replicate(model) for _ in range(n_replicas - 1)]
        self.grads = [[g for _, _, g in r.parameters()] for r in self.replicas]   # the same order in each
        control = blas_thread_control()                   # None: the BLAS's threads stay as they are
        self.threads_per_replica = _blas_threads_each(control[0](), n_replicas) if control and n_replicas > 1 else None
        self.pool = ThreadPoolExecutor(n_replicas - 1) if n_replicas > 1 else None
        self._settings = ExitStack()                      # what __enter__ set, undone by close()

    def loss(self, task, batch, smoothing: float = 0.0):
        """(L, backward): the batch's mean loss (a Python float) and a function that runs every
        part's backward and leaves the sum of the parts' gradients in the model's ``grads``."""
        parts = split_batch(batch, len(self.replicas))
        replicas = self.replicas[:len(parts)]
        for replica in replicas[1:]:
            for (_, m), (_, r) in zip(self.model.named_modules(), replica.named_modules()):
                r.training = m.training

        def part_loss(replica, part):
            logits, targets = task.forward(replica, part)
            L_i, cache = fast(cross_entropy_forward)(logits, targets, smoothing=smoothing)
            return float(L_i), cache

        results = self._run(part_loss, replicas, parts)
        N = sum(cache.n_kept for _, cache in results)
        L = sum(cache.n_kept * L_i for L_i, cache in results) / N if N else 0.0

        def backward():
            def part_backward(replica, cache):
                replica.backward(fast(cross_entropy_backward)(cache.n_kept / N if N else 0.0, cache))
            self._run(part_backward, replicas, [cache for _, cache in results])
            for i in range(1, len(replicas)):
                for g, g_i in zip(self.grads[0], self.grads[i]):
                    g += g_i                                # ∂L/∂θ = Σ_i (N_i / N) ∂L_i/∂θ
                    g_i[...] = 0
        return L, backward

    def release_caches(self) -> None:
        """Drop every replica's forward caches (after a ``loss`` that no backward follows)."""
        for replica in self.replicas:
            replica.release_caches()

    def _run(self, work, replicas, args) -> list:
        """[work(replica_i, args_i)], part 0 in this thread, the others on the pool. On an error
        (or Ctrl-C) the parts are waited for, every cache is dropped and the other replicas'
        gradients zeroed."""
        if len(replicas) == 1:
            return [work(replicas[0], args[0])]
        futures = []
        try:
            futures = [self.pool.submit(work, r, a) for r, a in zip(replicas[1:], args[1:])]
            first = work(replicas[0], args[0])
            return [first] + [f.result() for f in futures]
        except BaseException:
            for future in futures:
                if not future.cancel():
                    future.exception()                     # wait: its replica must be idle again
            for replica in replicas:
                replica.release_caches()
            for replica in replicas[1:]:
                replica.zero_grad()                        # the model's own: the caller's to clear
            raise

    def close(self) -> None:
        """Give OpenBLAS its thread count back (if the block set it), stop the worker threads."""
        self._settings.close()
        if self.pool is not None:
            self.pool.shutdown(wait=True)

    def __enter__(self):
        """OpenBLAS at ``threads_per_replica`` threads until the block ends (module docstring)."""
        if self.threads_per_replica is not None:
            self._settings.enter_context(blas_threads(self.threads_per_replica))
        return self

    def __exit__(self, *exc):
        self.close()
        return False
