"""The GPU check: the library's own checks and timings run on CuPy, one JSON line per part.

    python benchmarks/gpu_check.py                    # on CUDA with CuPy: every part
    python benchmarks/gpu_check.py --steps 10         # more training steps in train_match
    python benchmarks/gpu_check.py --device numpy     # dry run on the CPU: NumPy stands in for the device
    python benchmarks/gpu_check.py --parts gradcheck checkpoint
    python benchmarks/gpu_check.py --jsonl out/gpu_check.jsonl --out out   # also a JSON file, figures in out/
    python benchmarks/gpu_check.py --summary out/gpu_check.jsonl          # the table of a finished run
    python benchmarks/gpu_check.py --pack-minilm DIR  # a float16 copy of all-MiniLM-L6-v2 to carry along

benchmarks/gpu_run.sh is the one command for a lent GPU machine (install, versions, this
script, the log and the table). After the parts, the script prints a summary table.

Parts (each prints one JSON line; ``ok`` says whether it passed):

gradcheck    every layer of ``python -m minitransformer gradcheck`` (the list in
             ``minitransformer.gradcheck.suite.layer_checks``, reused, not copied), in
             float64, with the inputs and the modules on the device: the checker
             perturbs device arrays. Worst relative error per layer and ok / not
             (tolerance 1e-7 per layer, 1e-6 for the whole GPT, as the command has).
train_match  config ``a`` of benchmarks/train_step.py built from one seed twice, once on
             NumPy and once on the device; ``--steps`` AdamW ``train_step`` calls on the
             same batches; the losses side by side and their largest relative
             difference. Tolerances (TOLERANCES): float64 1e-10 (the two sides differ
             only by round-off, ~1e-16 per operation, in a different summation order:
             cuBLAS against OpenBLAS, CUDA's exp/tanh against the C library's; a few
             steps leave ~1e-13), float32 1e-4 (the same with ~1e-7 per operation).
             The float32 bound assumes CuPy's default full-float32 matmuls: with
             CUPY_TF32=1 (10-bit mantissa products) it fails, and the line says so.
             The parameters' largest relative difference is reported, not checked.
checkpoint   a model trained one step on the device is saved, loaded into a model on
             NumPy (built from another seed), and the reverse; every parameter and
             every AdamW buffer must be bit-for-bit equal, of the saved dtype and on
             the loading side's device; then one more step on each side from the same
             batch must give the same loss (float32 tolerance).
timing       configs b and c in float32: milliseconds per ``train_step`` (median, min)
             over ``--timed-steps`` (>= 10) steps after ``--warmup`` steps, tokens/s, with
             the device synchronised before each clock reading. The host-to-device copy of
             each batch is inside the step, as in training. Memory, from CuPy's default
             pool, which was emptied (free_all_blocks) before the model was built:
             ``pool_peak_mb`` = total_bytes() after the steps (the pool keeps every block
             until told to free it, so this is its high-water mark: the peak of the live
             arrays rounded up to the pool's blocks; cuBLAS workspaces not counted),
             ``pool_used_mb`` = used_bytes() between steps (parameters, gradients, AdamW
             state). With PyTorch (CUDA build) installed, its twin of the model
             (benchmarks/torch_compare.py) is timed alongside.

environment  not a check: the GPU, CuPy, CUDA runtime and driver, NumPy and PyTorch versions,
             CUPY_TF32 and PyTorch's float32 matmul precision.
generation, figures, minilm, train_command: benchmarks/gpu_parts.py's docstring.

The timing part also reports ``ratio_vs_torch`` per config, CuPy's median step over
PyTorch's (eager, ``scaled_dot_product_attention``), against the goal ``RATIO_GOAL``.
``--gradcheck-budget-s``: layers not started within that many seconds are listed as
skipped (the part still fails on any layer that ran and failed).

``--device numpy`` runs every part with NumPy standing in for the device (the
"device" twin is a second NumPy model), so the script's logic runs on any machine;
its timing part times config b only, 3 steps after 1 warm-up, without device memory.
Without CuPy or without a CUDA device, and without ``--device numpy``, the script
prints one line saying what is missing and exits 0. Otherwise it exits 1 if a part
failed or raised (the error is in the part's line, the traceback on stderr), else 0.
"""
from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import sys
import tempfile
import time
import traceback
from typing import NamedTuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_step import CONFIGS, build, machine, make_task  # noqa: E402

from minitransformer.backend import cupy_available, device_of, to_numpy, xp_for_device  # noqa: E402
from minitransformer.training.checkpoint import load_checkpoint, save_checkpoint  # noqa: E402
from minitransformer.gradcheck.suite import layer_checks  # noqa: E402
from minitransformer.training.loop import make_optimizer, train_step  # noqa: E402
from minitransformer.fast.cuda_adamw import fused_like  # noqa: E402
import gpu_parts  # noqa: E402

PARTS = ("environment", "gradcheck", "train_match", "checkpoint", "timing", "generation", "figures", "minilm",
         "train_command")
RATIO_GOAL = 1.5                                        # CuPy's config c step at most 1.5x PyTorch's
DEVICES = {"cuda": "cuda", "numpy": "cpu"}              # --device -> the library's device name
TOLERANCES = {"float64": 1e-10, "float32": 1e-4}        # largest relative loss difference (see above)
MATCH_CONFIG = "a"                                      # the smallest config of train_step.py
TINY = 1e-300                                           # keeps a relative difference of zeros defined


class Twin(NamedTuple):
    """One side of a comparison: what ``train_step`` needs, on one device."""
    model: object
    task: object
    cfg: object
    opt: object
    rng: np.random.Generator
    device: str


def make_twin(config: str, seed: int, device: str, dtype) -> Twin:
    """benchmarks/train_step.build(config, seed), cast to ``dtype``, moved to ``device``.

    The weights are drawn on the host from the seed, so both sides start equal; the
    optimizer is made again because the cast and the move replace the arrays.
    """
    model, task, cfg, _, rng = build(config, seed)
    model.astype(dtype).to(device)
    return Twin(model, task, cfg, make_optimizer(model, cfg), rng, device)


def step(twin: Twin, batch) -> float:
    """One ``train_step`` (forward, backward, clip, AdamW at the config's lr); the loss."""
    return train_step(twin.model, twin.task, batch, twin.opt, twin.cfg.lr, twin.cfg, twin.device)


def max_relative_difference(a, b) -> float:
    """max_i |a_i - b_i| / max(|a_i|, |b_i|, tiny) over two equally long sequences of numbers."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b) / np.maximum(np.maximum(np.abs(a), np.abs(b)), TINY), initial=0.0))


def state_mismatches(expected: dict, got: dict) -> list:
    """Names whose arrays are missing, or differ in shape, dtype or any bit of value."""
    bad = sorted(set(expected) ^ set(got))
    for name in sorted(set(expected) & set(got)):
        a, b = to_numpy(expected[name]), to_numpy(got[name])
        if a.dtype != b.dtype or a.shape != b.shape or not np.array_equal(a, b):
            bad.append(name)
    return bad


# ------------------------------------------------------------------------ gradcheck
def gradcheck_part(device: str, seed: int = 0, budget_s: float = float("inf")) -> dict:
    """Every layer check of the gradcheck command, on ``device``; a failing table goes to stderr.
    A layer not started within ``budget_s`` seconds of the first is skipped (listed)."""
    layers, skipped = {}, []
    t0 = time.perf_counter()
    for name, thunk in layer_checks(seed, device=device):
        if time.perf_counter() - t0 > budget_s:
            skipped.append(name)
            continue
        t_layer = time.perf_counter()
        result = thunk()
        layers[name] = {"max_rel_error": float(f"{result.max_rel_error:.3e}"), "ok": result.ok,
                        "seconds": round(time.perf_counter() - t_layer, 2)}
        if not result.ok:
            print(f"gradcheck {name} on {device}:\n{result}", file=sys.stderr)
    worst = max(layers, key=lambda n: layers[n]["max_rel_error"])
    return {"part": "gradcheck", "dtype": "float64", "ok": all(r["ok"] for r in layers.values()),
            "worst_layer": worst, "worst_rel_error": layers[worst]["max_rel_error"],
            "seconds": round(time.perf_counter() - t0, 1), "skipped_layers": skipped, "layers": layers}


# ---------------------------------------------------------------------- train_match
def match_one_dtype(device: str, dtype, steps: int, config: str, seed: int) -> dict:
    """``steps`` train steps of a NumPy twin and a device twin on the same batches."""
    ref, dev = make_twin(config, seed, "cpu", dtype), make_twin(config, seed, device, dtype)
    batches = [ref.task.batch("train", ref.rng) for _ in range(steps)]
    ref_losses = [step(ref, b) for b in batches]
    dev_losses = [step(dev, b) for b in batches]
    rel = max_relative_difference(ref_losses, dev_losses)
    params = max(_tensor_relative_difference(p, q) for (_, p, _), (_, q, _)
                 in zip(ref.model.parameters(), dev.model.parameters()))
    tol = TOLERANCES[np.dtype(dtype).name]
    return {"numpy_losses": ref_losses, "device_losses": dev_losses, "max_rel_diff": rel,
            "tolerance": tol, "ok": rel <= tol, "param_max_rel_diff": params}


def _tensor_relative_difference(p, q) -> float:
    """max|p - q| / max(max|p|, max|q|, tiny), the gradient checker's measure, for one tensor."""
    a, b = to_numpy(p).astype(np.float64), to_numpy(q).astype(np.float64)
    scale = max(float(np.max(np.abs(a))), float(np.max(np.abs(b))), TINY)
    return float(np.max(np.abs(a - b))) / scale


def train_match_part(device: str, steps: int = 5, config: str = MATCH_CONFIG, seed: int = 0) -> dict:
    """float64 and float32 runs of ``match_one_dtype``; ok when both are within tolerance."""
    runs = {name: match_one_dtype(device, dtype, steps, config, seed)
            for name, dtype in (("float64", np.float64), ("float32", np.float32))}
    line = {"part": "train_match", "config": config, "steps": steps, "optimizer": "AdamW",
            "ok": all(r["ok"] for r in runs.values()), **runs}
    if device == "cuda":
        line["cupy_tf32"] = os.environ.get("CUPY_TF32", "0")   # "1" breaks the float32 bound
    return line


# ----------------------------------------------------------------------- checkpoint
def transfer(src: Twin, dst: Twin, path: str) -> dict:
    """Save ``src`` (after one step), load into ``dst``; compare; one more step on each."""
    batch, next_batch = src.task.batch("train", src.rng), src.task.batch("train", src.rng)
    step(src, batch)
    save_checkpoint(path, src.model, optimizer_state=src.opt.state_dict())
    params, optim_state, _ = load_checkpoint(path)
    dst.model.load_state_dict(params)
    dst.opt.load_state_dict(optim_state)
    wrong_device = [n for n, p, _ in dst.model.parameters() if device_of(p) != dst.device]
    mismatched = (state_mismatches(src.model.state_dict(), dst.model.state_dict())
                  + state_mismatches(_buffers(src.opt), _buffers(dst.opt))
                  + (["optimizer step"] if dst.opt.t != src.opt.t else []))   # AdamW's bias correction
    losses = [step(src, next_batch), step(dst, next_batch)]
    rel = max_relative_difference(losses[:1], losses[1:])
    return {"mismatched": mismatched, "wrong_device": wrong_device, "next_losses": losses,
            "next_loss_rel_diff": rel,
            "ok": not mismatched and not wrong_device and rel <= TOLERANCES["float32"]}


def _buffers(optimizer) -> dict:
    """The optimizer's arrays (AdamW's m and v per parameter) from its state_dict."""
    return {k: v for k, v in optimizer.state_dict().items() if "/" in k}


def checkpoint_part(device: str, config: str = MATCH_CONFIG, seed: int = 0) -> dict:
    """Device -> NumPy and NumPy -> device; the loading side is built from another seed."""
    directions = {}
    with tempfile.TemporaryDirectory(prefix="gpu_check-") as directory:
        for name, (a, b) in {"device_to_numpy": (device, "cpu"), "numpy_to_device": ("cpu", device)}.items():
            src, dst = make_twin(config, seed, a, np.float32), make_twin(config, seed + 1, b, np.float32)
            directions[name] = transfer(src, dst, os.path.join(directory, f"{name}.npz"))
    return {"part": "checkpoint", "config": config, "dtype": "float32",
            "ok": all(d["ok"] for d in directions.values()), **directions}


# --------------------------------------------------------------------------- timing
synchronize = gpu_parts.synchronize


def memory_pool(device: str):
    """CuPy's default device memory pool, or None on NumPy."""
    return xp_for_device("cuda").get_default_memory_pool() if device == "cuda" else None


def time_config(name: str, device: str, steps: int, warmup: int, fused: bool = False) -> dict:
    """ms per float32 train_step of config ``name`` on ``device``, tokens/s, pool memory.
    ``fused``: the speed wing's FusedAdamW (one kernel per parameter) instead of AdamW."""
    pool = memory_pool(device)
    gc.collect()                                   # the previous config's arrays back to the pool,
    if pool is not None:
        pool.free_all_blocks()                     # and the pool's blocks back to the device
    twin = make_twin(name, 0, device, np.float32)
    if fused:
        twin = twin._replace(opt=fused_like(twin.opt))
    batches = [twin.task.batch("train", twin.rng) for _ in range(warmup + steps)]
    ms = []
    for i, batch in enumerate(batches):
        synchronize(device)                        # the previous step's kernels are not this step's
        t0 = time.perf_counter()
        step(twin, batch)
        synchronize(device)
        if i >= warmup:
            ms.append((time.perf_counter() - t0) * 1e3)
    L, H, C, T, B = CONFIGS[name]
    median = float(np.median(ms))
    params_bytes = sum(int(p.nbytes) for _, p, _ in twin.model.parameters())
    line = {"config": name, "n_layer": L, "n_head": H, "d_model": C, "block_size": T, "batch": B,
            "steps": steps, "warmup": warmup, "ms_median": round(median, 3), "ms_min": round(min(ms), 3),
            "tokens_per_s": round(B * T / median * 1e3), "params_mb": round(4 * params_bytes / 2**20, 1)}
    if pool is not None:
        line["pool_peak_mb"] = round(pool.total_bytes() / 2**20, 1)
        line["pool_used_mb"] = round(pool.used_bytes() / 2**20, 1)
    line["phases_ms"] = phase_ms(twin, batches[warmup:warmup + max(3, min(steps, 10))])
    if device == "cuda":
        line["host_vs_device_ms"] = host_vs_device_ms(twin, batches[-1])
    return line


def host_vs_device_ms(twin: Twin, batch) -> dict:
    """Median host (Python, launches) and device (kernels) ms of a step, as cupyx.profiler.benchmark
    measures them: a step whose device time is far below its host time waits on its launches."""
    from cupyx.profiler import benchmark
    result = benchmark(lambda: step(twin, batch), n_repeat=10, n_warmup=2)
    return {"host": round(float(np.median(result.cpu_times)) * 1e3, 3),
            "device": round(float(np.median(result.gpu_times)) * 1e3, 3)}


def fused_adamw_match(device: str, config: str, steps: int = 3) -> dict:
    """Losses of ``steps`` float32 steps with AdamW and with FusedAdamW from the same start."""
    plain = make_twin(config, 0, device, np.float32)
    fused = make_twin(config, 0, device, np.float32)
    fused = fused._replace(opt=fused_like(fused.opt))
    batches = [plain.task.batch("train", plain.rng) for _ in range(steps)]
    losses = {"adamw": [step(plain, b) for b in batches], "fused": [step(fused, b) for b in batches]}
    diff = max_relative_difference(losses["adamw"], losses["fused"])
    return {"config": config, **losses, "max_rel_diff": diff, "tolerance": TOLERANCES["float32"],
            "ok": diff <= TOLERANCES["float32"]}


def phase_ms(twin: Twin, batches) -> dict:
    """Median ms of each part of a train_step, the device synchronised around each: where a step's
    time goes (forward with the loss, backward, the gradient norm and clipping, the AdamW update).
    The parts are train_step's own calls, in its order; their sum exceeds the step's time by the
    waits the synchronisations add."""
    from minitransformer.optim import clip_grad_norm
    from minitransformer.training.loss import task_loss, task_loss_backward
    model, opt, cfg, device = twin.model, twin.opt, twin.cfg, twin.device
    ms = {"forward": [], "backward": [], "clip": [], "update": []}
    for batch in batches:
        marks = [time.perf_counter()]
        _, cache = task_loss(model, twin.task, batch, cfg.smoothing, device)
        for name, call in (("forward", lambda: None), ("backward", lambda: task_loss_backward(model, 1.0, cache)),
                           ("clip", lambda: clip_grad_norm(opt.params, cfg.grad_clip)),
                           ("update", lambda: (opt.step(cfg.lr), model.zero_grad()))):
            call()
            synchronize(device)
            marks.append(time.perf_counter())
            ms[name].append((marks[-1] - marks[-2]) * 1e3)
    return {name: round(float(np.median(v)), 3) for name, v in ms.items()}


def gpu_name() -> str:
    """The current CUDA device's name, as the CUDA runtime reports it."""
    cupy = xp_for_device("cuda")
    name = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def torch_cuda_lines(configs, steps: int, warmup: int):
    """The PyTorch twin (benchmarks/torch_compare.py) timed on CUDA, or a line saying why not."""
    try:
        import torch
    except ImportError:
        return "skipped: PyTorch is not installed"
    if not torch.cuda.is_available():
        return "skipped: PyTorch sees no CUDA device"
    from torch_compare import torch_model
    lines = []
    for name in configs:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        step_fn = torch_model(name, device="cuda")
        task, rng = make_task(name)
        ms = []
        for i in range(warmup + steps):
            batch = task.batch("train", rng)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            step_fn(batch)                              # float(loss) waits for the step's kernels
            torch.cuda.synchronize()
            if i >= warmup:
                ms.append((time.perf_counter() - t0) * 1e3)
        B, T = CONFIGS[name][4], CONFIGS[name][3]
        median = float(np.median(ms))
        lines.append({"config": name, "ms_median": round(median, 3), "ms_min": round(min(ms), 3),
                      "tokens_per_s": round(B * T / median * 1e3),
                      "peak_allocated_mb": round(torch.cuda.max_memory_allocated() / 2**20, 1)})
    return lines


def add_ratios(cupy_rows, torch_rows) -> None:
    """``ratio_vs_torch`` = CuPy's median ms / PyTorch's, and whether it meets RATIO_GOAL, per config."""
    if not isinstance(torch_rows, list):                 # "skipped: ..."
        return
    torch_ms = {row["config"]: row["ms_median"] for row in torch_rows}
    for row in cupy_rows:
        if row["config"] in torch_ms:
            row["ratio_vs_torch"] = round(row["ms_median"] / torch_ms[row["config"]], 3)
            row["ratio_goal"], row["goal_met"] = RATIO_GOAL, row["ratio_vs_torch"] <= RATIO_GOAL


def timing_part(device: str, configs=("b", "c"), steps: int = 10, warmup: int = 3) -> dict:
    """time_config for each config; on NumPy (the dry run) no memory and no PyTorch line."""
    line = {"part": "timing", "dtype": "float32", "ok": True,
            "configs": [time_config(name, device, steps, warmup) for name in configs],
            "machine": machine()}             # the host CPU and its OpenBLAS core
    if device == "cuda":
        line["gpu"] = gpu_name()
        line["fused_adamw"] = [time_config(name, device, steps, warmup, fused=True) for name in configs]
        line["fused_match"] = fused_adamw_match(device, configs[0])
        line["ok"] = line["fused_match"]["ok"]
        line["torch_cuda"] = torch_cuda_lines(configs, steps, warmup)
        add_ratios(line["configs"], line["torch_cuda"])
        add_ratios(line["fused_adamw"], line["torch_cuda"])
    else:
        line["note"] = (f"dry run: NumPy stands in for the device; config(s) {', '.join(configs)} only, "
                        f"{steps} steps after {warmup} warm-up, no device memory, no PyTorch")
    return line


# ---------------------------------------------------------------------- environment
def environment_part(device: str) -> dict:
    """The versions a result depends on (not a check)."""
    line = {"part": "environment", "ok": True, "python": sys.version.split()[0], "numpy": np.__version__,
            "machine": machine(), "cupy_tf32": os.environ.get("CUPY_TF32", "0")}
    if device == "cuda":
        cupy = xp_for_device("cuda")
        runtime = cupy.cuda.runtime
        line.update(gpu=gpu_name(), cupy=cupy.__version__, cuda_runtime=runtime.runtimeGetVersion(),
                    cuda_driver=runtime.driverGetVersion())
    try:
        import torch
        line.update(torch=torch.__version__, torch_cuda=torch.version.cuda,
                    torch_float32_matmul=torch.get_float32_matmul_precision())
    except ImportError:
        line["torch"] = None
    return line


# ----------------------------------------------------------------------------- main
def missing_cuda():
    """What is missing for --device cuda, or None when CuPy sees a CUDA device."""
    if cupy_available():
        return None
    if importlib.util.find_spec("cupy") is None:
        return "CuPy is not installed (pip install 'minitransformer[gpu]')"
    return "CuPy is installed but sees no CUDA device (or cannot load its CUDA runtime)"


def run_part(name: str, thunk, label: str, jsonl=None) -> dict:
    """Run one part and print its JSON line (and append it to ``jsonl``); an exception becomes a
    failed line with the exception's last line (the traceback on stderr)."""
    t0 = time.perf_counter()
    try:
        line = thunk()
    except Exception as e:  # noqa: BLE001  (one part's failure must not hide the others' results)
        traceback.print_exc()
        line = {"part": name, "ok": False, "error": f"{type(e).__name__}: {e}"}
    line = {"part": line.pop("part"), "device": label, **line, "part_seconds": round(time.perf_counter() - t0, 1)}
    text = json.dumps(line)
    print(text, flush=True)
    if jsonl:
        with open(jsonl, "a") as f:
            f.write(text + "\n")
    return line


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", choices=sorted(DEVICES), default="cuda",
                   help="cuda (CuPy), or numpy for a dry run on the CPU")
    p.add_argument("--steps", type=int, default=5, help="train_match: AdamW steps per dtype")
    p.add_argument("--timed-steps", type=int, default=20, help="timing: timed steps per config (>= 10)")
    p.add_argument("--warmup", type=int, default=5, help="timing: untimed steps first")
    p.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS), help="which parts to run")
    p.add_argument("--gradcheck-budget-s", type=float, default=120.0,
                   help="gradcheck: layers not started within this many seconds are skipped")
    p.add_argument("--model-steps", type=int, default=300,
                   help="generation, figures: steps of the default GPT trained on the device")
    p.add_argument("--train-steps", type=int, default=2000, help="train_command: --steps of the train command")
    p.add_argument("--train-timeout-s", type=float, default=240.0, help="train_command: the subprocess's limit")
    p.add_argument("--sentences", type=int, default=256, help="minilm: sentences embedded on each side")
    p.add_argument("--minilm-dir", default=None,
                   help=f"minilm: the model folder (default ${gpu_parts.MINILM_ENV}, else the installed package)")
    p.add_argument("--out", default=None, help="figures: folder for the PNG files (default: a temporary one)")
    p.add_argument("--jsonl", default=None, help="also append every JSON line to this file")
    p.add_argument("--summary", metavar="JSONL", help="print the table of a finished run's JSON lines, and exit")
    p.add_argument("--pack-minilm", metavar="DIR", help="write a float16 copy of all-MiniLM-L6-v2 to DIR, and exit")
    args = p.parse_args(argv)
    if args.steps < 1:
        p.error(f"--steps: expected an integer >= 1, got {args.steps}")
    if args.device == "cuda" and (args.timed_steps < 10 or args.warmup < 0):
        p.error(f"--timed-steps, --warmup: expected >= 10 and >= 0, got {args.timed_steps}, {args.warmup}")
    return args


def thunks(args, device: str, out_dir: str) -> dict:
    """Each part's call; the dry run (NumPy) keeps every size small."""
    dry = device == "cpu"
    model_steps = min(args.model_steps, 20) if dry else args.model_steps
    return {"environment": lambda: environment_part(device),
            "gradcheck": lambda: gradcheck_part(device, budget_s=args.gradcheck_budget_s),
            "train_match": lambda: train_match_part(device, args.steps, MATCH_CONFIG),
            "checkpoint": lambda: checkpoint_part(device, MATCH_CONFIG),
            "timing": ((lambda: timing_part(device, ("b", "c"), args.timed_steps, args.warmup)) if not dry
                       else (lambda: timing_part(device, ("b",), 3, 1))),
            "generation": lambda: gpu_parts.generation_part(device, model_steps),
            "figures": lambda: gpu_parts.figures_part(device, out_dir, model_steps),
            "minilm": lambda: gpu_parts.minilm_part(device, min(args.sentences, 16) if dry else args.sentences,
                                                    args.minilm_dir),
            "train_command": lambda: gpu_parts.train_command_part(
                device, min(args.train_steps, 20) if dry else args.train_steps, args.train_timeout_s)}


def main(argv=None) -> int:
    args = parse(argv)
    if args.summary:
        print(gpu_parts.summary_table(gpu_parts.read_jsonl(args.summary)))
        return 0
    if args.pack_minilm:
        print(json.dumps(gpu_parts.pack_minilm(gpu_parts.minilm_dir(args.minilm_dir), args.pack_minilm)))
        return 0
    missing = missing_cuda() if args.device == "cuda" else None
    if missing:
        print(f"gpu_check: {missing}; nothing was run (a dry run on the CPU: --device numpy)")
        return 0
    device = DEVICES[args.device]
    label = "cuda" if device == "cuda" else "numpy (dry run)"
    with tempfile.TemporaryDirectory(prefix="gpu_check-figures-") as scratch:
        out_dir = args.out or scratch
        calls = thunks(args, device, out_dir)
        lines = [run_part(name, calls[name], label, args.jsonl) for name in PARTS if name in args.parts]
    print("\n" + gpu_parts.summary_table(lines), flush=True)
    return 0 if all(line["ok"] for line in lines) else 1


if __name__ == "__main__":
    sys.exit(main())
