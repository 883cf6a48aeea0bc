"""`python -m minitransformer train`: build a model and its task from arguments, train, report.

    train                                   a small GPT on the Python help topics (character level)
    train --model seq2seq --task reverse    the original encoder-decoder on a synthetic task
    train --model encoder --task mlm        a BERT-like encoder with masked-language modelling
    train --model vit                       a Vision Transformer on generated images of six shapes
    train --model tabular                   an FT-Transformer-style model on a generated table
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from functools import partial
from importlib.util import find_spec

import numpy as np

from ..backend import xp_for_device
from ..validate import check_writable_dir, cli_integer, cli_one_line_error, cli_real
from ..training.data import BOS, EOS, load_text, train_val_split
from ..models import GPT, Encoder, EncoderConfig, GPTConfig, Seq2Seq, Seq2SeqConfig
from ..training.tasks import LanguageModelTask, MaskedLMTask, SequenceTaskData
from ..training.loop import (BadRunState, ResumeMismatch, TrainConfig, TrainingDiverged, TrainingInterrupted,
                             train)

SEQ_VOCAB = 16          # PAD, BOS, EOS and 13 symbols for the synthetic tasks
SEQ_LENGTHS = (4, 12)   # source lengths of the synthetic tasks
CLASSIFIERS = ("vit", "tabular")   # families trained on generated examples, reported by accuracy
DATA_PARALLEL = 2       # the speed wing's model replicas (fast.train), a core each
TEXT_FLAGS = {"data": None, "tokenizer": "char", "vocab_size": 512, "block_size": 64}   # the text's flags, defaults


_integer, _real, _one_line_error = cli_integer, cli_real, cli_one_line_error   # validate.py's, shared by every command


def add_train_arguments(p: argparse.ArgumentParser) -> None:
    p.error = _one_line_error(p)                 # argparse calls self.error: the instance's wins
    p.set_defaults(train_parser=p)               # run_train rebuilds the exact --resume command from it
    p.add_argument("--model", choices=("gpt", "seq2seq", "encoder") + CLASSIFIERS, default="gpt",
                   help="model family (default: gpt)")
    p.add_argument("--task", choices=("lm", "copy", "reverse", "sort", "mlm"), default=None,
                   help="gpt: lm; seq2seq: copy | reverse | sort (default reverse); encoder: mlm")
    p.add_argument("--data", default=TEXT_FLAGS["data"], help="a UTF-8 text file (default: Python's own help topics)")
    p.add_argument("--tokenizer", choices=("char", "bpe"), default=TEXT_FLAGS["tokenizer"], help="text tokenizer (default: char)")
    p.add_argument("--vocab-size", type=_integer(1), default=TEXT_FLAGS["vocab_size"], help="BPE vocabulary size (with --tokenizer bpe)")
    p.add_argument("--steps", type=_integer(1), default=None, help="optimizer steps (default: 2000 gpt, 800 seq2seq, 1000 mlm, 1500 vit, tabular)")
    p.add_argument("--batch-size", type=_integer(1), default=None, help="sequences per step (default: 12; seq2seq, vit, tabular 64)")
    p.add_argument("--block-size", type=_integer(1), default=TEXT_FLAGS["block_size"], help="context length in tokens (default: 64)")
    p.add_argument("--n-layer", type=_integer(1), default=None, help="blocks per stack (default: 4; seq2seq, vit, tabular 2)")
    p.add_argument("--n-head", type=_integer(1), default=4, help="attention heads (default: 4)")
    p.add_argument("--d-model", type=_integer(1), default=None,
                   help="model width d_model (default: 128; vit, tabular 64)")
    p.add_argument("--lr", type=_real(0.0), default=1e-3, help="peak learning rate (default: 1e-3)")
    p.add_argument("--p-drop", type=_real(0.0, 1.0, low_open=False), default=0.0, help="dropout probability (default: 0)")
    p.add_argument("--position", choices=("learned", "sinusoidal", "rope", "alibi", "shaw", "t5", "none"), default=None,
                   help="position encoding (default: learned; seq2seq sinusoidal)")
    p.add_argument("--eval-interval", type=_integer(1), default=500, help="steps between evaluations (default: 500)")
    p.add_argument("--seed", type=_integer(0), default=0, help="seed of the weights and the batches (default: 0)")
    p.add_argument("--out", default=None, help="output folder for checkpoint and loss curve (default: runs/MODEL)")
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint in --out, bit for bit")
    p.add_argument("--overwrite", action="store_true",
                   help="start afresh in an --out that holds a checkpoint, replacing it (without it, "
                        "train refuses such a folder: a trained model is never lost by accident)")
    p.add_argument("--checkpoint-every", type=_integer(0), default=0,
                   help="save the checkpoint every N steps (default 0: at the end and on Ctrl-C only)")
    p.add_argument("--allow-config-change", action="store_true",
                   help="with --resume: continue although lr, steps, seed, ... differ from the checkpoint's "
                        "(the model architecture can never change)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="cuda needs CuPy (default: cpu)")
    p.add_argument("--data-parallel", type=_integer(1), default=None,
                   help=f"model replicas, each in its own process with a part of every batch (default: "
                        f"{DATA_PARALLEL}; 1 = off; fewer where they cannot run: dropout, GPU; the speed "
                        "wing's, so not with --plain)")
    p.add_argument("--plain", action="store_true",
                   help="train with the plain loop and forms only, as a student reads them (the speed wing, "
                        "minitransformer.fast, stays off: one process, no kernel twins; slower, the same math)")
    p.add_argument("--recompute", action="store_true",
                   help="activation recomputation: each block redoes its forward in backward instead of "
                        "storing its activations (less memory, a slower step, the same numbers)")


def build(args):
    """(model, task, TrainConfig, meta) from the parsed arguments."""
    steps_default = {"gpt": 2000, "seq2seq": 800, "encoder": 1000, **CLASSIFIER_STEPS}[args.model]
    cfg = TrainConfig(steps=args.steps or steps_default, lr=args.lr, seed=args.seed,
                      min_lr=min(TrainConfig.min_lr, args.lr),       # an --lr below the decay's floor: constant
                      eval_interval=min(args.eval_interval, args.steps or steps_default),
                      checkpoint_interval=getattr(args, "checkpoint_every", 0),
                      recompute=getattr(args, "recompute", False))
    batch = args.batch_size or (64 if args.model in ("seq2seq",) + CLASSIFIERS else 12)
    if args.model in CLASSIFIERS:
        return _build_classifier(args, batch, cfg)
    if args.model == "seq2seq":
        task_name = args.task or "reverse"
        if task_name not in ("copy", "reverse", "sort"):
            raise ValueError(f"--task: seq2seq trains on copy, reverse or sort, got {task_name!r}")
        _refuse_text_flags(args, f"seq2seq trains on the generated {task_name} task")
        config = Seq2SeqConfig(vocab_size=SEQ_VOCAB, block_size=SEQ_LENGTHS[1] + 2, n_layer=args.n_layer or 2,
                               n_head=args.n_head, d_model=args.d_model or 128, p_drop=args.p_drop,
                               position=args.position or "sinusoidal")
        task = SequenceTaskData(task_name, SEQ_VOCAB, SEQ_LENGTHS, batch, seed=args.seed)
        model = Seq2Seq(config, rng=args.seed)
        return model, task, cfg, {"family": "seq2seq", "config": config.to_dict(), "task": task_name,
                                  "batch_size": batch}
    tokenizer, ids = _tokenize(args)
    train_ids, val_ids = train_val_split(ids)
    common = dict(block_size=args.block_size, n_layer=args.n_layer or 4, n_head=args.n_head,
                  d_model=args.d_model or 128, p_drop=args.p_drop, position=args.position or "learned")
    meta_tok = {"tokenizer": tokenizer.to_dict(), "batch_size": batch}
    if args.model == "encoder":
        if args.task not in (None, "mlm"):
            raise ValueError(f"--task: the encoder trains on mlm, got {args.task!r}")
        V = tokenizer.vocab_size + 1                   # one extra id: [MASK]
        config = EncoderConfig(vocab_size=V, **common)
        task = MaskedLMTask(train_ids, val_ids, args.block_size, batch, V, mask_id=V - 1)
        model = Encoder(config, rng=args.seed)
        return model, task, cfg, {"family": "encoder", "config": config.to_dict(), **meta_tok}
    if args.task not in (None, "lm"):
        raise ValueError(f"--task: gpt trains on lm, got {args.task!r}")
    config = GPTConfig(vocab_size=tokenizer.vocab_size, **common)
    task = LanguageModelTask(train_ids, val_ids, args.block_size, batch)
    return GPT(config, rng=args.seed), task, cfg, {"family": "gpt", "config": config.to_dict(), **meta_tok}


CLASSIFIER_STEPS = {"vit": 1500, "tabular": 1500}   # about a minute each on 2 CPU cores (README)


def _build_classifier(args, batch, cfg):
    """ViT or the tabular model on its generated data: (model, task, TrainConfig, meta)."""
    from ..training.classification import tabular_task, vit_task
    if args.task is not None:
        raise ValueError(f"--task: {args.model} trains on its own generated data and takes no --task, "
                         f"got {args.task!r}")
    _refuse_text_flags(args, f"{args.model} trains on its own generated data")
    if args.position is not None:
        raise ValueError(f"--position: {args.model} has its own positions (vit: row + column; tabular: none), "
                         f"got {args.position!r}")
    make = vit_task if args.model == "vit" else tabular_task
    model, task, meta = make(batch_size=batch, seed=args.seed, n_layer=args.n_layer or 2, n_head=args.n_head,
                             d_model=args.d_model or 64, p_drop=args.p_drop)
    return model, task, cfg, meta


def _refuse_text_flags(args, why: str) -> None:
    """A family that trains on generated data refuses the text's flags rather than ignore them."""
    for name, default in TEXT_FLAGS.items():
        if getattr(args, name) != default:
            flag = "--" + name.replace("_", "-")
            raise ValueError(f"{flag}: {why}, not on text, and takes no {flag}, got {getattr(args, name)!r}")


def _tokenize(args):
    try:
        text = load_text(args.data)
    except (ValueError, OSError) as e:            # name the flag: "--data: path: ..."
        raise type(e)(f"--data: {e}") from None
    if not text:
        raise ValueError(f"--data: {args.data!r} is empty; expected a UTF-8 text file of at least one character")
    if args.tokenizer != "bpe" and args.vocab_size != TEXT_FLAGS["vocab_size"]:
        raise ValueError(f"--vocab-size: sets the size of a BPE vocabulary and needs --tokenizer bpe "
                         f"(the char tokenizer's vocabulary is the text's characters), got {args.vocab_size}")
    if args.tokenizer == "bpe":
        from ..tokenizers import ByteBPETokenizer
        tokenizer = ByteBPETokenizer.train(text, args.vocab_size)
    else:
        from ..tokenizers import CharTokenizer
        tokenizer = CharTokenizer.from_text(text)
    return tokenizer, np.asarray(tokenizer.encode(text), dtype=np.int64)


def _in_a_homework_copy() -> bool:
    """Whether this command runs from a student's copy (its mark, homework/copy.json, in the package
    this command was imported from); there it says which implementation of each assigned function
    trains. The speed wing is then never switched on, whatever else is importable: a copy has no
    fast/, but an editable install's finder still resolves minitransformer.fast from the repository,
    and its twins would replace the student's functions."""
    from ..homework.expected import in_student_copy
    if not in_student_copy():
        return False
    from ..homework.implementations import report
    print("homework copy (minitransformer/homework/copy.json): the plain loop with your functions, "
          "the speed wing stays off")
    for line in report():
        print(f"  {line}")
    return True


def run_train(args) -> int:
    copy = _in_a_homework_copy()
    plain = getattr(args, "plain", False) or copy
    if not plain and find_spec(f"{__package__.rpartition('.')[0]}.fast") is None:
        print("the speed wing (minitransformer/fast/) is absent: the plain loop")
        plain = True
    run = train
    if not plain:
        from .. import fast                  # the speed wing (the core never imports it): twins for the
                                             # run, malloc tuned, data parallelism
        run = partial(fast.train, data_parallel=getattr(args, "data_parallel", None) or DATA_PARALLEL)
    try:
        if plain and getattr(args, "data_parallel", None) not in (None, 1):
            why = "never in a homework copy (your functions train the model)" if copy else "not with --plain"
            raise ValueError(f"--data-parallel: the speed wing's, {why}, got {args.data_parallel}")
        _check_run_folder(args)
        model, task, cfg, meta = build(args)
        out = args.out or os.path.join("runs", meta["family"])
        ckpt = os.path.join(out, "checkpoint.npz")
        if args.resume:
            from ..training.checkpoint import load_checkpoint
            from ..training.resume import check_run_state
            # truncated or corrupted, or no run's state in it: one line naming the file, before any work
            check_run_state(load_checkpoint(ckpt)[2], ckpt, cfg.steps)
        prompt = _preflight(task, meta, out)
        if args.device != "cpu":
            try:
                xp_for_device(args.device)
            except ValueError as e:
                raise ValueError(f"--device {args.device}: {e}") from None
    except (ValueError, TypeError, OSError) as e:
        print(f"error: {_as_flags(str(e))}", file=sys.stderr)
        return 2
    if args.device != "cpu":
        model.to(args.device)
    print(f"{meta['family']}: {model.num_parameters():,} parameters | {cfg.steps} steps | checkpoint {ckpt}")
    try:
        # A diverging run overflows in NumPy before the loop's own check stops it with one line
        # (TrainingDiverged): the command prints that line, not the warnings before it.
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            result = run(model, task, cfg, checkpoint_path=ckpt, resume=args.resume, meta=meta,
                         device=args.device, allow_config_change=getattr(args, "allow_config_change", False))
    except TrainingDiverged as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except NotImplementedError as e:
        if not copy:
            raise
        print(f"error: {_stub_called(e)}", file=sys.stderr)
        return 2
    except (ResumeMismatch, BadRunState) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except TrainingInterrupted as e:
        if e.saved:
            print(f"\ninterrupted: step {e.step} of {cfg.steps} saved to {ckpt}; to continue:\n"
                  f"    {_resume_command(args, out)}", file=sys.stderr)
        else:
            print(f"\ninterrupted: {e}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:           # after the last step (final evaluation): every step is saved
        print(f"\ninterrupted during the final evaluation; all {cfg.steps} steps are saved in {ckpt}",
              file=sys.stderr)
        return 130
    except OSError as e:                # disk full, folder made read-only: save_checkpoint's one line
        print(f"error: {e}", file=sys.stderr)
        return 1
    try:
        _write_results(model, task, meta, args, prompt, result, out)
    except NotImplementedError as e:        # sampling calls a function training did not (a copy's stub)
        if not copy:
            raise
        print(f"error: {_stub_called(e)}; the checkpoint {ckpt} is saved", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: {out}: cannot write the run's results ({e.strerror or e}); "
              f"the checkpoint {ckpt} is saved", file=sys.stderr)
        return 1
    return 0


def _stub_called(e: NotImplementedError) -> str:
    """One line for a homework copy's stub reached by the run (its message names the function)."""
    return f"{e} (a stub of this homework copy: the model calls it; write it first, the lines above list them)"


def _write_results(model, task, meta, args, prompt, result, out) -> None:
    print(f"trained in {result.seconds:.1f} s | final loss: train {result.final_train_loss:.4f} | "
          f"val {result.final_val_loss:.4f} ({result.final_eval_batches} batches each, "
          f"evaluated in {result.eval_seconds:.1f} s)")
    extra = _classifier_accuracy(model, task, meta, args.device)     # {} for the text families
    # The numbers first: a failing plot or sample must not lose them.
    with open(os.path.join(out, "result.json"), "w") as f:
        json.dump({"seconds": result.seconds, "eval_seconds": result.eval_seconds,
                   "final_eval_batches": result.final_eval_batches, "train_loss": result.final_train_loss,
                   "val_loss": result.final_val_loss, "evals": result.evals, **extra}, f)
    _plot_losses(result, os.path.join(out, "loss.png"))
    _report(model, task, meta, args, prompt)


FLAGS = {name: "--" + name.replace("_", "-") for name in
         ("d_model", "n_head", "n_layer", "block_size", "p_drop", "position", "vocab_size")}


def _as_flags(message: str) -> str:
    """A config's message names its argument (``d_model: ...``); the command line's names the flag."""
    name, colon, rest = message.partition(":")
    return FLAGS[name] + colon + rest if colon and name in FLAGS else message


def _check_run_folder(args) -> None:
    """Refuse, before any work, a folder that holds a checkpoint unless --resume or --overwrite says
    what to do with it; and --resume without a checkpoint to continue."""
    out = args.out or os.path.join("runs", args.model)
    ckpt = os.path.join(out, "checkpoint.npz")
    if args.resume and getattr(args, "overwrite", False):
        raise ValueError("--overwrite: cannot be combined with --resume (continue the checkpoint, or replace it)")
    if args.resume and not os.path.isfile(ckpt):
        raise ValueError(f"--resume: no checkpoint at {ckpt}")
    if not args.resume and not getattr(args, "overwrite", False) and os.path.exists(ckpt):
        raise ValueError(f"--out: {out} already holds a checkpoint ({ckpt}); continue it with --resume, "
                         f"replace it with --overwrite, or choose another --out")


def _preflight(task, meta, out) -> str | None:
    """Everything that can fail after training, checked before step 1; returns the GPT sample prompt.

    The output folder must be writable (checkpoint, result.json, loss curve); each
    split must hold one batch of the block size; the sample prompt "The " must be
    encodable (a corpus without those characters gets its own first characters).
    """
    check_writable_dir("--out", out)
    for split in ("train", "val"):
        try:
            task.batch(split, np.random.default_rng(0))
        except ValueError as e:
            raise ValueError(f"--data: the {split} split is too short for --block-size ({e})") from None
    if meta["family"] != "gpt":
        return None
    from ..tokenizers import tokenizer_from_dict
    tok = tokenizer_from_dict(meta["tokenizer"])
    try:
        tok.encode("The ")
        return "The "
    except ValueError:
        return tok.decode(task.splits["train"][:4].tolist())


RESUME_DROPS = ("--help", "--out", "--resume", "--overwrite")   # --overwrite started the run; a resume
                                                                # continues it (the two are refused together)


def _resume_command(args, out) -> str:
    """The exact command that continues this run: the same flags but --overwrite, --out spelled
    out, --resume."""
    words = ["python", "-m", "minitransformer", "train"]
    parser = getattr(args, "train_parser", None)
    for action in (parser._actions if parser else ()):
        flag = next((o for o in action.option_strings if o.startswith("--")), None)
        if flag is None or flag in RESUME_DROPS:
            continue
        value = getattr(args, action.dest, action.default)
        if value == action.default:
            continue
        words += [flag] if isinstance(action, argparse._StoreTrueAction) else [flag, str(value)]
    return shlex.join(words + ["--out", out, "--resume"])


def _plot_losses(result, path) -> None:
    from ..plots.training import loss_curve
    loss_curve(result.history, result.evals, path=path)
    print(f"loss curve: {path}")


def _classifier_accuracy(model, task, meta, device) -> dict:
    """ViT / tabular: {"accuracy", "n_heldout", "chance"} on the held-out set, printed; {} otherwise."""
    if meta["family"] not in CLASSIFIERS:
        return {}
    from ..training.classification import classification_accuracy
    accuracy = classification_accuracy(model, task, device=device)
    labels = task.val[-1]
    chance = float(np.bincount(labels).max() / len(labels))      # always answering the commonest class
    print(f"held-out accuracy ({meta['family']}, {len(labels)} generated examples): {accuracy:.2%} "
          f"(majority class: {chance:.2%})")
    return {"accuracy": accuracy, "n_heldout": int(len(labels)), "chance": chance}


def _report(model, task, meta, args, prompt="The ") -> None:
    """What the trained model does: a text sample, or held-out accuracy."""
    model.eval()
    if meta["family"] == "gpt":
        from ..generation.generate import generate
        from ..tokenizers import tokenizer_from_dict
        tok = tokenizer_from_dict(meta["tokenizer"])
        ids = generate(model, np.asarray([tok.encode(prompt)]), max_new_tokens=200, strategy="sample",
                       temperature=0.8, rng=np.random.default_rng(args.seed),
                       use_cache=False)   # the uncached loop crops the context: 200 chars > block_size
        print("sample:\n" + tok.decode(ids[0].tolist()))
    elif meta["family"] in CLASSIFIERS:
        return                          # the accuracy is printed (and in result.json) already
    elif meta["family"] == "seq2seq":
        acc = sequence_accuracy(model, task)
        print(f"held-out exact-match accuracy ({meta['task']}, greedy decoding): {acc:.2%}")
    else:
        print("masked-token accuracy on validation batches: "
              f"{mlm_accuracy(model, task, np.random.default_rng(args.seed)):.2%}")


def sequence_accuracy(model, task) -> float:
    """Exact-match accuracy of greedy decoding on the task's held-out set."""
    from ..generation.generate import greedy_seq2seq
    src, lengths, _, tgt_out = task.val
    pred = greedy_seq2seq(model, src, max_len=tgt_out.shape[1], bos_id=BOS, eos_id=EOS)   # (N, T)
    target = np.where(tgt_out == -100, EOS, tgt_out)
    ok = [np.array_equal(pred[i, :lengths[i] + 1], target[i, :lengths[i] + 1]) for i in range(len(src))]
    return float(np.mean(ok))


def mlm_accuracy(model, task, rng, n_batches: int = 20) -> float:
    hits = total = 0
    for _ in range(n_batches):
        inputs, labels = task.batch("val", rng)
        logits = model.forward(inputs, head="mlm")
        model.release_caches()
        chosen = labels != -100
        hits += int((logits.argmax(-1)[chosen] == labels[chosen]).sum())
        total += int(chosen.sum())
    return hits / max(total, 1)
