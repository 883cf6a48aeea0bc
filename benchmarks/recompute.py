"""Memory against step time, with and without activation recomputation, per config.

    python benchmarks/recompute.py                       # configs a, b, c; prints JSON lines
    python benchmarks/recompute.py b c --figure out.png  # and draws memory against step time

For every config, ``benchmarks/train_step.py`` runs in a fresh process once with the
caches stored (the default) and once with ``--recompute`` (every block keeps only its
input and redoes its forward in backward: ``minitransformer.layers.set_recompute``),
alternating over ``--rounds`` (each process announced on stderr as it starts, since
one takes minutes). One JSON line per config and setting: ``ms_median`` and
``ms_min`` (over all rounds' steps), ``peak_rss_delta_mb`` (the largest over the rounds:
the step's working memory as the operating system counts it), ``tracemalloc_peak_mb``
(what NumPy allocates during one step) and the machine. The memory figures do not
depend on the machine's load; the step times do (compare the two settings of one run).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_step import CONFIGS, checked_environment, machine  # noqa: E402

SETTINGS = (("stored", []), ("recompute", ["--recompute"]))


def measure(name: str, steps: int, rounds: int, env) -> list[dict]:
    """Both settings of config ``name``, alternating fresh processes; one dict per setting."""
    import numpy as np
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "train_step.py")
    runs = {setting: [] for setting, _ in SETTINGS}
    for r in range(rounds):
        order = SETTINGS if r % 2 == 0 else SETTINGS[::-1]
        for setting, flags in order:
            print(f"recompute.py: config {name}, {setting}, round {r + 1} of {rounds} "
                  f"({steps} timed steps in a fresh process)...", file=sys.stderr, flush=True)
            cmd = [sys.executable, script, "--one", name, "--steps", str(steps), "--warmup", "2"] + flags
            done = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if done.returncode:
                raise RuntimeError(done.stderr)
            runs[setting].append(json.loads(done.stdout.strip().splitlines()[-1]))
    rows = []
    for setting, results in runs.items():
        rows.append({"config": name, "setting": setting,
                     "ms_median": round(float(np.median([r["ms_median"] for r in results])), 1),
                     "ms_min": round(min(r["ms_min"] for r in results), 1),
                     "peak_rss_delta_mb": max(r["peak_rss_delta_mb"] for r in results),
                     "tracemalloc_peak_mb": max(r["tracemalloc_peak_mb"] for r in results),
                     "params_mb": results[0]["params_mb"], "rounds": rounds,
                     "machine": {**machine(), "OPENBLAS_NUM_THREADS": env.get("OPENBLAS_NUM_THREADS")}})
    return rows


def draw(rows: list[dict], path: str) -> None:
    """Peak working memory against step time: one line per config, from stored to recomputed."""
    from matplotlib.figure import Figure
    fig = Figure(figsize=(5.5, 4))
    ax = fig.add_subplot()
    for name in dict.fromkeys(r["config"] for r in rows):
        pair = [r for r in rows if r["config"] == name]
        ax.plot([r["ms_min"] for r in pair], [r["peak_rss_delta_mb"] for r in pair], "-", color="0.6")
        for r in pair:
            marker = "o" if r["setting"] == "stored" else "s"
            ax.plot(r["ms_min"], r["peak_rss_delta_mb"], marker, color="C0" if marker == "o" else "C1")
            ax.annotate(f"{name} {r['setting']}", (r["ms_min"], r["peak_rss_delta_mb"]),
                        textcoords="offset points", xytext=(5, 3), fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    from matplotlib.ticker import NullFormatter, ScalarFormatter
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(ScalarFormatter())
        axis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("step time, ms (min over the steps)")
    ax.set_ylabel("peak working memory, MB (RSS growth)")
    ax.set_title("Activation recomputation: memory against time")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("configs", nargs="*", default=list(CONFIGS), help="config names (default: a b c)")
    p.add_argument("--steps", type=int, default=5, help="timed steps per process")
    p.add_argument("--rounds", type=int, default=2, help="fresh processes per setting")
    p.add_argument("--threads", type=int, default=2, help="OPENBLAS_NUM_THREADS, unless already set")
    p.add_argument("--figure", default=None, help="also draw memory against step time into this PNG")
    args = p.parse_args(argv)
    env = checked_environment(p, args)
    rows = []
    for name in args.configs:
        for row in measure(name, args.steps, args.rounds, env):
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.figure:
        draw(rows, args.figure)
    return 0


if __name__ == "__main__":
    sys.exit(main())
