"""Evaluation metrics computed on token sequences (no arrays, no model): BLEU.

A layer of its own beside ``tokenizers/`` and ``optim/``: it imports only ``validate``,
and any folder above it may use it (a lecture scores a model's translations with it).
"""
from .bleu import BleuScore, brevity_penalty, corpus_bleu, modified_precision, sentence_bleu

__all__ = ["BleuScore", "brevity_penalty", "corpus_bleu", "modified_precision", "sentence_bleu"]
