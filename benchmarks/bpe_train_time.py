"""Time ByteBPETokenizer.train on the default corpus (the pydoc_data help topics).

    python benchmarks/bpe_train_time.py                  # vocab 512 and 1000
    python benchmarks/bpe_train_time.py 2000 --repeats 5

Prints one JSON line per vocabulary size: {"vocab_size", "seconds", "chars"}.
"seconds" is the fastest of ``--repeats`` runs of the whole training (pre-tokenising
the text included), so a busy machine inflates it less.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

from minitransformer.training.data import default_corpus
from minitransformer.tokenizers.bpe import ByteBPETokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_step import machine  # noqa: E402  (the CPU, AVX-512, OpenBLAS core: one helper for every benchmark)


def train_seconds(text: str, vocab_size: int, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        ByteBPETokenizer.train(text, vocab_size)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("vocab_sizes", nargs="*", type=int, default=[512, 1000])
    parser.add_argument("--repeats", type=int, default=3, help="runs per size; the fastest counts")
    args = parser.parse_args()
    text = default_corpus()
    for vocab_size in args.vocab_sizes:
        seconds = train_seconds(text, vocab_size, args.repeats)
        print(json.dumps({"vocab_size": vocab_size, "seconds": round(seconds, 3), "chars": len(text),
                          "machine": machine()}))


if __name__ == "__main__":
    main()
