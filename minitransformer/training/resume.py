"""Saving a run and resuming it bit for bit.

A run's checkpoint (checkpoint.py) keeps the parameters, the optimizer state (per
parameter name) and a JSON document: the TrainConfig, the step, the history and both
random generators (the batches', the dropout layers'), so ``restore`` continues the
run with the same losses as an uninterrupted one. A resume whose model differs from
the checkpoint's is refused (``ResumeMismatch``); so is one whose TrainConfig or
optimizer differs, unless ``allow_config_change`` (the model, never). A checkpoint
that holds no run's state (written by ``save_checkpoint`` alone), or a field of it
missing or of the wrong type, is refused before anything is loaded (``BadRunState``:
one line naming the file and the field).
"""
from __future__ import annotations

import json
import numbers
from dataclasses import asdict

import numpy as np

from .checkpoint import generator_state, load_checkpoint, save_checkpoint, set_generator_state
from .config import TrainResult


class ResumeMismatch(ValueError):
    """``resume`` with a model or a TrainConfig that differs from the checkpoint's."""


class BadRunState(ValueError):
    """``resume`` from a checkpoint whose run state (step, generators, history) is missing
    or malformed: the message names the file and the field."""


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


def _generator_state_error(state) -> str | None:
    """Why ``state`` is not a NumPy generator's state (as ``save_run`` writes it), or None."""
    try:
        np.random.default_rng(0).bit_generator.state = state     # a scratch generator checks it
    except (TypeError, ValueError, KeyError, OverflowError) as e:
        return str(e)
    return None


def _is_rows(value, width: int) -> bool:
    """A list of [step, number, ...] rows of ``width`` entries (history: 2, evals: 3)."""
    def row_ok(row):
        return (isinstance(row, (list, tuple)) and len(row) == width
                and isinstance(row[0], int) and not isinstance(row[0], bool)
                and all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in row[1:]))
    return isinstance(value, list) and all(map(row_ok, value))


def check_run_state(saved: dict, path, steps: int | None = None) -> int:
    """The step a run's checkpoint continues from, after checking every field ``restore`` reads;
    ``BadRunState`` naming ``path`` and the field otherwise. ``steps``: the run's total, which the
    saved step may not pass."""
    if not isinstance(saved, dict):
        raise BadRunState(f"resume: {path}: expected the checkpoint's metadata (a dict, load_checkpoint's third "
                          f"value), got {type(saved).__name__}")
    missing = [k for k in ("step", "train_config", "batch_rng", "dropout_rngs", "history", "evals")
               if k not in saved]
    if missing:
        raise BadRunState(f"resume: {path} holds no run state to continue (no {', '.join(missing)}): a "
                          "checkpoint written by save_checkpoint alone holds a model, not a run; load it "
                          "with minitransformer.load or load_checkpoint, or start a new run")
    step = saved["step"]
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise BadRunState(f"resume: {path}: field 'step': expected an integer >= 0, got {step!r}")
    if steps is not None and step > steps:
        raise BadRunState(f"resume: {path}: field 'step': the checkpoint is at step {step}, beyond "
                          f"steps={steps}; nothing is left to train (train for at least {step} steps)")
    if not isinstance(saved["train_config"], dict):
        raise BadRunState(f"resume: {path}: field 'train_config': expected a JSON object (a TrainConfig), "
                          f"got {type(saved['train_config']).__name__}")
    why = _generator_state_error(saved["batch_rng"])
    if why:
        raise BadRunState(f"resume: {path}: field 'batch_rng': expected a NumPy generator's state ({why})")
    if not isinstance(saved["dropout_rngs"], list):
        raise BadRunState(f"resume: {path}: field 'dropout_rngs': expected a list of generator states, "
                          f"got {type(saved['dropout_rngs']).__name__}")
    for i, state in enumerate(saved["dropout_rngs"]):
        why = _generator_state_error(state)
        if why:
            raise BadRunState(f"resume: {path}: field 'dropout_rngs'[{i}]: expected a NumPy generator's "
                              f"state ({why})")
    for name, width in (("history", 2), ("evals", 3)):
        if not _is_rows(saved[name], width):
            raise BadRunState(f"resume: {path}: field {name!r}: expected a list of [step, loss"
                              f"{', loss' if width == 3 else ''}] rows, got {saved[name]!r:.60}")
    return step


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
    check_run_state(saved, path, cfg.steps if cfg is not None else None)
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
    generators = dropout_generators(model)
    if len(saved["dropout_rngs"]) != len(generators):
        raise BadRunState(f"resume: {path}: field 'dropout_rngs': expected {len(generators)} generator "
                          f"states (the model's dropout layers), got {len(saved['dropout_rngs'])}")
    for what, load, state in (("parameters", model.load_state_dict, params),
                              ("optimizer state", optimizer.load_state_dict, optim_state)):
        try:
            load(state)                  # each checks everything before it changes anything
        except (TypeError, ValueError) as e:
            raise BadRunState(f"resume: {path}: {what}: {e}") from None
    set_generator_state(batch_rng, saved["batch_rng"])
    for g, state in zip(generators, saved["dropout_rngs"]):
        set_generator_state(g, state)
    result = TrainResult(history=[tuple(h) for h in saved["history"]], evals=[tuple(e) for e in saved["evals"]])
    return int(saved["step"]), result
