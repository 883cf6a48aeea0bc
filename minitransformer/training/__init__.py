"""Training support: the loop, the data and tasks it draws batches from, the loss
Module, checkpoints (save, resume, load), data parallelism on the CPU's cores, and the
process-wide allocator and BLAS-thread settings.

    loop.py         TrainConfig, train(), make_optimizer, TrainingDiverged, TrainingInterrupted, ResumeMismatch
    data.py         the default corpus, splits, random batches, MLM masking
    tasks.py        what a model family trains on (LM, MLM, sequence tasks)
    loss.py         CrossEntropyLoss, the Module around functional/cross_entropy; task_loss(_backward)
    checkpoint.py   atomic .npz checkpoints
    load.py         load_model(path) -> (model, tokenizer)
    perf.py         tune_malloc(), blas_threads(n)
    data_parallel.py  DataParallel: the batch in parts, a model replica and a core each
    sharded_update.py after the backward, each process sums and updates a share of the parameters
    workers.py        the replicas past the first, in forked worker processes
"""
from .load import load_model
from .loop import ResumeMismatch, TrainConfig, TrainingDiverged, TrainingInterrupted, train
