"""The rest of a data-parallel step split over the replicas' processes: a share of θ each.

After the backward, replica i holds the gradient of its part of the batch, already
weighted (data_parallel.py). What is left of the step is elementwise over θ:

    g = g_0 + g_1 + ... + g_{n-1}           the sum of the replicas' gradients
    θ, m, v = AdamW(θ, g, m, v)               the update, number by number

so nothing forces one process to do all of it while the others wait. Cut θ into n
shares; process s adds up share s of every replica's gradient (``reduce``) and updates
share s of the parameters and of the optimizer's state (``update``). Between the two
the training process computes the gradient norm and clips (it needs every share). The
idea is the first stage of ZeRO (DeepSpeed; PyTorch's ZeroRedundancyOptimizer), where
each GPU keeps and updates the optimizer state of its share only; here the shares live
in memory all processes map, so each process reads and writes its share in place.

What it needs: the model's gradients, the workers' gradients, and the optimizer's
parameters, gradients and state in shared memory (``make_optimizer`` puts them there on
the CPU: ``workers.shared_empty``). Otherwise ``plan`` returns None and the training
process sums and updates everything itself, as before.

The shares. The gradient sum: each run of neighbouring gradients (all of them, after
``flatten_parameters``) cut into n slices of equal length. The update: the optimizer's
parameters in n groups of whole parameters, each about 1/n of the numbers
(``Optimizer.part``); whole parameters keep each part an optimizer of its own. Every
number gets the same arithmetic as in one process: the results are the same, bit for
bit (tests/test_sharded_update.py).
"""
from __future__ import annotations

import numpy

from ..layers.flat_parameters import contiguous_runs
from .workers import is_shared


class Shard:
    """What one process does of the rest of a step: its slices of the gradient sum and its
    part of the optimizer."""

    def __init__(self, sums, part):
        self.sums = sums                   # [(g slice, [the workers' slices of the same numbers])]
        self.part = part                   # the optimizer restricted to this share's parameters

    def reduce(self) -> None:
        """g = g_0 + Σ_k g_k over this share; the workers' slices cleared for the next step."""
        for g, g_ks in self.sums:
            for g_k in g_ks:
                g += g_k
                g_k[...] = 0

    def update(self, t: int, lr: float) -> None:
        """The optimizer's update of this share's parameters at step ``t`` with ``lr``."""
        self.part.t, self.part.lr = t, lr
        self.part.apply_update()


def plan(grads, worker_grads, optimizer):
    """[Shard] for the n = 1 + len(worker_grads) processes (the training process's first), or
    None where an array is not in shared memory (the caller then does it all itself).

    ``grads``: the model's gradient arrays; ``worker_grads``: each worker's, in the same order."""
    n = 1 + len(worker_grads)
    state = [a for table in optimizer.state.values() for a in table.values()]
    arrays = (optimizer.param_arrays() + optimizer.grad_arrays() + state + list(grads)
              + [g for gs in worker_grads for g in gs])
    if not all(is_shared(a) for a in arrays):
        return None
    sums = [[] for _ in range(n)]
    for _, _, (g, *g_ks) in contiguous_runs(grads, *worker_grads):
        g, g_ks = g.reshape(-1), [g_k.reshape(-1) for g_k in g_ks]     # views: gradients are contiguous
        for s, (lo, hi) in enumerate(_equal_slices(g.size, n)):
            sums[s].append((g[lo:hi], [g_k[lo:hi] for g_k in g_ks]))
    return [Shard(sums[s], optimizer.part(names)) for s, names in enumerate(_groups(optimizer.params, n))]


def _equal_slices(size: int, n: int) -> list[tuple[int, int]]:
    """[(lo, hi)]: 0..size cut into n slices whose lengths differ by 1 at most."""
    bounds = [size * s // n for s in range(n + 1)]
    return list(zip(bounds[:-1], bounds[1:]))


def _groups(params, n: int) -> list[list[str]]:
    """The parameter names in n groups of neighbours (``params`` order), group s ending at the
    parameter boundary closest to (s + 1)/n of all the numbers (a group may be empty)."""
    bounds = numpy.cumsum([0] + [int(p.size) for _, p, _ in params])   # (len + 1,) offsets of the boundaries
    cuts = [0] + [int(numpy.argmin(numpy.abs(bounds - bounds[-1] * s / n))) for s in range(1, n)] + [len(params)]
    return [[name for name, _, _ in params[lo:hi]] for lo, hi in zip(cuts[:-1], cuts[1:])]
