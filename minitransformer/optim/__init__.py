"""Optimizers (SGD, Adam, AdamW), gradient clipping and learning-rate schedules.

    optimizers.py   the update rules and their checkpointable state
    clipping.py     clip_grad_norm: one global L2 norm over all gradients
    schedules.py    step -> lr functions, steps counted from 1
"""
from .clipping import clip_grad_norm
from .optimizers import SGD, Adam, AdamW, Optimizer, default_no_decay
from .schedules import constant_schedule, noam_schedule, warmup_cosine_schedule

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "default_no_decay", "clip_grad_norm",
           "constant_schedule", "warmup_cosine_schedule", "noam_schedule"]
