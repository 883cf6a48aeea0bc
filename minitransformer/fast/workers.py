"""A model replica in a forked worker process: the plumbing under data_parallel.py.

    worker = Worker(model, shared_params, threads, parent_only)   # forks; the replica lives there
    ticket = worker.send("loss", part, smoothing, modes)          # a request, numbered
    L_i, n_kept = worker.receive(ticket)                          # its reply (a worker's error raised here)

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
model's parameters and gradients, and what ``forget`` lists: ``fast.train`` passes
the optimizer's state buffers) and of the free heap it inherited
(``perf.release_free_heap``). What is left is what replicas cost anywhere: the shared
parameters and each worker's gradients (one copy of the parameters each) and each
part's activations. Measured: benchmarks/RESULTS.md.

Requests ("task", "loss", "backward", "release", "call") and replies carry a ticket
number, so a call interrupted half-way (Ctrl-C while waiting) never leaves a stale
reply to be read as the next one: ``receive`` skips older tickets.
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

import numpy

from ..training.loss import task_loss, task_loss_backward
from .perf import blas_thread_control, release_free_heap


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


class Worker:
    """A replica in a forked process: the pipe to it and the shared views of its gradients."""

    def __init__(self, model, shared_params, threads, parent_only):
        self.grads = shared_like([g for _, _, g in model.parameters()])
        replica = replicate(model, shared_params, self.grads)
        context = multiprocessing.get_context("fork")
        self.conn, child_end = context.Pipe()
        self.process = context.Process(target=_serve, daemon=True, name="minitransformer-replica",
                                       args=(child_end, self.conn, os.getpid(), replica, threads, parent_only))
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
        part, smoothing, modes = args
        for (_, module), training in zip(replica.named_modules(), modes):
            module.training = training                     # the main process's train/eval modes
        L_i, held["cache"] = task_loss(replica, held["task"], part, smoothing)
        return L_i, held["cache"].n_kept
    elif op == "backward":
        cache, held["cache"] = held["cache"], None
        task_loss_backward(replica, args[0], cache)
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
        else:                                              # 3.10: the same attribute, set by hand
            exc.__notes__ = [*getattr(exc, "__notes__", []), where]
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc} ({where})")


def stop(workers) -> None:
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
