"""Training support: the loop, the data and tasks it draws batches from, the loss Module,
checkpoints (save, resume, load).

    loop.py         train(), train_step, evaluate, make_optimizer (AdamW): the plain loop
    config.py       TrainConfig, TrainResult, final_eval_batch_count
    divergence.py   TrainingDiverged: a non-finite loss, gradient or update stops the run
    interrupt.py    TrainingInterrupted, SigintGuard: Ctrl-C saves the last completed step
    resume.py       ResumeMismatch, BadRunState, save_run, restore: a run continued bit for bit
    data.py         the default corpus, splits, random batches, MLM masking
    tasks.py        what a model family trains on (LM, MLM, sequence tasks)
    loss.py         CrossEntropyLoss, the Module around functional/cross_entropy; task_loss(_backward)
    checkpoint.py   atomic .npz checkpoints
    load.py         load_model(path) -> (model, tokenizer)

The speed wing (minitransformer/fast/) adds data parallelism and process tuning on top of
this loop; nothing here imports it.
"""
from .load import load_model
from .loop import BadRunState, ResumeMismatch, TrainConfig, TrainingDiverged, TrainingInterrupted, train
