"""The training loop: the same for every model family and task.

One step:
    logits, targets = task.forward(model, batch)        forward
    L, cache  = cross_entropy_forward(logits, targets)  the loss
    dlogits   = cross_entropy_backward(1, cache)        dL/dlogits
    model.backward(dlogits)                             every parameter's gradient (accumulated)
    clip_grad_norm(model.parameters(), max_norm)        one global norm
    optimizer.step(lr = schedule(step))                 AdamW by default
    model.zero_grad()

A non-finite loss or gradient norm stops training with a clear message BEFORE the
update, so no NaN reaches the weights; a non-finite update is caught right after it
(train_step says how), and ``save_checkpoint`` refuses non-finite values, so no NaN
ever reaches a checkpoint. Ctrl-C saves the last completed step (TrainingInterrupted);
a resume whose model or TrainConfig differs from the checkpoint's is refused
(ResumeMismatch) unless ``allow_config_change`` (the model, never). Checkpoints (checkpoint.py) keep the
parameters, the optimizer state and both random generators (batches, dropout),
so ``resume`` continues bit for bit: the same losses as an uninterrupted run.

Speed: unless ``TrainConfig.tune_malloc`` is False, ``train`` first asks glibc to keep
freed memory for reuse (perf.tune_malloc): a step frees and allocates the same
megabyte-sized arrays again and again, and fresh pages cost a page fault each.
It is a process-wide setting, and it stays on after ``train`` returns. And unless
``TrainConfig.data_parallel`` is 1, the forward and backward run on two model replicas,
half of the batch each, one core each: the model here and a copy in a worker process
(data_parallel.py; where they can: no dropout, NumPy, an OpenBLAS whose threads can be
set, fork); the rest of the step is the same.

The final evaluation is scaled to the run (``final_eval_batch_count``): steps // 25
batches of each split, at least ``eval_batches`` and at most 200, unless
``TrainConfig.final_eval_batches`` names a count. An evaluation batch is a forward
pass without caches (eval mode, ``release_caches``): 0.42-0.49 of a training step
(default run, measured 2026-11-23, AMD Zen 3), so the two splits cost about
2 x 1/25 x 0.45 ~ 3.6% of the training (default run: 80 batches each after 2000
steps; it was 200 each, ~9%); a one-step run evaluates on ``eval_batches`` (20).
It logs a line before it starts and one per split, with the seconds taken.
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from .checkpoint import generator_state, load_checkpoint, save_checkpoint, set_generator_state
from .data_parallel import DataParallel, n_replicas_for
from .loss import task_loss, task_loss_backward
from ..functional.cross_entropy import cross_entropy_forward
from ..optim import AdamW, clip_grad_norm, warmup_cosine_schedule
from ..layers.blocks import set_recompute
from ..layers.flat_parameters import flatten_parameters
from ..validate import check_int, check_number
from .perf import tune_malloc
from .workers import shared_empty


class TrainingDiverged(RuntimeError):
    """The loss, the gradient norm or the updated weights became NaN or infinite.

    The message says which step and what was non-finite, and whether the weights
    in memory are still those of the step before (a non-finite loss or gradient
    norm: caught before the update) or not (a non-finite update). No checkpoint is
    ever written with non-finite values (``save_checkpoint`` refuses).
    """


class ResumeMismatch(ValueError):
    """``resume`` with a model or a TrainConfig that differs from the checkpoint's."""


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C during ``train``: ``step`` steps are done; ``saved`` says whether they are in ``checkpoint_path``."""

    def __init__(self, message: str, step: int, checkpoint_path, saved: bool):
        super().__init__(message)
        self.step, self.checkpoint_path, self.saved = step, checkpoint_path, saved


# TrainConfig fields that do not change the trajectory of a run: a resume may change them freely.
RESUME_RUN_FIELDS = ("task", "batch_size")   # meta fields compared on resume, like the train config
RESUME_FREE_FIELDS = ("eval_interval", "eval_batches", "final_eval_batches", "log_interval",
                      "checkpoint_interval", "tune_malloc", "recompute", "data_parallel")


@dataclass
class TrainConfig:
    steps: int = 2000                  # optimizer steps in all (a resumed run counts from 0 too)
    lr: float = 1e-3                   # peak learning rate, reached after the warmup
    min_lr: float = 1e-4               # the cosine decay ends here at the last step
    warmup_steps: int = 100            # linear warmup from 0
    betas: tuple = (0.9, 0.99)         # AdamW moment decay rates
    weight_decay: float = 0.1          # AdamW decoupled decay (not on norms, biases, embeddings)
    grad_clip: float = 1.0             # max global gradient norm; 0 = no clipping
    smoothing: float = 0.0             # label smoothing ε of the cross-entropy
    eval_interval: int = 500           # evaluate every this many steps (and at the end)
    eval_batches: int = 20             # batches per intermediate evaluation
    final_eval_batches: int | None = None  # batches of the final evaluation; None: final_eval_batch_count
    log_interval: int = 100            # a progress line every this many steps
    checkpoint_interval: int = 0       # save every this many steps (0 = only at the end)
    seed: int = 0                      # seeds the batch generator (the model has its own)
    tune_malloc: bool = True           # keep freed memory for reuse (perf.tune_malloc): faster steps
    recompute: bool = False            # activation recomputation (layers/blocks.py): each block keeps
                                       # only its input and redoes its forward in backward; less
                                       # memory, a slower step, the same numbers
    data_parallel: int = 2             # model replicas, a part of each batch and a core each
                                       # (data_parallel.py; 1 = off); fewer where they cannot run

    def __post_init__(self):
        for name in ("steps", "eval_interval", "log_interval", "final_eval_batches", "eval_batches"):
            if name == "final_eval_batches" and self.final_eval_batches is None:
                continue
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name}: expected a positive integer, got {getattr(self, name)!r}")
        for name in ("tune_malloc", "recompute"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name}: expected True or False, got {getattr(self, name)!r}")
        check_int("data_parallel", self.data_parallel, low=1)
        for name in ("warmup_steps", "checkpoint_interval"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 0:
                raise ValueError(f"{name}: expected an integer >= 0, got {getattr(self, name)!r}")
        check_number("lr", self.lr, low=0.0, low_open=True, finite=True)
        check_number("min_lr", self.min_lr, low=0.0, finite=True)
        if not 0 <= self.min_lr <= self.lr:
            raise ValueError(f"lr, min_lr: expected 0 <= min_lr <= lr and lr > 0, got {self.lr}, {self.min_lr}")


@dataclass
class TrainResult:
    history: list = field(default_factory=list)     # (step, train loss) per step
    evals: list = field(default_factory=list)       # (step, train eval loss, val eval loss)
    seconds: float = 0.0                            # time spent in training steps (no evaluation)
    final_train_loss: float = float("nan")
    final_val_loss: float = float("nan")
    final_eval_batches: int = 0                     # batches of each split in the final evaluation
    eval_seconds: float = 0.0                       # time of the final evaluation (both splits)


FINAL_EVAL_FRACTION = 25     # final evaluation: steps // 25 batches per split ...
FINAL_EVAL_MAX = 200         # ... but at most this many


def final_eval_batch_count(cfg: TrainConfig) -> int:
    """Batches of each split in the final evaluation: ``cfg.final_eval_batches`` if set,
    else steps // 25 clamped to [eval_batches, 200]: a short run evaluates on few
    batches, and the evaluation stays under 5% of the training (module docstring)."""
    if cfg.final_eval_batches is not None:
        return cfg.final_eval_batches
    return min(FINAL_EVAL_MAX, max(cfg.eval_batches, cfg.steps // FINAL_EVAL_FRACTION))


def dropout_generators(model) -> list:
    """The distinct random generators of the model's dropout layers."""
    gens = {}
    for _, m in model.named_modules():
        if getattr(m, "rng", None) is not None:
            gens[id(m.rng)] = m.rng
    return list(gens.values())


def make_optimizer(model, cfg: TrainConfig) -> AdamW:
    """The AdamW of ``cfg`` for ``model``. On the CPU it first puts the model's parameters into one
    flat array and its gradients into another (``layers.flatten_parameters``: same values, the
    layers see no difference), so that each pass of the update, the gradient norm and the data
    parallel sums is one NumPy call for all parameters; those arrays and the optimizer's state
    live in shared memory (``workers.shared_empty``), where data parallelism's worker processes
    read the parameters and update their share (training/sharded_update.py)."""
    on_cpu = all(type(p) is np.ndarray for _, p, _ in model.parameters())
    if on_cpu:
        flatten_parameters(model, empty=shared_empty)    # shared memory: data parallelism's workers
    return AdamW(model.parameters(), cfg.lr, betas=tuple(cfg.betas), weight_decay=cfg.weight_decay,
                 empty=shared_empty if on_cpu else None)  # read the parameters, update a share in place


def train_step(model, task, batch, optimizer, lr: float, cfg: TrainConfig, device="cpu", *,
               step=None, guard=None, parallel=None) -> float:
    """Forward, backward, clip, update; returns the loss (a Python float).

    ``parallel``: a ``DataParallel`` of ``model`` (data_parallel.py) runs the forward and
    backward on its replicas, a part of the batch each, and, where it can, the gradient sum
    and the update in shares, one per process (sharded_update.py); the checks are the same.

    Non-finite values stop training with ``TrainingDiverged``, checked where it is cheap:
      - the loss, before the backward;
      - the global gradient norm, before the update: ``clip_grad_norm`` computes it
        anyway (with no clipping, an infinite ``max_norm`` only measures it), and an
        inf/NaN anywhere in any gradient makes it inf/NaN. A gradient that overflowed
        while the loss stayed finite is caught here, with the weights untouched;
      - the weights, after the update: one sum per parameter (a single pass, no
        temporary array; NaN and inf propagate into a sum). Finite gradients and a
        finite lr give a finite AdamW update, so this only fires for an absurd lr
        (or a bug); the update has been applied by then, and the message says so.
        Undoing it would need a copy of every weight at every step, which costs
        more than the case is worth; the caller never saves those weights.
    ``step``: the step number, for the messages. ``guard``: a ``_SigintGuard`` that
    holds a Ctrl-C back while the update runs, so the weights are never half updated.
    """
    at = f"at step {step}" if step is not None else "at this step"
    if parallel is None:
        loss, cache = task_loss(model, task, batch, cfg.smoothing, device)
        backward = lambda: task_loss_backward(model, 1.0, cache)
    else:
        loss, backward = parallel.loss(task, batch, cfg.smoothing)
    loss = float(loss)
    if not math.isfinite(loss):
        raise TrainingDiverged(f"the loss is {loss} {at}: training stopped before the update "
                               "(lower the learning rate, or check the data); no weight was changed, "
                               "the weights are those of the step before")
    backward()
    norm = clip_grad_norm(optimizer.grad_arrays(), cfg.grad_clip or math.inf)
    if not math.isfinite(norm):
        bad = [name for name, _, g in optimizer.params if not math.isfinite(float(g.sum()))]
        model.zero_grad()
        what = (f"non-finite gradient of {', '.join(bad[:3])}{' ...' if len(bad) > 3 else ''}" if bad
                else "finite gradients too large to square")
        raise TrainingDiverged(f"the gradient norm is {norm} {at} ({what}) "
                               f"while the loss is {loss:.4g}: training stopped before the update "
                               "(lower the learning rate, or check the data); no weight was changed, "
                               "the weights are those of the step before")
    if guard is not None:
        guard.active = True
    try:
        if parallel is None:
            optimizer.begin_step(lr)                      # = step(lr) without its finiteness pass:
            optimizer.apply_update()                      #   the global norm above was finite
        else:
            parallel.step(optimizer, lr)                  # each process updates a share (sharded_update.py)
    finally:
        if guard is not None:
            guard.active = False
    model.zero_grad()
    # One scalar for all parameters (sums added on the device): one host sync per step, not one per array.
    sums = [p.sum() for p in optimizer.param_arrays()]    # 0-d each; sum() from sums[0], not from the int 0,
    if not math.isfinite(float(sum(sums[1:], sums[0]))):  # which NumPy 1.x would promote to float64
        bad = [name for name, p, _ in optimizer.params if not math.isfinite(float(p.sum()))] or ["their sum"]
        raise TrainingDiverged(f"the update {at} (lr {lr:.3g}) made the weights non-finite "
                               f"({', '.join(bad[:3])}{' ...' if len(bad) > 3 else ''}): the weights in "
                               "memory are NOT those of the step before and must not be used; "
                               "nothing was saved, the last checkpoint is intact (lower the learning rate)")
    return loss


class _SigintGuard:
    """Holds Ctrl-C (SIGINT) back while ``active`` (the optimizer update) and raises it right after.

    Outside the update a Ctrl-C raises KeyboardInterrupt at once, as usual. Installed
    by ``train`` in the main thread only (``signal`` allows no other).
    """

    def __init__(self):
        self.active = self.pending = False
        self.previous = None

    def __enter__(self):
        import signal
        import threading
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc):
        import signal
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
        return False

    def _handler(self, signum, frame):
        if self.active:
            self.pending = True
        else:
            raise KeyboardInterrupt

    def check(self):
        if self.pending:
            self.pending = False
            raise KeyboardInterrupt


def evaluate(model, task, split: str, n_batches: int, seed: int, device="cpu", parallel=None) -> float:
    """Mean loss over ``n_batches`` batches drawn from a generator seeded with ``seed`` (eval mode).
    ``parallel``: a ``DataParallel`` of ``model`` computes each batch's loss on its replicas."""
    rng = np.random.default_rng(seed)
    was_training = model.training
    model.eval()
    total = 0.0
    for _ in range(n_batches):
        batch = task.batch(split, rng)
        if parallel is None:
            logits, targets = task.forward(model, batch, device)
            total += float(cross_entropy_forward(logits, targets)[0])
            model.release_caches()          # evaluation runs no backward
        else:
            total += parallel.loss(task, batch)[0]
            parallel.release_caches()
    model.train(was_training)
    return total / n_batches


def train(model, task, cfg: TrainConfig, *, optimizer=None, checkpoint_path=None, resume=False,
          meta=None, device="cpu", log=print, stop_after=None, allow_config_change=False) -> TrainResult:
    """Train ``model`` on ``task`` for ``cfg.steps`` steps; see the module docstring.

    ``stop_after``: stop (after saving the checkpoint) once this many steps are
    done, as an interruption would; used to test that resuming is exact.
    ``resume``: a model that differs from the checkpoint's always raises
    ``ResumeMismatch``; so does a TrainConfig that differs (lr, steps, seed, ...;
    not the logging and evaluation fields), unless ``allow_config_change``.
    Ctrl-C (KeyboardInterrupt) saves the last completed step to ``checkpoint_path``
    (atomically, never non-finite weights) and raises ``TrainingInterrupted``.
    """
    if resume and checkpoint_path is None:
        raise ValueError("checkpoint_path: resume=True needs the checkpoint to continue from, got None")
    optimizer = optimizer or make_optimizer(model, cfg)
    if cfg.recompute:
        set_recompute(model)
    if cfg.tune_malloc:
        tune_malloc()      # process-wide, glibc only; 25-30% faster steps measured (perf.py)
    # A run shorter than the warmup warms up over its whole length.
    schedule = warmup_cosine_schedule(cfg.lr, min(cfg.warmup_steps, cfg.steps), cfg.steps, cfg.min_lr)
    batch_rng = np.random.default_rng(cfg.seed)
    result, start = TrainResult(), 0
    if resume:
        start, result = _restore(checkpoint_path, model, optimizer, batch_rng, cfg, meta, allow_config_change)
        log(f"resumed from {checkpoint_path} at step {start}")
    model.train()
    sample = task.batch("train", np.random.default_rng(0))
    tokens_per_step = task.tokens(sample)
    n_replicas, why = n_replicas_for(model, sample, cfg.data_parallel) if device == "cpu" else (1, "off (GPU)")
    if cfg.data_parallel > 1:
        log(f"data parallel: {why}")
    generators = [batch_rng] + dropout_generators(model)
    done, states = start, None       # steps completed; the generators' states when step done+1 began
    t0 = time.perf_counter()
    forget = optimizer.state_arrays() if n_replicas > 1 else ()   # NumPy's, for the workers: none on a GPU
    with _SigintGuard() as guard, DataParallel(model, n_replicas, forget=forget,
                                                     optimizer=optimizer) as data_parallel:
        parallel = data_parallel if n_replicas > 1 else None      # None: the plain step
        try:
            for step in range(start + 1, cfg.steps + 1):
                states = [generator_state(g) for g in generators]     # a few small dicts: cheap
                loss = train_step(model, task, task.batch("train", batch_rng), optimizer, schedule(step), cfg,
                                  device, step=step, guard=guard, parallel=parallel)
                result.history.append((step, loss))
                done, states = step, None
                guard.check()                     # a Ctrl-C held back during the update
                if step % cfg.log_interval == 0 or step == cfg.steps:
                    elapsed = time.perf_counter() - t0
                    n_done = step - start
                    log(_progress(step, cfg.steps, loss, schedule(step), n_done * tokens_per_step / elapsed,
                                  elapsed / n_done * (cfg.steps - step)))
                if step % cfg.eval_interval == 0 and step != cfg.steps:
                    t_eval = time.perf_counter()
                    tr, va = (evaluate(model, task, s, cfg.eval_batches, cfg.seed + 7, device, parallel)
                              for s in ("train", "val"))
                    result.evals.append((step, tr, va))
                    log(f"step {step}: eval train {tr:.4f} | val {va:.4f}")
                    t0 += time.perf_counter() - t_eval            # evaluation is not training time
                interrupted = stop_after is not None and step == stop_after
                if checkpoint_path and ((cfg.checkpoint_interval and step % cfg.checkpoint_interval == 0)
                                        or step == cfg.steps or interrupted):
                    t_save = time.perf_counter()
                    _save(checkpoint_path, model, optimizer, batch_rng, step, result, cfg, meta)
                    t0 += time.perf_counter() - t_save
                if interrupted:
                    return result
        except KeyboardInterrupt:
            _interrupted(model, optimizer, batch_rng, generators, states, done, result, cfg, meta,
                         checkpoint_path, log)
        result.seconds = time.perf_counter() - t0
        n = result.final_eval_batches = final_eval_batch_count(cfg)
        log(f"final evaluation: {n} batches of train, {n} of val")
        t_eval = time.perf_counter()
        for split, seed in (("train", cfg.seed + 11), ("val", cfg.seed + 13)):
            t_split = time.perf_counter()
            loss = evaluate(model, task, split, n, seed, device, parallel)
            setattr(result, f"final_{split}_loss", loss)
            log(f"final evaluation, {split}: loss {loss:.4f} ({time.perf_counter() - t_split:.1f} s)")
    result.eval_seconds = time.perf_counter() - t_eval
    result.evals.append((cfg.steps, result.final_train_loss, result.final_val_loss))
    return result


def _progress(step, steps, loss, lr, tokens_per_s, eta_s) -> str:
    return (f"step {step:>5}/{steps} | loss {loss:.4f} | lr {lr:.2e} | "
            f"{tokens_per_s:,.0f} tok/s | ETA {int(eta_s) // 60}m{int(eta_s) % 60:02d}s")


def _save(path, model, optimizer, batch_rng, step, result, cfg, meta, generator_states=None) -> None:
    """``generator_states``: [batch, *dropout] states to store instead of the current ones."""
    rngs = generator_states or [generator_state(g) for g in [batch_rng] + dropout_generators(model)]
    doc = {**(meta or {}), "step": step, "train_config": asdict(cfg),
           "batch_rng": rngs[0], "dropout_rngs": rngs[1:],
           "history": result.history, "evals": result.evals}
    save_checkpoint(path, model, optimizer_state=optimizer.state_dict(), meta=doc)


def _interrupted(model, optimizer, batch_rng, generators, states, done, result, cfg, meta, path, log):
    """Ctrl-C: save the last completed step (if any weights are worth saving), raise TrainingInterrupted.

    An interrupt inside a step's forward or backward leaves the weights of step
    ``done`` (the update is never cut in half: ``_SigintGuard``); only the random
    generators moved on, and ``states`` holds them as they were when that step
    began, so a resume replays it bit for bit.
    """
    model.zero_grad()
    model.release_caches()
    if not path:
        raise TrainingInterrupted(f"interrupted after step {done}; no checkpoint path, nothing saved",
                                  done, path, False) from None
    try:
        _save(path, model, optimizer, batch_rng, done, result, cfg, meta, generator_states=states)
    except (ValueError, OSError) as e:
        raise TrainingInterrupted(f"interrupted after step {done}; the checkpoint could not be saved ({e})",
                                  done, path, False) from None
    log(f"interrupted: step {done} saved to {path}")
    raise TrainingInterrupted(f"interrupted after step {done}; saved to {path}", done, path, True) from None


def _differences(saved: dict, now: dict, skip=()) -> list[str]:
    """'field: saved vs now' for each field whose value differs (JSON-normalised: tuples are lists)."""
    import json
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


def _restore(path, model, optimizer, batch_rng, cfg=None, meta=None, allow_config_change=False):
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
