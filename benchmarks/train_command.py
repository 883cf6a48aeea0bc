"""The default ``train`` run (the bar a student waits on) next to the same training in PyTorch's CPU eager mode.

    python benchmarks/train_command.py              # 2000 steps each, 2 threads
    python benchmarks/train_command.py --steps 200  # shorter

Both trainings take the batches of the default run (the Python help topics, character
level, 103 symbols, batch 12 of context 64, batch generator seeded 0), the same
learning-rate schedule (warmup 100 steps, cosine to 1e-4) and the same step
(benchmarks/torch_compare.py's twin of the GPT: AdamW betas (0.9, 0.99), weight decay
0.1, clipping 1.0). Each runs in a FRESH subprocess, NumPy first, and reports the
seconds spent in its training steps (no evaluation, as ``train`` reports them) and
its last loss averaged over the final 100 steps. minitransformer's side is
``minitransformer.fast.train``, what the command runs, with evaluation pushed past the end.
PyTorch is never a dependency: without it, this prints a message and exits 0.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_step import machine  # noqa: E402


def _default_run(steps: int):
    """(model, task, TrainConfig) exactly as ``python -m minitransformer train`` builds them."""
    from dataclasses import replace

    from minitransformer.cli import train as cli_train
    p = argparse.ArgumentParser()
    cli_train.add_train_arguments(p)
    model, task, cfg, _ = cli_train.build(p.parse_args([]))
    return model, task, replace(cfg, steps=steps, eval_interval=10**9, final_eval_batches=1)


def run_numpy(steps: int) -> dict:
    from minitransformer import fast                   # the command's trainer: the speed wing
    model, task, cfg = _default_run(steps)
    result = fast.train(model, task, cfg, log=lambda line: None)
    losses = [loss for _, loss in result.history[-100:]]
    return {"lib": "numpy", "seconds": round(result.seconds, 1), "final_loss": round(sum(losses) / len(losses), 4)}


def run_torch(steps: int) -> dict:
    import numpy as np
    import torch

    from minitransformer.optim import warmup_cosine_schedule
    from torch_compare import torch_model
    torch.set_num_threads(int(os.environ.get("OPENBLAS_NUM_THREADS", "2")))
    model, task, cfg = _default_run(steps)
    step = torch_model("a", vocab=model.config.vocab_size)
    schedule = warmup_cosine_schedule(cfg.lr, min(cfg.warmup_steps, steps), steps, cfg.min_lr)
    rng = np.random.default_rng(cfg.seed)
    seconds, losses = 0.0, []
    for i in range(1, steps + 1):
        batch = task.batch("train", rng)
        t0 = time.perf_counter()
        losses.append(step(batch, schedule(i)))
        seconds += time.perf_counter() - t0
    tail = losses[-100:]
    return {"lib": "torch", "seconds": round(seconds, 1), "final_loss": round(sum(tail) / len(tail), 4)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--run", help=argparse.SUPPRESS)     # internal: numpy | torch in this process
    args = p.parse_args(argv)
    try:
        import torch  # noqa: F401
    except ImportError:
        print("train_command: PyTorch is not installed; nothing to compare")
        return 0
    if args.run:
        print(json.dumps((run_numpy if args.run == "numpy" else run_torch)(args.steps)))
        return 0
    env = dict(os.environ)
    env.setdefault("OPENBLAS_NUM_THREADS", str(args.threads))
    rows = {}
    for lib in ("numpy", "torch"):
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--run", lib, "--steps", str(args.steps)],
                             env=env, capture_output=True, text=True)
        if out.returncode:
            sys.stderr.write(out.stderr)
            return out.returncode
        rows[lib] = json.loads(out.stdout.strip().splitlines()[-1])
    print(json.dumps({"steps": args.steps, "numpy_s": rows["numpy"]["seconds"], "torch_s": rows["torch"]["seconds"],
                      "ratio": round(rows["numpy"]["seconds"] / rows["torch"]["seconds"], 3),
                      "numpy_final_loss": rows["numpy"]["final_loss"], "torch_final_loss": rows["torch"]["final_loss"],
                      "threads": int(env["OPENBLAS_NUM_THREADS"]), "machine": machine()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
