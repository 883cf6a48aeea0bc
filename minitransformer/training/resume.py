"""Saving a run and resuming it bit for bit.

A run's checkpoint (checkpoint.py) keeps the parameters, the optimizer state (per
parameter name) and a JSON document: the TrainConfig, the step, the history and both
random generators (the batches', the dropout layers'), so ``restore`` continues the
run with the same losses as an uninterrupted one. A resume whose model differs from
the checkpoint's is refused (``ResumeMismatch``); so is one whose TrainConfig or
optimizer differs, unless ``allow_config_change`` (the model, never).
"""
from __future__ import annotations

import json
from dataclasses import asdict

from .checkpoint import generator_state, load_checkpoint, save_checkpoint, set_generator_state
from .config import TrainResult


class ResumeMismatch(ValueError):
    """``resume`` with a model or a TrainConfig that differs from the checkpoint's."""


RESUME_RUN_FIELDS = ("task", "batch_size")   # meta fields compared on resume, like the train config
# TrainConfig fields that do not change the trajectory of a run: a resume may change them freely
# (tune_malloc and data_parallel: fields of older checkpoints, now the speed wing's settings).
RESUME_FREE_FIELDS = ("eval_interval", "eval_batches", "final_eval_batches", "log_interval",
                      "checkpoint_interval", "recompute", "tune_malloc", "data_parallel")


def dropout_generators(model) -> list:
    """The distinct random generators of the model's dropout layers."""
    gens = {}
    for _, m in model.named_modules():
        if getattr(m, "rng", None) is not None:
            gens[id(m.rng)] = m.rng
    return list(gens.values())


def save_run(path, model, optimizer, batch_rng, step, result, cfg, meta, generator_states=None) -> None:
    """The checkpoint of step ``step``. ``generator_states``: [batch, *dropout] states to store
    instead of the current ones."""
    rngs = generator_states or [generator_state(g) for g in [batch_rng] + dropout_generators(model)]
    doc = {**(meta or {}), "step": step, "train_config": asdict(cfg),
           "batch_rng": rngs[0], "dropout_rngs": rngs[1:],
           "history": result.history, "evals": result.evals}
    save_checkpoint(path, model, optimizer_state=optimizer.state_dict(), meta=doc)


def _differences(saved: dict, now: dict, skip=()) -> list[str]:
    """'field: saved vs now' for each field whose value differs (JSON-normalised: tuples are lists)."""
    norm = lambda v: json.loads(json.dumps(v))
    return [f"{k}: {norm(saved.get(k))!r} (checkpoint) vs {norm(now.get(k))!r} (now)"
            for k in sorted(set(saved) | set(now)) if k not in skip and norm(saved.get(k)) != norm(now.get(k))]


def _optimizer_differences(saved_state: dict, optimizer) -> list[str]:
    """'optimizer X: saved vs now' for the optimizer's type and hyperparameters (betas, eps, weight decay)."""
    if str(saved_state.get("type")) != type(optimizer).__name__:
        raise ResumeMismatch(f"resume: optimizer: {saved_state.get('type')!r} (checkpoint) vs "
                             f"{type(optimizer).__name__!r} (now); the optimizer cannot change on resume")
    names = getattr(optimizer, "hyperparameters", ())
    return [f"optimizer {d}" for d in _differences({h: saved_state.get(h) for h in names},
                                                   {h: getattr(optimizer, h) for h in names})]


def restore(path, model, optimizer, batch_rng, cfg=None, meta=None, allow_config_change=False):
    """Load the checkpoint at ``path`` into the model, the optimizer and the generators, after
    checking it fits; returns (the step it saved, its TrainResult so far)."""
    params, optim_state, saved = load_checkpoint(path)
    # The architecture first: it can never change (the parameters would not fit).
    arch = []
    if meta and "family" in meta and "family" in saved and meta["family"] != saved["family"]:
        arch.append(f"family: {saved['family']!r} (checkpoint) vs {meta['family']!r} (now)")
    if meta and isinstance(meta.get("config"), dict) and isinstance(saved.get("config"), dict):
        arch += _differences(saved["config"], meta["config"])
    if meta and "tokenizer" in meta and "tokenizer" in saved and _differences(saved["tokenizer"], meta["tokenizer"]):
        arch.append("tokenizer: another vocabulary (other --data or --tokenizer): the token ids would mean "
                    "other text")
    now_shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    saved_shapes = {k: tuple(v.shape) for k, v in params.items()}
    if not arch and now_shapes != saved_shapes:
        diff = sorted(k for k in set(now_shapes) | set(saved_shapes) if now_shapes.get(k) != saved_shapes.get(k))
        arch += [f"{k}: {saved_shapes.get(k)} (checkpoint) vs {now_shapes.get(k)} (now)" for k in diff[:3]]
        arch += ["..."] if len(diff) > 3 else []
    if arch:
        raise ResumeMismatch(f"resume: the model differs from the checkpoint's in {path}: {'; '.join(arch)}; "
                             "the architecture cannot change on resume (start a new run elsewhere)")
    diff = []
    if cfg is not None and isinstance(saved.get("train_config"), dict):
        diff = _differences(saved["train_config"], asdict(cfg), skip=RESUME_FREE_FIELDS)
    if meta:  # the run's other settings (the seq2seq task, the batch size), where both runs name them
        both = [k for k in RESUME_RUN_FIELDS if k in meta and k in saved]
        diff += _differences({k: saved[k] for k in both}, {k: meta[k] for k in both})
    optim_diff = _optimizer_differences(optim_state, optimizer)
    diff += optim_diff
    if diff:
        if not allow_config_change:
            why = " (changing steps changes the learning-rate schedule)" if any(d.startswith("steps:") for d in diff) else ""
            raise ResumeMismatch(f"resume: the training config differs from the checkpoint's in {path}: "
                                 f"{'; '.join(diff)}{why}; allow the change explicitly "
                                 "(--allow-config-change, allow_config_change=True) to continue anyway")
        if optim_diff:   # allowed: the moment buffers carry over, the hyperparameters are the new ones
            optim_state = {**optim_state, **{h: getattr(optimizer, h) for h in optimizer.hyperparameters}}
    model.load_state_dict(params)
    optimizer.load_state_dict(optim_state)
    set_generator_state(batch_rng, saved["batch_rng"])
    for g, state in zip(dropout_generators(model), saved["dropout_rngs"]):
        set_generator_state(g, state)
    result = TrainResult(history=[tuple(h) for h in saved["history"]], evals=[tuple(e) for e in saved["evals"]])
    return int(saved["step"]), result
