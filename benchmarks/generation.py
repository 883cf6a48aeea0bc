"""Generation speed: tokens/s with and without the KV cache, one JSON line per mode.

The model is the default GPT (GPTConfig(vocab_size=103): 4 layers, 4 heads, d_model
128, learned positions) with ONE change: block_size=320 instead of 64, so that the
64-token prompt and the 256 new tokens fit the context in both modes. The uncached
mode then re-runs exactly the prefixes the cached mode extends, nothing is cropped,
and both must produce the same tokens (checked). With block_size 64 the cache would
stop after 1 token, and a cropped rerun would do less work per token than a model
that sees the whole sequence.

float32, batch 1, greedy decoding (sampling adds one softmax and one draw per token),
the time from the prompt's forward to the last token. Each mode runs once to warm
up, then ``--repeats`` times; the fastest run is reported.

    python benchmarks/generation.py [--repeats 3] [--new-tokens 256]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

from minitransformer.generation.generate import generate
from minitransformer.models import GPT, GPTConfig

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_step import machine  # noqa: E402  (the CPU, AVX-512, OpenBLAS core: one helper for every benchmark)

PROMPT_TOKENS = 64
BLOCK_SIZE = 320        # PROMPT_TOKENS + 256 new tokens


def time_generation(model, prompt, new_tokens: int, use_cache: bool, repeats: int):
    """(fastest seconds, the ids of the last run)."""
    generate(model, prompt, new_tokens, use_cache=use_cache)          # warm-up
    best, ids = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        ids = generate(model, prompt, new_tokens, use_cache=use_cache)
        best = min(best, time.perf_counter() - start)
    return best, ids


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3, help="timed runs per mode, the fastest counts (default: 3)")
    p.add_argument("--new-tokens", type=int, default=256, help="tokens generated per run (default: 256)")
    args = p.parse_args(argv)
    config = GPTConfig(vocab_size=103, block_size=max(BLOCK_SIZE, PROMPT_TOKENS + args.new_tokens))
    model = GPT(config, rng=0).eval()                                    # float32
    prompt = np.random.default_rng(0).integers(0, config.vocab_size, (1, PROMPT_TOKENS))
    tokens = {}
    for mode, use_cache in (("kv_cache", True), ("no_cache", False)):
        seconds, tokens[mode] = time_generation(model, prompt, args.new_tokens, use_cache, args.repeats)
        n = tokens[mode].shape[1] - PROMPT_TOKENS
        print(json.dumps({"benchmark": "generation", "mode": mode, "tokens_per_s": round(n / seconds, 1),
                          "seconds": round(seconds, 4), "new_tokens": n, "prompt_tokens": PROMPT_TOKENS,
                          "batch": 1, "dtype": "float32", "block_size": config.block_size,
                          "n_layer": config.n_layer, "d_model": config.d_model, "strategy": "greedy",
                          "machine": machine()}))
    if not np.array_equal(tokens["kv_cache"], tokens["no_cache"]):
        raise SystemExit("error: the cached and the uncached runs chose different tokens")


if __name__ == "__main__":
    main()
