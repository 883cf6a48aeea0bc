"""The same GPT training step in NumPy (minitransformer) and in PyTorch's CPU eager mode, side by side.

    python benchmarks/torch_compare.py               # configs a, b, c; 2 threads each
    python benchmarks/torch_compare.py b --steps 20

PyTorch is never a dependency: it is imported inside, and without it this prints a
message and exits 0. (CPU wheel: pip install torch --index-url https://download.pytorch.org/whl/cpu)

The PyTorch model is written out here, layer by layer, to match minitransformer's
GPT for the config: token embedding and learned positions (N(0, 0.02²)), pre-LN
blocks with one fused QKV projection and ``F.scaled_dot_product_attention(is_causal=True)``
(PyTorch's fastest eager attention), a tanh-GELU MLP of width 4C, a final LayerNorm,
the head tied to the token embedding, dropout 0. The step is the same as
``minitransformer.training.loop.train_step``: forward, cross-entropy, backward,
``clip_grad_norm_(1.0)``, AdamW(lr 1e-3, betas (0.9, 0.99), weight decay 0.1 on the 2-D
weights only), ``zero_grad()``. The NumPy step is the command line's, the speed wing's
(``minitransformer.fast.train``): the kernel twins on, the batch split over 2 model
replicas (fast/data_parallel.py: the timed process and a forked worker process, one BLAS
thread each on 2 cores; ``--data-parallel 1``: one replica, 2 BLAS threads);
``data_parallel`` in the JSON says how many ran.

Timing: each library runs in a FRESH subprocess of ``--steps`` timed steps (after
``--warmup`` untimed ones), ``--rounds`` times, the order alternating (NumPy, PyTorch,
PyTorch, NumPy, ...), so a drift of the machine's speed hits both alike; both
libraries on 2 threads (``torch.set_num_threads``, OPENBLAS_NUM_THREADS). Separate
processes because in one process each library's idle worker threads keep spinning
on the cores for a while after its last call (OpenBLAS's, OpenMP's), measured to
slow the other library's next step by up to 1.6x. Reported per config: median and
min ms per step of each over all rounds, ``ratio`` = NumPy median / PyTorch median
(and ``ratio_min`` of the minima), and ``ratio_paired``: the median over the rounds of
each round's ratio (its two processes ran back to back), which a drift of the machine
between rounds moves least.

Memory: ``peak_rss_mb`` = VmHWM after the steps minus VmRSS after the imports (before
the model is built), the largest over the rounds: parameters, gradients, optimizer
state, activations and library buffers, everything the training holds at its peak,
as the operating system counts it; NumPy's side adds what its data-parallel worker
processes allocated for themselves (``train_step.workers_growth_kb``: a forked worker
starts with this process's pages, and the shared parameters and gradients are in this
process's RSS already, so each is counted once).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_step import (CONFIGS, VOCAB, _status_kb, build, checked_environment, machine, make_task,  # noqa: E402
                        DATA_PARALLEL, replica_count, replicas_for, stepper, workers_growth_kb,
                        workers_memory_kb)


def torch_model(name: str, seed: int = 0, device: str = "cpu", vocab: int = VOCAB):
    """The step function ``step(batch, lr=1e-3) -> loss`` of the PyTorch twin of config ``name``
    on ``device`` ("cpu", "cuda"), with a vocabulary of ``vocab`` symbols."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    L, H, C, T, B = CONFIGS[name]
    torch.manual_seed(seed)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
            self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
            self.fc_in, self.fc_out = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

        def forward(self, x):
            Bx, Tx, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
            q, k, v = (t.view(Bx, Tx, H, C // H).transpose(1, 2) for t in (q, k, v))   # (B, H, T, D)
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(o.transpose(1, 2).reshape(Bx, Tx, C))
            return x + self.fc_out(F.gelu(self.fc_in(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Parameter(torch.randn(vocab, C) * 0.02)
            self.pos = nn.Parameter(torch.randn(T, C) * 0.02)
            self.blocks = nn.ModuleList(Block() for _ in range(L))
            self.ln_f = nn.LayerNorm(C)
            for m in self.modules():
                if isinstance(m, nn.Linear):
                    nn.init.normal_(m.weight, std=0.02)
                    nn.init.zeros_(m.bias)

        def forward(self, ids):
            x = self.tok[ids] + self.pos[: ids.shape[1]]
            for block in self.blocks:
                x = block(x)
            return self.ln_f(x) @ self.tok.T                      # tied head

    model = GPT().to(device)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": other, "weight_decay": 0.0}], lr=1e-3, betas=(0.9, 0.99))

    def step(batch, lr: float = 1e-3):
        for group in opt.param_groups:
            group["lr"] = lr
        x, y = (torch.from_numpy(a).to(device) for a in batch)
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, vocab), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
        return float(loss.detach())

    return step


def _numpy_step(name, recompute=False, data_parallel=DATA_PARALLEL):
    """The wing's step (kernel twins, ``data_parallel`` replicas): (step, task, rng, parallel)."""
    from minitransformer import fast
    fast.enable()
    model, task, cfg, opt, rng = build(name, recompute=recompute)
    import numpy as np
    n = replicas_for(model, task.batch("train", np.random.default_rng(0)), data_parallel)
    step, parallel = stepper(model, task, opt, cfg, n)
    return step, task, rng, parallel


def run_one(name: str, lib: str, steps: int, warmup: int, malloc: bool = True, recompute: bool = False,
            data_parallel: int = DATA_PARALLEL) -> dict:
    """In a fresh subprocess: ``warmup`` + ``steps`` steps of one library; times and peak memory.

    NumPy's side first calls ``minitransformer.fast.perf.tune_malloc()``, as ``fast.train`` does
    (``--no-malloc``: not).
    """
    if lib == "numpy" and malloc:
        from minitransformer.fast.perf import tune_malloc
        tune_malloc()
    if lib == "torch":
        import torch
        torch.set_num_threads(int(os.environ.get("OPENBLAS_NUM_THREADS", "2")))
    import minitransformer.training.loop  # noqa: F401  (both processes import the same NumPy side)
    rss0 = _status_kb("VmRSS")
    parallel = None
    if lib == "torch":
        step = torch_model(name)
        task, rng = make_task(name)
    else:
        step, task, rng, parallel = _numpy_step(name, recompute, data_parallel)
    workers0 = workers_memory_kb(parallel)
    batches = [task.batch("train", rng) for _ in range(warmup + steps)]
    ms = []
    for i, batch in enumerate(batches):
        t0 = time.perf_counter()
        step(batch)
        if i >= warmup:
            ms.append((time.perf_counter() - t0) * 1e3)
    grown = _status_kb("VmHWM") - rss0 + workers_growth_kb(parallel, workers0)   # + the worker processes'
    return {"lib": lib, "ms": ms, "peak_rss_mb": round(grown / 1024, 1),
            "data_parallel": replica_count(parallel) if lib == "numpy" else None}


def compare(name: str, steps: int, warmup: int, rounds: int, env, malloc: bool = True,
            recompute: bool = False, data_parallel: int = DATA_PARALLEL) -> dict:
    """Alternate fresh subprocesses of each library; medians over all their timed steps."""
    import numpy as np
    ms = {"numpy": [], "torch": []}
    rss = {"numpy": 0.0, "torch": 0.0}
    round_ratios = []                       # NumPy's median / PyTorch's median, per round (back to back)
    replicas = None
    for r in range(rounds):
        round_median = {}
        for lib in (("numpy", "torch") if r % 2 == 0 else ("torch", "numpy")):
            extra = ([] if malloc else ["--no-malloc"]) + (["--recompute"] if recompute else []) \
                + ["--data-parallel", str(data_parallel)]
            out = _subprocess(["--run", name, lib, "--steps", str(steps), "--warmup", str(warmup)] + extra, env)
            ms[lib] += out["ms"]
            rss[lib] = max(rss[lib], out["peak_rss_mb"])
            round_median[lib] = float(np.median(out["ms"]))
            replicas = out["data_parallel"] if lib == "numpy" else replicas
        round_ratios.append(round_median["numpy"] / round_median["torch"])
    med = {lib: float(np.median(v)) for lib, v in ms.items()}
    low = {lib: float(np.min(v)) for lib, v in ms.items()}
    return {"config": name, "steps": len(ms["numpy"]),
            "numpy_ms": round(med["numpy"], 1), "numpy_min": round(low["numpy"], 1),
            "torch_ms": round(med["torch"], 1), "torch_min": round(low["torch"], 1),
            "ratio": round(med["numpy"] / med["torch"], 3),
            "ratio_min": round(low["numpy"] / low["torch"], 3),
            "ratio_paired": round(float(np.median(round_ratios)), 3),
            "numpy_peak_rss_mb": rss["numpy"], "torch_peak_rss_mb": rss["torch"],
            "memory_ratio": round(rss["numpy"] / rss["torch"], 3),
            "threads": int(env["OPENBLAS_NUM_THREADS"]), "tune_malloc": malloc, "recompute": recompute,
            "data_parallel": replicas, "machine": machine(), "torch": _torch_version()}


def _torch_version() -> str:
    import torch
    return torch.__version__


def _subprocess(args, env):
    result = subprocess.run([sys.executable, os.path.abspath(__file__), *args], env=env,
                            capture_output=True, text=True)
    if result.returncode:
        raise RuntimeError(result.stderr)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("configs", nargs="*", default=list(CONFIGS))
    p.add_argument("--steps", type=int, default=10, help="timed steps per library and round")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first, in every process")
    p.add_argument("--rounds", type=int, default=3, help="fresh processes per library")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--no-malloc", action="store_true",
                   help="NumPy side without minitransformer.fast.perf.tune_malloc() (fast.train calls it)")
    p.add_argument("--recompute", action="store_true",
                   help="NumPy side with activation recomputation in every block (layers.set_recompute)")
    p.add_argument("--data-parallel", type=int, default=DATA_PARALLEL,
                   help=f"NumPy side: model replicas, a core each (default: {DATA_PARALLEL}, as fast.train runs; "
                        "1 = off)")
    p.add_argument("--run", nargs=2, help=argparse.SUPPRESS)   # internal: CONFIG LIB in this process
    args = p.parse_args(argv)
    try:
        import torch  # noqa: F401
    except ImportError:
        print("torch_compare: PyTorch is not installed; nothing to compare "
              "(pip install torch --index-url https://download.pytorch.org/whl/cpu)")
        return 0
    if args.run:
        print(json.dumps(run_one(args.run[0], args.run[1], args.steps, args.warmup, not args.no_malloc,
                                 args.recompute, args.data_parallel)))
        return 0
    env = checked_environment(p, args)
    for name in args.configs:
        print(json.dumps(compare(name, args.steps, args.warmup, args.rounds, env, not args.no_malloc,
                                 args.recompute, args.data_parallel)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
