"""Generation: greedy, sampling (temperature, top-k, top-p) and beam search, for
GPT and the encoder-decoder, through the KV cache."""
from .generate import STRATEGIES, generate
