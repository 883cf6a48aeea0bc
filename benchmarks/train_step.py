"""Time one GPT training step (float32, CPU) for the named configs; one JSON line per config.

    python benchmarks/train_step.py                 # configs a, b, c, 2 BLAS threads
    python benchmarks/train_step.py b --steps 20    # one config, more steps
    python benchmarks/train_step.py --no-malloc     # without minitransformer.fast.perf.tune_malloc()
    python benchmarks/train_step.py b --recompute   # with activation recomputation (layers/blocks.py)
    python benchmarks/train_step.py --data-parallel 1   # one model replica (default: as fast.train runs)
    python benchmarks/train_step.py --plain         # the plain forms (the kernel twins off)

A step is ``minitransformer.training.loop.train_step`` itself: forward, cross-entropy forward
and backward, model.backward, clip_grad_norm(1.0), AdamW(betas (0.9, 0.99), weight
decay 0.1).step(), zero_grad, with the speed wing as the train command runs it
(``minitransformer.fast.train``): the kernel twins on (``--plain``: off), the batch split
over 2 replicas (fast/data_parallel.py; ``--data-parallel``).
The model, for every config: learned positions,
pre-norm, tanh GELU, tied head, dropout 0, vocabulary 65; batches of random token ids.

Each config runs in a FRESH subprocess (its own peak-memory high-water mark, its own
allocator state), with OPENBLAS_NUM_THREADS set to ``--threads`` unless it is set
already. Reported per config:

    ms_median, ms_min, ms_max   over ``--steps`` timed steps after ``--warmup`` steps
    tokens_per_s                B·T / median step time
    gemm_ms, matmul_share       time inside the matrix-matrix products of one step, and
                                its share of the step (method below)
    gemv_ms                     the matrix-vector products LayerNorm uses as row means
    tracemalloc_peak_mb         peak of the memory NumPy allocates during one step
                                (NumPy reports its allocations to tracemalloc), the
                                parameters and optimizer state not counted
    peak_rss_delta_mb           VmHWM at the end minus VmRSS after building the model and
                                optimizer (before the first step): the step's working
                                memory as the operating system sees it, BLAS buffers included;
                                plus, with replicas, each worker process's own growth
                                (``workers_growth_kb``: shared memory counted once)
    params_mb                   parameters + gradients + AdamW state, for scale

Matmul share. After the plain timing, a twin of the model (the same config and seed)
gets its parameters re-viewed as ``benchmarks.matmul_timer.TimedArray`` (no copy), an
ndarray subclass whose ``__array_ufunc__`` times every ``np.matmul`` call, i.e. every
``@`` of the library, in place, with the caches and operands of a real step; it runs on
as many replicas as the plain step (each worker process times its own products, read
back with ``DataParallel.call_workers``). Over 6 batches, a plain step and an
instrumented step on the same batch run in turn (in ABBA order, so neither always goes
first). The sum over one instrumented step of the products whose operands are both at
least 2-D is ``gemm_ms`` (median); ``matmul_share`` is the median of that sum divided by
the plain step's time on the same batch, run next to it, and by the number of replicas
(with n replicas the products of n processes add up: the share of the cores' time).
The wrapper slows every other ufunc (about 5% of b's step), not the products, hence the
plain step in the denominator; ``matmul_share_of_timed_step`` divides by the
instrumented step itself instead (the method before 2026-11-24: a lower bound).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

CONFIGS = {  # name: (n_layer, n_head, d_model, block_size, batch)
    "a": (4, 4, 128, 64, 12),
    "b": (4, 4, 128, 128, 32),
    "c": (6, 6, 384, 256, 16),
}
VOCAB = 65


def make_task(name: str, seed: int = 0):
    """(task, generator): random token ids in batches of config ``name``'s shape."""
    import numpy as np

    from minitransformer.training.tasks import LanguageModelTask

    T, B = CONFIGS[name][3:]
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, VOCAB, size=100_000)
    return LanguageModelTask(ids[:90_000], ids[90_000:], T, B), rng


DATA_PARALLEL = 2     # fast.train's default replicas


def build(name: str, seed: int = 0, recompute: bool = False):
    """(model, task, train config, optimizer, generator) for config ``name``; ``recompute``:
    activation recomputation in every block (``layers.set_recompute``)."""
    from minitransformer.layers import set_recompute
    from minitransformer.models import GPT, GPTConfig
    from minitransformer.training.loop import TrainConfig, make_optimizer

    L, H, C, T, B = CONFIGS[name]
    config = GPTConfig(vocab_size=VOCAB, block_size=T, n_layer=L, n_head=H, d_model=C,
                       activation="gelu_tanh", position="learned", norm_position="pre",
                       tie_weights=True, p_drop=0.0)
    model = GPT(config, rng=seed)
    set_recompute(model, recompute)
    task, rng = make_task(name, seed)
    cfg = TrainConfig(lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1, grad_clip=1.0)
    return model, task, cfg, make_optimizer(model, cfg), rng


def replicas_for(model, batch, requested: int = DATA_PARALLEL) -> int:
    """The replicas ``fast.train`` runs for this model and batch when asked for ``requested``."""
    from minitransformer.fast.data_parallel import n_replicas_for
    return n_replicas_for(model, batch, requested)[0]


def stepper(model, task, opt, cfg, n: int):
    """(step(batch), parallel): ``train_step`` with the batch split over ``n`` replicas as
    ``fast.train`` splits it (fast/data_parallel.py); ``parallel`` is the entered DataParallel
    (it holds OpenBLAS's thread count, as in a run: close it before another stepper reads the
    count) or None for one replica."""
    from minitransformer.fast import enabled
    from minitransformer.fast.data_parallel import DataParallel
    from minitransformer.training.loop import train_step

    state = [a for table in opt.state.values() for a in table.values()]     # as fast.train passes it
    parallel = DataParallel(model, n, forget=state).__enter__() if n > 1 else None
    twins = parallel.twins() if parallel is not None else []               # as fast.train registers them

    def step(b):
        with enabled(twins):
            return train_step(model, task, b, opt, cfg.lr, cfg)
    return step, parallel


def replica_count(parallel) -> int:
    """The replicas a stepper's step runs on."""
    return 1 if parallel is None else parallel.n_replicas


def memory_kb(replica=None) -> tuple[int, int, int]:
    """(VmRSS, VmHWM, RssShmem) of this process in kB; a DataParallel's ``call_workers(memory_kb)``
    reads its worker processes' (``replica`` unused)."""
    return _status_kb("VmRSS"), _status_kb("VmHWM"), _status_kb("RssShmem")


def workers_memory_kb(parallel) -> list:
    """Each worker process's ``memory_kb`` (none without a DataParallel): ``workers_growth_kb``'s start."""
    return [] if parallel is None else parallel.call_workers(memory_kb)


def workers_growth_kb(parallel, start) -> int:
    """The memory the worker processes added since ``start`` (``workers_memory_kb`` then): the sum
    over the workers of (VmHWM - RssShmem) now minus (VmRSS - RssShmem) then. A forked worker
    begins with this process's pages (counted in both RSS figures, shared), and the shared
    parameters and gradients (RssShmem) are counted in this process's RSS already, so only
    what the worker allocated for itself counts (approximately: a page it copies on writing
    was counted at the start)."""
    now = workers_memory_kb(parallel)
    return sum((hwm - shmem) - (rss0 - shmem0) for (rss0, _, shmem0), (_, hwm, shmem) in zip(start, now))


def checked_environment(parser, args) -> dict:
    """The subprocesses' environment (OPENBLAS_NUM_THREADS from --threads unless set);
    an unknown config name is a usage error."""
    for name in args.configs:
        if name not in CONFIGS:
            parser.error(f"config: expected one of {sorted(CONFIGS)}, got {name!r}")
    env = dict(os.environ)
    env.setdefault("OPENBLAS_NUM_THREADS", str(args.threads))
    return env


def machine() -> dict:
    """What a speed figure depends on, for every benchmark's JSON: the CPU (model name,
    family/model from /proc/cpuinfo), whether it has AVX-512 (``avx512f`` among its flags;
    ``OPENBLAS_CORETYPE=SkylakeX`` crashes with SIGILL on a CPU without it), the kernels
    NumPy's OpenBLAS runs (asked of the library itself, ``openblas_get_corename``), and
    ``OPENBLAS_CORETYPE`` / ``OPENBLAS_NUM_THREADS`` as set in the environment."""
    import numpy as np

    cpu = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("model name", "cpu family", "model", "flags") and key not in cpu:
                    cpu[key] = value.strip()
                if not line.strip() and cpu:
                    break                      # the first processor is enough
    except OSError:
        pass
    flags = cpu.get("flags", "").split()
    return {"cpu": cpu.get("model name", "unknown"), "cpu_family": cpu.get("cpu family"),
            "cpu_model": cpu.get("model"), "avx2": "avx2" in flags, "avx512f": "avx512f" in flags,
            "numpy": np.__version__, "openblas_core": _openblas_core(),
            "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
            "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS")}


def _openblas_core():
    """The core OpenBLAS chose (or was told), from the library NumPy loaded; None if not found."""
    import ctypes

    import numpy  # noqa: F401  (loads the library)
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "openblas" in line.lower() and "/" in line}
    except OSError:
        return None
    for path in sorted(paths):
        lib = ctypes.CDLL(path)
        for name in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename", "openblas_get_corename"):
            fn = getattr(lib, name, None)
            if fn is not None:
                fn.restype = ctypes.c_char_p
                return fn().decode()
    return None


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def measure(name: str, steps: int, warmup: int, recompute: bool = False, data_parallel: int = DATA_PARALLEL) -> dict:
    """Run in the subprocess: time, memory and matmul share of one config."""
    import tracemalloc

    import numpy as np

    model, task, cfg, opt, rng = build(name, recompute=recompute)
    batches = [task.batch("train", rng) for _ in range(warmup + steps + 6)]
    step, parallel = stepper(model, task, opt, cfg, replicas_for(model, batches[0], data_parallel))
    replicas = replica_count(parallel)
    rss0 = _status_kb("VmRSS")
    workers0 = workers_memory_kb(parallel)
    for i in range(warmup):
        step(batches[i])
    times = []
    for i in range(warmup, warmup + steps):
        t0 = time.perf_counter()
        step(batches[i])
        times.append(time.perf_counter() - t0)
    hwm = _status_kb("VmHWM") + workers_growth_kb(parallel, workers0)   # this process's + the workers'
    tracemalloc.start()
    step(batches[-7])
    traced_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    gemm_ms, gemv_ms, gemm_calls, share, share_timed, top = _matmul_time(name, recompute, task, batches[-7:],
                                                                         step, parallel)
    if parallel is not None:
        parallel.close()
    ms = np.array(times) * 1e3
    L, H, C, T, B = CONFIGS[name]
    params_bytes = sum(p.nbytes for _, p, _ in model.parameters())
    med = float(np.median(ms))
    return {"config": name, "recompute": recompute, "data_parallel": replicas, "n_layer": L, "n_head": H, "d_model": C, "block_size": T, "batch": B,
            "steps": steps, "ms_median": round(med, 2), "ms_min": round(float(ms.min()), 2),
            "ms_max": round(float(ms.max()), 2), "tokens_per_s": round(B * T / med * 1e3),
            "gemm_ms": round(gemm_ms, 2), "gemm_calls": gemm_calls, "gemv_ms": round(gemv_ms, 2),
            "matmul_share": round(share, 3), "matmul_share_of_timed_step": round(share_timed, 3),
            "tracemalloc_peak_mb": round(traced_peak / 2**20, 1),
            "peak_rss_delta_mb": round((hwm - rss0) / 1024, 1),
            "params_mb": round(4 * params_bytes / 2**20, 1),   # p, grad, m, v
            "top_gemms": top, "machine": machine()}


def _matmul_time(name, recompute, task, batches, plain_step, plain_parallel):
    """GEMM and GEMV ms per step and the GEMM share of the step (see module doc): a twin of the
    model (same config and seed) on TimedArray parameters, stepped in turn with the plain one."""
    import numpy as np
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from matmul_timer import MATMUL, as_timed, clock_reading

    from minitransformer.training.loop import make_optimizer

    model, _, cfg, _, _ = build(name, recompute=recompute)
    model._map_params(as_timed)           # views: the same memory, every op now reports to MATMUL
    opt = make_optimizer(model, cfg)      # the new gradient arrays
    replicas = replica_count(plain_parallel)          # the plain step's (the BLAS count is held now)
    step, parallel = stepper(model, task, opt, cfg, replicas)
    step(batches[0])                      # warm-up of the instrumented path
    MATMUL.reset()
    gemm, gemv, share, share_timed, calls = [], [], [], [], 0

    def clocks():                         # this process's and the worker processes' clocks, summed
        readings = [clock_reading()] + (parallel.call_workers(clock_reading) if parallel is not None else [])
        return [sum(column) for column in zip(*readings)]

    def plain(b):
        t0 = time.perf_counter()
        plain_step(b)
        return time.perf_counter() - t0

    for i, b in enumerate(batches[1:]):
        plain_s = plain(b) if i % 2 == 0 else 0.0        # plain and timed steps in turn, ABBA
        g0, v0, c0 = clocks()
        t0 = time.perf_counter()
        step(b)
        total = time.perf_counter() - t0
        g1, v1, c1 = clocks()
        plain_s = plain_s or plain(b)
        gemm.append(g1 - g0)
        gemv.append(v1 - v0)
        calls += c1 - c0
        share.append(gemm[-1] / plain_s / replicas)
        share_timed.append(gemm[-1] / total / replicas)
    if parallel is not None:
        parallel.close()
    n = len(batches) - 1
    top = sorted(MATMUL.shapes.items(), key=lambda kv: -kv[1][1])[:6]
    top = [f"{a}@{b}: {c // n}x {s / n * 1e3:.1f} ms" for (a, b), (c, s) in top]
    return (float(np.median(gemm)) * 1e3, float(np.median(gemv)) * 1e3, calls // n,
            float(np.median(share)), float(np.median(share_timed)), top)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("configs", nargs="*", default=list(CONFIGS), help="config names (default: a b c)")
    p.add_argument("--steps", type=int, default=10, help="timed steps per config (>= 10 recommended)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    p.add_argument("--threads", type=int, default=2, help="OPENBLAS_NUM_THREADS, unless already set")
    p.add_argument("--no-malloc", action="store_true",
                   help="skip minitransformer.fast.perf.tune_malloc(), which fast.train() calls first")
    p.add_argument("--plain", action="store_true", help="the plain forms: the wing's kernel twins off")
    p.add_argument("--recompute", action="store_true", help="activation recomputation in every block")
    p.add_argument("--data-parallel", type=int, default=DATA_PARALLEL,
                   help=f"model replicas, a core each (default: {DATA_PARALLEL}, as fast.train runs; 1 = off)")
    p.add_argument("--one", help=argparse.SUPPRESS)        # internal: measure in this process
    args = p.parse_args(argv)
    if args.one:
        if not args.plain:
            from minitransformer import fast
            fast.enable()
        if not args.no_malloc:
            from minitransformer.fast.perf import tune_malloc
            tune_malloc()
        print(json.dumps(measure(args.one, args.steps, args.warmup, args.recompute, args.data_parallel)), flush=True)
        return 0
    env = checked_environment(p, args)
    for name in args.configs:
        cmd = [sys.executable, os.path.abspath(__file__), "--one", name, "--steps", str(args.steps),
               "--warmup", str(args.warmup)] + (["--no-malloc"] if args.no_malloc else []) \
            + (["--recompute"] if args.recompute else []) \
            + (["--plain"] if args.plain else []) + ["--data-parallel", str(args.data_parallel)]
        result = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if result.returncode:
            sys.stderr.write(result.stderr)
            return result.returncode
        sys.stdout.write(result.stdout)
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
