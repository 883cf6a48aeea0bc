"""Data parallelism on the cores of one CPU: the batch cut in parts, one model replica per part.

    with DataParallel(model, n_replicas=2) as parallel:   # replica 0: the model; the others: worker processes
        loss, backward = parallel.loss(task, batch)   # each part's forward and loss, at the same time
        backward()                                    # each part's backward; model.grads = their sum

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
9,000 NumPy calls a step wait for each other there. Measured on 2 cores (AMD Zen 3,
AVX2), half a step of config b on one core: 201 ms alone, 221-230 ms with another
half in a second thread, 208 ms with it in a second process; whole steps of configs a
and b 7-8% faster with a worker process than with a worker thread (c, whose NumPy calls
are longer, 1-3%): benchmarks/RESULTS.md. So replicas 1, 2 ... live in worker processes,
each with its own interpreter and its own GIL (the reason PyTorch's
DistributedDataParallel runs a process per GPU). Replica 0 is the model itself, in
this process.

What is shared, and how. The workers are forked (multiprocessing's "fork": Linux and
the like), so each starts with a copy of the model made here. Two kinds of arrays
live in shared memory (an anonymous shared ``mmap``, the same pages in every process):
the parameters, which ``loss`` copies in from the model at every call (the optimizer
updates the model's own arrays; 3 MB for the default GPT, a fraction of a millisecond),
and each worker's gradients, which ``backward`` adds into the model's and clears. The
parts, the task (once per task object) and each module's train/eval mode travel
through a pipe (pickled); so do the replies, a part's loss and kept-target count.
Workers ignore Ctrl-C (the training loop handles it here) and end when the
DataParallel closes or this process ends.

Memory. A forked worker starts with every page of this process, shared until one of
the two writes it; this process writes its parameters, gradients and optimizer state
at every step, and each write would copy a page whose old copy stays with the worker,
unused. So a worker first gives back its copy of those arrays (``release_pages``: the
model's parameters and gradients, and what ``forget`` lists, as ``train`` passes
``optimizer.state_arrays()``) and of the free heap it inherited
(``perf.release_free_heap``). What is left is what replicas cost anywhere: the shared
parameters and each worker's gradients (one copy of the parameters each) and each
part's activations. Measured: benchmarks/RESULTS.md.

The ``with`` block holds OpenBLAS at one thread a replica in this process for its
whole length, not only while the parts run: a product on two BLAS threads anywhere in
between (the gradient norm's dot products) wakes OpenBLAS's worker thread, which then
spins on a core for milliseconds, just when the next step's parts want both cores
(measured: the parts took 1.8x as long right after a step on two BLAS threads). The
workers hold their count for their whole life.

When (``n_replicas_for``): NumPy arrays, a model without dropout (each replica would
draw from its own copy of the dropout generators: two parts would get the same
masks, and a resumed run could not replay the draws), at least 2 examples in a
batch, an OpenBLAS whose thread count this process can set, and the "fork" start
method in a process that may start others (not a daemonic one, such as a
multiprocessing pool's worker). Otherwise one replica: the plain step. The numbers are those of one replica
up to rounding (the sums run in another order): tests/test_data_parallel.py.
"""
from __future__ import annotations

import copy
import ctypes
import mmap
import multiprocessing
import os
import pickle
import signal
import sys
import traceback
import weakref
from contextlib import ExitStack

import numpy

from ..functional._kernels import fast
from ..functional.cross_entropy import cross_entropy_backward, cross_entropy_forward
from ..validate import check_int
from .perf import blas_thread_control, blas_threads, release_free_heap


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


def shared_like(arrays) -> list:
    """Zero-filled arrays with the shapes, dtypes and array types of ``arrays``, views of one
    anonymous shared mmap: a process forked afterwards reads and writes the same memory."""
    offsets, size = [], 0
    for a in arrays:
        size = -(-size // 64) * 64                         # each array on a 64-byte boundary
        offsets.append(size)
        size += a.nbytes
    buffer = mmap.mmap(-1, max(size, 1))                   # anonymous: MAP_SHARED, zero-filled
    return [numpy.frombuffer(buffer, a.dtype, a.size, offset).reshape(a.shape).view(type(a))
            for a, offset in zip(arrays, offsets)]


def release_pages(arrays) -> None:
    """In a forked worker: give back its copy of the memory of ``arrays``, which only the main
    process uses (the model's parameters and gradients, the optimizer's state).

    After a fork the two processes share every page until one writes it; the main process
    writes these arrays at every step, and each write would copy the page, leaving the old
    copy to the worker, which never reads it: a second copy of four times the parameters
    for nothing. ``madvise(MADV_DONTNEED)`` on the worker's side (whole pages inside each
    array only) drops the worker's mapping, so the main process's writes copy nothing.
    The worker must never read these arrays again (it would read zeros). Linux only; a
    no-op where libc's ``madvise`` cannot be reached.
    """
    madvise = _madvise()
    if madvise is None:
        return
    page = mmap.PAGESIZE
    for a in arrays:
        if not (a.flags.c_contiguous or a.flags.f_contiguous):
            continue                                       # its bytes are not one range
        start = -(-a.ctypes.data // page) * page           # the first whole page inside the array
        end = (a.ctypes.data + a.nbytes) // page * page    # the end of the last whole page
        if end > start:
            madvise(ctypes.c_void_p(start), ctypes.c_size_t(end - start), _MADV_DONTNEED)


_MADV_DONTNEED = 4                                         # Linux's value (sys/mman.h)


def _madvise():
    """libc's madvise (Linux), or None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        madvise = libc.madvise
    except (OSError, AttributeError):
        return None
    madvise.argtypes, madvise.restype = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int), ctypes.c_int
    return madvise


def replicate(model, params, grads):
    """A deep copy of ``model`` whose parameters are ``params`` and whose gradients are ``grads``
    (lists in ``model.parameters()`` order; a tied array stays one array); no forward cache.
    deepcopy's memo hands out the given arrays in place of the model's: nothing is copied twice."""
    memo = {}
    for (_, p, g), p_new, g_new in zip(model.parameters(), params, grads):
        memo[id(p)], memo[id(g)] = p_new, g_new
    replica = copy.deepcopy(model, memo=memo)
    replica.release_caches()
    return replica


def part_loss(replica, task, part, smoothing: float, modes=None):
    """(L_i, cache): the mean loss of one part on one replica (its cross-entropy cache kept for
    the backward); ``modes``: each module's train/eval mode, in ``named_modules`` order."""
    if modes is not None:
        for (_, module), training in zip(replica.named_modules(), modes):
            module.training = training
    logits, targets = task.forward(replica, part)
    L_i, cache = fast(cross_entropy_forward)(logits, targets, smoothing=smoothing)
    return float(L_i), cache


class DataParallel:
    """``n_replicas`` replicas of ``model``: the model itself here, the others in worker processes.

    ``forget``: more arrays of this process that the workers never read (the optimizer's state,
    ``optimizer.state_arrays()``): each worker gives its copy of their memory back (module
    docstring, "Memory"). Create the DataParallel after the optimizer, and pass it."""

    def __init__(self, model, n_replicas: int = 2, forget=()):
        n_replicas = check_int("n_replicas", n_replicas, low=1)
        self.model, self.n_replicas = model, n_replicas
        self.params = [p for _, p, _ in model.parameters()]
        self.grads = [g for _, _, g in model.parameters()]
        parent_only = self.params + self.grads + list(forget)   # the workers drop their copies
        control = blas_thread_control()                   # None: the BLAS's threads stay as they are
        self.threads_per_replica = _blas_threads_each(control[0](), n_replicas) if control and n_replicas > 1 else None
        self.shared_params = shared_like(self.params) if n_replicas > 1 else []
        self.workers = [_Worker(model, self.shared_params, self.threads_per_replica, parent_only)
                        for _ in range(n_replicas - 1)]
        self._task = None                                 # the task the workers hold
        self._settings = ExitStack()                      # what __enter__ set, undone by close()
        self._finalizer = weakref.finalize(self, _stop, self.workers)

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
                            lambda: part_loss(self.model, task, parts[0], smoothing))
        caches = [results[0][1]] + [None] * len(workers)  # the workers keep theirs
        n_kept = [results[0][1].n_kept] + [n_i for _, n_i in results[1:]]
        N = sum(n_kept)
        L = sum(n_i * L_i for n_i, (L_i, _) in zip(n_kept, results)) / N if N else 0.0
        weights = [n_i / N if N else 0.0 for n_i in n_kept]

        def backward():
            self._run(workers, [("backward", w) for w in weights[1:]],
                      lambda: self.model.backward(fast(cross_entropy_backward)(weights[0], caches[0])))
            for worker in workers:
                for g, g_i in zip(self.grads, worker.grads):
                    g += g_i                                # ∂L/∂θ = Σ_i (N_i / N) ∂L_i/∂θ
                    g_i[...] = 0
        return L, backward

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


class _Worker:
    """A replica in a forked process: the pipe to it and the shared views of its gradients."""

    def __init__(self, model, shared_params, threads, parent_only):
        self.grads = shared_like([g for _, _, g in model.parameters()])
        replica = replicate(model, shared_params, self.grads)
        context = multiprocessing.get_context("fork")
        self.conn, child_end = context.Pipe()
        self.process = context.Process(target=_serve, args=(child_end, self.conn, os.getpid(), replica, threads, parent_only),
                                       daemon=True,
                                       name="minitransformer-replica")
        self.process.start()                               # the process holds its own copy of the replica
        child_end.close()
        self.ticket = 0                                    # numbers the requests; a reply carries its number

    def send(self, *message) -> int:
        self.ticket += 1
        try:
            self.conn.send((self.ticket,) + message)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            raise TypeError(f"DataParallel sends {message[0]!r} to its worker processes, which needs "
                            f"pickle: {exc}") from exc
        except OSError:
            self._ended()
        return self.ticket

    def receive(self, ticket: int, raising: bool = True):
        """The reply to request ``ticket`` (older replies, left by an interrupted call, skipped)."""
        while True:
            try:
                number, status, value = self.conn.recv()
            except (EOFError, OSError):
                if not raising:
                    return None
                self._ended()
            if number == ticket:
                break
        if status == "error" and raising:
            raise value
        return value

    def _ended(self):
        self.process.join(timeout=1)
        raise RuntimeError(f"data parallel: the worker process {self.process.pid} has ended (exit code "
                           f"{self.process.exitcode}: killed, out of memory?); start a new DataParallel")


def _serve(conn, parent_end, main_pid, replica, threads, parent_only) -> None:
    """A worker process: run each request on ``replica``, reply (ticket, "ok" or "error", value).
    It ends when asked (None), when the pipe closes, or when the main process has gone (checked
    every second: a main process killed outright closes no pipe that a later fork inherited)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)           # Ctrl-C: the main process handles it
    parent_end.close()                                     # the main process's end, inherited by the fork
    release_pages(parent_only)                             # the main process's arrays: not copied on its writes
    release_free_heap()                                    # nor the free heap it inherited
    if threads is not None:
        blas_thread_control()[1](threads)
    held = {"task": None, "cache": None}
    while True:
        try:
            while not conn.poll(1.0):
                if os.getppid() != main_pid:
                    return                                 # orphaned: the main process has gone
            request = conn.recv()
        except (EOFError, OSError):
            return                                         # the main process has gone
        if request is None:
            return
        ticket, op, *args = request
        try:
            reply = (ticket, "ok", _handle(replica, held, op, args))
        except BaseException as exc:                       # the replica clean for the next request
            held["cache"] = None
            replica.release_caches()
            replica.zero_grad()
            reply = (ticket, "error", _picklable(exc))
        conn.send(reply)


def _handle(replica, held, op, args):
    """One request in a worker: "task", "loss", "backward", "release" or "call"."""
    if op == "task":
        held["task"] = args[0]
    elif op == "loss":
        L_i, held["cache"] = part_loss(replica, held["task"], *args)
        return L_i, held["cache"].n_kept
    elif op == "backward":
        cache, held["cache"] = held["cache"], None
        replica.backward(fast(cross_entropy_backward)(args[0], cache))
    elif op == "release":
        held["cache"] = None
        replica.release_caches()
        replica.zero_grad()
    elif op == "call":
        fn, fn_args = args
        return fn(replica, *fn_args)
    return None


def _picklable(exc: BaseException) -> BaseException:
    """``exc`` with the worker's traceback as a note, or a RuntimeError saying it, if it cannot be pickled."""
    where = f"in a data-parallel worker process:\n{''.join(traceback.format_exception(type(exc), exc, exc.__traceback__))}"
    try:
        if hasattr(exc, "add_note"):                       # Python 3.11 on
            exc.add_note(where)
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc} ({where})")


def _stop(workers) -> None:
    """Ask each worker to end, wait for it (a second at most, then terminate it)."""
    for worker in workers:
        try:
            worker.conn.send(None)
        except OSError:
            pass
    for worker in workers:
        worker.process.join(timeout=1)
        if worker.process.is_alive():
            worker.process.terminate()
            worker.process.join()
        worker.conn.close()
