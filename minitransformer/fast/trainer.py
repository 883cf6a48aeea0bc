"""The core's ``train`` with the speed wing on: what ``python -m minitransformer train`` runs.

    from minitransformer import fast
    result = fast.train(model, task, TrainConfig(...))     # instead of training.train(...)

The same loop (training/loop.py), the same losses up to float32 rounding, with:
  - the kernel twins (``fast.enabled()``) for the length of the run;
  - the batch cut in parts over model replicas, a core each (data_parallel.py), whose
    twins of the loop's ``task_loss`` and ``task_loss_backward`` are registered in the
    core's hook for the run, as the kernel twins are (no argument of the core's loop);
  - glibc's allocator keeping freed memory for reuse (perf.tune_malloc), process-wide,
    left so after the run.
On a GPU (``device="cuda"``) the kernel twins and the replicas stay off (they are NumPy
and CPU-process machinery) and AdamW updates each parameter in one fused kernel
(cuda_adamw.py).
"""
from __future__ import annotations

import numpy

from . import enabled
from .kernels import pairs
from .cuda_adamw import fused_like
from .data_parallel import DataParallel, n_replicas_for
from .perf import tune_malloc
from ..layers.blocks import set_recompute
from ..training.loop import check_run_inputs, make_optimizer, train as plain_train
from ..validate import check_flag, check_int


def train(model, task, cfg, *, data_parallel: int = 2, malloc: bool = True, optimizer=None,
          device="cpu", log=print, **kwargs):
    """``training.train(model, task, cfg, **kwargs)`` with the speed wing (module docstring).

    ``data_parallel``: model replicas (1 = off; fewer where they cannot run: dropout, a GPU,
    one core; the log says why). ``malloc``: tune glibc's allocator first.
    """
    check_run_inputs(model, task, cfg)
    data_parallel = check_int("data_parallel", data_parallel, low=1)
    if check_flag("malloc", malloc):
        tune_malloc()
    on_cpu = device == "cpu"
    if optimizer is None:                     # on a GPU, AdamW in one fused kernel per parameter
        optimizer = make_optimizer(model, cfg) if on_cpu else fused_like(make_optimizer(model, cfg))
    if cfg.recompute:
        set_recompute(model)                  # before the replicas are forked: theirs too
    sample = task.batch("train", numpy.random.default_rng(0))
    n, why = n_replicas_for(model, sample, data_parallel) if device == "cpu" else (1, "off (GPU)")
    if data_parallel > 1:
        log(f"data parallel: {why}")
    state = [a for table in optimizer.state.values() for a in table.values()] if n > 1 else []
    kernels = pairs() if on_cpu else []       # NumPy kernels; on before the workers fork, so theirs too
    with enabled(kernels), DataParallel(model, n, forget=state) as parallel:
        with enabled(parallel.twins() if n > 1 else []):   # the loop's loss over the replicas
            return plain_train(model, task, cfg, optimizer=optimizer, device=device, log=log, **kwargs)
